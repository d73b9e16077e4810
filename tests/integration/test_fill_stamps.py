"""A key whose fill installed is answered from the memos (and by the hit lanes) at its next
read, against the real upstream: the read that missed left its statement's memo and Bind
tail behind (``proxy.fillstamps``), and the install remembered the answer there.

Who answered is counted by ``SHOW WEIR STATUS``: ``lane_answers`` (the lanes),
``loop_memo_answers`` (the event loop's hit path) and ``memo_from_fills``. Without this the
read after the install went through the general path (neither counter moves) and only the
one after it was answered from a memo. A write to the key afterwards must be seen: the
remembered answer is dropped with the engine's (``Runtime.watched``, ``Engine.current``).
Under ``WEIR_IMPL=python`` there are no lanes: the event loop's hit path answers.
(``--read-your-writes off``: otherwise the read after the install may wait for a barrier
after the miss's answer, on the general path, which says nothing of the memos.)
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import psycopg

import cython_ext
from proxy.misses import MISS
from tests.support import (
    InProcessWeir,
    eventually,
    kv_read,
    kv_table,
    last_statement,
    memo_answers,
    weir_status,
)

LANES = cython_ext.load("lanes") is not None
KEYS = 5


def _memo_answers(conn: Any) -> int:
    return sum(memo_answers(conn))


def test_the_read_after_a_fill_is_answered_from_a_memo(pg: Any, dbname: str) -> None:
    pg.psql(kv_table(100), dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), misses="upstream", admission="always",
                                 read_your_writes="off", hit_lanes=1 if LANES else 0)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.prepare_threshold = 0  # named prepared statements: what the lanes answer
            admin.execute("CREATE CACHE kv_fs FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host

            def read(k: int) -> Any:
                return kv_read(conn, k)

            def last() -> tuple[str, str]:
                return last_statement(conn)

            reader = host.engine.graph.caches["kv_fs"][0]
            for k in range(1, KEYS + 1):
                assert read(k) == f"v{k}"
                assert last() == ("upstream", MISS)
                # its fill installed (the marker came through the stream: ``Engine.marker``)
                eventually(functools.partial(operator.contains, reader.state, (k,)), 10)
                answers = _memo_answers(admin)
                assert read(k) == f"v{k}"
                assert _memo_answers(admin) == answers + 1, (k, weir_status(admin))
            assert int(weir_status(admin)["memo_from_fills"]) == KEYS
            # a write to a key answered so is seen (the remembered answer is not current)
            direct.execute("UPDATE kv SET v = 'w' WHERE k = 1")
            server.call(host.barrier(10))
            assert read(1) == "w"
    finally:
        server.stop()
