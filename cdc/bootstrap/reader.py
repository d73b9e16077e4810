"""One partition of one table, read by a Spark task: COPY under the run's snapshot to Parquet.

Owns: what an executor does for a task (a plain dict, so it pickles anywhere): connect,
``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``, ``SET TRANSACTION SNAPSHOT``, record
``pg_current_snapshot()`` (the visibility the replication patching uses for this partition),
``COPY (SELECT ... WHERE <partition predicate>) TO STDOUT``, row hashes and Arrow columns in
batches, an optional rows/s throttle, and the output protocol that makes a partition done:
the Parquet file is renamed into place first, then its result file (rows, checksum, snapshot);
a partition without a result file is not done, whatever else exists. A progress file with the
rows read so far is rewritten after every batch for the driver's progress line.

Imports neither Spark nor weir's proxy: executors need psycopg, pyarrow and this package only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from psycopg import sql

from cdc.bootstrap import copytext
from cdc.bootstrap.errors import explain
from cdc.bootstrap.plan import TableSpec, table_from_json

BATCH_ROWS = 65536
#: seconds between rewrites of a running task's progress file
PROGRESS_EVERY = 0.5
_ARROW = {"int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64()}


def partition_stem(index: int) -> str:
    return f"part-{index:05d}"


def table_dir(out: str | Path, table: TableSpec) -> Path:
    return Path(out) / table.qualified


def arrow_schema(table: TableSpec) -> pa.Schema:
    kinds = {"bool": pa.bool_(), **_ARROW}
    return pa.schema([pa.field(c.name, kinds.get(c.kind, pa.string())) for c in table.columns])


def _options(table: TableSpec, schema: pa.Schema) -> tuple[Any, Any, Any]:
    """pyarrow CSV options that read COPY text format: tab-separated, no quoting, ``\\N``
    is NULL; backslash escapes are undone afterwards, only in columns that have any."""
    read = pa_csv.ReadOptions(column_names=[c.name for c in table.columns], use_threads=False)
    parse = pa_csv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False,
                                double_quote=False, newlines_in_values=False)
    convert = pa_csv.ConvertOptions(
        column_types=dict(zip(schema.names, schema.types, strict=True)),
        null_values=["\\N"], strings_can_be_null=True, quoted_strings_can_be_null=False,
        true_values=["t"], false_values=["f"])
    return read, parse, convert


def _unescaped(column: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    if not pa.types.is_string(column.type) or not pc.any(
            pc.match_substring(column, "\\")).as_py():
        return column
    return pa.array([v if v is None or "\\" not in v
                     else copytext.unescape(v.encode()).decode("utf-8")
                     for v in column.to_pylist()], pa.string())


def _batch(options: tuple[Any, Any, Any], schema: pa.Schema, data: bytes) -> pa.Table:
    """COPY text rows (complete lines) as an Arrow table of ``schema``."""
    if not data:
        return schema.empty_table()
    read, parse, convert = options
    table = pa_csv.read_csv(pa.py_buffer(data), read, parse, convert)
    return pa.Table.from_arrays([_unescaped(c) for c in table.columns], schema=schema)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _flush(options: tuple[Any, Any, Any], schema: pa.Schema, writer: pq.ParquetWriter,
           data: bytes, total: int) -> tuple[int, int]:
    """Write complete COPY lines ``data``; returns (rows, checksum so far)."""
    lines = data.split(b"\n")[:-1]
    writer.write_table(_batch(options, schema, data))
    return len(lines), copytext.combine((total, copytext.lines_checksum(lines)))


def _write(options: tuple[Any, Any, Any], schema: pa.Schema, writer: pq.ParquetWriter,
           chunks: list[bytes], rows: int, total: int, last: bool = False) -> tuple[int, int]:
    """Flush the complete lines among ``chunks`` (all of them when ``last``), keeping an
    incomplete tail in ``chunks``; returns the new (rows, checksum)."""
    data = b"".join(chunks)
    cut = len(data) if last else data.rfind(b"\n") + 1
    chunks[:] = [data[cut:]] if cut < len(data) else []
    if cut == 0:
        return rows, total
    added, total = _flush(options, schema, writer, data[:cut], total)
    return rows + added, total


def _throttle(rows: int, rate: float, started: float) -> None:
    """Keep this task at or under ``rate`` rows/s (protects a busy upstream)."""
    behind = rows / rate - (time.monotonic() - started)
    if behind > 0.01:
        time.sleep(behind)


def read_partition(task: dict[str, Any]) -> dict[str, Any]:
    """Run one task; returns (and writes) the partition's result."""
    table = table_from_json(task["table"])
    index = int(task["index"])
    try:
        return _read(task, table, index)
    except Exception as exc:
        raise explain(exc, f"reading partition {index} of {table.qualified}") from None


def _read(task: dict[str, Any], table: TableSpec, index: int) -> dict[str, Any]:
    started = time.monotonic()
    folder = table_dir(task["out"], table)
    folder.mkdir(parents=True, exist_ok=True)
    stem = partition_stem(index)
    final = folder / f"{stem}.parquet"
    tmp = folder / f"{stem}.parquet.tmp.{os.getpid()}"
    progress = folder / f"{stem}.progress"
    schema = arrow_schema(table)
    rate = float(task.get("max_rows_per_second") or 0)
    rows, total = 0, 0
    with psycopg.connect(task["dsn"], autocommit=True) as conn:
        for name, value in task["settings"].items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
            sql.Literal(task["snapshot"])))
        snap = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        copy_sql = f"COPY ({table.select_sql(index)}) TO STDOUT"
        with pq.ParquetWriter(tmp, schema, compression="snappy") as writer, \
                conn.cursor() as cur, cur.copy(copy_sql) as copy:
            options = _options(table, schema)
            chunks: list[bytes] = []
            reported = started
            for chunk in copy:
                chunks.append(bytes(chunk))
                if len(chunks) >= BATCH_ROWS:
                    rows, total = _write(options, schema, writer, chunks, rows, total)
                if len(chunks) % 1024 == 0 and time.monotonic() - reported > PROGRESS_EVERY:
                    progress.write_text(str(rows + len(chunks)))
                    reported = time.monotonic()
                if rate:
                    _throttle(rows + len(chunks), rate, started)
            rows, total = _write(options, schema, writer, chunks, rows, total, last=True)
        conn.execute("COMMIT")
    os.replace(tmp, final)
    result = {
        "table": table.qualified, "index": index, "file": final.name, "rows": rows,
        "checksum": total, "snapshot": str(snap[0]) if snap else "",
        "bytes": final.stat().st_size, "seconds": round(time.monotonic() - started, 3),
    }
    _write_atomic(folder / f"{stem}.json", json.dumps(result).encode())
    progress.unlink(missing_ok=True)
    return result
