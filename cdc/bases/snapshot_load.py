"""Local bases loaded by weir itself from one snapshot (small tables; reloads).

Owns :func:`load`: check the tables (as ``weir bootstrap`` does), make the publication publish
them, create the persistent slot exporting its snapshot, ``COPY`` every table inside that
snapshot (one REPEATABLE READ transaction, serially: no Spark) into a new
:class:`~cdc.bases.store.BaseStore`, and describe the result with a manifest of the same
shape as a bootstrap's (one partition per table, read under the slot's snapshot, ``lsn`` the
slot's consistent point). The slot's exported snapshot and its consistent point describe the
same state, so the store is exact as of that point and the slot streams every later change.

A slot of that name that already exists is dropped first (a reload replaces bases that can no
longer be kept exact). Blocking (psycopg): call it in a thread from asyncio.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from cdc.bases.store import BaseStore
from cdc.bootstrap import catalog, copytext, snapshot
from cdc.bootstrap.errors import BootstrapError, explain
from cdc.bootstrap.plan import Partitioning, TableSpec, quote_ident, table_to_json
from cdc.pgoutput import format_lsn


def ensure_published(conn: psycopg.Connection[Any], publication: str,
                     tables: Sequence[catalog.Found]) -> None:
    """Create ``publication`` for ``tables``, or add those it does not publish yet."""
    names = [f"{quote_ident(t.schema)}.{quote_ident(t.name)}" for t in tables]
    pub = quote_ident(publication)
    try:
        if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                        (publication,)).fetchone() is None:
            conn.execute(f"CREATE PUBLICATION {pub} FOR TABLE {', '.join(names)}")
            return
        for t, name in zip(tables, names, strict=True):
            if conn.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND"
                            " schemaname = %s AND tablename = %s",
                            (publication, t.schema, t.name)).fetchone() is None:
                conn.execute(f"ALTER PUBLICATION {pub} ADD TABLE ONLY {name}")
    except psycopg.Error as exc:
        raise explain(exc, f"publishing the local bases' tables in {publication}") from None


def _copy_rows(conn: psycopg.Connection[Any], spec: TableSpec, entry: dict[str, Any]
               ) -> Iterator[bytes]:
    """The table's rows as COPY text lines (weir's session settings); their count and row
    checksum are recorded in its manifest ``entry`` (and its one partition)."""
    cols = ", ".join(quote_ident(c.name) for c in spec.columns)
    rows, total, rest = 0, 0, b""
    with conn.cursor() as cur, cur.copy(
            f"COPY (SELECT {cols} FROM {spec.sql_name}) TO STDOUT") as copy:
        for chunk in copy:
            lines, rest = copytext.split_lines(rest, bytes(chunk))
            rows += len(lines)
            total = (total + copytext.lines_checksum(lines)) & copytext.MASK64
            yield from lines
    entry["rows"] = entry["estimated_rows"] = entry["partitions"][0]["rows"] = rows
    entry["checksum"] = entry["partitions"][0]["checksum"] = total


def load(path: str | Path, dsn: str, tables: Sequence[str], slot: str,
         publication: str) -> BaseStore:
    """Load ``tables`` (SQL names) into a new store at ``path`` from one snapshot of slot
    ``slot`` (created, persistent; dropped first if it exists)."""
    if not tables:
        raise BootstrapError("local bases need at least one table")
    with catalog.connect(dsn) as conn:
        found = [catalog.inspect(conn, name) for name in tables]
        catalog.check_replication(conn)
        ensure_published(conn, publication, found)
        system = conn.execute("SELECT system_identifier::text, current_database()"
                              " FROM pg_control_system()").fetchone()
    assert system is not None
    snapshot.drop_slot(dsn, slot)
    held = snapshot.create_slot(dsn, slot)
    try:
        with catalog.connect(dsn) as conn:
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                conn.execute(f"SET TRANSACTION SNAPSHOT '{held.name}'")
                row = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
                assert row is not None
                snap = str(row[0])
                specs = [TableSpec(f.schema, f.name, f.columns, f.key,
                                   Partitioning("hash", 1), 0) for f in found]
                data: dict[str, Any] = {
                    "version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "source": "snapshot", "system_identifier": str(system[0]),
                    "database": str(system[1]), "slot": slot, "publication": publication,
                    "lsn": format_lsn(held.lsn or 0), "snapshot": snap, "resumed": False,
                    "tables": [{**table_to_json(s), "qualified": s.qualified,
                                "partitions": [{"index": 0, "file": "", "snapshot": snap}]}
                               for s in specs]}
                by_name = dict(zip((s.qualified for s in specs), specs, strict=True))
                store = BaseStore.build(
                    path, data, lambda t: _copy_rows(conn, by_name[str(t["qualified"])], t))
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                raise explain(exc, "loading the local bases") from None
    finally:
        held.close()
    return store
