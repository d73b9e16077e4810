"""A forwarded miss reads the upstream's WAL position on the session's own connection
(``proxy.missfast_position``), against the real upstream: the session is covered once the
stream reaches that position, with no probe on weir's own connection, and never before (the
applier held, a hit after the miss waits and then shows the update); the read is invisible to
the client (no prepared statement left, idle, a client statement of the same name intact)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from proxy.misses import MISS
from proxy.missfast_position import NAME
from proxy.seen import observers
from tests.integration.test_coverage_park import _lagging, parked_read
from tests.support import eventually, kv_read, last_statement


def test_a_hit_after_the_miss_waits_until_the_stream_reaches_the_position(
        pg: Any, dbname: str) -> None:
    """Keys 1 and 2 are updated in one transaction; the applier is held; the session reads
    1 (a miss: the update, and the position read with it), then 2 (memoized, stale): 2 waits
    while the stream is behind the position (with no probe of its own; after the probes'
    patience a barrier is emitted, whose commit would flush the WAL), and then shows the
    update."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, direct, hold, release):
        coverage = server.server.service.host.coverage
        barriers = server.server.service.host.stream.barriers
        hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
        probes, fell_back = barriers.probes, barriers.waits_fell_back
        positions, passed = coverage.positions, coverage.positions_passed
        assert kv_read(conn, 1) == "v1-new"
        assert last_statement(conn) == ("upstream", MISS)
        eventually(lambda: coverage.positions == positions + 1)
        got, reader = parked_read(server, conn, dbname, 2)
        assert not got and coverage.positions_passed == passed
        # (not reached within the probes' patience: a barrier to flush the WAL, no probe)
        eventually(lambda: barriers.waits_fell_back > fell_back)
        assert not got and barriers.probes == probes
        release()
        reader.join(30)
        assert got == ["v2-new"]
        eventually(lambda: coverage.positions_passed == passed + 1)


@pytest.mark.parametrize("where", ["session", "probe"])
def test_the_next_hit_needs_no_probe(pg: Any, dbname: str, where: str) -> None:
    """With ``--miss-position session`` a miss covers its session with no probe on weir's
    own connection; with ``probe`` it takes one (the control). No pass lane forwards its
    misses (``--lane-misses off``): a hit handed back by such a stay after the miss needs a
    probe (the position passed while the session was in that lane), and whether the
    session is given one depends on the reads before (``aftermiss.mostly_hits``,
    ``lane_misses.MISS_SKIP``), which is none of this test's."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position=where, lane_misses="off") as (
            server, conn, _admin, _direct, _hold, _release):
        host = server.server.service.host
        probes, positions = host.stream.barriers.probes, host.coverage.positions
        for k in (3, 4, 5):
            assert kv_read(conn, k) == f"v{k}"
            assert last_statement(conn) == ("upstream", MISS)
            assert kv_read(conn, 2) == "v2" and last_statement(conn)[0] == "cache"
        if where == "session":
            assert host.stream.barriers.probes == probes
            assert host.coverage.positions == positions + 3
            assert host.coverage.positions_passed >= 3
        else:
            assert host.stream.barriers.probes >= probes + 3
            assert host.coverage.positions == positions


def test_the_read_is_invisible_to_the_client(pg: Any, dbname: str) -> None:
    """No prepared statement is left in the session, it stays idle, and a statement the
    client prepared under the same name survives (the read fails, swallowed; coverage falls
    back to the probe)."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, _direct, _hold, _release):
        coverage = server.server.service.host.coverage
        positions = coverage.positions
        assert kv_read(conn, 6) == "v6"
        eventually(lambda: coverage.positions == positions + 1)
        left = conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = %s",
                            (NAME,)).fetchone()
        assert left == (0,)
        assert conn.info.transaction_status.name == "IDLE"
        conn.execute(f"PREPARE {NAME} AS SELECT 42")
        failed = coverage.positions_failed
        assert kv_read(conn, 7) == "v7"
        eventually(lambda: coverage.positions_failed == failed + 1)
        assert kv_read(conn, 2) == "v2"
        assert conn.execute(f"EXECUTE {NAME}").fetchone() == (42,)
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_auto_does_not_read_it_where_every_statement_is_logged(pg: Any, dbname: str) -> None:
    """``--miss-position auto``: with ``log_statement = all`` for the database,
    the read would be logged, so misses take the probe instead."""
    pg.psql(f'ALTER DATABASE "{dbname}" SET log_statement = \'all\'', dbname)
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="auto") as (
            server, conn, _admin, _direct, _hold, _release):
        host = server.server.service.host
        assert host.observers == "every statement is logged"
        probes = host.stream.barriers.probes
        assert kv_read(conn, 3) == "v3"
        assert kv_read(conn, 2) == "v2" and last_statement(conn)[0] == "cache"
        assert host.coverage.positions == 0
        assert host.stream.barriers.probes > probes


def test_auto_cannot_know_without_reading_the_preloaded_libraries(pg: Any, dbname: str) -> None:
    """A role that may not read ``shared_preload_libraries`` (not a superuser, not in
    ``pg_read_all_settings``) cannot tell whether ``pg_stat_statements`` would count the
    read: auto does not send it then; with the privilege it can tell."""
    role = f"plain_{dbname}"
    pg.psql(f"CREATE ROLE {role} LOGIN", dbname)

    async def seen_by() -> str | None:
        pool = await asyncpg.create_pool(pg.dsn(role, dbname), min_size=1, max_size=1)
        try:
            return await observers(pool)
        finally:
            await pool.close()

    assert "hidden" in (asyncio.run(seen_by()) or "")
    pg.psql(f"GRANT pg_read_all_settings TO {role}", dbname)
    assert asyncio.run(seen_by()) is None
