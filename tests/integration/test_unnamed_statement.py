"""The unnamed statement prepared in its own round trip (issue: lost writes).

A client that sends ``Parse`` of the unnamed statement with its own ``Sync``, then ``Bind``/
``Execute``/``Sync`` in a second round trip (libpq's ``PQprepare(conn, "", ...)`` then
``PQexecPrepared``; asyncpg without a statement cache, which describes before it executes)
once got answers from the cache of the *previous* unnamed statement, and its writes never
reached PostgreSQL. Each driver runs the same reproduction through weir: every answer is
PostgreSQL's, every write lands, EXPLAIN LAST STATEMENT names the statement that ran last,
and auto mode counts the statements whatever protocol carried them.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.support import InProcessWeir, eventually

SCHEMA = "CREATE TABLE r1 (a int PRIMARY KEY, b int); INSERT INTO r1 VALUES (1, 10), (2, 20);"
CACHED = "SELECT b FROM r1 WHERE a = $1"
OTHER = "SELECT a * 100 AS x FROM r1 WHERE a = $1"
UPDATE = "UPDATE r1 SET b = b + 1 WHERE a = $1 RETURNING b"
INSERT = "INSERT INTO r1 VALUES ($1, 30)"
#: what PostgreSQL has after the reproduction
FINAL = "1|10\n2|21\n3|30\n"


@pytest.fixture
def cached(pg: Any, dbname: str) -> Iterator[tuple[InProcessWeir, str]]:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute(f"CREATE CACHE r1_b FROM {CACHED}")
        yield server, dbname
    finally:
        server.stop()


def _table(pg: Any, dbname: str) -> str:
    return str(pg.psql("SELECT a, b FROM r1 ORDER BY a", dbname))


def test_libpq_prepare_unnamed_then_exec_prepared(pg: Any, cached: Any) -> None:
    server, dbname = cached
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        pgconn = conn.pgconn

        def run(sql: str, param: bytes) -> tuple[bytes | None, bytes | None]:
            res = pgconn.prepare(b"", sql.encode())  # Parse "" + Sync: its own round trip
            assert res.error_message == b"", res.error_message
            res = pgconn.exec_prepared(b"", [param])  # Bind + Execute + Sync
            assert res.error_message == b"", res.error_message
            return (res.get_value(0, 0) if res.ntuples else None), res.command_status

        res = pgconn.exec_params(CACHED.encode(), [b"1"])
        assert res.get_value(0, 0) == b"10"
        assert conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0] == "cache"
        res = pgconn.exec_params(CACHED.encode(), [b"1"])  # the unnamed statement is held
        assert conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0] == "cache"
        assert run(OTHER, b"2") == (b"200", b"SELECT 1")
        assert run(UPDATE, b"2") == (b"21", b"UPDATE 1")
        assert conn.execute("EXPLAIN LAST STATEMENT").fetchone() == (
            "upstream", "unsupported: not a SELECT (UPDATE)")
        assert run(INSERT, b"3") == (None, b"INSERT 0 1")
        # held again, then replaced by a Parse alone: the cached statement no longer answers
        pgconn.exec_params(CACHED.encode(), [b"1"])
        assert run(OTHER, b"1") == (b"100", b"SELECT 1")
    assert _table(pg, dbname) == FINAL


def test_asyncpg_without_statement_cache(pg: Any, cached: Any) -> None:
    """asyncpg with ``statement_cache_size=0`` prepares each query as the unnamed statement
    (Parse, Describe, Sync), then binds and executes it in a second round trip."""
    server, dbname = cached

    async def run() -> None:
        conn = await asyncpg.connect(server.dsn(dbname=dbname), statement_cache_size=0)
        try:
            assert await conn.fetchval(CACHED, 1) == 10
            assert await conn.fetchval(CACHED, 1) == 10
            assert (await conn.fetchrow("EXPLAIN LAST STATEMENT"))[0] == "cache"
            assert await conn.fetchval(OTHER, 2) == 200
            assert await conn.fetchval(UPDATE, 2) == 21
            assert await conn.execute(INSERT, 3) == "INSERT 0 1"
            assert await conn.fetchval(CACHED, 1) == 10
            assert await conn.fetchval(OTHER, 1) == 100
        finally:
            await conn.close()

    asyncio.run(run())
    assert _table(pg, dbname) == FINAL


def test_simple_query_drops_the_unnamed_statement(pg: Any, cached: Any) -> None:
    """PostgreSQL drops the unnamed statement when a simple Query runs, also when weir
    answers that Query from a cache: a later Bind of it fails as it does directly."""
    server, dbname = cached
    for dsn in (server.dsn(dbname=dbname), pg.dsn(dbname=dbname)):
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgconn = conn.pgconn
            pgconn.prepare(b"", CACHED.encode())
            assert pgconn.exec_prepared(b"", [b"1"]).get_value(0, 0) == b"10"
            pgconn.prepare(b"", OTHER.encode())
            pgconn.exec_(b"SELECT b FROM r1 WHERE a = 2")  # cached through weir
            res = pgconn.exec_prepared(b"", [b"1"])
            assert b"unnamed prepared statement does not exist" in res.error_message, dsn


def test_auto_mode_counts_unnamed_statements(pg: Any, dbname: str) -> None:
    """Auto mode counts a query whatever protocol carried it: prepared alone, run after."""
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=3)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            pgconn = conn.pgconn
            pgconn.exec_params(CACHED.encode(), [b"1"])
            for a in (b"1", b"2", b"1", b"2"):
                pgconn.prepare(b"", OTHER.encode())
                assert pgconn.exec_prepared(b"", [a]).error_message == b""

            def caches() -> list[str]:
                return [r[2] for r in conn.execute("SHOW CACHES WITH LITERALS").fetchall()]

            eventually(lambda: any("a * 100" in q for q in caches()), timeout=10)
    finally:
        server.stop()


JAVA = r"""
import java.sql.*;

