"""The replication stream against the real cluster: every change shape, via barriers."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from cdc.events import UNCHANGED_TOAST
from cdc.stream import ReplicationStream, StreamConfig
from engine.values import Interval
from tests.integration.cdc.harness import changes_of, execute, params, run, streaming
from tests.support import unique_name
from tests.unit.cdc.recording import RecordingSink

T = UNCHANGED_TOAST


def test_change_types_transactions_rollbacks_and_subtransactions(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE acct (id int PRIMARY KEY, owner text, balance numeric)", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await execute(pg, dbname,
                          "INSERT INTO acct VALUES (1, 'a', 10.50), (2, 'b', 20)",
                          "UPDATE acct SET balance = balance + 1 WHERE id = 1",
                          "DELETE FROM acct WHERE id = 2",
                          "BEGIN; INSERT INTO acct VALUES (3, 'c', 0);"
                          " UPDATE acct SET owner = 'cc' WHERE id = 3; COMMIT",
                          "BEGIN; INSERT INTO acct VALUES (99, 'never', 0); ROLLBACK",
                          "BEGIN; INSERT INTO acct VALUES (4, 'd', 4); SAVEPOINT s;"
                          " INSERT INTO acct VALUES (98, 'undone', 0); ROLLBACK TO s;"
                          " SAVEPOINT t; INSERT INTO acct VALUES (5, 'e', 5); RELEASE t; COMMIT",
                          "TRUNCATE acct")
            result = await stream.barrier()
            assert result.lag_seconds >= 0 and result.applied_lsn >= result.message_lsn
            stats = stream.stats()
            assert stats.connected and stats.lag_seconds == result.lag_seconds
            assert stats.applied_lsn >= result.applied_lsn and stats.transactions_applied >= 6
            changes = changes_of(sink, "acct")
            assert [(c.kind.value, c.new) for c in changes[:2]] == [
                ("insert", (1, "a", Decimal("10.50"))), ("insert", (2, "b", Decimal("20")))]
            assert (changes[2].kind.value, changes[2].old, changes[2].new) == (
                "update", None, (1, "a", Decimal("11.50")))
            assert (changes[3].kind.value, changes[3].old, changes[3].old_full) == (
                "delete", (2, T, T), False)
            multi = [t for t in sink.transactions if len(t.changes) == 2
                     and t.changes[0].new == (3, "c", Decimal("0"))]
            assert len(multi) == 1 and multi[0].changes[1].new == (3, "cc", Decimal("0"))
            ids = {c.new[0] for c in changes if c.new is not None}
            assert ids == {1, 2, 3, 4, 5}
            sub = next(t for t in sink.transactions if any(c.new and c.new[0] == 4
                                                           for c in t.changes))
            assert [c.new[0] for c in sub.changes if c.new] == [4, 5]
            assert changes[-1].kind.value == "truncate"
            lsns = [t.commit_lsn for t in sink.transactions]
            assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)

    run(body)


def test_toast_unchanged_and_replica_identity_full(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE doc (id int PRIMARY KEY, title text, body text);"
            "ALTER TABLE doc ALTER COLUMN body SET STORAGE EXTERNAL;"
            "CREATE TABLE doc_full (id int PRIMARY KEY, title text, body text);"
            "ALTER TABLE doc_full ALTER COLUMN body SET STORAGE EXTERNAL;"
            "ALTER TABLE doc_full REPLICA IDENTITY FULL", dbname)
    big = os.urandom(60_000).hex()

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await execute(pg, dbname,
                          f"INSERT INTO doc VALUES (1, 't', '{big}')",
                          f"INSERT INTO doc_full VALUES (1, 't', '{big}')",
                          "UPDATE doc SET title = 't2' WHERE id = 1",
                          "UPDATE doc_full SET title = 't2' WHERE id = 1",
                          "DELETE FROM doc_full WHERE id = 1")
            await stream.barrier()
            insert, update = changes_of(sink, "doc")
            assert insert.new == (1, "t", big)
            assert update.new == (1, "t2", UNCHANGED_TOAST) and update.old is None
            _ins, upd, dele = changes_of(sink, "doc_full")
            assert upd.old == (1, "t", big) and upd.new == (1, "t2", big)
            assert upd.old_full
            assert dele.old == (1, "t2", big) and dele.old_full

    run(body)


def test_tables_without_primary_key(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE log_ (at int, msg text);"
            "CREATE TABLE bag (a int, b text); ALTER TABLE bag REPLICA IDENTITY FULL", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await execute(pg, dbname, "INSERT INTO log_ VALUES (1, 'x'), (1, 'x')",
                          "INSERT INTO bag VALUES (1, 'a'), (1, 'a')",
                          "UPDATE bag SET b = 'z' WHERE a = 1", "DELETE FROM bag")
            await stream.barrier()
            assert [c.new for c in changes_of(sink, "log_")] == [(1, "x"), (1, "x")]
            kinds = [(c.kind.value, c.old, c.new) for c in changes_of(sink, "bag")]
            assert kinds == [("insert", None, (1, "a")), ("insert", None, (1, "a")),
                             ("update", (1, "a"), (1, "z")), ("update", (1, "a"), (1, "z")),
                             ("delete", (1, "z"), None), ("delete", (1, "z"), None)]

    run(body)


def test_schema_changes_reset_only_that_table(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE a (id int PRIMARY KEY, v int); CREATE TABLE b (id int PRIMARY KEY)",
            dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await execute(pg, dbname, "INSERT INTO a VALUES (1, 1)", "INSERT INTO b VALUES (1)")
            await stream.barrier()
            assert sink.resets == []
            await execute(pg, dbname, "ALTER TABLE a ADD COLUMN w text",
                          "BEGIN; INSERT INTO a VALUES (2, 2, 'two'); INSERT INTO b VALUES (2);"
                          " COMMIT")
            await stream.barrier()
            a_oid = next(s.oid for s in sink.schemas if s.name == "a")
            assert [oid for oid, _ in sink.resets] == [a_oid]
            assert changes_of(sink, "b")[-1].new == (2,)
            await execute(pg, dbname, "INSERT INTO a VALUES (3, 3, 'three')",
                          "ALTER TABLE a DROP COLUMN v", "INSERT INTO a VALUES (4, 'four')",
                          "ALTER TABLE a ALTER COLUMN w TYPE varchar(10)",
                          "INSERT INTO a VALUES (5, 'five')")
            await stream.barrier()
            assert [oid for oid, _ in sink.resets] == [a_oid, a_oid, a_oid]
            assert [c.new for c in changes_of(sink, "a")] == [
                (1, 1), (2, 2, "two"), (3, 3, "three"), (4, "four"), (5, "five")]
            latest = [s for s in sink.schemas if s.name == "a"][-1]
            assert [(c.name, c.type_oid) for c in latest.columns] == [("id", 23), ("w", 1043)]
            assert sink.events[-1][0] == "apply"

    run(body)


def test_publication_for_a_table_list(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE wanted (id int PRIMARY KEY); CREATE TABLE other (id int PRIMARY KEY)",
            dbname)

    async def body() -> None:
        sink = RecordingSink()
        config = StreamConfig(params(pg, dbname), publication=unique_name("pub"),
                              tables=("public.wanted",), slot=unique_name("weir_list"))
        stream = ReplicationStream(config, sink)
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO wanted VALUES (1)",
                          "INSERT INTO other VALUES (1)")
            await stream.barrier()
        finally:
            await stream.stop()
        assert {s.name for s in sink.schemas} == {"wanted"}
        assert [c.new for c in changes_of(sink, "wanted")] == [(1,)]
        assert pg.psql(f"SELECT tablename FROM pg_publication_tables WHERE pubname = "
                       f"'{config.publication}'", dbname).split() == ["wanted"]

    run(body)


def test_values_decode_the_same_whatever_the_database_settings(pg: Any, dbname: str) -> None:
    pg.psql(f"ALTER DATABASE {dbname} SET TimeZone = 'Asia/Kolkata';"
            f"ALTER DATABASE {dbname} SET DateStyle = 'SQL, DMY';"
            f"ALTER DATABASE {dbname} SET IntervalStyle = 'iso_8601';"
            f"ALTER DATABASE {dbname} SET extra_float_digits = -3;"
            f"ALTER DATABASE {dbname} SET bytea_output = 'escape'")
    pg.psql("CREATE TABLE v (id int PRIMARY KEY, ts timestamptz, d date, iv interval,"
            " f float8, b bytea, u uuid, a int[], n numeric, j jsonb)", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await execute(pg, dbname,
                          "INSERT INTO v VALUES (1, '2020-01-02 03:04:05.25+00', '2021-12-31',"
                          " '1 mon 2 days 03:00:00', 0.1, '\\x00ff', "
                          "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,NULL,3}', '12.340',"
                          " '{\"k\": [1, 2]}')")
            await stream.barrier()
            (change,) = changes_of(sink, "v")
            assert change.new == (
                1, datetime(2020, 1, 2, 3, 4, 5, 250000, tzinfo=UTC), date(2021, 12, 31),
                Interval(1, 2, 3 * 3600 * 1_000_000), 0.1, b"\x00\xff",
                UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), (1, None, 3), Decimal("12.340"),
                '{"k": [1, 2]}')

    run(body)


def test_host_markers_fire_right_after_their_transaction(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE m (id int PRIMARY KEY)", dbname)

    async def body() -> None:
        sink = RecordingSink()
        seen: list[tuple[str, int]] = []
        config = StreamConfig(params(pg, dbname), publication=unique_name("pub"),
                              slot=unique_name("weir_marker"))
        stream = ReplicationStream(
            config, sink, on_marker=lambda m, lsn: seen.append((m, len(sink.transactions))))
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO m VALUES (1)",
                          "BEGIN; INSERT INTO m VALUES (2);"
                          " SELECT pg_logical_emit_message(true, 'weir', 'fill-7'); COMMIT",
                          "INSERT INTO m VALUES (3)")
            await stream.barrier()
        finally:
            await stream.stop()
        fill = [(m, n) for m, n in seen if m == "fill-7"]
        assert fill == [("fill-7", 2)]  # after the marker's transaction, before the next
        assert len(seen) == 2  # and the barrier's own marker

    run(body)
