"""The bootstrap's output directory: plan, partition results and the manifest, and their
atomic writes.

Owns the layout (``_plan.json`` written once at the first run; per table ``<schema.table>/
part-NNNNN.parquet`` with its result ``part-NNNNN.json``; ``_manifest.json`` written last) and
building the manifest from the plan and the results. A directory with a manifest is a finished,
consistent bootstrap; without one it is unfinished, whatever files it holds, and only a
partition with a result file counts as read.

Manifest: ``tables`` (schema, columns with PostgreSQL and Parquet types, key, partitioning,
rows, checksum), per partition its file, rows, checksum and the snapshot it was read under,
the slot and publication, ``lsn`` (the slot's consistent point: CDC applies the slot's
transactions from there), the first run's ``snapshot``, and ``resumed`` (whether partitions
were read under different snapshots).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from cdc.bootstrap import copytext
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.plan import Plan, table_to_json
from cdc.bootstrap.reader import partition_stem
from cdc.pgoutput import format_lsn

PLAN = "_plan.json"
MANIFEST = "_manifest.json"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, fsync the folder)."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> dict[str, Any]:
    with open(path) as f:
        data: dict[str, Any] = json.load(f)
    return data


def load_plan(out: Path) -> Plan | None:
    path = out / PLAN
    return Plan.from_json(read_json(path)) if path.exists() else None


def load_manifest(out: str | Path) -> dict[str, Any] | None:
    path = Path(out) / MANIFEST
    return read_json(path) if path.exists() else None


def result_path(out: Path, table: str, index: int) -> Path:
    return out / table / f"{partition_stem(index)}.json"


def done_results(out: Path, plan: Plan) -> dict[tuple[str, int], dict[str, Any]]:
    """The partitions already read (those with a result file)."""
    found = {}
    for table, index in plan.tasks():
        path = result_path(out, table, index)
        if path.exists():
            found[(table, index)] = read_json(path)
    return found


def in_flight_rows(out: Path, plan: Plan) -> int:
    """Rows read so far by partitions still running (their progress files)."""
    total = 0
    for table in plan.tables:
        folder = out / table.qualified
        if not folder.is_dir():
            continue
        for p in folder.glob("*.progress"):
            try:
                total += int(p.read_text() or 0)
            except (OSError, ValueError):  # replaced or removed while we looked
                continue
    return total


def build(plan: Plan, results: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    missing = [t for t in plan.tasks() if t not in results]
    if missing:
        raise BootstrapError(f"{len(missing)} partitions were not read (first: {missing[0]}); "
                             "rerun to finish them")
    snapshots = {r["snapshot"] for r in results.values()}
    tables = []
    for t in plan.tables:
        parts = [results[(t.qualified, i)] for i in range(t.partitioning.count)]
        tables.append({
            **table_to_json(t),
            "name": t.name, "qualified": t.qualified,
            "rows": sum(int(p["rows"]) for p in parts),
            "checksum": copytext.combine(int(p["checksum"]) for p in parts),
            "partitions": [{k: p[k] for k in ("index", "file", "rows", "checksum", "snapshot")}
                           for p in parts],
        })
    return {
        "version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "system_identifier": plan.system_identifier, "database": plan.database,
        "slot": plan.slot, "publication": plan.publication,
        "lsn": format_lsn(plan.lsn), "snapshot": plan.snapshot,
        "resumed": len(snapshots) > 1, "tables": tables,
    }
