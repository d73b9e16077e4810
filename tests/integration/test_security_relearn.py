"""A session whose identity became unknown learns it again (issue 20): after RESET ROLE,
RESET SESSION AUTHORIZATION, RESET search_path or DISCARD ALL, sent alone, its reads are
served from the caches again — and each answer is PostgreSQL's own (every scenario runs
directly against PostgreSQL too). A reset that does not commit, or a login whose own role
or search_path weir does not know, keeps the reads upstream."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.integration.test_security_identity import READ, READ_PG, World, last, world

__all__ = ["world"]  # (the fixture, shared with test_security_identity)

PUBLIC, OTHER = [("public-secret",)], [("other-secret",)]
DENIED = "42501"


def _read(conn: Any) -> Any:
    try:
        return conn.execute(READ, (1,)).fetchall()
    except psycopg.errors.InsufficientPrivilege:
        return DENIED


def _both(world: World, script: Callable[[Any], list[Any]], **connect: Any) -> list[Any]:
    """``script``'s answers through weir (with where the last read was served), after
    checking they are PostgreSQL's own."""
    with psycopg.connect(world.pg.dsn(user=world.app, dbname=world.dbname), autocommit=True,
                         **connect) as direct:
        expected = script(direct)
    with world.connect(world.app, **connect) as conn:
        got = script(conn)
        assert got == expected
        return [*got, last(conn)[0]]


async def _aread(conn: asyncpg.Connection) -> Any:
    """``_read`` over asyncpg."""
    try:
        return [tuple(r) for r in await conn.fetch(READ_PG, 1)]
    except asyncpg.exceptions.InsufficientPrivilegeError:
        return DENIED


def _asyncpg_both(world: World,
                  script: Callable[[asyncpg.Connection], Awaitable[list[Any]]]) -> list[Any]:
    """``script``'s answers over asyncpg through weir, after checking they are the ones it
    gets directly."""
    async def run(dsn: str) -> list[Any]:
        conn = await asyncpg.connect(dsn)
        try:
            return await script(conn)
        finally:
            await conn.close()

    direct = asyncio.run(run(world.pg.dsn(user=world.app, dbname=world.dbname)))
    through = asyncio.run(run(world.async_dsn(world.app)))
    assert through == direct
    return through


def steps(*items: str | Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    """A script for ``_both``: each SQL string executed in turn, each callable called with
    the connection (its answer kept unless None: ``_read`` keeps the read's), then a read
    whose answer is kept last."""
    def script(conn: Any) -> list[Any]:
        kept = []
        for item in items:
            if isinstance(item, str):
                conn.execute(item)
            elif (answer := item(conn)) is not None:
                kept.append(answer)
        return [*kept, _read(conn)]

    return script


@pytest.mark.parametrize("reset", ["RESET ROLE", "SET ROLE NONE", "RESET SESSION AUTHORIZATION",
                                   "DISCARD ALL"])
def test_a_role_reset_learns_the_identity_again(world: World, reset: str) -> None:
    script = steps(f"SET ROLE {world.bob}", _read, reset)
    assert _both(world, script) == [DENIED, PUBLIC, "cache"]


@pytest.mark.parametrize("reset", ["RESET search_path", "SET search_path TO DEFAULT",
                                   "RESET ALL", "DISCARD ALL"])
def test_a_search_path_reset_learns_it_again(world: World, reset: str) -> None:
    script = steps("SET search_path = other, public", _read, reset)
    assert _both(world, script) == [OTHER, PUBLIC, "cache"]


def test_a_reset_rolled_back_keeps_the_reads_upstream(world: World) -> None:
    script = steps(f"SET ROLE {world.bob}", "BEGIN", "RESET ROLE", "ROLLBACK")
    assert _both(world, script) == [DENIED, "upstream"]


def test_a_reset_followed_by_a_change_in_the_same_query(world: World) -> None:
    script = steps(f"SET ROLE {world.bob}", f"RESET ROLE; SET ROLE {world.bob}")
    assert _both(world, script) == [DENIED, "upstream"]


def test_a_role_set_at_startup_is_not_learnt_again(world: World) -> None:
    script = steps(_read, "RESET ROLE")  # back to the startup value: still bob
    assert _both(world, script, options=f"-c role={world.bob}") == [DENIED, DENIED, "upstream"]


def test_asyncpg_learns_it_again_after_a_simple_reset(world: World) -> None:
    """asyncpg: SET ROLE over the extended protocol (``fetch``), RESET ROLE as a simple
    Query (``execute`` without arguments)."""
    async def script(conn: asyncpg.Connection) -> list[Any]:
        await conn.fetch(f"SET ROLE {world.bob}")
        denied = await _aread(conn)
        await conn.execute("RESET ROLE")
        return [denied, await _aread(conn)]

    assert _asyncpg_both(world, script) == [DENIED, PUBLIC]
    with world.connect(world.app) as conn:  # (the same login, on another session: unaffected)
        assert _read(conn) == PUBLIC and last(conn)[0] == "cache"


@pytest.mark.parametrize("reset", ["RESET ROLE", "DISCARD ALL"])
def test_an_extended_protocol_reset_learns_it_again(world: World, reset: str) -> None:
    """asyncpg's ``fetch`` and psycopg's prepared statements send the reset over the
    extended protocol."""
    async def script(dsn: str, through: bool) -> list[Any]:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.fetch(f"SET ROLE {world.bob}")
            try:  # (prepared while the identity is unknown: adopted again after the reset)
                denied: Any = await conn.fetch(READ_PG, 1)
            except asyncpg.exceptions.InsufficientPrivilegeError:
                denied = DENIED
            await conn.fetch(reset)
            rows = [tuple(r) for r in await conn.fetch(READ_PG, 1)]
            if through:
                rows.append((await conn.fetchrow("EXPLAIN LAST STATEMENT"))[0])
            return [denied, rows]
        finally:
            await conn.close()

    if reset == "RESET ROLE":  # (after DISCARD ALL, asyncpg's own statement cache is stale)
        direct = asyncio.run(script(world.pg.dsn(user=world.app, dbname=world.dbname), False))
        assert direct == [DENIED, PUBLIC]
        assert asyncio.run(script(world.async_dsn(world.app), True)) == [
            DENIED, [*PUBLIC, "cache"]]

    def prepared(conn: Any) -> list[Any]:
        conn.execute(f"SET ROLE {world.bob}", prepare=True)
        denied = _read(conn)
        conn.execute(reset, prepare=True)
        return [denied, _read(conn)]

    assert _both(world, prepared) == [DENIED, PUBLIC, "cache"]
