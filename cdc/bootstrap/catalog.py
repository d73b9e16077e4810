"""The driver's look at the upstream before and while it plans a bootstrap.

Owns: connecting (weir's session settings, so every value's text matches what pgoutput
sends), checking every input with a clear error (unknown table, not a plain table, no primary
key, replica identity NOTHING, no SELECT privilege, no REPLICATION attribute, ``wal_level`` not
logical, no free replication slot), the publication the bootstrap's changes are streamed
through (created for the tables when absent, checked when present), and planning each table's
partitions inside the exported snapshot (so bounds and estimates describe the loaded state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import psycopg

from cdc.bootstrap.errors import BootstrapError, explain
from cdc.bootstrap.plan import (
    INTEGER_TYPES,
    KINDS,
    Column,
    Partitioning,
    TableSpec,
    even_bounds,
    quote_ident,
)
from cdc.connection import SESSION_SETTINGS as STREAM_SETTINGS

#: The replication stream's session settings: every type's text output under them is what
#: pgoutput sends weir, so row checksums of loaded and streamed rows agree.
SESSION_SETTINGS = dict(STREAM_SETTINGS)


def connect(dsn: str, settings: dict[str, str] | None = None,
            **kwargs: str) -> psycopg.Connection[Any]:
    """An autocommit connection with weir's session settings."""
    try:
        conn = psycopg.connect(dsn, autocommit=True, **kwargs)  # type: ignore[arg-type]
    except psycopg.Error as exc:
        raise explain(exc, "connecting") from None
    if "replication" not in kwargs:
        with conn.cursor() as cur:
            for name, value in (settings or SESSION_SETTINGS).items():
                cur.execute("SELECT set_config(%s, %s, false)", (name, value))
    return conn


@dataclass(frozen=True, slots=True)
class Found:
    """A table as the catalog describes it, before partitioning."""

    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]


def inspect(conn: psycopg.Connection[Any], name: str) -> Found:
    """Resolve and check one table named as in SQL (``t``, ``s.t``, ``"Odd Name"``)."""
    try:
        row = conn.execute(
            "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident,"
            " has_table_privilege(c.oid, 'SELECT')"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.oid = to_regclass(%s)", (name,)).fetchone()
    except psycopg.Error as exc:
        raise explain(exc, f"looking up table {name}") from None
    if row is None:
        raise BootstrapError(f"unknown table {name!r}: no such table in the upstream database "
                             "(check the name, its schema and the search_path)")
    oid, schema, rel, kind, replident, can_select = row
    if kind not in ("r",):
        raise BootstrapError(f"{schema}.{rel} is not a plain table (relkind {kind!r}); "
                             "bootstrap its tables or partitions instead")
    if not can_select:
        user = conn.execute("SELECT current_user").fetchone()
        raise BootstrapError(f"no privilege: role {user[0] if user else '?'} cannot SELECT "
                             f"from {schema}.{rel}: GRANT SELECT ON {schema}.{rel} TO ...")
    if replident == "n":
        raise BootstrapError(f"{schema}.{rel} has REPLICA IDENTITY NOTHING: its updates and "
                             "deletes cannot be streamed; ALTER TABLE ... REPLICA IDENTITY "
                             "DEFAULT")
    cols = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod), atttypid, atttypmod"
        " FROM pg_attribute"
        " WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (oid,)).fetchall()
    key = conn.execute(
        "SELECT a.attname FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos),"
        " pg_attribute a WHERE i.indrelid = %s AND i.indisprimary AND a.attrelid = i.indrelid"
        " AND a.attnum = k.attnum ORDER BY k.pos", (oid,)).fetchall()
    if not key:
        raise BootstrapError(f"{schema}.{rel} has no primary key: weir partitions a table by "
                             "its key and applies its changes by key; add a PRIMARY KEY")
    columns = tuple(Column(str(c), str(t), KINDS.get(str(t), "text"), int(o), int(m))
                    for c, t, o, m in cols)
    return Found(int(oid), str(schema), str(rel), columns, tuple(str(k[0]) for k in key))


