"""A write or an eviction of one key drops only that key's stamped lane answers, against the
real upstream.

The hit lanes (``proxy.lanes``) answer from replies the hit path stamped. A write upstream
that changes key A, or an eviction of key A, must stop the lanes answering A's old reply at
once (the session's next read of A is answered from the cache's current state, on the event
loop), while the reads of key B go on being answered by the lanes (no global epoch bump that
would send every session back to the event loop). Who answered is counted by ``SHOW WEIR
STATUS`` (``lane_answers``, ``loop_memo_answers``). Under ``WEIR_IMPL=python`` there are no
lanes: the same reads must then be answered right by the event loop.
"""

from __future__ import annotations

from typing import Any

import psycopg

import cython_ext
from tests.support import InProcessWeir, eventually, kv_read, kv_table, memo_answers, weir_status

LANES = cython_ext.load("lanes") is not None
A, B, READS = 1, 2, 20


def _setup(pg: Any, dbname: str) -> InProcessWeir:
    pg.psql(kv_table(100), dbname)
    return InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1 if LANES else 0)


def _warm(conn: Any, admin: Any) -> None:
    """Until the session's reads of A and B are answered by the lanes (by the event loop's
    hit path without lanes)."""
    def in_lane() -> bool:
        assert kv_read(conn, A) == f"v{A}"
        lane0, loop0 = memo_answers(admin)
        for _ in range(5):
            assert kv_read(conn, A) == f"v{A}"
            assert kv_read(conn, B) == f"v{B}"
        lane1, loop1 = memo_answers(admin)
        return (lane1 - lane0 if LANES else loop1 - loop0) == 10

    eventually(in_lane, 20)


def _reads_of_b_stay_in_the_lane(conn: Any, admin: Any) -> None:
    lane0, loop0 = memo_answers(admin)
    for _ in range(READS):
        assert kv_read(conn, B) == f"v{B}"
    lane1, loop1 = memo_answers(admin)
    print(f"reads of B: lanes {lane1 - lane0}, loop {loop1 - loop0}; {weir_status(admin)}")
    if LANES:
        assert lane1 - lane0 == READS  # none was handed back to the event loop
        assert int(weir_status(admin)["lane_left_epoch"]) == 0
    else:
        assert loop1 - loop0 == READS


def test_a_write_of_one_key_keeps_the_other_keys_in_the_lanes(pg: Any, dbname: str) -> None:
    server = _setup(pg, dbname)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.prepare_threshold = 0  # named prepared statements: what the lanes answer
            admin.execute("CREATE CACHE kv_inv FROM SELECT v FROM kv WHERE k = $1")
            _warm(conn, admin)
            host = server.server.service.host
            direct.execute("UPDATE kv SET v = 'w1' WHERE k = %s", (A,))
            server.call(host.barrier(10))  # weir applied the write
            _reads_of_b_stay_in_the_lane(conn, admin)
            # A's stamped reply is gone: the next read of A is the new value (and the lanes
            # answer A again once the hit path stamped it anew)
            lane0, _ = memo_answers(admin)
            assert kv_read(conn, A) == "w1"
            assert memo_answers(admin)[0] == lane0
            if LANES:
                assert int(weir_status(admin)["lane_left_unstamped"]) >= 1
            who = 0 if LANES else 1
            base = memo_answers(admin)[who]
            eventually(lambda: kv_read(conn, A) == "w1" and memo_answers(admin)[who] > base + 1, 10)
    finally:
        server.stop()


def test_an_eviction_of_one_key_keeps_the_other_keys_in_the_lanes(pg: Any,
                                                                   dbname: str) -> None:
    server = _setup(pg, dbname)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            conn.prepare_threshold = 0
            admin.execute("CREATE CACHE kv_ev FROM SELECT v FROM kv WHERE k = $1")
            _warm(conn, admin)
            engine = server.server.service.host.engine
            reader = engine.graph.caches["kv_ev"][0]

            async def evict_a() -> None:  # what the budget's eviction does to one key
                engine.graph.evict(reader.nid, (A,))

            server.call(evict_a())
            assert (A,) not in reader.answers
            _reads_of_b_stay_in_the_lane(conn, admin)
            lane0, _ = memo_answers(admin)
            assert kv_read(conn, A) == f"v{A}"  # not a stamp of the evicted answer
            assert memo_answers(admin)[0] == lane0
    finally:
        server.stop()
