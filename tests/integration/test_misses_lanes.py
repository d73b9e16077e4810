"""After a miss, a session's hits are answered by the lanes again, against the real upstream.

A miss goes upstream and its fill installs the key in the background: neither may keep the
session's next cached reads on the event loop (``proxy.lanes``: a fill's install replaces no
answer the lanes stamped, so it does not bump their epoch). The check counts who answered:
``SHOW WEIR STATUS`` says ``lane_answers`` (the lanes) and ``loop_memo_answers`` (the event
loop's hit path). Under ``WEIR_IMPL=python`` there are no lanes: the same reads must then be
answered by the event loop's hit path, and right.
"""

from __future__ import annotations

from typing import Any

import psycopg

import cython_ext
from proxy.misses import MISS
from tests.support import InProcessWeir, eventually, kv_read, kv_table, last_statement, memo_answers

LANES = cython_ext.load("lanes") is not None
ROUNDS, HITS = 40, 10


def test_hits_after_a_miss_are_answered_by_the_lanes(pg: Any, dbname: str) -> None:
    """Rounds of one miss (its key's fill installed in the background) then ``HITS`` hits
    of a key in the cache: the lanes answer most of the hits, not the event loop."""
    pg.psql(kv_table(1000), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream", admission="always",
                                 hit_lanes=1 if LANES else 0)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            conn.prepare_threshold = 0  # named prepared statements: what the lanes answer
            admin.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host

            def read(k: int) -> Any:
                return kv_read(conn, k)

            def last() -> tuple[str, str]:
                return last_statement(conn)

            assert read(1) == "v1"
            eventually(lambda: read(1) == "v1" and last()[0] == "cache")
            for _ in range(HITS):
                assert read(1) == "v1"
            lane0, loop0 = memo_answers(admin)
            fills0 = host.fills.done
            for i in range(ROUNDS):
                key = 100 + i
                assert read(key) == f"v{key}"  # a miss: upstream, its fill queued
                assert last() == ("upstream", MISS)
                for _ in range(HITS):
                    assert read(1) == "v1"
                # (its fill installs before the next round's hits: with the miss's position
                # read the hits need no wait, and the rounds could outrun the fills)
                eventually(lambda i=i: host.fills.done - fills0 > i)  # type: ignore[misc]
            lane1, loop1 = memo_answers(admin)
            hits = ROUNDS * HITS
            print(f"hits {hits}: lanes {lane1 - lane0}, loop {loop1 - loop0}, "
                  f"fills {host.fills.done - fills0}")
            assert host.fills.done - fills0 >= ROUNDS // 2  # fills did install meanwhile
            if LANES:
                assert lane1 - lane0 >= hits * 0.6
            else:
                assert loop1 - loop0 >= hits * 0.6
    finally:
        server.stop()


def test_a_miss_answer_settles_seen_and_sends_the_session_back_to_its_lane(
        pg: Any, dbname: str) -> None:
    """Once a miss's upstream answer has come, with nothing more sent: the session's seen(s)
    is settled and covered by a barrier sent at once (``proxy.aftermiss``), and with lanes
    the session is back in its lane before its next read."""
    pg.psql(kv_table(100), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream", admission="second",
                                 hit_lanes=1 if LANES else 0)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.prepare_threshold = 0
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host

            def read(k: int) -> Any:
                return kv_read(conn, k)

            read(1)
            eventually(lambda: read(1) == "v1" and host.engine.stats.hits > 2)
            session = next(s for s in server.server.sessions if s.ctx is not None
                           and s.ctx.database == dbname and s.state.held)
            seen = session.ctx.seen
            for k in range(10, 20):
                if LANES:  # (in its lane after a hit)
                    eventually(lambda: read(1) == "v1" and session.lane != 0)
                assert read(k) == f"v{k}"  # a miss (a one-off key: not admitted)
                eventually(lambda: not seen.pending and seen.at <= host.coverage.covered)
                if LANES:
                    eventually(lambda: session.lane != 0)  # back with no read in between
                assert read(1) == "v1"
    finally:
        server.stop()