def check_replication(conn: psycopg.Connection[Any]) -> None:
    """The role may create slots, the server decodes logically, and a slot is free."""
    row = conn.execute(
        "SELECT r.rolreplication OR r.rolsuper, current_user, current_setting('wal_level'),"
        " current_setting('max_replication_slots')::int,"
        " (SELECT count(*) FROM pg_replication_slots)"
        " FROM pg_roles r WHERE r.rolname = current_user").fetchone()
    assert row is not None
    may, user, wal_level, max_slots, used = row
    if not may:
        raise BootstrapError(f"no privilege: role {user} cannot create replication slots: "
                             f"ALTER ROLE {user} REPLICATION (or run as a superuser)")
    if wal_level != "logical":
        raise BootstrapError(f"wal_level is {wal_level!r}; logical decoding needs 'logical': "
                             "ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL")
    if int(str(used)) >= int(str(max_slots)):
        raise BootstrapError(
            f"replication slot limit reached: all {max_slots} slots are in use; drop unused "
            "ones (weir slots list / weir slots drop) or raise max_replication_slots")


def ensure_publication(conn: psycopg.Connection[Any], publication: str,
                       tables: list[Found]) -> None:
    """Create ``publication`` for the tables, or check that it publishes all of them."""
    exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                          (publication,)).fetchone()
    if exists is None:
        names = ", ".join(f"{quote_ident(t.schema)}.{quote_ident(t.name)}" for t in tables)
        try:
            conn.execute(f"CREATE PUBLICATION {quote_ident(publication)} FOR TABLE {names}")
        except psycopg.Error as exc:
            raise BootstrapError(
                f"cannot create publication {publication}: {str(exc).strip()}; create it as "
                f"the tables' owner: CREATE PUBLICATION {publication} FOR TABLE {names}"
            ) from None
        return
    for t in tables:
        found = conn.execute(
            "SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s"
            " AND tablename = %s", (publication, t.schema, t.name)).fetchone()
        if found is None:
            raise BootstrapError(f"publication {publication} does not publish {t.schema}."
                                 f"{t.name}: ALTER PUBLICATION {publication} ADD TABLE "
                                 f"{t.schema}.{t.name}")


def partition_table(conn: psycopg.Connection[Any], found: Found,
                    rows_per_partition: int, min_partitions: int,
                    partitions: int | None = None) -> TableSpec:
    """Cut one table into partitions; runs inside the exported snapshot."""
    estimate = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s",
                            (found.oid,)).fetchone()
    rows = int(str(estimate[0])) if estimate else -1
    sql_name = f"{quote_ident(found.schema)}.{quote_ident(found.name)}"
    if rows < 0:  # never analyzed: count under the snapshot (the plan must be right)
        counted = conn.execute(f"SELECT count(*) FROM {sql_name}").fetchone()
        rows = int(str(counted[0])) if counted else 0
    count = partitions or max(min_partitions, math.ceil(rows / max(rows_per_partition, 1)))
    count = max(1, min(count, max(1, rows // 1000)))
    first = next(c for c in found.columns if c.name == found.key[0])
    if first.type in INTEGER_TYPES:
        bounds = _range_bounds(conn, sql_name, quote_ident(first.name), rows, count)
        parts = Partitioning("range", len(bounds) + 1, first.name, bounds)
    else:
        parts = Partitioning("hash", count)
    return TableSpec(found.schema, found.name, found.columns, found.key, parts, rows)


#: Rows sampled to place range bounds at quantiles of the key (not evenly between min and max:
#: keys are rarely uniform, e.g. old ids deleted, new ones far above).
SAMPLE_ROWS = 30_000


def _range_bounds(conn: psycopg.Connection[Any], sql_name: str, col: str, rows: int,
                  count: int) -> tuple[int, ...]:
    if count <= 1:
        return ()
    percent = min(100.0, 100.0 * SAMPLE_ROWS / max(rows, 1))
    fractions = [i / count for i in range(1, count)]
    found = conn.execute(
        f"SELECT percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY {col})"
        f" FROM {sql_name} TABLESAMPLE SYSTEM (%s)", (fractions, percent)).fetchone()
    if found is not None and found[0]:
        return tuple(sorted({int(b) for b in found[0] if b is not None}))
    low, high = conn.execute(f"SELECT min({col}), max({col}) FROM {sql_name}").fetchone() \
        or (None, None)
    return () if low is None or high is None else even_bounds(int(low), int(high), count)
