"""Pass lanes (``proxy.lanes``, ``cython_ext.lanes``): sessions whose requests go upstream,
relayed by a lane thread, against the real upstream.

- Differential, byte for byte: the same raw client byte streams (named prepared statements
  run again, unnamed Parse/Bind/Describe/Execute/Sync batches, plain simple Queries, pipelined
  and split writes, errors, writes, transaction blocks, large results, EXPLAIN LAST
  STATEMENT, a cache created midway for a statement prepared before) sent through a weir with
  a lane and a weir without lanes get the same reply bytes from both, and the lane must have
  relayed many cycles. The relay core and the session's Python path are the lanes' twins.
- SHOW PROXIED QUERIES counts the runs a lane relayed.
- A session in a lane whose upstream goes away is told so and ends, as without lanes.
- Sessions moving in and out of lanes concurrently, while caches for their reads come and
  go and SHOW PROXIED QUERIES settles the lanes, read exactly their own writes.

Under ``WEIR_IMPL=python`` there are no lanes: the same streams must then come from the event
loop, and the lane-only checks say so.
"""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any

import psycopg

from tests.integration.test_hit_lanes import (
    LANES,
    _raw_session,
    _status,
    msg,
    parse,
    query,
    replies,
    run,
    same_replies,
)
from tests.support import InProcessWeir, eventually

#: one row per key: a read the cache answers and one a slow fill sends upstream are the same
#: bytes (several rows could come in another order)
SELECT = "SELECT id, name, score FROM things WHERE id = $1"


def _setup(pg: Any, dbname: str) -> None:
    pg.psql(
        "CREATE TABLE things (id int PRIMARY KEY, grp int, name text, score int);"
        "INSERT INTO things SELECT g, g % 10, 'n' || (g * 7 % 13), (g * 31) % 50 "
        "FROM generate_series(1, 200) g;"
        "CREATE TABLE log (n int)",
        dbname,
    )


def unnamed(sql: str, value: int) -> bytes:
    """Parse, Bind, Describe, Execute, Sync of the unnamed statement (pgbench -M extended)."""
    text = str(value).encode()
    return (msg(b"P", b"\x00" + sql.encode() + b"\x00\x00\x00")
            + msg(b"B", b"\x00\x00\x00\x00\x00\x01" + len(text).to_bytes(4, "big") + text
                  + b"\x00\x00")
            + msg(b"D", b"P\x00") + msg(b"E", b"\x00\x00\x00\x00\x00") + msg(b"S", b""))


def _chunk(rng: random.Random, step: int) -> tuple[bytes, int]:
    """A random client write and how many ReadyForQuery answer it."""
    out, ready = b"", 0
    rare = step % 50 < 10  # phases with the things a lane hands back, then quiet ones
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.random()
        key = rng.randint(0, 12)
        if not rare or kind < 0.5:
            pick = rng.random()
            if pick < 0.4:
                out += run(rng.choice(("p1", "p2")), key, rng.random() < 0.5,
                           binary=rng.random() < 0.3)
            elif pick < 0.7:
                out += unnamed("SELECT name FROM things WHERE id = $1", key)
            else:
                out += query(f"SELECT count(*) FROM things WHERE grp = {key}")
        elif kind < 0.6:
            out += query("SELECT 1 / 0")
        elif kind < 0.7:
            out += query(f"INSERT INTO log VALUES ({key})")
        elif kind < 0.8:
            out += query("BEGIN") + query("SELECT 2") + query("COMMIT")
            ready += 2
        elif kind < 0.9:
            out += query("SELECT g, repeat('x', 20) FROM generate_series(1, 20000) g")
        else:
            out += query("EXPLAIN LAST STATEMENT")
        ready += 1
    return out, ready


def test_pass_lanes_relay_byte_for_byte_as_the_event_loop(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    rng = random.Random(20261122)
    with_lane = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    without = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=0)
    try:
        assert (with_lane.server.service.lanes is not None) == LANES
        socks = []
        for server in (with_lane, without):
            sock = _raw_session(server, dbname)
            sock.sendall(parse("p1", SELECT) + parse("p2", "SELECT $1::int + 1")
                         + msg(b"S", b""))
            replies(sock, 1)
            socks.append(sock)
        direct = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
        mismatches = 0
        for step in range(500):
            if step == 300:  # a cache for a statement the session prepared in a lane
                for sock in socks:
                    sock.sendall(query(f"CREATE CACHE pass_by_grp FROM {SELECT}"))
                    replies(sock, 1)
            if step % 100 == 99:
                direct.execute("UPDATE things SET score = score + 1 WHERE grp = %s",
                               (rng.randint(0, 12),))
                for server in (with_lane, without):
                    if server.server.service.host is not None:
                        server.call(server.server.service.host.barrier(10))
            chunk, ready = _chunk(rng, step)
            split = rng.randint(1, len(chunk) - 1) if rng.random() < 0.2 else 0
            mismatches += not same_replies(socks, chunk, ready, split)
        assert mismatches == 0
        stats = _status(with_lane)
        print(f"lane stats {stats}")
        if LANES:
            assert stats["lane_relayed"] > 300
            assert stats["lane_pass_entered"] >= 5  # the rare phases sent it back each time
            # every cycle a lane relayed was timed (weir_upstream_statement_seconds)
            counts, total = with_lane.server.service.lanes.upstream_latency()
            assert sum(counts) == stats["lane_relayed"] and total > 0
        for sock in socks:
            sock.close()
        direct.close()
    finally:
        with_lane.stop()
        without.stop()


