"""One partition of one table, read by a Spark task: COPY under the run's snapshot to Parquet.

Owns: what an executor does for a task (a plain dict, so it pickles anywhere): connect,
``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``, ``SET TRANSACTION SNAPSHOT``, record
``pg_current_snapshot()`` (the visibility the replication patching uses for this partition),
``COPY (SELECT ... WHERE <partition predicate>) TO STDOUT``, row hashes and Arrow columns in
batches of ``BATCH_BYTES``, an optional rows/s throttle, and the output protocol that makes a
partition done: the Parquet file is renamed into place first, then its result file (rows,
checksum, snapshot); a partition without a result file is not done, whatever else exists. A
progress file with the rows read so far is rewritten every ``PROGRESS_EVERY`` seconds for
the driver's progress line.

Imports neither Spark nor weir's proxy: executors need asyncpg, psycopg (for errors), pyarrow
and this package only. The COPY is read with asyncpg, which hands over the data in blocks of
many rows: psycopg yields one Python object per row, which was a third of a task's time.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from cdc.bootstrap import copytext
from cdc.bootstrap.errors import explain
from cdc.bootstrap.plan import TableSpec, table_from_json

#: bytes of COPY data converted to Arrow and written to Parquet at a time
BATCH_BYTES = 4 << 20
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


@dataclass(slots=True)
class _State:
    """A running task's counts: rows and checksum written, lines received, bytes pending."""

    reported: float
    chunks: list[bytes] = field(default_factory=list)
    rows: int = 0
    total: int = 0
    lines: int = 0
    pending: int = 0


async def _copy(task: dict[str, Any], select: str, take: Callable[[bytes], None]) -> str:
    """``COPY (select) TO STDOUT`` under the task's snapshot, its data handed to ``take`` in
    the blocks asyncpg receives (tens of kilobytes: no Python work per row); returns the
    ``pg_current_snapshot()`` the partition was read under."""
    conn = await asyncpg.connect(task["dsn"], server_settings=dict(task["settings"]))
    try:
        await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        name = str(task["snapshot"]).replace("'", "''")
        await conn.execute(f"SET TRANSACTION SNAPSHOT '{name}'")
        snap = str(await conn.fetchval("SELECT pg_current_snapshot()::text"))

        async def sink(data: bytes) -> None:
            take(bytes(data))

        await conn.copy_from_query(select, output=sink)
        await conn.execute("COMMIT")
        return snap
    finally:
        await conn.close()


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
    # no dictionary encoding: the values of a table's columns are mostly distinct, and the
    # dictionaries made Parquet writing 2.4x slower (half a task's time) for larger files
    with pq.ParquetWriter(tmp, schema, compression="snappy", use_dictionary=False) as writer:
        options = _options(table, schema)
        state = _State(started)

        def take(data: bytes) -> None:
            """One block of COPY data (many rows, the last maybe cut): batches to Parquet."""
            state.chunks.append(data)
            state.pending += len(data)
            state.lines += data.count(b"\n")
            if state.pending >= BATCH_BYTES:
                state.rows, state.total = _write(options, schema, writer, state.chunks,
                                                 state.rows, state.total)
                state.pending = sum(map(len, state.chunks))
            if time.monotonic() - state.reported > PROGRESS_EVERY:
                progress.write_text(str(state.lines))
                state.reported = time.monotonic()
            if rate:
                _throttle(state.lines, rate, started)

        snap = asyncio.run(_copy(task, table.select_sql(index), take))
        state.rows, state.total = _write(options, schema, writer, state.chunks, state.rows,
                                         state.total, last=True)
    rows, total = state.rows, state.total
    os.replace(tmp, final)
    result = {
        "table": table.qualified, "index": index, "file": final.name, "rows": rows,
        "checksum": total, "snapshot": snap,
        "bytes": final.stat().st_size, "seconds": round(time.monotonic() - started, 3),
    }
    _write_atomic(folder / f"{stem}.json", json.dumps(result).encode())
    progress.unlink(missing_ok=True)
    return result
