"""Cached reads obey what PostgreSQL would allow whoever the session is (issue 20, repros 1-4,
10): role and search_path changed by any route, schema USAGE, privilege changes committed
through weir or made directly upstream. Each read is compared with PostgreSQL's own answer
(an InsufficientPrivilege error, or the other schema's row)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg
import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.support import InProcessWeir, eventually

READ = "SELECT v FROM secret WHERE id = %s"
READ_PG = "SELECT v FROM secret WHERE id = $1"


class World:
    """Roles ``app`` (member of ``bob``; SELECT on public.secret and other.secret) and
    ``bob`` (no grant), a weir with a cache over ``secret`` read once by ``app``."""

    def __init__(self, pg: Any, dbname: str, **settings: Any) -> None:
        self.pg, self.dbname = pg, dbname
        self.app, self.bob = f"app_{dbname}", f"bob_{dbname}"
        pg.psql(f"CREATE ROLE {self.bob} LOGIN; CREATE ROLE {self.app} LOGIN IN ROLE {self.bob}")
        pg.psql("CREATE TABLE secret (id int PRIMARY KEY, v text);"
                "INSERT INTO secret VALUES (1, 'public-secret');"
                "CREATE SCHEMA other; CREATE TABLE other.secret (id int PRIMARY KEY, v text);"
                "INSERT INTO other.secret VALUES (1, 'other-secret');"
                f"GRANT SELECT ON secret TO {self.app};"
                f"GRANT USAGE ON SCHEMA other TO {self.app};"
                f"GRANT SELECT ON other.secret TO {self.app}", dbname)
        self.server = InProcessWeir.start(pg.dsn(dbname=dbname), **settings)
        with psycopg.connect(self.server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute(f"CREATE CACHE secret_v FROM {READ_PG}")
        with self.connect(self.app) as conn:  # (its first read may be a miss: upstream)
            eventually(lambda: conn.execute(READ, (1,)).fetchall() == [("public-secret",)]
                       and last(conn)[0] == "cache")

    def connect(self, role: str, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.server.dsn(role, self.dbname), autocommit=True, **kwargs)

    def async_dsn(self, role: str) -> str:
        return str(self.server.dsn(role, self.dbname))


def last(conn: Any) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return (row[0], row[1])


@pytest.fixture
def world(pg: Any, dbname: str) -> Iterator[World]:
    w = World(pg, dbname)
    try:
        yield w
    finally:
        w.server.stop()


def _denied_psycopg(conn: Any) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(READ, (1,))


def _denied_asyncpg(dsn: str, setup: str | None, **connect: Any) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(dsn, **connect)
        try:
            if setup is not None:
                await conn.fetch(setup)  # the extended protocol, as asyncpg always does
            with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                await conn.fetch(READ_PG, 1)
        finally:
            await conn.close()

    asyncio.run(run())


# -- repro 1: role changes ---------------------------------------------------------------------

def test_set_role_over_extended_protocol(world: World) -> None:
    _denied_asyncpg(world.async_dsn(world.app), f"SET ROLE {world.bob}")
    with world.connect(world.app) as conn:  # psycopg's prepared (extended) SET
        conn.execute(f"SET ROLE {world.bob}", prepare=True)
        _denied_psycopg(conn)


def test_set_config_role(world: World) -> None:
    with world.connect(world.app) as conn:
        conn.execute(f"SELECT set_config('role', '{world.bob}', false)")
        _denied_psycopg(conn)
    with world.connect(world.app) as conn:  # mixed case, extended protocol, a parameter
        conn.execute("SELECT Set_Config('role', %s, false)", (world.bob,))
        _denied_psycopg(conn)


def test_role_in_startup_parameters(world: World) -> None:
    with world.connect(world.app, options=f"--role={world.bob}") as conn:
        _denied_psycopg(conn)
    _denied_asyncpg(world.async_dsn(world.app), None, server_settings={"role": world.bob})


def test_role_default_set_upstream(world: World) -> None:
    world.pg.psql(f"ALTER ROLE {world.app} SET role = '{world.bob}'")
    try:
        _after_a_heartbeat(world)  # made directly upstream: followed from the next heartbeat
        with world.connect(world.app) as conn:
            _denied_psycopg(conn)
        with psycopg.connect(world.server.dsn(dbname=world.dbname), autocommit=True) as owner:
            owner.execute(f"ALTER ROLE {world.app} SET role = '{world.app}'")  # through weir
            owner.execute(f"ALTER ROLE {world.app} SET role = '{world.bob}'")
        with world.connect(world.app) as conn:  # through weir: followed at once
            _denied_psycopg(conn)
    finally:
        world.pg.psql(f"ALTER ROLE {world.app} RESET role")


@pytest.mark.parametrize("text", ["SELECT 1; SET ROLE {bob}", "/* c */ SET ROLE {bob}",
                                  "-- c\nSET ROLE {bob}", "SET /* c */ ROLE {bob}"])
def test_role_changed_behind_a_first_statement_or_a_comment(world: World, text: str) -> None:
    with world.connect(world.app) as conn:  # a simple Query (no parameters)
        for _ in range(2):  # (plain Queries before it: weir knows what they say)
            conn.execute("SELECT 2")
        conn.execute(text.format(bob=world.bob))
        _denied_psycopg(conn)
    if not text.startswith("SELECT 1;"):  # (one statement: also as a prepared statement)
        with world.connect(world.app) as conn:
            conn.execute(text.format(bob=world.bob), prepare=True)
            _denied_psycopg(conn)


def test_role_changed_inside_do_block(world: World) -> None:
    with world.connect(world.app) as conn:
        conn.execute(f"DO $$ BEGIN EXECUTE 'SET ROLE {world.bob}'; END $$")
        _denied_psycopg(conn)


@pytest.mark.parametrize("read_your_writes", ["on", "off"])
def test_role_changed_by_a_user_function(pg: Any, dbname: str, read_your_writes: str) -> None:
    world = World(pg, dbname, read_your_writes=read_your_writes)
    try:
        pg.psql("CREATE FUNCTION become(r text) RETURNS text LANGUAGE sql STABLE "
                "AS $$ SELECT set_config('role', r, false) $$", dbname)
        _after_a_heartbeat(world)  # created directly upstream: known from the next heartbeat
        with world.connect(world.app) as conn:
            conn.execute(f"SELECT become('{world.bob}')")
            _denied_psycopg(conn)
    finally:
        world.server.stop()


def test_role_changed_by_a_user_function_before_caching_ran(pg: Any, dbname: str) -> None:
    """Before the first cache, weir does not watch calls of user functions that may change
    the role: a session that logged in then reads upstream once such functions exist, until
    a reset it sends alone gives its identity back; a later login is served from the cache."""
    app, bob = f"app_{dbname}", f"bob_{dbname}"
    pg.psql(f"CREATE ROLE {bob} LOGIN; CREATE ROLE {app} LOGIN IN ROLE {bob}")
    pg.psql("CREATE TABLE secret (id int PRIMARY KEY, v text);"
            "INSERT INTO secret VALUES (1, 'public-secret');"
            f"GRANT SELECT ON secret TO {app};"
            "CREATE FUNCTION become(r text) RETURNS text LANGUAGE sql STABLE "
            "AS $$ SELECT set_config('role', r, false) $$", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(app, dbname), autocommit=True) as early, \
                psycopg.connect(server.dsn(app, dbname), autocommit=True) as plain:
            early.execute(f"SELECT become('{bob}')")  # before any cache: not watched
            with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
                owner.execute(f"CREATE CACHE secret_v FROM {READ_PG}")
            _denied_psycopg(early)  # as PostgreSQL: the session is bob now
            # one that called nothing reads upstream too (weir cannot tell), and exactly
            assert plain.execute(READ, (1,)).fetchall() == [("public-secret",)]
            assert last(plain) == ("upstream", last(plain)[1])
            assert "before caching ran" in last(plain)[1]
            plain.execute("DISCARD ALL")  # sent alone: the identity is the login's again
            _served_from_cache(plain)
        with psycopg.connect(server.dsn(app, dbname), autocommit=True) as later:
            _served_from_cache(later)
    finally:
        server.stop()


def _served_from_cache(conn: Any) -> None:
    """Reads of key 1 come to be answered from the cache (a miss is answered upstream
    while its fill runs), each answer PostgreSQL's."""
    reads: list[tuple[str, str]] = []

    def hit() -> bool:
        assert conn.execute(READ, (1,)).fetchall() == [("public-secret",)]
        reads.append(last(conn))
        return reads[-1][0] == "cache"
    try:
        eventually(hit, timeout=20)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last read: {reads[-1:]}") from None


