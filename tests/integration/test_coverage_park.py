"""seen(s) after a miss, against the real upstream (DESIGN §12, ``proxy.aftermiss.park``): a
read that misses is forwarded upstream at once even while the session is not covered; a hit
that is not covered yet waits at the door and is then answered by the hit path from its memo
(not by the general path); after ``--read-timeout`` in vain it goes upstream, waiting its bound
once. The cache lags because its applier is held (the messages are kept and fed later)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import cython_ext
from proxy import fillqueue
from proxy.aftermiss import NOT_WORTH_WAITING
from proxy.lane_replay import FORWARDED
from proxy.misses import BEHIND, MISS
from tests.support import (
    HeldApplier,
    InProcessWeir,
    eventually,
    kv_read,
    kv_table,
    last_statement,
    memo_answers,
)

LANES = cython_ext.load("lanes") is not None


@contextmanager
def _lagging(pg: Any, dbname: str, **settings: Any) -> Iterator[tuple[Any, ...]]:
    """weir with key 2 memoized for a prepared-statement session; yields (server, conn,
    admin, direct, hold, release): ``hold`` stops the applier, ``release`` feeds it what it
    kept."""
    pg.psql(kv_table(10), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream",
                                 hit_lanes=1 if LANES else 0,
                                 **{"admission": "always", **settings})
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.prepare_threshold = 0  # named prepared statements: what the hit path answers
            admin.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            held = HeldApplier(server)
            kv_read(conn, 2)
            eventually(lambda: kv_read(conn, 2) == "v2" and last_statement(conn)[0] == "cache"
                       and sum(memo_answers(admin)) > 0)
            yield server, conn, admin, direct, held.hold, held.release
    finally:
        server.stop()


def parked_read(server: Any, conn: Any, dbname: str, key: int) -> tuple[list[Any],
                                                                     threading.Thread]:
    """Read ``key`` in a thread through the session that has held statements, and return once
    that read is parked waiting for seen(s) coverage: what it got (appended when it is
    answered) and the thread."""
    session = next(s for s in server.server.sessions if s.ctx is not None
                   and s.ctx.database == dbname and s.state.held)
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(kv_read(conn, key)))
    reader.start()
    eventually(lambda: "seen(s) coverage" in session.state.paused, timeout=10)
    return got, reader


def test_a_hit_not_yet_covered_waits_and_the_memo_answers_it(pg: Any, dbname: str) -> None:
    """A (key 1) is updated; the session reads A (a miss, upstream: the update), then B (key
    2, unchanged, memoized): B waits for coverage, parked, and is then answered from the memo
    by the hit path (without the parking, the general path would read it after its wait)."""
    with _lagging(pg, dbname, read_timeout=30.0) as (server, conn, admin, direct, hold, release):
        host = server.server.service.host
        hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k = 1")
        assert kv_read(conn, 1) == "v1-new"
        assert last_statement(conn) == ("upstream", MISS)
        answers = sum(memo_answers(admin))
        got, reader = parked_read(server, conn, dbname, 2)
        assert not got
        release()
        reader.join(30)
        assert got == ["v2"] and last_statement(conn)[0] == "cache"
        assert sum(memo_answers(admin)) == answers + 1  # the hit path's memo answered it
        assert host.coverage.waits_failed == 0


def test_a_miss_is_forwarded_at_once_while_the_session_is_not_covered(pg: Any, dbname: str
                                                                      ) -> None:
    """After a miss answered upstream (the applier held: no barrier can pass), another miss
    goes upstream at once: it needs no coverage (PostgreSQL's answer is never older than what
    the session saw). With a 30 s bound, a wait would fail the ``eventually``."""
    with _lagging(pg, dbname, read_timeout=30.0) as (server, conn, _admin, direct, hold,
                                                     release):
        host = server.server.service.host
        hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 3)")
        assert kv_read(conn, 1) == "v1-new"
        waits = host.coverage.waits
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.append(kv_read(conn, 3)))
        reader.start()
        eventually(lambda: bool(got), timeout=10)
        reader.join()
        # (forwarded by the event loop, or by the hit lane the session went back to after
        # its first miss when its reads were mostly hits: ``aftermiss.mostly_hits``)
        assert got == ["v3-new"] and last_statement(conn) in (("upstream", MISS),
                                                              ("upstream", FORWARDED))
        assert host.coverage.waits == waits  # (no read waited for coverage)
        release()


def test_a_parked_hit_goes_upstream_after_its_bound_once(pg: Any, dbname: str) -> None:
    """While no barrier can pass, a parked hit waits ``--read-timeout`` once, then goes
    upstream (the general path does not wait its bound again: one failed wait)."""
    with _lagging(pg, dbname, read_timeout=0.3) as (server, conn, _admin, direct, hold,
                                                    release):
        host = server.server.service.host
        hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
        assert kv_read(conn, 1) == "v1-new"
        failed = host.coverage.waits_failed
        assert kv_read(conn, 2) == "v2-new"
        assert last_statement(conn) == ("upstream", BEHIND)
        assert host.coverage.waits_failed == failed + 1
        release()


def test_while_fills_do_not_pay_a_hit_not_yet_covered_goes_upstream_at_once(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While admission is strict (fills were followed by fewer hits than fills: mostly
    one-off reads), a hit that is not covered yet neither parks nor waits: it goes upstream
    at once, and PostgreSQL's answer shows the update the miss before it saw (monotonic
    reads). With a 30 s bound and the applier held, a wait would fail the ``eventually``."""
    monkeypatch.setattr(fillqueue, "YIELD_WINDOW", 1 << 30)  # (keep stays as set below)
    with _lagging(pg, dbname, read_timeout=30.0, admission="second") as (
            server, conn, _admin, direct, hold, release):
        host = server.server.service.host
        host.fills.admission.keep = 2
        hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
        assert kv_read(conn, 1) == "v1-new"  # a miss: upstream, the update
        waits, parks = host.coverage.waits, host.coverage.parks
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.append(kv_read(conn, 2)))
        reader.start()
        eventually(lambda: bool(got), timeout=10)
        reader.join()
        assert got == ["v2-new"]  # (the cache still holds v2: the applier is held)
        assert last_statement(conn) == ("upstream", NOT_WORTH_WAITING)
        assert (host.coverage.waits, host.coverage.parks) == (waits, parks)
        host.fills.admission.keep = 1  # fills pay again: a hit not covered waits (parked)
        direct.execute("UPDATE kv SET v = v || '-newer' WHERE k = 1")
        assert kv_read(conn, 1) == "v1-new-newer"
        got2, reader2 = parked_read(server, conn, dbname, 2)
        assert not got2
        release()
        reader2.join(30)
        assert got2 == ["v2-new"]
