"""Schema changes upstream: caches over a changed relation are planned again under the new
catalog, or dropped (their reads go upstream) when their query no longer plans.

DDL is not in the logical replication stream, so weir checks the relations of its caches with
every heartbeat (the staleness bound covers schema and data alike), and stops serving at once
when DDL passes through weir itself, until that check has run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support import InProcessWeir, eventually

QUERY = "SELECT id, a, b FROM ddl_t WHERE id = %s"


def _last(conn: psycopg.Connection[Any]) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    assert row is not None
    return (row[0], row[1])


def _caches(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute("SHOW CACHES").fetchall()]


@pytest.fixture
def server(pg: Any, dbname: str) -> Iterator[InProcessWeir]:
    """weir over a database with the table ``ddl_t`` (id, a, b) of ten rows."""
    pg.psql("CREATE TABLE ddl_t (id int PRIMARY KEY, a text, b int);"
            "INSERT INTO ddl_t SELECT g, 'a' || g, g FROM generate_series(1, 10) g", dbname)
    weir = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        yield weir
    finally:
        weir.stop()


def test_direct_ddl_replans_or_drops_caches(pg: Any, dbname: str,
                                            server: InProcessWeir) -> None:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as through, \
            psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
        through.execute(f"CREATE CACHE ddl1 FROM {QUERY.replace('%s', '$1')}")
        through.execute("CREATE CACHE ddl2 FROM SELECT id, b FROM ddl_t WHERE id = $1")
        assert through.execute(QUERY, (3,)).fetchall() == [(3, "a3", 3)]
        assert _last(through)[0] == "cache"

        # a column the caches do not read: both planned again, still served, still right
        direct.execute("ALTER TABLE ddl_t ADD COLUMN c int DEFAULT 7")
        direct.execute("UPDATE ddl_t SET b = 33, c = 8 WHERE id = 3")
        eventually(lambda: through.execute(QUERY, (3,)).fetchall() == [(3, "a3", 33)], 10)
        assert _last(through)[0] == "cache"

        # a column ddl1 reads: ddl1 is dropped and PostgreSQL's own error comes back;
        # ddl2 is planned again and goes on serving
        direct.execute("ALTER TABLE ddl_t DROP COLUMN a")
        eventually(lambda: _caches(through) == ["ddl2"], 10)
        with pytest.raises(psycopg.errors.UndefinedColumn):
            through.execute(QUERY, (3,))
        assert through.execute("SELECT id, b FROM ddl_t WHERE id = %s", (3,)).fetchall() \
            == [(3, 33)]
        assert _last(through) == ("cache", "served by cache ddl2")

        # a renamed table: the query's name no longer resolves
        direct.execute("ALTER TABLE ddl_t RENAME TO ddl_renamed")
        eventually(lambda: _caches(through) == [], 10)
        with pytest.raises(psycopg.errors.UndefinedTable):
            through.execute("SELECT id, b FROM ddl_t WHERE id = %s", (3,))


def test_ddl_through_weir_stops_cached_reads_until_checked(dbname: str,
                                                           server: InProcessWeir) -> None:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as ddl, \
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as reader:
        ddl.execute(f"CREATE CACHE ddl1 FROM {QUERY.replace('%s', '$1')}")
        assert reader.execute(QUERY, (3,)).fetchall() == [(3, "a3", 3)]
        assert _last(reader)[0] == "cache"
        host = server.server.service.host
        checks = host._trust
        ddl.execute("ALTER TABLE ddl_t DROP COLUMN a")
        # the very next read of *another* session: never the old shape from the cache
        with pytest.raises(psycopg.errors.UndefinedColumn):
            reader.execute(QUERY, (3,))
        assert host._trust > checks
        eventually(lambda: _caches(reader) == [], 10)


def test_prepared_statements_follow_their_cache_through_a_schema_change(
        pg: Any, dbname: str, server: InProcessWeir) -> None:
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin, \
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                            prepare_threshold=0) as conn, \
            psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
        admin.execute(f"CREATE CACHE ddl1 FROM {QUERY.replace('%s', '$1')}")
        for _ in range(2):
            assert conn.execute(QUERY, (3,)).fetchall() == [(3, "a3", 3)]
        assert _last(conn)[0] == "cache"
        registry = server.server.service.registry
        before = registry.caches["ddl1"]
        direct.execute("ALTER TABLE ddl_t ADD COLUMN c int")
        eventually(lambda: registry.caches.get("ddl1") not in (None, before), 10)
        direct.execute("UPDATE ddl_t SET b = 30 WHERE id = 3")
        # the statement prepared before the change is served by the cache planned again
        eventually(lambda: conn.execute(QUERY, (3,)).fetchall() == [(3, "a3", 30)], 10)
        assert _last(conn) == ("cache", "served by cache ddl1")


def test_auto_mode_follows_tables_created_and_altered_upstream(pg: Any, dbname: str) -> None:
    """A table created after weir read its catalog (directly or through weir), or a column
    added, is known within a heartbeat without any admin command: auto mode caches the
    queries over it, and they answer as PostgreSQL does. (Reads poll every 0.1 s.)"""
    pg.psql("CREATE TABLE before_t (id int PRIMARY KEY)", dbname)
    weir = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=2)
    try:
        with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as through, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            def served(sql: str, params: tuple[Any, ...], want: list[Any]) -> bool:
                # a new session each time: a session that already sent the statement may
                # keep forwarding it from its own memo (see docs/sql-support.md)
                with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
                    try:
                        rows = conn.execute(sql, params).fetchall()
                    except psycopg.errors.UndefinedColumn:
                        return False
                    assert rows == want
                    return _last(conn)[0] == "cache"

            through.execute("SELECT 1 FROM before_t")  # weir has read its catalog by now
            direct.execute("CREATE TABLE n1 (id int PRIMARY KEY, v text)")
            direct.execute("INSERT INTO n1 VALUES (1, 'one'), (2, 'two')")
            eventually(lambda: served("SELECT id, v FROM n1 WHERE id = %s", (2,),
                                      [(2, "two")]), 10, interval=0.1)
            assert served("SELECT id, v FROM n1 WHERE id = %s", (1,), [(1, "one")])

            through.execute("CREATE TABLE n2 (id int PRIMARY KEY, v int)")  # through weir
            through.execute("INSERT INTO n2 VALUES (5, 50)")
            eventually(lambda: served("SELECT v FROM n2 WHERE id = %s", (5,), [(50,)]), 10,
                       interval=0.1)

            direct.execute("ALTER TABLE before_t ADD COLUMN w int")
            direct.execute("INSERT INTO before_t VALUES (3, 30)")
            eventually(lambda: served("SELECT id, w FROM before_t WHERE id = %s", (3,),
                                      [(3, 30)]), 10, interval=0.1)
    finally:
        weir.stop()
