"""weir's SQL commands are for admins (issue 20, repro 5): the upstream URL's role,
superusers, or the roles ``--admin-roles`` names. Others get 42501; SHOW shows literal values
only when asked WITH LITERALS."""

from __future__ import annotations

from typing import Any

import asyncpg
import psycopg
import pytest

from tests.support import InProcessWeir

COMMANDS = (
    "CREATE CACHE FROM SELECT v FROM notes WHERE id = $1",
    "EXPLAIN CREATE CACHE FROM SELECT v FROM notes WHERE id = $1",
    "DROP CACHE notes_v",
    "DROP ALL CACHES",
    "SHOW CACHES",
    "SHOW PROXIED QUERIES",
    "SHOW PROXIED SUPPORTED QUERIES",
    "SHOW WEIR STATUS",
    "SHOW WEIR TABLES",
)


def _setup(pg: Any, dbname: str) -> tuple[str, str]:
    bob, admin = f"bob_{dbname}", f"ops_{dbname}"
    pg.psql(f"CREATE ROLE {bob} LOGIN; CREATE ROLE {admin} LOGIN")
    pg.psql("CREATE TABLE notes (id int PRIMARY KEY, v text);"
            "INSERT INTO notes VALUES (1, 'alice-password-hunter2');"
            f"GRANT SELECT ON notes TO {bob}, {admin}", dbname)
    return bob, admin


def test_admin_commands_are_refused_to_other_roles(pg: Any, dbname: str) -> None:
    bob, _ = _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute("CREATE CACHE notes_v FROM SELECT v FROM notes WHERE id = $1")
        with psycopg.connect(server.dsn(bob, dbname), autocommit=True) as conn:
            for command in COMMANDS:
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="admin roles"):
                    conn.execute(command)
            assert conn.execute("EXPLAIN LAST STATEMENT").fetchone() is not None
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # extended protocol
                conn.execute("DROP ALL CACHES", prepare=True)

        async def extended() -> None:
            conn = await asyncpg.connect(server.dsn(bob, dbname))
            try:
                with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                    await conn.fetch("DROP ALL CACHES")
            finally:
                await conn.close()

        import asyncio
        asyncio.run(extended())
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            assert [r[0] for r in owner.execute("SHOW CACHES")] == ["notes_v"]
            # the admin (the upstream URL's role, here a superuser) becomes bob: no admin
            owner.execute(f"SET ROLE {bob}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                owner.execute("DROP ALL CACHES")
    finally:
        server.stop()


def test_admin_roles_setting_and_literals(pg: Any, dbname: str) -> None:
    bob, admin = _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), admin_roles=admin)
    try:
        with psycopg.connect(server.dsn(admin, dbname), autocommit=True) as ops, \
                psycopg.connect(server.dsn(bob, dbname), autocommit=True) as conn:
            ops.execute("CREATE CACHE notes_v FROM SELECT v FROM notes "
                        "WHERE v = 'alice-password-hunter2'")
            conn.execute("SELECT id FROM notes WHERE v = 'alice-password-hunter2'")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SHOW PROXIED QUERIES")
            shown = [r[1] for r in ops.execute("SHOW PROXIED QUERIES")]
            assert shown and not any("hunter2" in text for text in shown), shown
            cached = [r[2] for r in ops.execute("SHOW CACHES")]
            assert cached and not any("hunter2" in text for text in cached), cached
            shown = [r[1] for r in ops.execute("SHOW PROXIED QUERIES WITH LITERALS")]
            assert any("hunter2" in text for text in shown), shown
            cached = [r[2] for r in ops.execute("SHOW CACHES WITH LITERALS")]
            assert any("hunter2" in text for text in cached), cached
            ops.execute("DROP ALL CACHES")
    finally:
        server.stop()
