"""Misses forwarded from the lanes (issue 18 (b): one-off keys at pass-through cost), against
the real upstream.

After a miss a session goes to a pass lane that also forwards the reads of its held
statements it has no stamped answer for (``proxy.lane_misses``): every answer is PostgreSQL's,
and the event loop still reads each forwarded Bind as a miss (``missfast.count``): counted,
and admitted on its key's second read, so the keys read twice are filled and then answered
from the cache. ``SHOW WEIR STATUS`` counts what the lanes forwarded (``lane_misses``). Under
``WEIR_IMPL=python`` there are no lanes: the event loop forwards the same misses
(``proxy.missfast``) and the same keys must be filled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import cython_ext
from pgwire.framing import scan_messages
from proxy import fillqueue, lane_misses, missfast
from tests.support import InProcessWeir, eventually, kv_read, kv_table, last_statement, weir_status

LANES = cython_ext.load("lanes") is not None
KEYS = 120


@contextmanager
def _lanes_weir(pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch,
                **settings: Any) -> Iterator[tuple[Any, Any, Any]]:
    """weir over a fresh ``kv`` with the lanes forwarding misses, unpaced (the pacing,
    ``lane_misses.keeping_up``, is unit-tested: on a loaded CI machine its barrier latency
    bound could close the lanes to misses midway, which is none of these tests'), the cache
    ``kv1`` created: (server, a session preparing named statements, an admin session)."""
    monkeypatch.setattr(lane_misses, "KEEP_UP_BARRIER", float("inf"))
    monkeypatch.setattr(lane_misses, "KEEP_UP_LAG", float("inf"))
    pg.psql(kv_table(1000), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream",
                                 hit_lanes=1 if LANES else 0, lane_misses="on",
                                 **{"admission": "second", **settings})
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            conn.prepare_threshold = 0  # named prepared statements: what the lanes forward
            admin.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            yield server, conn, admin
    finally:
        server.stop()


def test_one_off_misses_go_through_a_lane_and_keys_read_twice_are_filled(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _lanes_weir(pg, dbname, monkeypatch) as (server, conn, admin):
        host = server.server.service.host
        assert kv_read(conn, 1000) == "v1000"  # the statement prepared upstream first
        misses0 = int(weir_status(admin)["misses"])
        for k in range(1, KEYS + 1):  # first reads: misses, none admitted
            assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: int(weir_status(admin)["misses"]) - misses0 >= KEYS)
        assert host.fills.done == 0
        status = weir_status(admin)
        if LANES:  # all but the first few went through a lane, at pass-through cost
            assert int(status["lane_miss_entered"]) >= 1
            assert int(status["lane_misses"]) >= KEYS - 10, status
            # (first reads: counted by the lanes' doorkeeper, never read on the loop)
            assert int(status["lane_miss_firsts"]) >= KEYS - 10, status
        else:
            assert "lane_misses" not in status
        for k in range(1, KEYS + 1):  # second reads: admitted, their fills queued
            assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: host.fills.done >= KEYS)

        def cached(k: int) -> bool:
            return bool(kv_read(conn, k) == f"v{k}" and last_statement(conn)[0] == "cache")

        for k in (1, KEYS // 2, KEYS):  # now in the cache: answered from it
            eventually(lambda k=k: cached(k))  # type: ignore[misc]
        pg.psql(f"UPDATE kv SET v = 'new' WHERE k = {KEYS + 1}", dbname)
        eventually(lambda: kv_read(conn, KEYS + 1) == "new")  # (a miss: upstream's)


@pytest.mark.parametrize("where", ["probe", "session"])
def test_a_session_whose_lane_forwarded_a_run_of_misses_asks_no_coverage_at_its_next_miss(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A session whose reads are one-off keys goes from pass lane to pass lane (each stay
    forwards up to ``MISS_STINT`` misses, then a miss on the event loop): after a stay that
    forwarded a run of misses, its next miss asks for no coverage (neither a probe on the
    pipelined connection at its answer nor, with ``--miss-position session``, a position
    read after it on its own connection), since its next read is most likely a miss too,
    which needs none (a hit would ask at its park, ``proxy.aftermiss``). Without lanes every
    miss asks, as before (the session's next read takes the event loop either way)."""
    with _lanes_weir(pg, dbname, monkeypatch, miss_position=where) as (server, conn, admin):
        coverage = server.server.service.host.coverage

        def asked() -> int:
            return int(coverage.barriers + coverage.positions)

        for k in range(1, 201):  # two stays in a lane at least
            assert kv_read(conn, k) == f"v{k}"
        asked0 = asked()
        for k in range(201, 601):  # six more stays, each ended by a miss on the loop
            assert kv_read(conn, k) == f"v{k}"
        status = weir_status(admin)
        print(f"coverage requests {asked() - asked0} (positions read "
              f"{coverage.positions}), lane stays {status.get('lane_miss_entered')}")
        if LANES:
            assert int(status["lane_misses"]) >= 500, status
            assert asked() - asked0 <= 1
        else:  # no lane marks a session's reads as mostly misses: every miss asks (how
            # many requests that makes depends on timing: up to eight fly at once and later
            # ones are not sent; once, on a loaded machine, none went out in the whole loop)
            assert all(s.lane_miss_run == 0 for s in server.server.sessions)
            assert asked() > asked0 or asked0 > 0


def test_while_admission_is_strict_the_lanes_keep_second_reads_and_pass_on_third_ones(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While fills do not pay, admission takes a key on a later read (``Admission.keep``, 2
    here: the third): the lanes' doorkeeper then keeps second reads too (only counted), so
    the event loop reads the Binds of third reads only, not of every second read (a uniform
    key space larger than what is read: most forwarded reads are a key's first or second).
    Keys read twice are not filled, keys read three times are, on either impl (without
    lanes the loop reads all)."""
    monkeypatch.setattr(fillqueue, "YIELD_WINDOW", 1 << 30)  # (keep stays as set below)
    binds: list[int] = []
    count = missfast.count

    def counted(session: Any, raw: bytes, seen_before: int = 0) -> int:
        binds.append(len(scan_messages(raw, 0, len(raw))[0]))
        return count(session, raw, seen_before)

    monkeypatch.setattr(missfast, "count", counted)
    with _lanes_weir(pg, dbname, monkeypatch) as (server, conn, admin):
        host = server.server.service.host
        host.fills.admission.keep = 2
        for _ in range(2):  # first and second reads: none admitted
            for k in range(1, KEYS + 1):
                assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: int(weir_status(admin)["misses"]) >= 2 * KEYS)
        assert host.fills.done == 0
        passed = sum(binds)
        for k in range(1, KEYS + 1):  # third reads: admitted, filled
            assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: host.fills.done >= KEYS - 10)
        print(f"Binds the loop read: {passed} for first and second reads, "
              f"{sum(binds) - passed} for third ones")
        if LANES:
            assert passed <= 10  # (before: every second read's, about KEYS)
            assert sum(binds) - passed >= KEYS - 20


def test_a_session_back_to_hits_reads_the_position_after_its_next_miss_again(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a run of one-off misses (no position read after a miss then), a session whose
    hit lane answered its reads is not taken for one whose reads are mostly misses
    (``HitLanes.reclaim`` of a hit lane that answered: ``lane_miss_run`` is 0): its next
    miss reads the position again (``--miss-position session``), so the hit after it finds
    it covered at once."""
    with _lanes_weir(pg, dbname, monkeypatch, admission="always",
                     miss_position="session") as (server, conn, _):
        coverage = server.server.service.host.coverage
        for k in range(1, 201):  # a run of misses (each key read once)
            assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: kv_read(conn, 1) == "v1" and last_statement(conn)[0] == "cache")
        for _ in range(20):  # hits: answered in its hit lane (or on the loop)
            assert kv_read(conn, 1) == "v1"
        for k in range(300, 305):  # misses among hits
            positions = coverage.positions
            assert kv_read(conn, k) == f"v{k}"
            # each reads the position (the first too, whose miss the hit lane handed back
            # after answering hits; before, that one still counted the run of misses and read
            # none); waited for, since a miss whose predecessor's position is still on its
            # way reads none (the hits between may not wait for it: the fills cover them)
            eventually(lambda: coverage.positions > positions)  # noqa: B023
            for _ in range(5):
                assert kv_read(conn, 1) == "v1"


def test_a_hit_session_whose_reads_are_mostly_misses_forwards_its_next_miss_in_its_lane(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose reads were mostly misses lately, handed to its hit lane after a hit,
    switches there to a pass session at its next miss and forwards it itself
    (``HitLanes._switch``): the hit lane hands nothing back (``lane_left_unstamped`` stays),
    ``lane_switched`` counts it, and the client gets PostgreSQL's answer. The lanes are kept
    closed to misses (``lane_misses.keeping_up``), so a key's second read and a stamped read
    leave the pass lane (the hit is then answered on the event loop, which hands the session
    to its hit lane) while first reads are still forwarded (``_would_keep``)."""
    monkeypatch.setattr(lane_misses, "keeping_up", lambda service, pace: False)
    with _lanes_weir(pg, dbname, monkeypatch) as (server, conn, admin):
        host = server.server.service.host
        assert kv_read(conn, 1000) == "v1000"  # (prepared upstream first)
        for k in range(1, 21):  # first reads: misses
            assert kv_read(conn, k) == f"v{k}"
        for _ in range(2):  # key 500 read twice: admitted, filled
            assert kv_read(conn, 500) == "v500"
        eventually(lambda: host.engine.lookup("kv1", (500,)) is not None)
        eventually(lambda: kv_read(conn, 500) == "v500" and last_statement(conn)[0] == "cache")
        assert kv_read(conn, 500) == "v500"  # a hit (after EXPLAIN: on the loop), to its lane
        before = weir_status(admin)
        assert kv_read(conn, 21) == "v21"  # a first read after the hit
        after = weir_status(admin)
        assert last_statement(conn)[0] != "cache"
        print(f"switched {before.get('lane_switched')} -> {after.get('lane_switched')}, "
              f"unstamped {before.get('lane_left_unstamped')} -> "
              f"{after.get('lane_left_unstamped')}")
        if LANES:
            assert int(after["lane_switched"]) == int(before["lane_switched"]) + 1
            assert after["lane_left_unstamped"] == before["lane_left_unstamped"]


def test_fills_that_yield_no_hits_make_admission_want_later_reads_and_the_lanes_follow(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys read twice at random and never again (one-off traffic): the fills of second
    reads yield no hits, so admission raises the read it admits a key on
    (``Admission.observe``, every ``YIELD_WINDOW`` fills: a small window here) and the
    lanes' doorkeeper is told to keep that many reads (``Pace.tell``): later keys read
    only twice are not filled. Counted, not timed: the window is counted in fills (its
    least time, ``YIELD_SECONDS``, set to none here)."""
    monkeypatch.setattr(fillqueue, "YIELD_WINDOW", 8)
    monkeypatch.setattr(fillqueue, "YIELD_SECONDS", 0.0)
    with _lanes_weir(pg, dbname, monkeypatch) as (server, conn, admin):
        host = server.server.service.host
        admission = host.fills.admission
        for k in range(1, KEYS + 1):
            for _ in range(2):  # each key read twice in a row, then never again
                assert kv_read(conn, k) == f"v{k}"
        eventually(lambda: int(weir_status(admin)["misses"]) >= 2 * KEYS)
        status = weir_status(admin)
        print(f"fills {host.fills.done}, keep {admission.keep}, status "
              f"{status['fills_admitted_on_read']} / {status['fills_admission_raised']}")
        assert admission.keep > 1 and int(status["fills_admitted_on_read"]) > 2
        assert int(status["fills_admission_raised"]) >= 1
        assert host.fills.done + host.fills.failures < KEYS // 2  # (before: every key)
        if LANES:  # the lanes keep as many reads as admission refuses (told at each count)
            lanes = server.server.service.lanes
            eventually(lambda: kv_read(conn, 999) == "v999"
                       and lanes._pace.keep == admission.keep)


def test_a_session_whose_reads_are_mostly_hits_goes_back_to_its_hit_lane_after_a_miss(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose reads are mostly hits lately (at most ``HIT_RUN_MISSES`` of its last
    8 held runs were misses: ``aftermiss.mostly_hits``) is not given a pass lane that
    forwards misses after a miss (its next read is likely a hit, which would leave that
    lane at once): once covered it goes back to its hit lane. Before, it was given such a
    lane after every 9th miss (``MISS_SKIP``) however rare its misses were. Each client
    read gets the key's current value either way."""
    with _lanes_weir(pg, dbname, monkeypatch, admission="always",
                     miss_position="session") as (_server, conn, admin):
        assert kv_read(conn, 1000) == "v1000"  # (prepared upstream first)
        eventually(lambda: kv_read(conn, 1) == "v1" and last_statement(conn)[0] == "cache")
        for _ in range(20):  # hits: answered in its hit lane (or on the loop)
            assert kv_read(conn, 1) == "v1"
        before = weir_status(admin)
        for k in range(300, 330):  # a miss among 7 hits, 30 times
            assert kv_read(conn, k) == f"v{k}"
            for _ in range(7):
                assert kv_read(conn, 1) == "v1"
        after = weir_status(admin)
        print(f"stays {before.get('lane_miss_entered')} -> {after.get('lane_miss_entered')}, "
              f"entered {before.get('lane_entered')} -> {after.get('lane_entered')}")
        assert int(after["misses"]) - int(before["misses"]) >= 30
        if LANES:
            assert after["lane_miss_entered"] == before["lane_miss_entered"]
            assert int(after["lane_entered"]) - int(before["lane_entered"]) >= 20
