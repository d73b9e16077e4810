"""Misses at pass-through cost and monotonic reads, against the real upstream (DESIGN §12):
a miss is answered upstream at once and filled in the background (shared per key, batched,
bounded, admitted on the second read), and a session that saw upstream state is never then
answered from an older cache state."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from proxy.fillqueue import FillPolicy
from proxy.misses import BEHIND, MISS, default_budget
from tests.support import HeldApplier, InProcessWeir, eventually

DEFAULTS = {"misses": "upstream", "admission": "second", "hit_lanes": 0}


def _kv(pg: Any, dbname: str, rows: int) -> None:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            f"INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, {rows}) g", dbname)


def _last(conn: Any) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return (row[0], row[1])


def _read(conn: Any, k: int) -> tuple[Any, tuple[str, str]]:
    """A read of key ``k`` (simple protocol: nothing of weir's own runs upstream in between)
    and where EXPLAIN LAST STATEMENT says it was answered."""
    value = psycopg.ClientCursor(conn).execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()
    return (None if value is None else value[0]), _last(conn)


def _start(pg: Any, dbname: str, **settings: Any) -> InProcessWeir:
    return InProcessWeir.start(pg.dsn(dbname=dbname), **{**DEFAULTS, **settings})


@contextmanager
def _cached(pg: Any, dbname: str, rows: int, **settings: Any
            ) -> Iterator[tuple[InProcessWeir, Any]]:
    """Table kv with ``rows`` keys, a weir started with ``settings`` over it and a client
    connection (autocommit) that created cache kv1 (a point lookup on k); weir stops after."""
    _kv(pg, dbname, rows)
    server = _start(pg, dbname, **settings)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            yield server, conn
    finally:
        server.stop()


def test_a_miss_is_answered_upstream_then_filled_in_the_background(pg: Any, dbname: str
                                                                     ) -> None:
    with _cached(pg, dbname, 10) as (server, conn):
        host = server.server.service.host
        # first read: a miss, answered upstream; the key is not admitted yet
        assert _read(conn, 3) == ("v3", ("upstream", MISS))
        assert host.engine.stats.fills == 0 and host.fills.admission.refused == 1
        # second read: still upstream, but now its fill runs in the background
        assert _read(conn, 3) == ("v3", ("upstream", MISS))
        assert host.engine.stats.fills == 1
        eventually(lambda: _read(conn, 3) == ("v3", ("cache", "served by cache kv1")))
        assert host.fills.done == 1
        p50 = float(dict(conn.execute("SHOW WEIR STATUS").fetchall())["fill_ms_p50"])
        assert 0 < p50 < 10_000  # (request to installed: rows and marker both in)


def test_auto_admission_fills_a_cold_caches_keys_on_their_first_read(pg: Any, dbname: str
                                                                       ) -> None:
    """``--admission auto`` (the default): a fresh cache fills a key on its first read
    (answered upstream as every miss), except the sample of keys (one in ``SAMPLE`` by
    hash) refused once to tell whether keys come back; a later read of the key gets the
    key's current value from the cache, a write to it included (the fill installs like any
    fill)."""
    with _cached(pg, dbname, 40, admission="auto") as (server, conn):
        host = server.server.service.host
        admission = host.fills.admission
        assert admission.keep == 0 and admission.reads == 1
        for k in range(1, 41):
            assert _read(conn, k) == (f"v{k}", ("upstream", MISS))
        refused = admission.refused  # (the sampled keys)
        assert refused < 20 and host.engine.stats.fills == 40 - refused
        assert int(dict(conn.execute("SHOW WEIR STATUS").fetchall())[
            "fills_admitted_on_read"]) == 1
        eventually(lambda: host.fills.done == 40 - refused)
        filled = [k for k in range(1, 41) if _read(conn, k)[1][0] == "cache"]
        assert len(filled) == 40 - refused  # (each read once: a hit now)
        conn.execute("UPDATE kv SET v = 'new' WHERE k = %s", (filled[0],))
        assert _read(conn, filled[0])[0] == "new"  # (read-your-writes: never older)
        eventually(lambda: _read(conn, filled[0]) == (
            "new", ("cache", "served by cache kv1")))


def test_a_new_cache_opens_its_fill_connections_before_its_first_read(pg: Any, dbname: str
                                                                       ) -> None:
    """CREATE CACHE opens the fill connections its first fills may run on at once
    (``FillPolicy.per_table`` per table: ``FillRunner.warm``), so the first misses of a cold
    cache do not wait for connections to be opened; nothing is read meanwhile."""
    with _cached(pg, dbname, 10) as (server, conn):
        host = server.server.service.host
        pool = host.fills._fills()  # (its least size is one: fills open the others)
        per_table = host.fills.policy.per_table
        eventually(lambda: pool.get_size() == per_table > 1)
        assert host.engine.stats.misses == 0 and host.fills.done == 0
        assert _read(conn, 1) == ("v1", ("upstream", MISS))


def test_concurrent_misses_of_one_key_share_one_fill(pg: Any, dbname: str) -> None:
    with _cached(pg, dbname, 10, admission="always") as (server, _conn):
        host = server.server.service.host

        async def miss_many() -> list[Any]:
            return [host.read_or_fill("kv1", (5,)) for _ in range(20)]

        assert server.call(miss_many()) == [None] * 20
        assert host.engine.stats.fills == 1
        eventually(lambda: host.engine.lookup("kv1", (5,)) == (("v5",),))
        assert host.fills.done == 1 and host.fills.transactions == 1


def test_misses_of_many_keys_fill_in_one_upstream_transaction(pg: Any, dbname: str) -> None:
    with _cached(pg, dbname, 100, admission="always") as (server, _conn):
        host = server.server.service.host

        async def miss_many() -> list[Any]:
            return [host.read_or_fill("kv1", (k,)) for k in range(1, 51)]

        assert server.call(miss_many()) == [None] * 50
        assert host.engine.stats.fills == 50
        # (a fill's rows are installed once its marker came through the replication stream,
        # after ``fills.done`` counted its answer)
        eventually(lambda: server.call(looked_up(host, range(1, 51)))
                   == [((f"v{k}",),) for k in range(1, 51)])
        # one snapshot, one marker, one statement (``= ANY``) for the fifty keys
        assert (host.fills.done, host.fills.transactions) == (50, 1)
        # (a key missing upstream is filled as present-and-empty)
        assert server.call(miss_one(host, 1000)) is None
        eventually(lambda: server.call(looked_up(host, [1000])) == [()])


async def miss_one(host: Any, k: int) -> Any:
    return host.read_or_fill("kv1", (k,))


async def looked_up(host: Any, keys: Iterable[int]) -> list[Any]:
    """Cache kv1's rows for ``keys`` (None: not filled), read on weir's loop."""
    return [host.engine.lookup("kv1", (k,)) for k in keys]


def test_the_fill_queue_is_bounded(pg: Any, dbname: str) -> None:
    with _cached(pg, dbname, 100, admission="always", fill_queue=5) as (server, _conn):
        host = server.server.service.host

        async def miss_many() -> tuple[list[Any], int]:
            got = [host.read_or_fill("kv1", (k,)) for k in range(1, 21)]
            return got, len(host.fills.queue.waiting)

        got, queued = server.call(miss_many())
        assert got == [None] * 20 and queued == 5
        assert host.fills.queue.dropped == 15 and host.engine.stats.fills == 5
        filled = [True] * 5 + [False] * 15
        eventually(lambda: [rows is not None for rows in
                            server.call(looked_up(host, range(1, 21)))] == filled)
        assert host.fills.done == 5


def test_a_table_whose_fills_fail_backs_off(pg: Any, dbname: str) -> None:
    """A fill that cannot run (the table is locked; the fill's lock_timeout ends it) is not
    retried per read: its table backs off, and misses of it just go upstream meanwhile; the
    heartbeat, off the fill connections, keeps the caches fresh throughout."""
    with _cached(pg, dbname, 10, admission="always") as (server, conn), \
            psycopg.connect(pg.dsn(dbname=dbname)) as locker:
        host = server.server.service.host
        host.fills.queue.policy = FillPolicy(admission="always", backoff=(600.0, 600.0))
        locker.execute("LOCK TABLE kv IN ACCESS EXCLUSIVE MODE")
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.append(_read(conn, 1)))
        reader.start()  # its upstream answer waits for the lock; its fill fails
        eventually(lambda: host.fills.failures == 1, timeout=30)
        assert host.staleness() < 2.0
        locker.rollback()
        reader.join(30)
        assert got == [("v1", ("upstream", MISS))]
        held = host.fills.queue.held_back
        assert _read(conn, 2) == ("v2", ("upstream", MISS))
        assert host.fills.queue.held_back == held + 1 and host.engine.stats.fills == 1


@pytest.mark.parametrize("rule", ["on", "off"])
def test_monotonic_reads_after_a_miss_answered_upstream(pg: Any, dbname: str, rule: str
                                                        ) -> None:
    """A transaction updates keys A and B; the cache lags (its applier is held); the session
    reads A (a miss, answered upstream: the update) and then B (a hit of the old state): with
    the rule it sees the update too (after the barrier, from the cache); without it (the
    control), it would see the old value — the anomaly the rule prevents."""
    with _cached(pg, dbname, 10, read_your_writes=rule, read_timeout=30.0,
                 admission="always") as (server, conn), \
            psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
        host = server.server.service.host
        _read(conn, 2)
        eventually(lambda: _read(conn, 2) == ("v2", ("cache", "served by cache kv1")))
        held = HeldApplier(server)
        held.hold()
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
        assert _read(conn, 1) == ("v1-new", ("upstream", MISS))  # A: a miss, upstream
        if rule == "off":
            assert _read(conn, 2) == ("v2", ("cache", "served by cache kv1"))
            return
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.append(_read(conn, 2)))
        reader.start()  # B waits for a barrier sent after A's answer
        eventually(lambda: host.coverage._wants, timeout=10)
        assert not got
        held.release()
        reader.join(30)
        assert got == [("v2-new", ("cache", "served by cache kv1"))]


def test_a_session_behind_the_cache_goes_upstream_after_its_bound(pg: Any, dbname: str
                                                                  ) -> None:
    """While no barrier after its last upstream answer passes (the applier is held), a read
    that would hit goes upstream once ``--read-timeout`` is over, and sees the update."""
    with _cached(pg, dbname, 10, read_timeout=0.2, admission="always") as (server, conn), \
            psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
        _read(conn, 2)
        eventually(lambda: _read(conn, 2) == ("v2", ("cache", "served by cache kv1")))
        HeldApplier(server).hold()  # (its keepalives too: they would pass a probe)
        direct.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
        assert _read(conn, 1) == ("v1-new", ("upstream", MISS))
        assert _read(conn, 2) == ("v2-new", ("upstream", BEHIND))


def test_a_memory_budget_by_default(pg: Any, dbname: str) -> None:
    """Without --memory-budget the caches and the memoized answers share a budget derived
    from the machine's (or the cgroup's) memory; --memory-budget none means no budget."""
    _kv(pg, dbname, 10)
    for given, bounded in ((None, True), (0, False)):
        server = _start(pg, dbname, memory_budget=given)
        try:
            with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
                conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
                service = server.server.service
                machine = default_budget()
                assert machine is not None
                if bounded:
                    assert service.host.engine.budget + service.hits.limit == machine
                    status = dict(conn.execute("SHOW WEIR STATUS").fetchall())
                    assert status["memory_budget"] == str(service.host.engine.budget)
                else:
                    assert service.host.engine.budget is None
        finally:
            server.stop()
