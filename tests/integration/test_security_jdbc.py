"""Issue 20's reproductions through JDBC, which sends every statement over the extended
protocol (``test_security_identity`` has SET ROLE): search_path changed with a plain
Statement, schema USAGE, a role reset, column grants and weir's admin commands. Each script
runs directly against PostgreSQL and through weir; the answers must be the same (the admin
commands, which PostgreSQL does not know, must be refused with 42501)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.integration.test_security_identity import World, world

__all__ = ["world"]  # (the fixture, shared with test_security_identity)

JAR = Path("/usr/share/java/postgresql.jar")

#: runs the script on standard input, a line per step: ``x SQL`` executes a Statement,
#: ``p SQL`` runs a PreparedStatement (the integer 1 bound to its parameter, if any); prints the
#: rows (``row a,b``) or the SQLSTATE of the error (``error 42501``) of each step
JAVA = """
import java.io.*;
import java.sql.*;
public class WeirScript {
  public static void main(String[] a) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    try (Connection c = DriverManager.getConnection(a[0], a[1], "")) {
      for (String line; (line = in.readLine()) != null; ) {
        String sql = line.substring(2);
        try {
          if (line.startsWith("x ")) {
            try (Statement st = c.createStatement()) { st.execute(sql); }
            System.out.println("ok");
            continue;
          }
          try (PreparedStatement ps = c.prepareStatement(sql)) {
            if (sql.indexOf('?') >= 0) { ps.setInt(1, 1); }
            try (ResultSet rs = ps.executeQuery()) {
              StringBuilder out = new StringBuilder("rows");
              while (rs.next()) { out.append(" ").append(rs.getString(1)); }
              System.out.println(out);
            }
          }
        } catch (SQLException e) {
          System.out.println("error " + e.getSQLState());
        }
      }
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


def _run(classes: Path, port: int, dbname: str, user: str, script: list[str]) -> list[str]:
    url = f"jdbc:postgresql://127.0.0.1:{port}/{dbname}?sslmode=disable"
    proc = subprocess.run(["java", "-cp", f"{JAR}:{classes}", "WeirScript", url, user],
                          input="\n".join(script) + "\n", capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _same(world: World, classes: Path, user: str, script: list[str]) -> list[str]:
    direct = _run(classes, world.pg.port, world.dbname, user, script)
    through = _run(classes, world.server.port, world.dbname, user, script)
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