def _proxied(server: InProcessWeir, dbname: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        return sorted(tuple(r) for r in conn.execute("SHOW PROXIED QUERIES").fetchall())


def test_show_proxied_queries_counts_what_lanes_relayed(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    with_lane = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    without = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=0)
    locked = "SELECT id, name FROM things WHERE grp = %s FOR UPDATE"  # counted, never cached
    try:
        counts = []
        for server in (with_lane, without):
            with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
                conn.execute(f"CREATE CACHE FROM {SELECT}")
                for i in range(300):
                    conn.execute(locked, (i % 10,), prepare=True)
                    conn.execute("SELECT 1 + %s", (i,), prepare=True)
                if server is with_lane and LANES:
                    assert _status(server)["lane_relayed"] > 200
                counts.append(_proxied(server, dbname))
                counts.append(_proxied(server, dbname))  # settled: asking again changes none
        assert counts[0] == counts[1] == counts[2] == counts[3]
        assert any(row[1].endswith("FOR UPDATE") and int(row[-1]) >= 300
                   for row in counts[0]), counts[0]
    finally:
        with_lane.stop()
        without.stop()


def test_a_session_in_a_lane_learns_its_upstream_went_away(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    try:
        conn = psycopg.connect(server.dsn(dbname=dbname), autocommit=True)
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]

        def in_lane() -> bool:
            conn.execute(SELECT.replace("$1", "%s"), (3,), prepare=True)
            return not LANES or _status(server)["lane_sessions"] == 1

        eventually(in_lane, 10)
        with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            direct.execute("SELECT pg_terminate_backend(%s)", (pid,))
        try:
            conn.execute("SELECT 1")
            raise AssertionError("the session outlived its upstream")
        except psycopg.OperationalError as exc:
            # (PostgreSQL's FATAL, relayed; once in CI, at c02b226 under python, psycopg
            # reported the socket closed instead, not reproduced in 15 runs: the session
            # is gone either way, which is what this test is about)
            assert "terminat" in str(exc) or "socket closed" in str(exc), exc
        conn.close()
        eventually(lambda: not server.server.sessions, 10)
        if LANES:
            assert _status(server)["lane_sessions"] == 0
    finally:
        server.stop()


def test_concurrent_sessions_in_lanes_read_their_own_writes(pg: Any, dbname: str) -> None:
    """Several sessions move in and out of lanes at once (prepared, unnamed and simple reads,
    writes in transaction blocks, errors) while caches for their reads are created and
    dropped and SHOW PROXIED QUERIES settles the lanes: every read returns what the session's
    own model says (each session owns its rows; read-your-writes covers cached reads)."""
    pg.psql("CREATE TABLE acct (id int PRIMARY KEY, owner int, balance int);"
            "INSERT INTO acct SELECT g, g / 100, 0 FROM generate_series(0, 399) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    point = "SELECT balance FROM acct WHERE id = %s"
    failures: list[str] = []
    done = threading.Event()
    progress = threading.Condition()
    steps = [0]  # reads and writes done by all workers (the admin paces itself on it)

    def worker(owner: int) -> None:
        rng = random.Random(owner)
        model = dict.fromkeys(range(owner * 100, owner * 100 + 100), 0)
        try:
            with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
                simple = psycopg.ClientCursor(conn)
                for step in range(400):
                    with progress:
                        steps[0] += 1
                        progress.notify_all()
                    key = rng.choice(list(model))
                    kind = rng.random()
                    if kind < 0.1:
                        with conn.transaction():
                            conn.execute("UPDATE acct SET balance = balance + 1 WHERE id = %s",
                                         (key,))
                        model[key] += 1
                        continue
                    if kind < 0.13:
                        with contextlib.suppress(psycopg.errors.DivisionByZero):
                            conn.execute("SELECT 1 / 0")
                        continue
                    if kind < 0.5:
                        row = conn.execute(point, (key,), prepare=True).fetchone()
                    elif kind < 0.75:
                        row = conn.execute(point, (key,), prepare=False).fetchone()
                    else:
                        row = simple.execute(point.replace("%s", str(key))).fetchone()
                    if row != (model[key],):
                        failures.append(f"owner {owner} step {step} key {key}: {row} "
                                        f"!= {model[key]}")
        except Exception as exc:  # reported below
            failures.append(f"owner {owner}: {exc!r}")

    def admin() -> None:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            def after(mark: int) -> None:
                with progress:
                    progress.wait_for(lambda: steps[0] >= mark or done.is_set(), 60)

            mark = 0
            while not done.is_set():  # a cache for a while, then none for a while, ...
                after(mark := mark + 100)
                conn.execute(f"CREATE CACHE acct_point FROM {point.replace('%s', '$1')}")
                conn.execute("SHOW PROXIED QUERIES").fetchall()
                after(mark := mark + 100)
                conn.execute("DROP CACHE acct_point")

    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        keeper = threading.Thread(target=admin)
        keeper.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        done.set()
        with progress:
            progress.notify_all()
        keeper.join(60)
        assert not any(t.is_alive() for t in [*threads, keeper])
        assert failures == []
        if LANES:
            stats = _status(server)
            print(f"lane stats {stats}")
            assert stats["lane_relayed"] > 30 and stats["lane_pass_entered"] > 5
    finally:
        server.stop()
