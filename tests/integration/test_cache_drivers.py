"""Drivers read caches unchanged, and the bytes weir sends equal PostgreSQL's.

Each driver reads a cached query through weir; EXPLAIN LAST STATEMENT (or SHOW WEIR STATUS
hit counts) proves the cache answered, and the result equals the direct upstream answer.
The raw-protocol test compares DataRow bytes in text and binary format message by message.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import psycopg2
import pytest
import sqlalchemy as sa

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.support import InProcessWeir

SCHEMA = """
CREATE TABLE items (
  id int PRIMARY KEY, grp int NOT NULL, name text, price numeric(10,2), ratio float8,
  big int8, flag bool, made date, seen timestamptz, uid uuid, raw bytea, doc jsonb,
  tags text[]);
INSERT INTO items
SELECT g, g % 5, 'item ' || g, g * 1.25, g / 7.0, g * 1000000007::int8, g % 2 = 0,
       date '2020-01-01' + g, timestamptz '2024-03-10 01:30:00+00' + g * interval '1 hour',
       md5(g::text)::uuid, decode(lpad(to_hex(g), 4, '0'), 'hex'),
       jsonb_build_object('g', g, 'name', 'x' || g), ARRAY['a' || g, NULL, 'b']
FROM generate_series(1, 60) g;
"""
COLUMNS = "id, grp, name, price, ratio, big, flag, made, seen, uid, raw, doc"


@pytest.fixture
def cached(pg: Any, dbname: str) -> Any:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute(f"CREATE CACHE by_grp FROM SELECT {COLUMNS} FROM items WHERE grp = 1")
        conn.execute("CREATE CACHE by_id FROM SELECT name, price FROM items WHERE id = $1")
        conn.execute(
            f"CREATE CACHE ordered FROM SELECT {COLUMNS} FROM items WHERE grp = $1 ORDER BY id"
        )
        conn.execute(
            "CREATE CACHE jdbc FROM SELECT id, name, price FROM items WHERE grp = $1 ORDER BY id"
        )
    try:
        yield server, dbname
    finally:
        server.stop()


def _bag(rows: list[Any]) -> list[str]:
    return sorted(map(repr, rows))


def _last(conn: Any) -> str:
    cur = conn.cursor()
    cur.execute("EXPLAIN LAST STATEMENT")
    return str(cur.fetchone()[0])


def test_psycopg3_text_simple_and_extended(pg: Any, cached: Any) -> None:
    server, dbname = cached
    with (
        psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as through,
        psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct,
    ):
        for g in (1, 2, 3, 1):
            simple = f"SELECT {COLUMNS} FROM items WHERE grp = {g}"
            assert _bag(through.execute(simple).fetchall()) == _bag(
                direct.execute(simple).fetchall()
            )
            assert _last(through) == "cache"
        for i in range(8):  # psycopg prepares after 5 executions: named statements
            sql = f"SELECT {COLUMNS} FROM items WHERE grp = %s"
            got = through.execute(sql, (i % 5,)).fetchall()
            assert _bag(got) == _bag(direct.execute(sql, (i % 5,)).fetchall())
            assert _last(through) == "cache"
        sql = f"SELECT {COLUMNS} FROM items WHERE grp = %s ORDER BY id"
        got = through.execute(sql, (2,), binary=True).fetchall()
        assert got == direct.execute(sql, (2,)).fetchall()
        assert _last(through) == "cache"


def test_asyncpg_binary(pg: Any, cached: Any) -> None:
    server, dbname = cached

    async def run() -> None:
        through = await asyncpg.connect(server.dsn(dbname=dbname))
        direct = await asyncpg.connect(pg.dsn(dbname=dbname))
        try:
            for g in (0, 1, 4):
                sql = f"SELECT {COLUMNS} FROM items WHERE grp = $1 ORDER BY id"
                assert await through.fetch(sql, g) == await direct.fetch(sql, g)
                assert (await through.fetchrow("EXPLAIN LAST STATEMENT"))[0] == "cache"
            stmt = await through.prepare("SELECT name, price FROM items WHERE id = $1")
            for i in (3, 7, 3):
                assert await stmt.fetchrow(i) == await direct.fetchrow(
                    "SELECT name, price FROM items WHERE id = $1", i
                )
            async with through.transaction():  # cursors need a transaction: upstream
                rows = [
                    r
                    async for r in through.cursor(
                        f"SELECT {COLUMNS} FROM items WHERE grp = $1", 2, prefetch=3
                    )
                ]
            assert len(rows) == 12
        finally:
            await through.close()
            await direct.close()

    asyncio.run(run())


def test_psycopg2_and_sqlalchemy(pg: Any, cached: Any) -> None:
    server, dbname = cached
    conn = psycopg2.connect(server.dsn(dbname=dbname))
    conn.autocommit = True
    direct = psycopg2.connect(pg.dsn(dbname=dbname))
    try:
        cur, dcur = conn.cursor(), direct.cursor()
        cur.execute(f"SELECT {COLUMNS} FROM items WHERE grp = %s ORDER BY id", (3,))
        dcur.execute(f"SELECT {COLUMNS} FROM items WHERE grp = %s ORDER BY id", (3,))
        assert cur.fetchall() == dcur.fetchall()
        assert _last(conn) == "cache"
    finally:
        conn.close()
        direct.close()
    engine = sa.create_engine(
        server.dsn(dbname=dbname).replace("postgresql://", "postgresql+psycopg2://")
    )
    with engine.connect() as sconn:
        sconn.execution_options(isolation_level="AUTOCOMMIT")
        rows = sconn.execute(sa.text("SELECT name, price FROM items WHERE id = :i"), {"i": 9})
        assert [tuple(r) for r in rows] == [("item 9", pytest.approx(11.25))]
    engine.dispose()


def _exchange(port: int, dbname: str, messages: list[bytes]) -> list[object]:
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    framer = Framer(1 << 30)
    sock.sendall(fe.StartupMessage({"user": "postgres", "database": dbname}).encode())

    def until_ready() -> list[object]:
        out: list[object] = []
        while True:
            item = framer.next()
            if item is None:
                framer.feed(sock.recv(65536))
                continue
            msg = be.decode_backend(*item)
            out.append(msg)
            if isinstance(msg, be.ReadyForQuery):
                return out

    until_ready()
    sock.sendall(b"".join(messages))
    answer = until_ready()
    sock.close()
    return answer


@pytest.mark.parametrize("fmt", [0, 1])
def test_datarow_bytes_equal_postgres(pg: Any, cached: Any, fmt: int) -> None:
    server, dbname = cached
    batch = [
        fe.Parse("", f"SELECT {COLUMNS} FROM items WHERE grp = $1 ORDER BY id", (23,)).encode(),
        fe.Bind("", "", (0,), (b"1",), (fmt,)).encode(),
        fe.Describe("P", "").encode(),
        fe.Execute("", 5).encode(),
        fe.Execute("", 0).encode(),
        fe.Sync().encode(),
    ]
    # both sides get the same bytes; weir answers from the cache "ordered"
    through = _exchange(server.port, dbname, batch)
    direct = _exchange(pg.port, dbname, batch)
    assert [type(m).__name__ for m in through] == [type(m).__name__ for m in direct]
    assert [m.encode() for m in through] == [m.encode() for m in direct]  # type: ignore[attr-defined]
    assert any(isinstance(m, be.PortalSuspended) for m in through)
    with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        status = dict(conn.execute("SHOW WEIR STATUS").fetchall())
        assert int(status["hits"]) + int(status["misses"]) >= 1


JAVA = """
import java.sql.*;
public class WeirJdbc {
  public static void main(String[] a) throws Exception {
    try (Connection c = DriverManager.getConnection(a[0], "postgres", "")) {
      PreparedStatement ps = c.prepareStatement(
          "SELECT id, name, price FROM items WHERE grp = ? ORDER BY id");
      for (int round = 0; round < 7; round++) {
        ps.setInt(1, round % 5);
        try (ResultSet rs = ps.executeQuery()) {
          StringBuilder sb = new StringBuilder();
          while (rs.next()) sb.append(rs.getInt(1)).append('|').append(rs.getString(2))
                              .append('|').append(rs.getBigDecimal(3)).append(';');
          System.out.println(sb);
        }
        if (a.length < 2) continue;
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("EXPLAIN LAST STATEMENT")) {
          rs.next(); System.out.println("route " + rs.getString(1));
        }
      }
    }
  }
}
"""


def test_jdbc(pg: Any, cached: Any, tmp_path: Path) -> None:
    jar = Path("/usr/share/java/postgresql.jar")
    if not jar.exists() or shutil.which("javac") is None:
        pytest.skip("JDBC driver or JDK not installed (make install installs the driver)")
    server, dbname = cached
    (tmp_path / "WeirJdbc.java").write_text(JAVA)
    subprocess.run(
        ["javac", "-d", str(tmp_path), str(tmp_path / "WeirJdbc.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )

    def run(port: int, *extra: str) -> list[str]:
        url = f"jdbc:postgresql://127.0.0.1:{port}/{dbname}?sslmode=disable"
        proc = subprocess.run(
            ["java", "-cp", f"{jar}:{tmp_path}", "WeirJdbc", url, *extra],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    through, direct = run(server.port, "explain"), run(pg.port)
    assert [x for x in through if not x.startswith("route")] == [
        x for x in direct if not x.startswith("route")
    ]
    routes = [x for x in through if x.startswith("route")]
    assert routes.count("route cache") >= 5, routes