public class WeirUnnamed {
    static int one(Connection c, String sql, int a) throws SQLException {
        try (PreparedStatement p = c.prepareStatement(sql)) {
            p.getParameterMetaData();  // described before it runs
            p.setInt(1, a);
            try (ResultSet r = p.executeQuery()) { r.next(); return r.getInt(1); }
        }
    }
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "postgres", "")) {
            System.out.println(one(c, "SELECT b FROM r1 WHERE a = ?", 1));
            System.out.println(one(c, "SELECT a * 100 AS x FROM r1 WHERE a = ?", 2));
            System.out.println(one(c, "UPDATE r1 SET b = b + 1 WHERE a = ? RETURNING b", 2));
            try (PreparedStatement p = c.prepareStatement("INSERT INTO r1 VALUES (?, 30)")) {
                p.getParameterMetaData();
                p.setInt(1, 3);
                System.out.println(p.executeUpdate());
            }
            System.out.println(one(c, "SELECT b FROM r1 WHERE a = ?", 1));
            System.out.println(one(c, "SELECT a * 100 AS x FROM r1 WHERE a = ?", 1));
        }
    }
}
"""


def test_jdbc_describe_then_execute(pg: Any, cached: Any, tmp_path: Path) -> None:
    """pgjdbc describes a statement (Parse, Describe, Sync) before it runs it. It parses the
    unnamed statement again for the run, so it did not lose writes before the fix; this
    keeps its path through the same reproduction."""
    jar = Path("/usr/share/java/postgresql.jar")
    if not jar.exists() or shutil.which("javac") is None:
        pytest.skip("JDBC driver or JDK not installed (make install installs the driver)")
    server, dbname = cached
    (tmp_path / "WeirUnnamed.java").write_text(JAVA)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "WeirUnnamed.java")],
                   check=True, capture_output=True, timeout=120)
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/{dbname}?sslmode=disable"
    proc = subprocess.run(["java", "-cp", f"{jar}:{tmp_path}", "WeirUnnamed", url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["10", "200", "21", "1", "10", "100"]
    assert _table(pg, dbname) == FINAL


def test_auto_mode_counts_after_an_unnamed_statement_a_cache_served(pg: Any, dbname: str) -> None:
    """After an unnamed statement a cache served, a Parse of another unnamed statement in its
    own round trip, then PQexecParams of a third query: auto mode counts the third (the stale
    bookkeeping of the unnamed statement once hid it) and makes it a cache."""
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=2)
    third = "SELECT a FROM r1 WHERE b = $1"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            pgconn = conn.pgconn

            def caches() -> list[str]:
                return [r[2] for r in conn.execute("SHOW CACHES WITH LITERALS").fetchall()]

            for a in (b"1", b"2"):
                assert pgconn.exec_params(CACHED.encode(), [a]).error_message == b""
            eventually(lambda: any("r1" in q for q in caches()), timeout=10)
            eventually(lambda: pgconn.exec_params(CACHED.encode(), [b"1"]).get_value(0, 0)
                       == b"10" and conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0]
                       == "cache", timeout=10)
            assert pgconn.prepare(b"", OTHER.encode()).error_message == b""
            assert pgconn.exec_prepared(b"", [b"2"]).get_value(0, 0) == b"200"
            for b in (b"10", b"20", b"10"):
                res = pgconn.exec_params(third.encode(), [b])
                assert res.error_message == b"", res.error_message
            eventually(lambda: any("b = $1" in q for q in caches()), timeout=10)
            assert pgconn.exec_params(third.encode(), [b"20"]).get_value(0, 0) == b"2"
            last = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert last[0] in ("cache", "upstream"), last
    finally:
        server.stop()
