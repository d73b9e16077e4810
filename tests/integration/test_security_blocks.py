"""A session's identity across transaction blocks (issue 20): a change made inside a block
that rolls back, or a ``SET LOCAL`` inside a block that ends either way, leaves the identity
of the block's start, so the reads after the block are served from the caches again; a
change that commits keeps them upstream. Every script runs directly against PostgreSQL too,
each answer compared (the rows, or 42501)."""

from __future__ import annotations

from typing import Any

import asyncpg
import psycopg
import pytest

from tests.integration.test_security_identity import World, world
from tests.integration.test_security_relearn import (
    DENIED,
    OTHER,
    PUBLIC,
    _aread,
    _asyncpg_both,
    _both,
    _read,
    steps,
)

__all__ = ["world"]  # (the fixture, shared with test_security_identity)


def _error(conn: Any) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        conn.execute("SELECT 1/0")


def _who(conn: Any) -> Any:
    return conn.execute("SELECT current_user").fetchall()


@pytest.mark.parametrize("end", ["ROLLBACK", "abort;", "rollback work"])
def test_a_role_set_in_a_block_rolled_back(world: World, end: str) -> None:
    script = steps("BEGIN", f"SET ROLE {world.bob}", _read, end)
    assert _both(world, script) == [DENIED, PUBLIC, "cache"]


def test_a_block_failed_then_rolled_back(world: World) -> None:
    script = steps("BEGIN", f"SET ROLE {world.bob}", _error, "ROLLBACK")
    assert _both(world, script) == [PUBLIC, "cache"]


def test_a_failed_block_committed_is_rolled_back(world: World) -> None:
    """COMMIT of a failed block rolls it back (its tag says ROLLBACK): weir looks at every
    message while a block's identity record is open (``identity.unsettled``), so it sees the
    COMMIT end a failed block and gives the block's start back, as after ROLLBACK."""
    script = steps("BEGIN", f"SET ROLE {world.bob}", _error, "COMMIT")
    assert _both(world, script) == [PUBLIC, "cache"]


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK", "END"])
def test_set_local_role_ends_with_its_block(world: World, end: str) -> None:
    script = steps("BEGIN", f"SET LOCAL ROLE {world.bob}", _who, end)
    assert _both(world, script) == [[(world.bob,)], PUBLIC, "cache"]


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_set_local_role_in_a_block_failed_by_a_read(world: World, end: str) -> None:
    """The read as bob fails, so the block fails: its COMMIT rolls it back."""
    script = steps("BEGIN", f"SET LOCAL ROLE {world.bob}", _read, end)
    assert _both(world, script) == [DENIED, PUBLIC, "cache"]


def test_set_local_search_path_ends_with_its_block(world: World) -> None:
    script = steps("BEGIN", "SET LOCAL search_path = other, public", _read, "COMMIT")
    assert _both(world, script) == [OTHER, PUBLIC, "cache"]


def test_set_local_in_a_driver_transaction(world: World) -> None:
    """psycopg outside autocommit: BEGIN sent by the driver, then commit() and rollback()."""
    def script(conn: Any) -> list[Any]:
        conn.autocommit = False
        conn.execute(f"SET LOCAL ROLE {world.bob}")
        denied = _read(conn)  # (fails the block)
        conn.rollback()
        conn.execute(f"SET LOCAL ROLE {world.bob}")
        conn.commit()
        conn.autocommit = True
        return [denied, _read(conn)]

    assert _both(world, script) == [DENIED, PUBLIC, "cache"]


@pytest.mark.parametrize("body", [
    "SET ROLE {bob}",  # commits with the block
    "SET LOCAL ROLE {bob}; SET ROLE {bob}",
    "SAVEPOINT s; SET ROLE {bob}; RELEASE s",
])
def test_a_role_set_in_a_block_that_commits_stays(world: World, body: str) -> None:
    script = steps("BEGIN", *body.format(bob=world.bob).split("; "), "COMMIT")
    assert _both(world, script) == [DENIED, "upstream"]


def test_a_reset_in_a_block_that_commits(world: World) -> None:
    """The reset commits (PostgreSQL: the login's role again); weir gives back only what it
    knew at the block's start, so the reads stay upstream, with PostgreSQL's rows."""
    script = steps(f"SET ROLE {world.bob}", "BEGIN", "RESET ROLE", "COMMIT")
    assert _both(world, script) == [PUBLIC, "upstream"]


def test_a_savepoint_rolled_back_then_committed(world: World) -> None:
    """PostgreSQL undoes the role set after the savepoint; weir does not follow savepoints
    and keeps the reads upstream (PostgreSQL's rows)."""
    script = steps("BEGIN", "SAVEPOINT s", f"SET ROLE {world.bob}", "ROLLBACK TO SAVEPOINT s",
                   "COMMIT")
    assert _both(world, script) == [PUBLIC, "upstream"]


def test_a_local_role_in_the_next_block_pipelined_behind_a_commit(world: World) -> None:
    """COMMIT, BEGIN and SET LOCAL ROLE in one pipeline: the commit must not give the
    identity back (the next block has already changed it)."""
    def script(conn: Any) -> list[Any]:
        conn.execute("BEGIN")
        conn.execute(f"SET LOCAL ROLE {world.bob}")
        conn.execute("SELECT current_user")
        with conn.pipeline():
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            conn.execute(f"SET LOCAL ROLE {world.bob}")
        denied = _read(conn)
        conn.execute("ROLLBACK")
        return [denied, _read(conn)]

    assert _both(world, script) == [DENIED, PUBLIC, "cache"]


def test_a_change_pipelined_behind_a_rollback_stays(world: World) -> None:
    def script(conn: Any) -> list[Any]:
        conn.execute("BEGIN")
        conn.execute(f"SET ROLE {world.bob}")
        with conn.pipeline():
            conn.execute("ROLLBACK")
            conn.execute(f"SET ROLE {world.bob}")
        return [_read(conn)]

    assert _both(world, script) == [DENIED, "upstream"]


def test_asyncpg_transaction_with_set_local(world: World) -> None:
    async def script(conn: asyncpg.Connection) -> list[Any]:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL ROLE {world.bob}")
            denied = await _aread(conn)
        return [denied, await _aread(conn)]

    assert _asyncpg_both(world, script) == [DENIED, PUBLIC]