# -- repro 2: search_path changes --------------------------------------------------------------

def _reads_other(conn: Any) -> None:
    assert conn.execute(READ, (1,)).fetchall() == [("other-secret",)]


def test_search_path_changes_are_followed(world: World) -> None:
    with world.connect(world.app) as conn:
        conn.execute("SELECT set_config('search_path', 'other', false)")
        _reads_other(conn)
    with world.connect(world.app) as conn:
        conn.execute("SET search_path = other", prepare=True)
        _reads_other(conn)
    with world.connect(world.app, options="--search_path=other") as conn:
        _reads_other(conn)

    async def run() -> None:
        conn = await asyncpg.connect(world.async_dsn(world.app))
        try:
            await conn.fetch("SET search_path = other")
            assert [tuple(r) for r in await conn.fetch(READ_PG, 1)] == [("other-secret",)]
        finally:
            await conn.close()

    asyncio.run(run())


# -- repro 3: schema USAGE ---------------------------------------------------------------------

def test_schema_usage_is_checked(pg: Any, dbname: str) -> None:
    bob = f"bob_{dbname}"
    pg.psql(f"CREATE ROLE {bob} LOGIN")
    pg.psql("CREATE SCHEMA priv; CREATE TABLE priv.t2 (id int PRIMARY KEY, v text);"
            f"INSERT INTO priv.t2 VALUES (1, 'x'); GRANT SELECT ON priv.t2 TO {bob}", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute("CREATE CACHE t2 FROM SELECT v FROM priv.t2 WHERE id = $1")
            assert owner.execute("SELECT v FROM priv.t2 WHERE id = %s", (1,)).fetchall() \
                == [("x",)]
        with psycopg.connect(server.dsn(bob, dbname), autocommit=True) as conn, \
                pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT v FROM priv.t2 WHERE id = %s", (1,))
    finally:
        server.stop()


# -- repro 4: REVOKE inside a transaction --------------------------------------------------------

def test_revoke_inside_transaction_takes_effect_at_commit(world: World) -> None:
    with world.connect(world.app) as reader, \
            psycopg.connect(world.server.dsn(dbname=world.dbname), autocommit=True) as owner:
        owner.execute("BEGIN")
        owner.execute(f"REVOKE SELECT ON secret FROM {world.app}")
        # before the COMMIT PostgreSQL still allows the read (weir checks it again)
        assert reader.execute(READ, (1,)).fetchall() == [("public-secret",)]
        assert reader.execute(READ, (1,)).fetchall() == [("public-secret",)]
        owner.execute("COMMIT")
        _denied_psycopg(reader)


# -- repro 10 and the bound for changes made directly upstream -----------------------------------

def _after_a_heartbeat(world: World) -> None:
    """Wait until a heartbeat begun after now has completed its checks."""
    host = world.server.server.service.host
    start = time.monotonic()
    eventually(lambda: host.fresh_as_of > start, timeout=10)


def test_revoke_made_directly_upstream_is_followed_within_a_heartbeat(world: World) -> None:
    with world.connect(world.app) as reader:
        assert reader.execute(READ, (1,)).fetchall() == [("public-secret",)]
        world.pg.psql(f"REVOKE SELECT ON secret FROM {world.app}", world.dbname)
        _after_a_heartbeat(world)
        _denied_psycopg(reader)


def test_row_security_enabled_upstream_is_followed_within_a_heartbeat(world: World) -> None:
    with world.connect(world.app) as reader, \
            psycopg.connect(world.pg.dsn(world.app, world.dbname), autocommit=True) as direct:
        assert reader.execute(READ, (1,)).fetchall() == [("public-secret",)]
        world.pg.psql("ALTER TABLE secret ENABLE ROW LEVEL SECURITY", world.dbname)
        _after_a_heartbeat(world)
        assert direct.execute(READ, (1,)).fetchall() == []
        assert reader.execute(READ, (1,)).fetchall() == []
        assert last(reader)[0] == "upstream"


# -- JDBC: every statement over the extended protocol ----------------------------------------

JAVA = """
import java.sql.*;
public class WeirRole {
  public static void main(String[] a) throws Exception {
    try (Connection c = DriverManager.getConnection(a[0], a[1], "")) {
      PreparedStatement ps = c.prepareStatement("SELECT v FROM secret WHERE id = ?");
      for (int round = 0; round < 2; round++) {
        if (round == 1) {
          try (Statement st = c.createStatement()) { st.execute("SET ROLE " + a[2]); }
        }
        ps.setInt(1, 1);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next(); System.out.println("row " + rs.getString(1));
        } catch (SQLException e) {
          System.out.println("error " + e.getSQLState());
        }
      }
    }
  }
}
"""


def test_set_role_through_jdbc(world: World, tmp_path: Any) -> None:
    import shutil
    import subprocess
    from pathlib import Path

    jar = Path("/usr/share/java/postgresql.jar")
    assert jar.exists() and shutil.which("javac"), "make install installs the JDBC driver"
    (tmp_path / "WeirRole.java").write_text(JAVA)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "WeirRole.java")],
                   check=True, capture_output=True, timeout=120)

    def run(port: int) -> list[str]:
        url = f"jdbc:postgresql://127.0.0.1:{port}/{world.dbname}?sslmode=disable"
        proc = subprocess.run(["java", "-cp", f"{jar}:{tmp_path}", "WeirRole", url, world.app,
                               world.bob], capture_output=True, text=True, timeout=120,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    expected = ["row public-secret", "error 42501"]
    assert run(world.pg.port) == expected
    assert run(world.server.port) == expected


def _function_call(oid: int, *args: bytes) -> bytes:
    """A FunctionCall message: all arguments and the result in text format."""
    body = oid.to_bytes(4, "big") + b"\0\x01\0\0" + len(args).to_bytes(2, "big")
    for arg in args:
        body += len(arg).to_bytes(4, "big") + arg
    body += b"\0\0"
    return b"F" + (len(body) + 4).to_bytes(4, "big") + body


def test_role_changed_by_a_function_call_message(world: World) -> None:
    """The protocol's FunctionCall runs any function by its oid, set_config (2078) too: the
    cached read after it gets PostgreSQL's 42501, as directly."""
    from tests.integration.test_security_encodings import _until_ready

    outcomes = []
    for port in (world.server.port, world.pg.port):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(10)
        framer = Framer()
        with sock:
            sock.sendall(fe.StartupMessage({"user": world.app,
                                            "database": world.dbname}).encode())
            _until_ready(sock, framer)
            sock.sendall(_function_call(2078, b"role", world.bob.encode(), b"false"))
            called = _until_ready(sock, framer)
            assert any(isinstance(m, be.FunctionCallResponse) for m in called), called
            sock.sendall(fe.Query("SELECT v FROM secret WHERE id = 1").encode())
            answer = _until_ready(sock, framer)
            outcomes.append([dict(m.fields)["C"] if isinstance(m, be.ErrorResponse)
                             else type(m).__name__ for m in answer
                             if not isinstance(m, be.ParameterStatus)])
    assert outcomes[0] == outcomes[1] == ["42501", "ReadyForQuery"], outcomes


@pytest.mark.parametrize("through_weir", [False, True])
def test_role_default_changed_between_login_and_first_cached_read(
        world: World, through_weir: bool) -> None:
    """A session logs in under ``ALTER ROLE app SET search_path = other, public``; the default
    is reset (directly upstream, or through weir) before the session's first cached read: the
    session keeps its login's search_path, so it reads other.secret, as PostgreSQL says."""
    app, pg = world.app, world.pg
    pg.psql(f"ALTER ROLE {app} SET search_path = other, public")
    try:
        _after_a_heartbeat(world)
        with psycopg.connect(pg.dsn(user=app, dbname=world.dbname), autocommit=True) as direct, \
                world.connect(app) as conn:
            if through_weir:
                with psycopg.connect(world.server.dsn(dbname=world.dbname),
                                     autocommit=True) as owner:
                    owner.execute(f"ALTER ROLE {app} RESET search_path")
            else:
                pg.psql(f"ALTER ROLE {app} RESET search_path")
                _after_a_heartbeat(world)
            expected = direct.execute(READ, (1,)).fetchall()
            assert expected == [("other-secret",)]
            assert conn.execute(READ, (1,)).fetchall() == expected
            assert last(conn)[0] == "upstream"
        _after_a_heartbeat(world)  # (after DDL through weir, a heartbeat checks the tables)
        with world.connect(app) as conn:  # a new login: the default is gone, known again
            assert conn.execute(READ, (1,)).fetchall() == [("public-secret",)]
            assert last(conn)[0] == "cache"
    finally:
        pg.psql(f"ALTER ROLE {app} RESET search_path")
