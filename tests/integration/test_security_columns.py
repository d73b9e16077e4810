"""Column-level privileges (issue 20): a role granted SELECT on some columns only (``GRANT
SELECT (id) ON t``) gets through weir exactly what PostgreSQL gives it — the rows of a read
of its columns, 42501 for a read of another — whether or not a cache covers the read. weir
serves from a cache only roles with SELECT on the whole table or on every one of its columns
(``proxy.grants``); a role with some columns only is answered by PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg

from tests.support import InProcessWeir, eventually, weir_over

READS = {  # the cached reads, and one the caches do not cover
    "id": "SELECT id FROM secret WHERE id = $1",
    "v": "SELECT v FROM secret WHERE id = $1",
    "both": "SELECT id, v FROM secret WHERE id = $1",
}
DENIED = "42501"
FULL = {"id": [(1,)], "v": [("column-secret",)], "both": [(1, "column-secret")]}


@contextlib.contextmanager
def _secret_cached(pg: Any, dbname: str, grants: str) -> Iterator[InProcessWeir]:
    """The table ``secret`` (one row) with ``grants``, weir over it, and its caches of the
    ``id`` and ``v`` reads."""
    setup = ("CREATE TABLE secret (id int PRIMARY KEY, v text);"
             "INSERT INTO secret VALUES (1, 'column-secret');" + grants)
    with weir_over(pg, dbname, setup) as server:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"CREATE CACHE secret_id FROM {READS['id']}")
            admin.execute(f"CREATE CACHE secret_v FROM {READS['v']}")
        yield server


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


def _where(dsn: str, read: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(READS[read].replace("$1", "%s"), (1,))
        where = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
        assert where is not None
        return str(where[0])


def test_column_grants_get_what_postgresql_gives(pg: Any, dbname: str) -> None:
    carol, owner_role = f"carol_{dbname}", f"full_{dbname}"
    pg.psql(f"CREATE ROLE {carol} LOGIN; CREATE ROLE {owner_role} LOGIN")
    grants = f"GRANT SELECT (id) ON secret TO {carol}; GRANT SELECT ON secret TO {owner_role}"
    with _secret_cached(pg, dbname, grants) as server:
        for role, expected in ((owner_role, FULL),
                               (carol, {"id": [(1,)], "v": DENIED, "both": DENIED})):
            for read in (_psycopg, _asyncpg):
                assert read(pg.dsn(user=role, dbname=dbname)) == expected, (role, read)
                assert read(server.dsn(role, dbname)) == expected, (role, read)
        assert _where(server.dsn(carol, dbname), "id") == "upstream"  # (its rows: above)
        assert _where(server.dsn(owner_role, dbname), "v") == "cache"


def test_every_column_granted_is_served_from_the_cache(pg: Any, dbname: str) -> None:
    """A role granted SELECT on each column (no table grant) is served from the caches, as
    PostgreSQL allows it every read; once one of its columns is revoked (through weir, or
    directly upstream), a read naming that column gets PostgreSQL's 42501 again, and a read
    of its other columns the rows (upstream: a role holding some columns only)."""
    dave = f"dave_{dbname}"
    pg.psql(f"CREATE ROLE {dave} LOGIN")
    with _secret_cached(pg, dbname, f"GRANT SELECT (id, v) ON secret TO {dave}") as server:
        for read in (_psycopg, _asyncpg):
            assert read(pg.dsn(user=dave, dbname=dbname)) == FULL, read
            assert read(server.dsn(dave, dbname)) == FULL, read
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
