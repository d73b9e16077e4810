"""Issue 20's reproductions through JDBC, which sends every statement over the extended
protocol (``test_security_identity`` has SET ROLE): search_path changed with a plain
Statement, schema USAGE, a role reset, column grants and weir's admin commands. Each script
runs directly against PostgreSQL and through weir; the answers must be the same (the admin
commands, which PostgreSQL does not know, must be refused with 42501)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.test_security_identity import World, _after_a_heartbeat, world
from tests.support import InProcessWeir, eventually

__all__ = ["world"]  # (the fixture, shared with test_security_identity)

JAR = Path("/usr/share/java/postgresql.jar")

#: runs the script on standard input, a line per step: ``x SQL`` executes a Statement,
#: ``p SQL`` runs a PreparedStatement (the integer 1 bound to its parameter, if any), ``s
#: VALUE|SQL`` one with the string VALUE bound; prints the rows (``rows a b``) or the SQLSTATE
#: of the error (``error 42501``) of each step (``error`` alone: the login failed so)
JAVA = """
import java.io.*;
import java.sql.*;
public class WeirScript {
  public static void main(String[] a) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    PrintStream out8 = new PrintStream(System.out, true, "UTF-8");
    Connection c;
    try {
      c = DriverManager.getConnection(a[0], a[1], "");
    } catch (SQLException e) {
      out8.println("login error " + e.getSQLState());
      return;
    }
    try {
      for (String line; (line = in.readLine()) != null; ) {
        String sql = line.substring(2);
        String value = null;
        if (line.startsWith("s ")) {
          value = sql.substring(0, sql.indexOf('|'));
          sql = sql.substring(sql.indexOf('|') + 1);
        }
        try {
          if (line.startsWith("x ")) {
            try (Statement st = c.createStatement()) { st.execute(sql); }
            out8.println("ok");
            continue;
          }
          try (PreparedStatement ps = c.prepareStatement(sql)) {
            if (value != null) { ps.setString(1, value); }
            else if (sql.indexOf('?') >= 0) { ps.setInt(1, 1); }
            try (ResultSet rs = ps.executeQuery()) {
              StringBuilder out = new StringBuilder("rows");
              while (rs.next()) { out.append(" ").append(rs.getString(1)); }
              out8.println(out);
            }
          }
        } catch (SQLException e) {
          out8.println("error " + e.getSQLState());
        }
      }
    } finally {
      c.close();
    }
  }
}
"""
READ = "p SELECT v FROM secret WHERE id = ?"


@pytest.fixture
def jdbc(tmp_path: Path) -> Path:
    assert JAR.exists() and shutil.which("javac"), "make install installs the JDBC driver"
    (tmp_path / "WeirScript.java").write_text(JAVA)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "WeirScript.java")],
                   check=True, capture_output=True, timeout=120)
    return tmp_path


def _run(classes: Path, port: int, dbname: str, user: str, script: list[str],
         options: str = "") -> list[str]:
    url = f"jdbc:postgresql://127.0.0.1:{port}/{dbname}?sslmode=disable{options}"
    proc = subprocess.run(["java", "-Dfile.encoding=UTF-8", "-cp", f"{JAR}:{classes}",
                           "WeirScript", url, user],
                          input="\n".join(script) + "\n", capture_output=True,
                          encoding="utf-8", timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _same(world: World, classes: Path, user: str, script: list[str],
          options: str = "") -> list[str]:
    direct = _run(classes, world.pg.port, world.dbname, user, script, options)
    through = _run(classes, world.server.port, world.dbname, user, script, options)
    assert through == direct, (script, direct, through)
    return through


def test_search_path_and_role_reset_through_jdbc(world: World, jdbc: Path) -> None:
    script = [READ, "x SET search_path = other, public", READ, "x RESET search_path", READ,
              f"x SET ROLE {world.bob}", READ, "x RESET ROLE", READ,
              "x DISCARD ALL", READ]
    assert _same(world, jdbc, world.app, script) == [
        "rows public-secret", "ok", "rows other-secret", "ok", "rows public-secret",
        "ok", "error 42501", "ok", "rows public-secret", "ok", "rows public-secret"]


def test_schema_usage_and_column_grants_through_jdbc(world: World, jdbc: Path) -> None:
    """bob: SELECT on other.secret without USAGE on ``other``, SELECT on secret's id only;
    caches cover every read."""
    world.pg.psql(f"GRANT SELECT ON other.secret TO {world.bob};"
                  f"GRANT SELECT (id) ON secret TO {world.bob}", world.dbname)
    other = "p SELECT v FROM other.secret WHERE id = ?"
    with psycopg.connect(world.server.dsn(dbname=world.dbname), autocommit=True) as owner:
        owner.execute("CREATE CACHE other_v FROM SELECT v FROM other.secret WHERE id = $1")
        owner.execute("CREATE CACHE secret_id FROM SELECT id FROM secret WHERE id = $1")
    assert _same(world, jdbc, world.app, [other]) == [
        "rows other-secret"]
    script = [other, READ, "p SELECT id FROM secret WHERE id = ?"]
    assert _same(world, jdbc, world.bob, script) == [
        "error 42501", "error 42501", "rows 1"]
    served = _run(jdbc, world.server.port, world.dbname, world.app,
                  [other, "p EXPLAIN LAST STATEMENT"])
    assert served == ["rows other-secret", "rows cache"]  # (the caches do serve app)


def test_admin_commands_through_jdbc(world: World, jdbc: Path) -> None:
    out = _run(jdbc, world.server.port, world.dbname, world.app,
               ["x DROP ALL CACHES", "p SHOW WEIR TABLES", "x SHOW WEIR STATUS", READ,
                "p SHOW CACHES"])
    # (a non-admin's SHOW CACHES lists the caches over statements it sent upstream: none)
    assert out == ["error 42501", "error 42501", "error 42501", "rows public-secret", "rows"]


def test_a_role_reset_through_jdbc_is_served_from_the_cache_again(world: World,
                                                                   jdbc: Path) -> None:
    out = _run(jdbc, world.server.port, world.dbname, world.app,
               [f"x SET ROLE {world.bob}", READ, "p EXPLAIN LAST STATEMENT", "x RESET ROLE",
                READ, "p EXPLAIN LAST STATEMENT"])
    assert out == ["ok", "error 42501", "rows upstream", "ok", "rows public-secret",
                   "rows cache"]


def test_revoke_inside_a_transaction_through_jdbc(world: World, jdbc: Path) -> None:
    """The owner revokes app's SELECT inside a transaction through weir: JDBC reads before
    the COMMIT get the row (as PostgreSQL gives it), after it 42501 (not a remembered
    verdict)."""
    with psycopg.connect(world.server.dsn(dbname=world.dbname), autocommit=True) as owner:
        owner.execute("BEGIN")
        owner.execute(f"REVOKE SELECT ON secret FROM {world.app}")
        before = _run(jdbc, world.server.port, world.dbname, world.app, [READ, READ])
        owner.execute("COMMIT")
    after = _run(jdbc, world.server.port, world.dbname, world.app, [READ])
    direct = _run(jdbc, world.pg.port, world.dbname, world.app, [READ])
    assert before == ["rows public-secret"] * 2
    assert after == direct == ["error 42501"]


# -- reproductions 6-10 ------------------------------------------------------------------------
# (6, memory before login, and 7's login timeout and fd limit are transport limits no driver
# reaches: tests/integration/test_security_limits.py drives them with raw sockets)


def test_too_many_clients_through_jdbc(pg: Any, dbname: str, jdbc: Path) -> None:
    """7: one client more than ``--max-client-connections`` gets PostgreSQL's 53300."""
    server = InProcessWeir.start(pg.dsn(dbname=dbname), max_client_connections=1)
    try:
        with psycopg.connect(server.dsn(dbname=dbname)):
            assert _run(jdbc, server.port, dbname, "postgres", ["p SELECT 1"]) == [
                "login error 53300"]
        eventually(lambda: not server.server.sessions)
        assert _run(jdbc, server.port, dbname, "postgres", ["p SELECT 1"]) == ["rows 1"]
    finally:
        server.stop()


