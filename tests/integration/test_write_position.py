"""A write's run reads the upstream's WAL position on the session's own connection
(``proxy.write_position``), against the real upstream: once a prepared write was learnt, its
runs cover the session when the stream reaches the position read after them, with no probe on
weir's own connection, and never before (the applier held, the read after the write waits and
then shows it: read-your-writes); the read is invisible to the client (the write's own answer,
no prepared statement left, idle), and none is sent for a write inside a transaction block
nor for a write after a write (the probe covers those, as before)."""

from __future__ import annotations

from typing import Any

from proxy.missfast_position import NAME
from tests.integration.test_coverage_park import LANES, _lagging, parked_read
from tests.support import eventually, kv_read, last_statement

UPDATE = "UPDATE kv SET v = %s WHERE k = 2"


def _cached(conn: Any, expect: str) -> None:
    """Read key 2 until the cache answers it, showing ``expect``."""
    eventually(lambda: kv_read(conn, 2) == expect and last_statement(conn)[0] == "cache")


def _learnt(server: Any, conn: Any) -> None:
    """Run the prepared write until the session knows it writes, each run after a cached read
    (``write_position.after_cached_read``); the last statement is a cached read, and the
    position read after the last write has been answered (while one is outstanding, a
    write reads none, ``missfast_position.may_read``: in about one run in a hundred on a
    loaded machine, that answer came only after the test's next write had been sent)."""
    coverage = server.server.service.host.coverage
    positions = coverage.write_positions
    conn.execute(UPDATE, ("learn0",))  # (learnt at its answer)
    _cached(conn, "learn0")
    conn.execute(UPDATE, ("learn1",))
    eventually(lambda: coverage.write_positions == positions + 1)
    _cached(conn, "learn1")
    session = next(s for s in server.server.sessions if s.ctx is not None and s.writers)
    eventually(lambda: session.miss_tail is None)


def test_the_read_after_a_write_waits_until_the_stream_reaches_its_position(
        pg: Any, dbname: str) -> None:
    """The applier is held; the session writes key 2 (a learnt write: its position read after
    it, and no probe), then reads key 2 (memoized, stale): the read waits, and once the applier
    goes on it shows the write."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, _direct, hold, release):
        host = server.server.service.host
        coverage, barriers = host.coverage, host.stream.barriers
        _learnt(server, conn)
        hold()
        probes, positions = barriers.probes, coverage.write_positions
        passed = coverage.write_positions_passed
        assert conn.execute(UPDATE, ("mine",)).rowcount == 1
        eventually(lambda: coverage.write_positions == positions + 1)
        # (a read that reaches weir before the position's answer settles seen(s) when it
        # parks and takes a probe, which the position then cannot replace: a cost only,
        # ``aftermiss.park``; 2 runs in 60 under load, session 21)
        session = next(s for s in server.server.sessions if s.ctx is not None and s.writers)
        eventually(lambda: session.miss_tail is None)
        got, reader = parked_read(server, conn, dbname, 2)
        assert not got and coverage.write_positions_passed == passed
        release()
        reader.join(30)
        assert got == ["mine"]
        eventually(lambda: coverage.write_positions_passed == passed + 1)
        assert barriers.probes == probes  # (covered by the position, no probe)


def test_the_read_is_invisible_to_the_client(pg: Any, dbname: str) -> None:
    """The write's answer is its own, no prepared statement is left and the session stays idle;
    a write inside a transaction block gets no read and its block is intact."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, direct, _hold, _release):
        coverage = server.server.service.host.coverage
        _learnt(server, conn)
        positions = coverage.write_positions
        cur = conn.execute(UPDATE, ("seen",))
        assert cur.rowcount == 1 and cur.statusmessage == "UPDATE 1"
        eventually(lambda: coverage.write_positions == positions + 1)
        left = conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = %s",
                            (NAME,)).fetchone()
        assert left == (0,)
        assert conn.info.transaction_status.name == "IDLE"
        positions = coverage.write_positions
        with conn.transaction():
            assert conn.execute(UPDATE, ("in block",)).rowcount == 1
            assert conn.info.transaction_status.name == "INTRANS"
            assert direct.execute("SELECT v FROM kv WHERE k = 2").fetchone() == ("seen",)
        assert coverage.write_positions == positions
        assert direct.execute("SELECT v FROM kv WHERE k = 2").fetchone() == ("in block",)
        assert kv_read(conn, 2) == "in block"  # read-your-writes after the block


def test_a_write_after_a_write_takes_the_probe(pg: Any, dbname: str) -> None:
    """Only a write after a cached read reads its position: a session that writes twice in a
    row takes the probe for the second (it likely writes on), and still reads its writes."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, _direct, _hold, _release):
        host = server.server.service.host
        _learnt(server, conn)
        positions = host.coverage.write_positions
        conn.execute(UPDATE, ("first",))
        eventually(lambda: host.coverage.write_positions == positions + 1)
        probes = host.stream.barriers.probes
        conn.execute(UPDATE, ("second",))
        assert kv_read(conn, 2) == "second"  # read-your-writes
        assert host.coverage.write_positions == positions + 1
        assert host.stream.barriers.probes > probes


def test_with_probe_a_write_takes_the_probe(pg: Any, dbname: str) -> None:
    """``--miss-position probe``: no position is read after a write; a probe covers it."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="probe") as (
            server, conn, _admin, _direct, _hold, _release):
        host = server.server.service.host
        probes = host.stream.barriers.probes
        for i in range(3):
            conn.execute(UPDATE, (f"p{i}",))
            assert kv_read(conn, 2) == f"p{i}"
        assert host.coverage.write_positions == 0
        assert host.stream.barriers.probes > probes


def test_a_write_from_a_lane_session_is_counted_and_read_back(pg: Any, dbname: str) -> None:
    """A session in a hit lane writes (a learnt write after cached reads): the lane hands it
    back at the write's run, counted as ``lane_left_write`` (``proxy.lane_writes``: what a
    lane forwarding writes itself would save), the write's position is read after it, and
    the read after the write shows it (read-your-writes). Without lanes
    (``WEIR_IMPL=python``) the write and its read are the same, and nothing is counted."""
    with _lagging(pg, dbname, read_timeout=30.0, miss_position="session") as (
            server, conn, _admin, _direct, _hold, _release):
        coverage, lanes = server.server.service.host.coverage, server.server.service.lanes
        assert (lanes is not None) == LANES
        _learnt(server, conn)
        session = next(s for s in server.server.sessions if s.ctx is not None
                       and s.ctx.database == dbname and s.state.held)
        if lanes is not None:  # (a hit session goes to its lane after a cached answer)
            eventually(lambda: kv_read(conn, 2) == "learn1" and session.lane != 0)
        before = lanes.stats()["lane_left_write"] if lanes is not None else 0
        positions = coverage.write_positions
        assert conn.execute(UPDATE, ("from a lane",)).rowcount == 1
        eventually(lambda: coverage.write_positions == positions + 1)
        assert kv_read(conn, 2) == "from a lane"
        if lanes is not None:
            assert lanes.stats()["lane_left_write"] == before + 1
