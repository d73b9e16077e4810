"""Column-level privileges (issue 20): a role granted SELECT on some columns only (``GRANT
SELECT (id) ON t``) gets through weir exactly what PostgreSQL gives it — the rows of a read
of its columns, 42501 for a read of another — whether or not a cache covers the read. weir
serves from a cache only roles with SELECT on the whole table or on every one of its columns
(``proxy.grants``); a role with some columns only is answered by PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import psycopg

from tests.support import InProcessWeir, eventually

READS = {  # the cached reads, and one the caches do not cover
    "id": "SELECT id FROM secret WHERE id = $1",
    "v": "SELECT v FROM secret WHERE id = $1",
    "both": "SELECT id, v FROM secret WHERE id = $1",
}
DENIED = "42501"


def _psycopg(dsn: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, text in READS.items():
            try:
                out[name] = conn.execute(text.replace("$1", "%s"), (1,)).fetchall()
            except psycopg.errors.InsufficientPrivilege:
                out[name] = DENIED
    return out


def _asyncpg(dsn: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        conn = await asyncpg.connect(dsn)
        out: dict[str, Any] = {}
        try:
            for name, text in READS.items():
                try:
                    out[name] = [tuple(r) for r in await conn.fetch(text, 1)]
                except asyncpg.exceptions.InsufficientPrivilegeError:
                    out[name] = DENIED
        finally:
            await conn.close()
        return out

    return asyncio.run(run())


def test_column_grants_get_what_postgresql_gives(pg: Any, dbname: str) -> None:
    carol, owner_role = f"carol_{dbname}", f"full_{dbname}"
    pg.psql(f"CREATE ROLE {carol} LOGIN; CREATE ROLE {owner_role} LOGIN")
    pg.psql("CREATE TABLE secret (id int PRIMARY KEY, v text);"
            "INSERT INTO secret VALUES (1, 'column-secret');"
            f"GRANT SELECT (id) ON secret TO {carol}; GRANT SELECT ON secret TO {owner_role}",
            dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"CREATE CACHE secret_id FROM {READS['id']}")
            admin.execute(f"CREATE CACHE secret_v FROM {READS['v']}")
        full = {"id": [(1,)], "v": [("column-secret",)], "both": [(1, "column-secret")]}
        for role, expected in ((owner_role, full),
                               (carol, {"id": [(1,)], "v": DENIED, "both": DENIED})):
            for read in (_psycopg, _asyncpg):
                assert read(pg.dsn(user=role, dbname=dbname)) == expected, (role, read)
                assert read(server.dsn(role, dbname)) == expected, (role, read)
        with psycopg.connect(server.dsn(carol, dbname), autocommit=True) as conn:
            conn.execute(READS["id"].replace("$1", "%s"), (1,))
            where = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert where is not None and where[0] == "upstream", where
        with psycopg.connect(server.dsn(owner_role, dbname), autocommit=True) as conn:
            conn.execute(READS["v"].replace("$1", "%s"), (1,))
            where = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert where is not None and where[0] == "cache", where
    finally:
        server.stop()


def _where(dsn: str, read: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(READS[read].replace("$1", "%s"), (1,))
        where = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
        assert where is not None
        return str(where[0])


def test_every_column_granted_is_served_from_the_cache(pg: Any, dbname: str) -> None:
    """A role granted SELECT on each column (no table grant) is served from the caches, as
    PostgreSQL allows it every read; once one of its columns is revoked (through weir, or
    directly upstream), a read naming that column gets PostgreSQL's 42501 again, and a read
    of its other columns the rows (upstream: a role holding some columns only)."""
    dave = f"dave_{dbname}"
    pg.psql(f"CREATE ROLE {dave} LOGIN")
    pg.psql("CREATE TABLE secret (id int PRIMARY KEY, v text);"
            "INSERT INTO secret VALUES (1, 'column-secret');"
            f"GRANT SELECT (id, v) ON secret TO {dave}", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"CREATE CACHE secret_id FROM {READS['id']}")
            admin.execute(f"CREATE CACHE secret_v FROM {READS['v']}")
        full = {"id": [(1,)], "v": [("column-secret",)], "both": [(1, "column-secret")]}
        for read in (_psycopg, _asyncpg):
            assert read(pg.dsn(user=dave, dbname=dbname)) == full, read
            assert read(server.dsn(dave, dbname)) == full, read
        assert _where(server.dsn(dave, dbname), "v") == "cache"
        assert _where(server.dsn(dave, dbname), "id") == "cache"
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"REVOKE SELECT (v) ON secret FROM {dave}")
        partial = {"id": [(1,)], "v": DENIED, "both": DENIED}
        for read in (_psycopg, _asyncpg):
            assert read(pg.dsn(user=dave, dbname=dbname)) == partial, read
            assert read(server.dsn(dave, dbname)) == partial, read
        assert _where(server.dsn(dave, dbname), "id") == "upstream"
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"GRANT SELECT (v) ON secret TO {dave}")
        assert _where(server.dsn(dave, dbname), "v") == "cache"
        pg.psql(f"REVOKE SELECT (id) ON secret FROM {dave}", dbname)  # directly upstream
        eventually(lambda: _psycopg(server.dsn(dave, dbname))
                   == {"id": DENIED, "v": DENIED, "both": DENIED}, timeout=5.0)
        assert _asyncpg(server.dsn(dave, dbname)) == {"id": DENIED, "v": DENIED,
                                                     "both": DENIED}
    finally:
        server.stop()
