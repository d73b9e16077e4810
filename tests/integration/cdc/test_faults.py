"""Continuity of the stream: disconnects, upstream restart, lost slots, slot hygiene, auth."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cdc import slots
from cdc.connection import PgConnection, UpstreamError
from cdc.stream import ReplicationStream, StreamConfig
from tests.integration.cdc.harness import changes_of, execute, params, persistent_stream, run
from tests.support import unique_name
from tests.unit.cdc.recording import RecordingSink


def _ids(sink: RecordingSink, table: str) -> list[int]:
    return sorted(int(c.new[0]) for c in changes_of(sink, table) if c.new is not None)


async def _slot_names(pg: Any, prefix: str) -> list[str]:
    conn = await PgConnection.connect(params(pg, "postgres"))
    try:
        return [s.name for s in await slots.list_slots(conn, prefix)]
    finally:
        await conn.close()


def test_persistent_slot_survives_disconnects_and_upstream_restart(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_persist")

    async def body() -> None:
        sink = RecordingSink()
        config = StreamConfig(params(pg, dbname), publication="p", slot=slot, temporary=False,
                              status_interval=3600)
        stream = ReplicationStream(config, sink)
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO t SELECT g FROM generate_series(1, 500) g",
                          *(f"INSERT INTO t VALUES ({i})" for i in range(501, 541)))
            await stream.barrier()
            stream.kill_connection()  # nothing confirmed yet (status_interval is an hour)
            await execute(pg, dbname, *(f"INSERT INTO t VALUES ({i})" for i in range(541, 561)))
            await stream.barrier()
            assert stream.sessions == 2
            assert _ids(sink, "t") == list(range(1, 561))
            writer = asyncio.create_task(execute(
                pg, dbname, "INSERT INTO t SELECT g FROM generate_series(561, 3000) g"))
            await asyncio.to_thread(pg.restart)
            await asyncio.gather(writer, return_exceptions=True)
            await execute(pg, dbname, *(f"INSERT INTO t VALUES ({i})" for i in range(3001, 3011)))
            await stream.barrier(timeout=60)
            got = _ids(sink, "t")
            assert len(got) == len(set(got)), "a change was applied twice"
            expected = list(range(1, 561)) + list(range(3001, 3011))
            rows = int(pg.psql("SELECT count(*) FROM t", dbname))
            if rows > 570:  # the big insert committed before the restart
                expected = list(range(1, 3011))
            assert got == expected
            assert sink.reset_alls == []
        finally:
            await stream.stop()
        assert await _slot_names(pg, slot) == [slot]
        assert await slots.drop_weir_slots(params(pg, "postgres"), prefix=slot) == [slot]
        assert await _slot_names(pg, slot) == []

    run(body)


def test_lost_persistent_slot_resets_everything(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_lost")

    async def body() -> None:
        sink = RecordingSink()
        stream = persistent_stream(pg, dbname, slot, sink)
        await stream.start()
        await execute(pg, dbname, "INSERT INTO t VALUES (1)")
        await stream.barrier()
        await stream.stop()
        pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")
        await execute(pg, dbname, "INSERT INTO t VALUES (2)")  # lost with the slot
        await stream.start()
        try:
            assert len(sink.reset_alls) == 1 and "lost" in sink.reset_alls[0]
            await execute(pg, dbname, "INSERT INTO t VALUES (3)")
            await stream.barrier()
            assert _ids(sink, "t") == [1, 3]
        finally:
            await stream.stop()
            pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")

    run(body)


def test_temporary_slot_reconnect_resets_and_leaves_no_orphans(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)

    async def body() -> None:
        sink = RecordingSink()
        stream = ReplicationStream(StreamConfig(params(pg, dbname), publication="p"), sink)
        await stream.start()
        first = stream.slot_name
        try:
            assert first.startswith("weir_") and await _slot_names(pg, first) == [first]
            await execute(pg, dbname, "INSERT INTO t VALUES (1)")
            await stream.barrier()
            stream.kill_connection()
            await execute(pg, dbname, "INSERT INTO t VALUES (2)")
            await stream.barrier(timeout=60)
            assert len(sink.reset_alls) == 1 and "temporary" in sink.reset_alls[0]
            got = _ids(sink, "t")
            assert got[0] == 1 and len(got) == len(set(got))
            second = stream.slot_name
            assert second != first
        finally:
            await stream.stop()
        for name in (first, second):
            assert await _slot_names(pg, name) == []

    run(body)


def test_scram_replication_user_over_tls_and_md5_plain_connection(pg: Any, dbname: str) -> None:
    scram, md5 = unique_name("scram"), unique_name("md5")
    pg.psql(f"CREATE ROLE {scram} LOGIN REPLICATION PASSWORD 'pw1' IN ROLE weir_scram;"
            f"SET password_encryption = 'md5';"
            f"CREATE ROLE {md5} LOGIN PASSWORD 'pw2' IN ROLE weir_md5;"
            f"GRANT ALL ON DATABASE {dbname} TO {scram}, {md5}")
    pg.psql(f"CREATE TABLE t (id int PRIMARY KEY); GRANT SELECT ON t TO {scram};"
            "CREATE PUBLICATION p FOR ALL TABLES", dbname)

    async def body() -> None:
        sink = RecordingSink()
        config = StreamConfig(params(pg, dbname, user=scram, password="pw1", sslmode="require"),
                              publication="p", slot=unique_name("weir_scram"))
        stream = ReplicationStream(config, sink)
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO t VALUES (7)")
            await stream.barrier()
            assert _ids(sink, "t") == [7]
        finally:
            await stream.stop()
        conn = await PgConnection.connect(params(pg, dbname, user=md5, password="pw2"))
        assert (await conn.query("SELECT current_user")).rows == [(md5,)]
        await conn.close()
        with pytest.raises(UpstreamError) as info:
            await PgConnection.connect(params(pg, dbname, user=md5, password="wrong"))
        assert info.value.sqlstate == "28P01"

    run(body)


def test_settings_warnings_name_the_fix(pg: Any, dbname: str) -> None:
    async def body() -> None:
        conn = await PgConnection.connect(params(pg, dbname), replication=True)
        try:
            assert await slots.check_settings(conn, 1) == []
            warnings = await slots.check_settings(conn, 1000)
        finally:
            await conn.close()
        assert len(warnings) == 2
        assert "ALTER SYSTEM SET max_replication_slots" in warnings[0]
        assert "ALTER SYSTEM SET max_wal_senders" in warnings[1]

    run(body)


class _FailingOnce(RecordingSink):
    """A sink whose first apply fails (an engine bug, say)."""

    failed = False

    def apply(self, txn: Any) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("engine exploded")
        super().apply(txn)


def test_a_failing_sink_resets_everything_and_the_stream_goes_on(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_fail")

    async def body() -> None:
        sink = _FailingOnce()
        stream = persistent_stream(pg, dbname, slot, sink)
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)")
            await stream.barrier(timeout=60)
            assert len(sink.reset_alls) == 1 and "engine exploded" in sink.reset_alls[0]
            assert _ids(sink, "t") == [1, 2]  # the failed transaction was delivered again
        finally:
            await stream.stop()
            pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")

    run(body)


def test_resume_from_a_durable_position_applies_nothing_twice(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_resume")

    async def body() -> None:
        first = RecordingSink()
        config = StreamConfig(params(pg, dbname), publication="p", slot=slot, temporary=False,
                              status_interval=3600)
        stream = ReplicationStream(config, first, durable_lsn=lambda: 0)  # confirms nothing
        await stream.start()
        await execute(pg, dbname, *(f"INSERT INTO t VALUES ({i})" for i in range(1, 6)))
        await stream.barrier()
        await stream.stop()
        durable = next(t.commit_lsn for t in first.transactions if t.changes
                       and t.changes[0].new == (3,))
        second = RecordingSink()  # a restarted weir whose durable state holds rows 1..3
        resumed = ReplicationStream(config, second, resume_lsn=durable)
        await resumed.start()
        try:
            await execute(pg, dbname, "INSERT INTO t VALUES (6)")
            await resumed.barrier()
            assert _ids(second, "t") == [4, 5, 6]
        finally:
            await resumed.stop()
            pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")

    run(body)
