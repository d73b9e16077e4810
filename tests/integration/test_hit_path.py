"""The hit path (``proxy.hitpath``) against the real upstream: prepared statements run again
are answered from memoized encodings, and never once the answer they came from is stale.

- Differential: random writes (through weir and directly), then reads through weir, each
  twice — prepared by psycopg (libpq's Bind/Describe/Execute/Sync, text) and asyncpg
  (Bind/Execute/Sync, binary), unnamed Parse/Bind/Describe/Execute/Sync batches, simple
  Queries — each compared with the same query run directly, under a memory budget that
  forces evictions; the memos must have answered many of them.
- Read-your-writes, transaction blocks and revoked privileges are honoured by memoized
  answers exactly as by the general path.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import asyncpg
import psycopg
import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from tests.integration.test_wire_client import connect
from tests.support import InProcessWeir, eventually

SHAPES = [
    "SELECT id, name, score FROM things WHERE grp = $1",
    "SELECT grp, count(*), sum(score) FROM things WHERE grp = $1 GROUP BY grp",
    "SELECT id, score FROM things WHERE grp = $1 ORDER BY score DESC, id LIMIT 3",
    "SELECT a.id, a.name, count(b.id) AS n FROM things a LEFT JOIN notes b ON b.ref = a.id "
    "WHERE a.id = $1 GROUP BY a.id, a.name",
]


def _setup(pg: Any, dbname: str) -> None:
    pg.psql(
        "CREATE TABLE things (id int PRIMARY KEY, grp int, name text, score int);"
        "CREATE TABLE notes (id int PRIMARY KEY, ref int, note text);"
        "INSERT INTO things SELECT g, g % 10, 'n' || (g * 7 % 13), (g * 31) % 50 "
        "FROM generate_series(1, 200) g;"
        "INSERT INTO notes SELECT g, g % 40, 'note ' || g FROM generate_series(1, 300) g",
        dbname,
    )


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: list[int]) -> None:
    op = rng.random()
    if op < 0.4:
        next_id[0] += 1
        conn.execute("INSERT INTO things VALUES (%s, %s, %s, %s)",
                      (next_id[0], rng.randint(0, 12), f"w{rng.randint(0, 9)}",
                       rng.randint(0, 60)))
    elif op < 0.7:
        conn.execute("UPDATE things SET score = %s, grp = %s WHERE id = %s",
                     (rng.randint(0, 60), rng.randint(0, 12), rng.randint(1, next_id[0])))
    elif op < 0.85:
        conn.execute("DELETE FROM things WHERE id = %s", (rng.randint(1, next_id[0]),))
    else:
        conn.execute("INSERT INTO notes VALUES (%s, %s, 'x') ON CONFLICT (id) DO UPDATE "
                     "SET ref = excluded.ref", (rng.randint(1, 400), rng.randint(0, 45)))


def _psql_text(sql: str) -> str:
    return sql.replace("$1", "%s")


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], sql: str) -> bool:
    return got == want if "ORDER BY" in sql else sorted(map(repr, got)) == sorted(map(repr, want))


def test_prepared_reads_match_upstream_through_writes_and_evictions(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    rng = random.Random(20261122)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), memory_budget=15_000)
    try:
        through = psycopg.connect(server.dsn(dbname=dbname), autocommit=True, prepare_threshold=0)
        # unnamed Parse/Bind/Describe/Execute/Sync batches, and simple Queries
        unnamed = psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                                  prepare_threshold=None)
        simple = psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                                 cursor_factory=psycopg.ClientCursor)
        direct = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
        for i, shape in enumerate(SHAPES):
            through.execute(f"CREATE CACHE h{i} FROM {shape}")

        async def binary_reads(reads: list[tuple[str, int]]) -> list[list[tuple[Any, ...]]]:
            conn = await asyncpg.connect(server.dsn(dbname=dbname))
            try:
                return [[tuple(r) for r in await conn.fetch(sql, k)] for sql, k in reads]
            finally:
                await conn.close()

        next_id = [1000]
        mismatches = checked = 0
        for _step in range(60):
            writer = through if rng.random() < 0.5 else direct
            with writer.transaction():
                for _ in range(rng.randint(1, 3)):
                    _write(writer, rng, next_id)
            server.call(server.server.service.host.barrier(10))
            reads = [(rng.choice(SHAPES), rng.randint(0, 14)) for _ in range(8)]
            text = [conn.execute(_psql_text(sql), (k,)).fetchall()
                    for sql, k in reads for conn in (through, through, unnamed, unnamed, simple,
                                                    simple)]
            binary = asyncio.run(binary_reads(reads + reads))
            for j, (sql, k) in enumerate(reads):
                want = direct.execute(_psql_text(sql), (k,)).fetchall()
                for got in (*text[6 * j : 6 * j + 6], binary[j], binary[len(reads) + j]):
                    checked += 1
                    if not _same(got, want, sql):
                        mismatches += 1
                        print("MISMATCH", sql, k, got, want)
        stats: dict[str, str] = dict(through.execute("SHOW WEIR STATUS").fetchall())
        print(f"checked {checked}; memoized answers {stats['memoized_answers']}; "
              f"evictions {stats['evictions']}")
        assert mismatches == 0
        assert int(stats["memoized_answers"]) > checked // 6
        assert int(stats["evictions"]) > 0
    finally:
        server.stop()


def _last(conn: psycopg.Connection[Any]) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT", prepare=False).fetchone()
    assert row is not None
    return (row[0], row[1])


def test_memoized_answers_respect_session_rules(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    role = f"hitter_{dbname}"
    pg.psql(f"CREATE ROLE {role} LOGIN; GRANT SELECT, UPDATE ON things TO {role}", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    query = "SELECT name, score FROM things WHERE id = %s"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner, \
                psycopg.connect(server.dsn(role, dbname), autocommit=True,
                                prepare_threshold=0) as conn:
            owner.execute("CREATE CACHE by_id FROM SELECT name, score FROM things WHERE id = $1")
            status: dict[str, str] = dict(owner.execute("SHOW WEIR STATUS").fetchall())
            served = int(status["memoized_answers"])
            for _ in range(3):
                assert conn.execute(query, (5,)).fetchone() == ("n9", 5 * 31 % 50)
            assert _last(conn) == ("cache", "served by cache by_id")
            status = dict(owner.execute("SHOW WEIR STATUS").fetchall())
            assert int(status["memoized_answers"]) >= served + 1

            # read-your-writes: the session's own write is visible to the very next read
            conn.execute("UPDATE things SET score = 99 WHERE id = 5")
            assert conn.execute(query, (5,)).fetchone() == ("n9", 99)
            assert _last(conn)[0] == "cache"

            # a REPEATABLE READ block: the same prepared read goes upstream (a READ
            # COMMITTED one is served: tests/integration/test_transaction_reads.py)
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            assert conn.execute(query, (5,)).fetchone() == ("n9", 99)
            assert _last(conn)[0] == "upstream"
            conn.execute("COMMIT")
            assert conn.execute(query, (5,)).fetchone() == ("n9", 99)
            assert _last(conn)[0] == "cache"

            # a revoked privilege: no memoized answer for the role any more
            owner.execute(f"REVOKE SELECT ON things FROM {role}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(query, (5,))
            assert _last(conn)[0] == "upstream"
    finally:
        server.stop()


@contextlib.contextmanager
def _wire_session(pg: Any, dbname: str) -> Iterator[Any]:
    """A wire-level session (``tests.integration.test_wire_client``) through weir, with the
    cache ``name_by_id`` on the test tables."""
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        s = connect(SimpleNamespace(host="127.0.0.1", port=server.port), "postgres", dbname)
        s.send(fe.Query("CREATE CACHE name_by_id FROM SELECT name FROM things WHERE id = $1"))
        s.until_ready()
        yield s
        s.close()
    finally:
        server.stop()


def test_a_statement_used_in_a_transaction_stays_held(pg: Any, dbname: str) -> None:
    """Run in a transaction block weir does not serve (REPEATABLE READ), a held statement is
    recreated upstream; afterwards weir answers it again, and closing it closes the upstream's
    copy (the name is free again)."""
    with _wire_session(pg, dbname) as s:
        query = "SELECT name FROM things WHERE id = $1"
        run = (fe.Bind("", "s1", (), (b"5",), ()), fe.Execute(), fe.Sync())

        def rows(events: list[object]) -> list[object]:
            assert not any(isinstance(e, be.ErrorResponse) for e in events), events
            return [e.values for e in events if isinstance(e, be.DataRow)]

        def last() -> bytes | None:
            s.send(fe.Query("EXPLAIN LAST STATEMENT"))
            return next(e.values for e in s.until_ready() if isinstance(e, be.DataRow))[0]

        s.send(fe.Parse("s1", query), fe.Sync())
        rows(s.until_ready())
        s.send(fe.Query("BEGIN ISOLATION LEVEL REPEATABLE READ"))
        assert not any(isinstance(e, be.ErrorResponse) for e in s.until_ready())
        s.send(*run)
        assert rows(s.until_ready()) == [(b"n9",)]
        assert last() == b"upstream"
        s.send(fe.Query("COMMIT"))
        s.until_ready()
        for _ in range(2):
            s.send(*run)
            assert rows(s.until_ready()) == [(b"n9",)]
            assert last() == b"cache"
        s.send(fe.Close("S", "s1"), fe.Sync())
        assert any(isinstance(e, be.CloseComplete) for e in s.until_ready())
        s.send(fe.Parse("s1", query), fe.Sync())
        rows(s.until_ready())  # no "prepared statement already exists" from the upstream
        s.send(fe.Query("BEGIN"))
        s.until_ready()
        s.send(*run)
        assert rows(s.until_ready()) == [(b"n9",)]
        s.send(fe.Query("COMMIT"))
        s.until_ready()


def test_deallocate_and_discard_of_held_statements(pg: Any, dbname: str) -> None:
    """DEALLOCATE and DISCARD ALL of statements only weir held behave as in PostgreSQL, and a
    named local portal does not outlive its implicit transaction."""
    with _wire_session(pg, dbname) as s:
        parse = fe.Parse("s1", "SELECT name FROM things WHERE id = $1")
        run = (fe.Bind("", "s1", (), (b"5",), ()), fe.Execute(), fe.Sync())

        def errors(*msgs: Any) -> list[str]:
            s.send(*msgs)
            return [e.message for e in s.until_ready() if isinstance(e, be.ErrorResponse)]

        assert errors(parse, fe.Sync()) == []
        assert errors(fe.Query("DEALLOCATE s1")) == []
        assert errors(parse, fe.Sync()) == []  # the name is free again
        assert errors(*run) == []
        assert errors(fe.Query("DEALLOCATE ALL")) == []
        assert errors(*run) == ['prepared statement "s1" does not exist']
        assert errors(parse, fe.Sync()) == []
        assert errors(fe.Query("DISCARD ALL")) == []
        assert errors(*run) == ['prepared statement "s1" does not exist']
        assert errors(fe.Query('DEALLOCATE "nothing"')) == \
            ['prepared statement "nothing" does not exist']

        assert errors(parse, fe.Bind("p1", "s1", (), (b"5",), ()), fe.Sync()) == []
        assert errors(fe.Execute("p1"), fe.Sync()) == ['portal "p1" does not exist']

        # a statement only weir holds, whose table is gone upstream: still deallocated
        pg.psql("CREATE TABLE gone (id int PRIMARY KEY, v text)", dbname)
        assert errors(fe.Query("CREATE CACHE gone_by_id FROM SELECT v FROM gone WHERE id = $1")) \
            == []
        assert errors(fe.Parse("s2", "SELECT v FROM gone WHERE id = $1"), fe.Sync()) == []
        pg.psql("DROP TABLE gone", dbname)
        assert errors(fe.Query("DEALLOCATE s2")) == []
        assert errors(fe.Query("DEALLOCATE s2")) == ['prepared statement "s2" does not exist']


def test_search_path_change_after_prepare_reads_upstream(pg: Any, dbname: str) -> None:
    """PostgreSQL analyzes a prepared statement again when search_path changes; weir, which
    does not follow search_path, must then leave the statement to the upstream."""
    _setup(pg, dbname)
    pg.psql("CREATE SCHEMA other; CREATE TABLE other.things (id int PRIMARY KEY, grp int, "
            "name text, score int); INSERT INTO other.things VALUES (5, 0, 'other', 0)", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    query = "SELECT name FROM things WHERE id = %s"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=0) as conn:
            conn.execute("CREATE CACHE name_by_id FROM SELECT name FROM things WHERE id = $1",
                         prepare=False)
            for _ in range(2):
                assert conn.execute(query, (5,)).fetchone() == ("n9",)
            assert _last(conn)[0] == "cache"
            conn.execute("SET search_path = other, public", prepare=False)
            assert conn.execute(query, (5,)).fetchone() == ("other",)
            assert _last(conn)[0] == "upstream"
    finally:
        server.stop()


@contextlib.contextmanager
def _admin_and_prepared(pg: Any, dbname: str) -> Iterator[tuple[Any, Any]]:
    """weir over the test tables, an admin connection and one that prepares everything."""
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin, \
                psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                                prepare_threshold=0) as conn:
            yield admin, conn
    finally:
        server.stop()


def test_a_cache_recreated_for_another_query_does_not_answer_old_statements(
        pg: Any, dbname: str) -> None:
    """A statement prepared while cache ``x`` served it must not read the cache that later
    takes the name ``x`` for another query (nor reuse the old one's column encoders)."""
    query = "SELECT name FROM things WHERE id = %s"
    with _admin_and_prepared(pg, dbname) as (admin, conn):
        admin.execute("CREATE CACHE x FROM SELECT name FROM things WHERE id = $1")
        for _ in range(2):
            assert conn.execute(query, (5,)).fetchone() == ("n9",)
        assert _last(conn)[0] == "cache"
        admin.execute("DROP CACHE x")
        admin.execute("CREATE CACHE x FROM SELECT score FROM things WHERE id = $1")
        for _ in range(2):
            assert conn.execute(query, (5,)).fetchone() == ("n9",)
            assert _last(conn)[0] == "upstream"
        assert conn.execute("SELECT score FROM things WHERE id = %s", (5,)).fetchone() \
            == (5 * 31 % 50,)
        assert _last(conn) == ("cache", "served by cache x")


def test_statements_prepared_before_the_cache_existed_are_served(pg: Any, dbname: str) -> None:
    """An application keeps its connections and prepared statements while the operator
    creates a cache: the very next runs are served by it."""
    query = "SELECT name FROM things WHERE id = %s"
    with _admin_and_prepared(pg, dbname) as (admin, conn):
        admin.execute("CREATE CACHE other FROM SELECT score FROM things WHERE id = $1")
        for _ in range(2):
            assert conn.execute(query, (5,)).fetchone() == ("n9",)
            assert _last(conn)[0] == "upstream"
        admin.execute("CREATE CACHE names FROM SELECT name FROM things WHERE id = $1")
        assert conn.execute(query, (5,)).fetchone() == ("n9",)
        assert _last(conn) == ("cache", "served by cache names")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")  # (a block weir does not serve)
        assert conn.execute(query, (6,)).fetchone() == ("n3",)  # both hold it: still fine
        assert _last(conn)[0] == "upstream"
        conn.execute("COMMIT")
        assert conn.execute(query, (6,)).fetchone() == ("n3",)
        assert _last(conn)[0] == "cache"


def test_a_batch_forwarded_upstream_does_not_lend_its_bytes_to_a_later_answer(
        pg: Any, dbname: str) -> None:
    """The hit path notes an unnamed Parse/Bind batch it could not answer, so that the
    answer weir gives to it can be memoized under its bytes. A batch that went upstream
    whole (no cache served it yet) left that note behind; the next run of the statement
    with another key, answered from the cache after a read-your-writes wait (so not through
    the hit path), was memoized under the first batch's bytes, and the first key then read
    the second key's row (found by ``test_psycopg_paths``' copy scenario, 1 run in 20)."""
    query = "SELECT name FROM things WHERE id = %s"
    with _admin_and_prepared(pg, dbname) as (admin, _), \
            psycopg.connect(admin.info.dsn, password="", autocommit=True,
                            prepare_threshold=None) as conn:
        admin.execute("CREATE CACHE other FROM SELECT score FROM things WHERE id = $1")
        eventually(lambda: conn.execute("SELECT score FROM things WHERE id = %s", (5,))
                   .fetchone() == (5 * 31 % 50,) and _last(conn)[0] == "cache", 10)
        assert conn.execute(query, (5,)).fetchone() == ("n9",)  # upstream: no cache yet
        admin.execute("CREATE CACHE names FROM SELECT name FROM things WHERE id = $1")
        conn.execute("INSERT INTO things VALUES (1000, 1, 'w', 1)")  # the next read waits
        assert conn.execute(query, (6,)).fetchone() == ("n3",)
        assert _last(conn) == ("cache", "served by cache names")
        for _ in range(3):
            assert conn.execute(query, (5,)).fetchone() == ("n9",)
            assert conn.execute(query, (6,)).fetchone() == ("n3",)
        assert _last(conn) == ("cache", "served by cache names")


def test_a_client_that_does_not_read_stops_weir_answering(pg: Any, dbname: str) -> None:
    """Backpressure for weir's own answers: a client that pipelines cached reads without
    reading the results makes weir stop reading from it (as PostgreSQL would), instead of
    buffering answers without bound; reading again resumes the session."""
    import socket
    import threading

    from tests.support import eventually

    _setup(pg, dbname)
    limit = 64 * 1024
    server = InProcessWeir.start(pg.dsn(dbname=dbname), write_buffer_bytes=limit)
    try:
        s = connect(SimpleNamespace(host="127.0.0.1", port=server.port), "postgres", dbname)
        s.send(fe.Query("CREATE CACHE name_by_id FROM SELECT name FROM things WHERE id = $1"))
        s.until_ready()
        s.send(fe.Parse("s1", "SELECT name FROM things WHERE id = $1"), fe.Sync())
        s.until_ready()
        run = (fe.Bind("", "s1", (), (b"5",), ()), fe.Execute(), fe.Sync())

        def cached() -> bool:
            s.send(*run)
            s.until_ready()
            s.send(fe.Query("EXPLAIN LAST STATEMENT"))
            return next(e.values for e in s.until_ready() if isinstance(e, be.DataRow))[0] \
                == b"cache"

        # the flood below must be weir's own answers from its first batch: key 5 filled and
        # the session's upstream answers covered first. Unprimed, its first read is a miss
        # that waits for the fill (tests run misses=wait), the rest of that 256 KiB read
        # waits behind it in the answering pump, and the flood's pace hung on the fill
        # connection's and the barrier's timing on a loaded machine (1 run in 10 under
        # WEIR_IMPL=python at load 16: weir never paused, the sender's 120 s ran out)
        eventually(cached, 30)
        batch = b"".join(m.encode() for m in run)
        sock = s.sock
        assert isinstance(sock, socket.socket)
        session = next(iter(server.server.sessions))
        # small socket buffers both ways (the kernel would otherwise take megabytes of
        # answers first), so that 20,000 batches (700 KB of requests, 1.2 MB of answers)
        # pass them many times over however slowly a loaded machine answers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        session.client.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        count = 20_000
        sock.settimeout(120)  # (sendall's timeout bounds the whole send, reading included)
        sender = threading.Thread(target=sock.sendall, args=(batch * count,))
        sender.start()
        try:
            eventually(lambda: "client send buffer full" in session.state.paused, 120)
        except AssertionError as exc:  # say why weir stopped reading, if it did
            raise AssertionError(f"{exc}; weir's reading paused for {set(session.state.paused)}"
                                 f", {session.client.get_write_buffer_size()} bytes buffered"
                                 ) from None
        # weir stops reading once the buffer passes the limit; what it has read by then (one
        # read: at most 256 KiB of requests on asyncio's loop, which this runs on) is still
        # answered, so the buffer stays within the limit plus the answers to one read (each
        # under 64 bytes here), not the megabytes of answers the client has asked for
        one_read = (256 * 1024 // len(batch) + 1) * 64
        assert session.client.get_write_buffer_size() < limit + one_read
        ready = received = 0
        pending = b""
        while ready < count:
            chunk = sock.recv(1 << 20)
            assert chunk
            received += len(chunk)
            pending += chunk
            ready += pending.count(b"Z\x00\x00\x00\x05I")
            pending = pending[-5:]
        sender.join()
        assert ready == count
        s.close()
    finally:
        server.stop()
