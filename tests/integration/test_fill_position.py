"""Fills at a position, against the real upstream (issue 18 item 4; docs/architecture.md
"Fills at a position"): a fill reads its snapshot and then the upstream's WAL insert position,
writes nothing, and is installed once the replication stream reaches that position. So fills
cost no transaction ID and no WAL; a fill racing commits installs PostgreSQL's exact state; a
fill whose position the stream does not reach (WAL not flushed yet) is carried there by one
fallback barrier, and never installed before."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

from tests.support import HeldApplier, InProcessWeir, eventually

SETTINGS = {"misses": "upstream", "admission": "always", "hit_lanes": 0}


def _kv(pg: Any, dbname: str, rows: int) -> None:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            f"INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, {rows}) g", dbname)
    pg.psql("VACUUM ANALYZE kv", dbname)  # (hint bits and statistics: no WAL from reads later)


def _cache(server: InProcessWeir, dbname: str, name: str, sql: str) -> Any:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute(f"CREATE CACHE {name} FROM {sql}")
    return server.server.service.host


async def _miss(host: Any, cache: str, keys: Iterable[Any]) -> list[Any]:
    return [host.read_or_fill(cache, (k,)) for k in keys]


async def _lookup(host: Any, cache: str, keys: Iterable[Any]) -> list[Any]:
    return [host.engine.lookup(cache, (k,)) for k in keys]


def _filled(server: InProcessWeir, host: Any, cache: str, keys: list[Any]) -> list[Any]:
    """Miss ``keys`` (their fills start) and wait until every one is installed."""
    server.call(_miss(host, cache, keys))

    def installed() -> list[Any]:
        got: list[Any] = server.call(_lookup(host, cache, keys))
        return got if all(g is not None for g in got) else []

    return eventually(installed)


def _position(conn: Any) -> tuple[int, str]:
    """(the next transaction ID, the WAL insert position): read using neither."""
    row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, "
                       "pg_current_wal_insert_lsn()::text").fetchone()
    return int(row[0]), str(row[1])


def test_fills_use_no_transaction_id_and_write_no_wal(pg: Any, dbname: str) -> None:
    """150 fills (a batch of 50, then 100 one at a time, each installed before the next
    starts) on an idle cluster: every transaction ID used and every WAL record written
    meanwhile is one of weir's own barriers (its heartbeat's, 2 a second, and any fallback),
    none is a fill's. (With a marker per fill batch this used 101 transaction IDs.)"""
    _kv(pg, dbname, 1000)
    pg.psql("CREATE EXTENSION pg_walinspect", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), **SETTINGS)
    # (the cluster is shared by the whole suite: autovacuum's ANALYZE of another test's
    # tables would take transaction IDs and write WAL meanwhile)
    pg.psql("ALTER SYSTEM SET autovacuum = off")
    pg.psql("SELECT pg_reload_conf()")
    try:
        host = _cache(server, dbname, "kv1", "SELECT v FROM kv WHERE k = $1")
        barriers = host.stream.barriers
        with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            eventually(lambda: direct.execute(
                "SELECT current_setting('autovacuum') = 'off' AND NOT EXISTS (SELECT FROM "
                "pg_stat_activity WHERE backend_type = 'autovacuum worker')").fetchone()
                == (True,), timeout=60)
            (xid0, lsn0), sent0 = _position(direct), barriers.sent
            assert _filled(server, host, "kv1", list(range(1, 51)))[-1] == (("v50",),)
            for k in range(51, 151):
                assert _filled(server, host, "kv1", [k]) == [((f"v{k}",),)]
            (xid1, lsn1), sent = _position(direct), barriers.sent - sent0
            assert host.fills.done == 150 and host.fills.transactions == 101
            assert xid1 - xid0 <= sent, (xid1 - xid0, sent)
            # the WAL written meanwhile, record by record (once flushed: the walinspect bound)
            eventually(lambda: direct.execute(
                "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn1,)).fetchone() == (True,))
            records = direct.execute(
                "SELECT resource_manager, record_type, xid::text::bigint, description "
                "FROM pg_get_wal_records_info(%s, %s)", (lsn0, lsn1)).fetchall()
        # (a read may prune a heap page it visits, directly as through weir: such a record
        # carries no transaction ID and is no fill's doing)
        kinds = {r[0] for r in records if (r[0], r[1]) != ("Heap2", "PRUNE")}
        assert kinds <= {"LogicalMessage", "Transaction", "Standby", "XLOG"}, records
        assert not [r for r in records if r[0] == "Heap2" and r[2]], records
        messages = [r for r in records if r[0] == "LogicalMessage"]
        assert len(messages) <= sent, records
        # (a fill marker's payload would start with 'fill-': 66 69 6C 6C 2D)
        assert not [r for r in messages if "66 69 6C 6C 2D" in r[3]], messages
        assert len({r[2] for r in records if r[2]}) <= sent, records
        assert sent <= 10  # (the heartbeat's, for a run of a few seconds)
    finally:
        pg.psql("ALTER SYSTEM RESET autovacuum")
        pg.psql("SELECT pg_reload_conf()")
        server.stop()


KEYS, ROUND = 96, 12


def test_fills_racing_commits_install_postgres_state(pg: Any, dbname: str) -> None:
    """Writers commit (single inserts, and multi-statement transactions with a released and a
    rolled-back subtransaction) to the keys being filled, of both an integer and a text
    column, while those keys fill, round after round of new keys; every other round the
    stream is held from before the round's first commits until its fills have their rows,
    so their snapshots see commits the cache has not applied. Once the writers stopped and
    the stream caught up, every key weir holds equals PostgreSQL's answer: no commit visible
    to a fill's snapshot applied twice, none missing. (Fills of the integer key take the
    one-statement form, those of the text key the REPEATABLE READ transaction.)"""
    pg.psql("CREATE TABLE ev (id serial PRIMARY KEY, k int, tag text, v int);"
            f"INSERT INTO ev (k, tag, v) SELECT g % {KEYS}, 't' || (g % {KEYS}), 1 "
            f"FROM generate_series(1, {5 * KEYS}) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), **SETTINGS)
    stop = threading.Event()
    errors: list[BaseException] = []
    current = [list(range(ROUND))]  # the keys of the round (the writers write to them)
    commits = [0]

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as w:
                while not stop.is_set():
                    keys = current[0]
                    i = rnd.randrange(ROUND)
                    k, k1, k2, k3 = (keys[(i + d) % ROUND] for d in range(4))
                    if rnd.random() < 0.5:
                        w.execute("INSERT INTO ev (k, tag, v) VALUES (%s, %s, %s)",
                                  (k, f"t{k}", rnd.randrange(1, 9)))
                    else:
                        _multi(w, k, k1, k2, k3)
                    commits[0] += 1
        except BaseException as exc:
            errors.append(exc)

    caches = {"by_k": "SELECT count(*), sum(v) FROM ev WHERE k = $1",
              "by_tag": "SELECT count(*), sum(v) FROM ev WHERE tag = $1"}
    try:
        for name, sql in caches.items():
            host = _cache(server, dbname, name, sql)
        threads = [threading.Thread(target=writer, args=(seed,)) for seed in (1, 2)]
        for t in threads:
            t.start()
        for r in range(KEYS // ROUND):
            keys = current[0] = list(range(r * ROUND, (r + 1) * ROUND))
            held = HeldApplier(server) if r % 2 == 0 else None
            if held is not None:
                held.hold()
                eventually(_more(commits, 3))  # (committed, not applied)
            server.call(_miss(host, "by_k", keys))
            server.call(_miss(host, "by_tag", [f"t{k}" for k in keys]))
            if held is not None:
                eventually(lambda: server.call(_fetched(host)))  # (rows in, not installed)
                held.release()
            eventually(lambda: not server.call(_fetched(host, pending=True)))  # installed
        stop.set()
        for t in threads:
            t.join(30)
        assert errors == []
        assert host.fills.done >= 2 * KEYS
        server.call(host.barrier(10))
        with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as through:
            for sql in caches.values():
                for key in [*range(KEYS), *(f"t{k}" for k in range(KEYS))]:
                    if isinstance(key, str) != ("tag" in sql):
                        continue
                    text = sql.replace("$1", "%s")
                    got = psycopg.ClientCursor(through).execute(text, (key,)).fetchall()
                    assert _last(through) == "cache", (sql, key)  # (what the fills installed)
                    assert got == direct.execute(text, (key,)).fetchall(), (sql, key)
    finally:
        stop.set()
        server.stop()


def _last(conn: Any) -> str:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return str(row[0]) if row is not None else ""


def _more(counter: list[int], n: int) -> Callable[[], bool]:
    """A predicate: ``counter[0]`` grew by ``n`` since this call."""
    start = counter[0]
    return lambda: counter[0] >= start + n


def _multi(w: Any, k: int, k1: int, k2: int, k3: int) -> None:
    """One transaction: an update, a released subtransaction's insert, a rolled-back
    subtransaction's delete, a delete."""
    with w.transaction():
        w.execute("UPDATE ev SET v = v + 1 WHERE k = %s", (k,))
        with w.transaction():
            w.execute("INSERT INTO ev (k, tag, v) VALUES (%s, %s, 5)", (k1, f"t{k1}"))
        try:
            with w.transaction():
                w.execute("DELETE FROM ev WHERE k = %s", (k2,))
                raise _Rollback
        except _Rollback:
            pass
        w.execute("DELETE FROM ev WHERE id IN (SELECT min(id) FROM ev WHERE k = %s)", (k3,))


async def _fetched(host: Any, pending: bool = False) -> bool:
    """Whether every pending fill has its rows (``pending``: whether any fill is pending)."""
    fills = host.engine.fills.pending.values()
    return bool(fills) if pending else all(f.rows is not None for f in fills)


class _Rollback(Exception):
    pass


def test_a_fill_never_installs_before_the_stream_reaches_its_position(pg: Any, dbname: str
                                                                       ) -> None:
    """The stream held (its messages and keepalives kept): a commit made after the hold is
    visible to the fill's snapshot, so the fill's position lies past what was applied; the
    fill does not install, though its rows are in and its fallback barrier was sent, until
    the stream is released — then the commit is applied once and the fill shows it once."""
    pg.psql("CREATE TABLE ev (id serial PRIMARY KEY, k int);"
            "INSERT INTO ev (k) SELECT g % 3 FROM generate_series(1, 30) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), **SETTINGS)
    held = HeldApplier(server)
    try:
        host = _cache(server, dbname, "ev1", "SELECT count(*) FROM ev WHERE k = $1")
        name = "ev1"
        barriers = host.stream.barriers
        held.hold()
        pg.psql("INSERT INTO ev (k) VALUES (1)", dbname)
        fell_back, done = barriers.waits_fell_back, host.fills.done
        server.call(_miss(host, name, [1]))
        eventually(lambda: host.fills.done == done + 1)  # (its rows are in)
        eventually(lambda: barriers.waits_fell_back == fell_back + 1)
        assert server.call(_lookup(host, name, [1])) == [None]
        held.release()
        assert eventually(lambda: server.call(_lookup(host, name, [1]))[0]) == ((11,),)
        server.call(host.barrier(10))
        assert server.call(_lookup(host, name, [1])) == [((11,),)]
    finally:
        server.stop()


def test_a_position_past_the_flushed_wal_is_reached_by_one_barrier(pg: Any, dbname: str
                                                                    ) -> None:
    """WAL inserted but not flushed (a non-transactional logical message: no commit flushes
    it, and a WAL writer told to wait 10 s between rounds) puts a fill's position past what
    the walsender can decode; after 20 ms one barrier is emitted, its commit flushes that WAL,
    and the fill installs. Fills whose position is reached in time emit none."""
    _kv(pg, dbname, 100)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), **SETTINGS)
    try:
        host = _cache(server, dbname, "kv1", "SELECT v FROM kv WHERE k = $1")
        barriers = host.stream.barriers
        pg.psql("ALTER SYSTEM SET wal_writer_delay = '10s'")
        pg.psql("SELECT pg_reload_conf()")
        with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            eventually(lambda: direct.execute("SHOW wal_writer_delay").fetchone() == ("10s",))
            for k in range(1, 6):
                fell_back, sent = barriers.waits_fell_back, barriers.sent
                direct.execute("SELECT pg_logical_emit_message(false, 'other', 'unflushed')")
                unflushed = direct.execute("SELECT pg_current_wal_flush_lsn() < "
                                           "pg_current_wal_insert_lsn()").fetchone()
                assert _filled(server, host, "kv1", [k]) == [((f"v{k}",),)]
                if unflushed == (True,) and \
                        barriers.sent - sent == barriers.waits_fell_back - fell_back:
                    break  # (else the heartbeat's barrier flushed the WAL first: again)
            assert barriers.waits_fell_back == fell_back + 1
            # a fill whose position is reached in time (nothing unflushed) emits none
            fell_back = barriers.waits_fell_back
            assert _filled(server, host, "kv1", [50]) == [(("v50",),)]
            assert barriers.waits_fell_back == fell_back
    finally:
        pg.psql("ALTER SYSTEM RESET wal_writer_delay")
        pg.psql("SELECT pg_reload_conf()")
        server.stop()


def test_a_fill_past_the_flushed_wal_does_not_wait_out_the_patience(
        pg: Any, dbname: str, monkeypatch: Any) -> None:
    """A fill whose position lies past the flushed WAL (a non-transactional message written
    just before it, as a page prune by a read would be; the WAL writer told to wait 10 s)
    cannot be reached before the next flush: its batch read the flush position beside its
    position, so its fallback barrier is sent after ``UNFLUSHED_PATIENCE`` — not after the
    usual patience, made 30 s here (and the heartbeat's barrier, which would flush it too,
    slowed to one a minute): the fill installs within 5 s. (Before, such a fill waited the
    whole patience: 20 ms a fill in a run of reads that prune, 17 ms a fill in the lead's
    cost table.)"""
    from cdc import barrier
    from proxy import caching, fillrun

    monkeypatch.setattr(barrier.Barriers.at, "__defaults__", (30.0,))
    monkeypatch.setattr(fillrun, "PROBE_PATIENCE", 30.0, raising=False)
    monkeypatch.setattr(caching.EngineHost._heartbeat, "__defaults__", (60.0,))
    _kv(pg, dbname, 100)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), **SETTINGS)
    try:
        host = _cache(server, dbname, "kv1", "SELECT v FROM kv WHERE k = $1")
        barriers = host.stream.barriers
        server.call(host.barrier(10))  # (the stream is at the upstream's position)
        pg.psql("ALTER SYSTEM SET wal_writer_delay = '10s'")
        pg.psql("SELECT pg_reload_conf()")
        with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            eventually(lambda: direct.execute("SHOW wal_writer_delay").fetchone() == ("10s",))
            fell_back = barriers.waits_fell_back
            direct.execute("SELECT pg_logical_emit_message(false, 'other', 'unflushed')")
            assert direct.execute("SELECT pg_current_wal_flush_lsn() < "
                                  "pg_current_wal_insert_lsn()").fetchone() == (True,)
            server.call(_miss(host, "kv1", [7]))
            assert eventually(lambda: server.call(_lookup(host, "kv1", [7]))[0],
                              timeout=5.0) == (("v7",),)
            assert barriers.waits_fell_back == fell_back + 1
            assert getattr(host.fills, "unflushed", 1) == 1
    finally:
        pg.psql("ALTER SYSTEM RESET wal_writer_delay")
        pg.psql("SELECT pg_reload_conf()")
        server.stop()