def test_encodings_through_jdbc(world: World, jdbc: Path) -> None:
    """8: non-ASCII text in statements, results and PostgreSQL's error texts (JDBC always
    speaks UTF8): the same answers as PostgreSQL, the session going on."""
    script = ["p SELECT 'café'", "p SELECT * FROM \"tablé\"", "s café|SELECT ?::text",
              "p SELECT v FROM secret WHERE id = ?", "x SELECT 1 FROM \"naïve\"", READ]
    assert _same(world, jdbc, world.app, script) == [
        "rows café", "error 42P01", "rows café", "rows public-secret", "error 42P01",
        "rows public-secret"]


def test_parameters_through_jdbc(world: World, jdbc: Path) -> None:
    """9: string parameters of a cached read decoded as PostgreSQL's int4 input does
    (``stringtype=unspecified``: the type is PostgreSQL's to infer)."""
    read = "SELECT v FROM secret WHERE id = ?"
    values = ["1", " 1", "0_1", "1_0", "\uff11", "\u0661", "3000000000", "+1", "1.0", ""]
    script = [f"s {value}|{read}" for value in values]
    assert _same(world, jdbc, world.app, script, "&stringtype=unspecified") == [
        "rows public-secret", "rows public-secret", "error 22P02", "error 22P02",
        "error 22P02", "error 22P02", "error 22003", "rows public-secret", "error 22P02",
        "error 22P02"]
    served = _run(jdbc, world.server.port, world.dbname, world.app,
                  [f"s 1|{read}", "p EXPLAIN LAST STATEMENT"], "&stringtype=unspecified")
    assert served == ["rows public-secret", "rows cache"]  # (weir does read them itself)


def test_row_security_enabled_upstream_through_jdbc(world: World, jdbc: Path) -> None:
    """10: row security turned on directly upstream after the cache served app: from the
    next heartbeat on, JDBC gets PostgreSQL's answer (no row for a role without a policy)."""
    assert _run(jdbc, world.server.port, world.dbname, world.app,
                [READ, "p EXPLAIN LAST STATEMENT"]) == ["rows public-secret", "rows cache"]
    world.pg.psql("ALTER TABLE secret ENABLE ROW LEVEL SECURITY", world.dbname)
    _after_a_heartbeat(world)
    assert _same(world, jdbc, world.app, [READ]) == ["rows"]
