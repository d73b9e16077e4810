"""Differential test: a replica built only from the stream equals the upstream table.

A seeded random workload (inserts, updates with and without key changes, updates that leave
a TOASTed column alone, deletes, truncates, multi-statement transactions, rollbacks and
savepoints) runs against a table with many types; a sink keeps a replica keyed by the primary
key, filling unchanged-TOAST columns from its own rows. After a barrier the replica must equal
``SELECT`` of the table decoded with the same codecs.
"""

from __future__ import annotations

import os
import random
from typing import Any

import psycopg

from cdc.events import UNCHANGED_TOAST, ChangeKind, TableSchema, Transaction
from engine.values import decode_text
from tests.integration.cdc.harness import run, streaming

COLUMNS = "id int PRIMARY KEY, t text, n numeric, f float8, ts timestamptz, b bytea, j jsonb," \
          " big text, arr int[], iv interval"


NUMERICS = ["1.50", "-3", "'NaN'"]
FLOATS = ["0.1", "-1e300", "'Infinity'", "NULL", "'NaN'"]


class ReplicaSink:
    def __init__(self) -> None:
        self.rows: dict[int, tuple[object, ...]] = {}
        self.oid: int | None = None
        self.seen: dict[str, int] = {}

    def _saw(self, what: str) -> None:
        self.seen[what] = self.seen.get(what, 0) + 1

    def table_schema(self, schema: TableSchema) -> None:
        if schema.name == "d":
            self.oid = schema.oid

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        raise AssertionError(f"unexpected reset: {reason}")

    def reset_all(self, reason: str) -> None:
        raise AssertionError(f"unexpected reset: {reason}")

    def apply(self, txn: Transaction) -> None:
        for c in txn.changes:
            if c.table_oid != self.oid:
                continue
            self._saw(c.kind.value)
            if c.kind is ChangeKind.TRUNCATE:
                self.rows.clear()
            elif c.kind is ChangeKind.DELETE:
                assert c.old is not None
                del self.rows[int(c.old[0])]  # type: ignore[call-overload]
            else:
                assert c.new is not None
                key = c.old[0] if c.old is not None else c.new[0]
                previous = self.rows.pop(int(key), None)  # type: ignore[call-overload]
                if c.kind is ChangeKind.UPDATE:
                    assert previous is not None
                    if c.old is not None:
                        self._saw("key change")
                    if any(v is UNCHANGED_TOAST for v in c.new):
                        self._saw("unchanged toast")
                    new = tuple(p if v is UNCHANGED_TOAST else v
                                for p, v in zip(previous, c.new, strict=True))
                else:
                    assert previous is None
                    new = c.new
                self.rows[int(new[0])] = new  # type: ignore[call-overload]


def _value_sql(rng: random.Random) -> str:
    big = "NULL" if rng.random() < 0.2 else f"'{os.urandom(rng.choice([4, 40_000])).hex()}'"
    return (f"'{rng.choice(['a', 'héllo', '', 'x y'])}', {rng.choice(NUMERICS)},"
            f" {rng.choice(FLOATS)},"
            f" '2024-0{rng.randint(1, 9)}-01 12:00:00.{rng.randint(0, 999999):06d}+02',"
            f" '\\x{os.urandom(3).hex()}', '{{\"k\": {rng.randint(0, 9)}}}', {big},"
            f" '{{{rng.randint(0, 5)},NULL}}', '{rng.randint(-3, 3)} days 01:00:00'")


def _statement(rng: random.Random, ids: list[int], next_id: list[int]) -> str:
    roll = rng.random()
    if roll < 0.35 or not ids:
        next_id[0] += 1
        return f"INSERT INTO d VALUES ({next_id[0]}, {_value_sql(rng)})"
    target = rng.choice(ids)
    if roll < 0.6:
        return f"UPDATE d SET t = 'u{rng.randint(0, 99)}', n = n + 1 WHERE id = {target}"
    if roll < 0.7:
        next_id[0] += 1
        return f"UPDATE d SET id = {next_id[0]} WHERE id = {target}"
    if roll < 0.8:
        return f"UPDATE d SET big = '{os.urandom(30_000).hex()}' WHERE id = {target}"
    if roll < 0.97:
        return f"DELETE FROM d WHERE id = {target}"
    return "TRUNCATE d"


def _workload(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    next_id = [0]
    for _ in range(60):
        ids = [r[0] for r in conn.execute("SELECT id FROM d").fetchall()]
        shape = rng.random()
        with conn.transaction() as tx:
            for _ in range(rng.randint(1, 4)):
                conn.execute(_statement(rng, ids, next_id))  # type: ignore[arg-type]
                ids = [r[0] for r in conn.execute("SELECT id FROM d").fetchall()]
            if shape < 0.15:  # a savepoint rolled back
                with conn.transaction():
                    conn.execute(_statement(rng, ids, next_id))  # type: ignore[arg-type]
                    raise psycopg.Rollback()
            if shape > 0.9:
                raise psycopg.Rollback(tx)


def test_replica_from_the_stream_equals_the_upstream(pg: Any, dbname: str) -> None:
    pg.psql(f"CREATE TABLE d ({COLUMNS}); ALTER TABLE d ALTER COLUMN big SET STORAGE EXTERNAL",
            dbname)

    async def body() -> None:
        sink = ReplicaSink()
        async with streaming(pg, dbname) as (stream, _recording):
            stream.sink = sink
            stream.applier.sink = sink
            with psycopg.connect(pg.dsn(dbname=dbname)) as conn:
                _workload(conn, random.Random(11))
            await stream.barrier()
        with psycopg.connect(pg.dsn(dbname=dbname)) as conn:
            conn.execute("SET TimeZone = 'UTC'; SET IntervalStyle = 'postgres'")
            oids = [r[0] for r in conn.execute(
                "SELECT atttypid FROM pg_attribute WHERE attrelid = 'd'::regclass"
                " AND attnum > 0 ORDER BY attnum").fetchall()]
            cols = ", ".join(f"{name.split()[0]}::text" for name in COLUMNS.split(", "))
            upstream = {int(r[0]): tuple(None if v is None else decode_text(o, v)
                                         for o, v in zip(oids, r, strict=True))
                        for r in conn.execute(f"SELECT {cols} FROM d").fetchall()}
        assert set(sink.seen) == {"insert", "update", "delete", "truncate", "key change",
                                  "unchanged toast"}, sink.seen
        assert sink.rows.keys() == upstream.keys()
        assert sink.rows == upstream

    run(body)
