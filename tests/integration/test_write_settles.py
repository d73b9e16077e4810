"""After a write through weir, read-your-writes coverage is asked for at the write's answer.

The demo's news site (issue 24) follows every vote and comment with a cached read. The write's
commit moves the session's seen(s) (read-your-writes); before, seen(s) was fixed only at that
next read, which then parked on the event loop for a coverage request sent only then. Now the
relay settles seen(s) as soon as the write's answer has come with nothing outstanding (as after
a miss, ``proxy.aftermiss``): the coverage request leaves at once, and with lanes the session
is back in its hit lane before its next read. The read after the write still sees the write.
"""

from __future__ import annotations

from typing import Any

import psycopg

import cython_ext
from tests.support import InProcessWeir, eventually, kv_read, kv_table

LANES = cython_ext.load("lanes") is not None


def test_a_write_answer_settles_seen_and_sends_the_session_back_to_its_lane(
        pg: Any, dbname: str) -> None:
    pg.psql(kv_table(100), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream", admission="always",
                                 hit_lanes=1 if LANES else 0)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.prepare_threshold = 0  # named prepared statements: what the lanes answer
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host
            kv_read(conn, 1)
            eventually(lambda: kv_read(conn, 1) == "v1" and host.engine.stats.hits > 2)
            session = next(s for s in server.server.sessions if s.ctx is not None
                           and s.ctx.database == dbname and s.state.held)
            seen = session.ctx.seen
            for i in range(10):
                if LANES:  # (in its lane after a hit)
                    eventually(lambda: kv_read(conn, 1) is not None and session.lane != 0)
                conn.execute("UPDATE kv SET v = %s WHERE k = 1", (f"w{i}",))
                # settled at the answer, with no read since, and covered by a request sent then
                eventually(lambda: not seen.pending and seen.at <= host.coverage.covered)
                if LANES:
                    eventually(lambda: session.lane != 0)  # back with no read in between
                assert kv_read(conn, 1) == f"w{i}"  # read-your-writes
    finally:
        server.stop()
