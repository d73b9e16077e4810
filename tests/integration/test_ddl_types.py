"""Column types after DDL: a cached read is never described with a type the column no longer
has, and DDL on one cached table resets only the caches over that table (issue 19, cause 4).

Each read right after the DDL is the test: no ``eventually`` between the DDL and the read
whose type is checked, since the defect was a window of about a second in which the cache
still answered with the old RowDescription.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import InProcessWeir, eventually, last_statement, weir_over

READ = "SELECT v FROM ty_t WHERE id = %s"


@pytest.fixture
def server(pg: Any, dbname: str) -> Iterator[InProcessWeir]:
    with weir_over(pg, dbname,
                   "CREATE TABLE ty_t (id int PRIMARY KEY, v text);"
                   "INSERT INTO ty_t SELECT g, g::text FROM generate_series(1, 5) g;"
                   "CREATE TABLE ty_other (id int PRIMARY KEY, w text);"
                   "INSERT INTO ty_other SELECT g, 'w' || g FROM generate_series(1, 5) g"
                   ) as weir:
        yield weir


def _cached(conn: psycopg.Connection[Any], query: str, arg: int) -> list[tuple[Any, ...]]:
    """Run ``query`` until the cache answers it (the first run fills)."""
    eventually(lambda: conn.execute(query, (arg,)).fetchall() is not None
               and last_statement(conn)[0] == "cache", 10)
    return conn.execute(query, (arg,)).fetchall()


@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit", "transaction"])
def test_alter_column_type_is_seen_by_the_next_read(dbname: str, server: InProcessWeir,
                                                    autocommit: bool) -> None:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as reader, \
            psycopg.connect(server.dsn(dbname=dbname), autocommit=autocommit) as ddl:
        reader.execute("CREATE CACHE ty FROM SELECT v FROM ty_t WHERE id = $1")
        assert _cached(reader, READ, 1) == [("1",)]
        ddl.execute("ALTER TABLE ty_t ALTER COLUMN v TYPE int USING v::int")
        if not autocommit:
            ddl.commit()
        for _ in range(20):  # every read from now on: int, never the old text
            cur = reader.execute(READ, (1,))
            got = cur.fetchall()
            assert got == [(1,)], (last_statement(reader), cur.description, cur.pgresult.ftype(0))
        eventually(lambda: reader.execute(READ, (2,)).fetchall() == [(2,)]
                   and last_statement(reader)[0] == "cache", 10)


def test_drop_and_create_with_another_type(dbname: str, server: InProcessWeir) -> None:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as reader, \
            psycopg.connect(server.dsn(dbname=dbname)) as ddl:
        reader.execute("CREATE CACHE ty FROM SELECT v FROM ty_t WHERE id = $1")
        assert _cached(reader, READ, 1) == [("1",)]
        ddl.execute("DROP TABLE ty_t")
        ddl.execute("CREATE TABLE ty_t (id int PRIMARY KEY, v int)")
        ddl.execute("INSERT INTO ty_t VALUES (1, 10)")
        ddl.commit()
        for _ in range(20):
            assert reader.execute(READ, (1,)).fetchall() == [(10,)]


def test_ddl_resets_only_the_caches_over_its_table(dbname: str,
                                                   server: InProcessWeir) -> None:
    other = "SELECT w FROM ty_other WHERE id = %s"
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute("CREATE CACHE ty FROM SELECT v FROM ty_t WHERE id = $1")
        conn.execute("CREATE CACHE oth FROM SELECT w FROM ty_other WHERE id = $1")
        assert _cached(conn, READ, 1) == [("1",)]
        assert _cached(conn, other, 1) == [("w1",)]
        host = server.server.service.host
        fills = host.fills.done
        conn.execute("ALTER TABLE ty_t ALTER COLUMN v TYPE int USING v::int")
        assert conn.execute(READ, (1,)).fetchall() == [(1,)]
        eventually(lambda: conn.execute(other, (1,)).fetchall() == [("w1",)]
                   and last_statement(conn)[0] == "cache", 10)
        eventually(lambda: conn.execute(READ, (1,)).fetchall() == [(1,)]
                   and last_statement(conn)[0] == "cache", 10)
        # ty was refilled; oth kept its state (no fill for it)
        assert host.fills.done == fills + 1


def test_ddl_in_a_transaction_block_holds_cached_reads_until_it_ends(
        dbname: str, server: InProcessWeir) -> None:
    simple = "SELECT v FROM ty_t WHERE id = 1"  # simple protocol: no statement is held
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as reader, \
            psycopg.connect(server.dsn(dbname=dbname)) as ddl:
        reader.execute("CREATE CACHE ty FROM SELECT v FROM ty_t WHERE id = $1")
        eventually(lambda: reader.execute(simple).fetchall() == [("1",)]
                   and last_statement(reader)[0] == "cache", 10)
        host = server.server.service.host
        ddl.execute("ALTER TABLE ty_t ALTER COLUMN v TYPE int USING v::int")
        # heartbeats check the catalog while the ALTER is uncommitted (they see the old
        # one): none of them may make the caches count as fresh again
        rounds = host.heartbeats
        eventually(lambda: host.heartbeats >= rounds + 2, 10)
        assert host.staleness() == float("inf")
        ddl.commit()
        for _ in range(20):
            assert reader.execute(simple).fetchall() == [(1,)], last_statement(reader)
        eventually(lambda: reader.execute(simple).fetchall() == [(1,)]
                   and last_statement(reader)[0] == "cache", 10)
