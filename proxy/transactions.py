"""Reads inside transaction blocks (DESIGN §12): when a cached read may answer a SELECT sent
inside ``BEGIN ... COMMIT``.

Owns: :class:`Block`, what weir knows of a session's current transaction block (the isolation
level it named, and why its reads must go upstream until it ends), the session's default
isolation (``SET default_transaction_isolation``, ``SET SESSION CHARACTERISTICS``, the role's
and database's defaults), :func:`observe` (a statement's text, before it runs),
:func:`note_write` (a write's CommandComplete), and :func:`refusal`, the rule itself.

The rule: a block may be served from the caches while it is READ COMMITTED (or READ
UNCOMMITTED, which PostgreSQL runs as READ COMMITTED), has not failed, and has run nothing
but reads and transaction control: after its first write, a locking read (``FOR UPDATE``,
``FOR SHARE``, ...), or a statement weir does not classify as a read, its reads go upstream
until it ends. BEGIN, COMMIT, ROLLBACK and savepoints always go upstream (they are never
cached reads), so the block itself behaves exactly as it does directly.

Why that is exact: under READ COMMITTED each statement takes a new snapshot, no older than
the previous statement's; a cached read shows one committed state of the upstream (prefix
consistency), so a block that has not written sees nothing PostgreSQL could not have shown it,
provided no cached read is older than what the session already saw. That last condition is
seen(s) (DESIGN §12, ``proxy.seen``): every upstream answer, BEGIN's and those inside the
block included, moves seen(s), and a cached read is allowed only once the applier has passed
a barrier sent after it (with ``--read-your-writes on``, the default).
A block that wrote must read its own uncommitted rows, which only PostgreSQL has; a locking
read returns rows as of after the lock wait, and REPEATABLE READ / SERIALIZABLE pin one
snapshot for the whole block, which the caches cannot hold.

Pure: no I/O; the relay and the service call these functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the isolation levels a block may be served at (PostgreSQL runs READ UNCOMMITTED as READ
#: COMMITTED)
SERVED = frozenset({"read committed", "read uncommitted"})
#: first words of statements that leave a block servable: reads and transaction control (a
#: read that hides a write is caught by ``rules.hides_write``, a write by its tag)
READS = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "SHOW", "SET", "RESET", "BEGIN",
                   "START", "SAVEPOINT", "RELEASE", "ROLLBACK", "FETCH", "MOVE", "DECLARE",
                   "CLOSE", "LISTEN", "UNLISTEN", "DEALLOCATE", "PREPARE", "EXPLAIN", "COMMIT",
                   "END", "ABORT"})
#: first words of the statements that write
WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "TRUNCATE"})
#: CommandComplete tags (their first 8 bytes) the relay counts as writes (read-your-writes)
#: that change no data a later read of the block sees
_NOT_WRITES = (b"SAVEPOIN", b"RELEASE", b"NOTIFY")
WROTE = "the transaction wrote (its reads go upstream until it ends)"
LOCKED = "the transaction ran a locking read (FOR UPDATE/SHARE): its reads go upstream"
FAILED = "the transaction failed (PostgreSQL answers its statements with an error)"

_LEVEL = r"(read\s+committed|read\s+uncommitted|repeatable\s+read|serializable)"
_ISOLATION = re.compile(r"\bisolation\s+level\s+" + _LEVEL, re.IGNORECASE)
_LOCKING = re.compile(r"\bfor\s+(?:no\s+key\s+update|update|key\s+share|share)\b",
                      re.IGNORECASE)
_DEFAULT = re.compile(r"^\s*(?:set|reset)\s+(?:session\s+|local\s+)?"
                      r"default_transaction_isolation\b\s*(?:to|=)?\s*'?([a-z ]*)'?",
                      re.IGNORECASE)
_CHARACTERISTICS = re.compile(r"^\s*set\s+session\s+characteristics\b", re.IGNORECASE)
_SET_TRANSACTION = re.compile(r"^\s*set\s+(?:local\s+)?transaction\b", re.IGNORECASE)
_SAVEPOINT = re.compile(r"^\s*rollback\s+(?:work\s+|transaction\s+)?to\b", re.IGNORECASE)
_SNAPSHOT = re.compile(r"\bsnapshot\b", re.IGNORECASE)


@dataclass(slots=True)
class Block:
    """The session's current transaction block, as far as weir saw it."""

    isolation: str | None = None  # named by BEGIN/START TRANSACTION/SET TRANSACTION
    upstream: str | None = None  # why its reads go upstream until it ends
    open: bool = False  # the session was inside the block when last checked


@dataclass(slots=True)
class Isolation:
    """The session's default isolation: set in the session, else its role's/database's."""

    session: str | None = None  # SET default_transaction_isolation / SESSION CHARACTERISTICS
    role: str | None = None  # ALTER ROLE/DATABASE ... SET, the server's configuration

    def default(self) -> str:
        return self.session or self.role or "read committed"


def _level(text: str) -> str | None:
    found = _ISOLATION.search(text)
    return None if found is None else " ".join(found.group(1).lower().split())


def isolation_named(text: str) -> bool:
    """Whether a statement names an isolation level."""
    return _ISOLATION.search(text) is not None


def level_name(value: str) -> str | None:
    """A ``default_transaction_isolation`` value in canonical form (None when not one)."""
    value = " ".join(value.strip().strip("'\"").lower().split())
    return value if value in SERVED or value in ("repeatable read", "serializable") else None


def observe(text: str, in_block: bool, block: Block, isolation: Isolation,
            hides_write: bool) -> None:
    """A statement the session sends (a simple Query's text or a Parse's), before it runs.
    ``in_block``: the session is or may be inside a transaction block now (False only when
    it is idle outside one: then the record of the last block is cleared first)."""
    if not in_block:
        clear(block)
    stripped = text.lstrip()
    head = stripped[:12].split(None, 1)[0].upper().rstrip(";") if stripped else ""
    if head in ("ROLLBACK", "ABORT", "COMMIT", "END") and _SAVEPOINT.match(text) is None:
        clear(block)  # the block ends (a ROLLBACK's tag is not observed, a COMMIT's is)
        return
    if head in ("BEGIN", "START"):
        block.isolation = _level(text) or block.isolation
    elif head in ("SET", "RESET"):
        default = _DEFAULT.match(text)
        if default is not None:
            isolation.session = None if head == "RESET" else level_name(default.group(1))
        elif _CHARACTERISTICS.match(text) is not None:
            isolation.session = _level(text) or isolation.session
        elif _SET_TRANSACTION.match(text) is not None:
            if _SNAPSHOT.search(text) is not None:
                block.upstream = "the transaction imported a snapshot"
            block.isolation = _level(text) or block.isolation
    if not in_block and head not in ("BEGIN", "START"):
        return
    if hides_write or head in WRITES:
        block.upstream = block.upstream or WROTE
    elif head not in READS:
        block.upstream = block.upstream or (
            f"the transaction ran a statement weir does not classify as a read ({head})")
    elif _LOCKING.search(text) is not None:
        block.upstream = block.upstream or LOCKED


def note_write(block: Block, status: str, tag: bytes = b"") -> None:
    """A statement of the session wrote (its CommandComplete ``tag`` says so, or it hides a
    write), the session's transaction status being ``status``: the block it belongs to reads
    upstream from now on. A COMMIT ends the block. (A write seen while the status is still
    idle is an autocommit one: a multi-statement Query that begins a block and writes has
    its ReadyForQuery, T, observed before its tags when they arrive together.)"""
    if tag.startswith(b"COMMIT"):
        clear(block)
    elif status != "I" and not tag.startswith(_NOT_WRITES):
        block.upstream = block.upstream or WROTE


def clear(block: Block) -> None:
    """The block ended: forget it."""
    if block.open or block.upstream is not None or block.isolation is not None:
        block.open, block.upstream, block.isolation = False, None, None


def refusal(status: str, block: Block, isolation: Isolation) -> str | None:
    """Why a cached read may not answer the session now (None: it may, as far as the
    transaction goes). ``status`` is the session's transaction status (I, T or E)."""
    if status == "I":
        block.open = False
        return None
    block.open = True
    if status != "T":
        return FAILED
    if block.upstream is not None:
        return block.upstream
    level = block.isolation or isolation.default()
    if level not in SERVED:
        return f"inside a {level.upper()} transaction (one snapshot for the whole block)"
    return None


def ended(state: Any) -> bool:
    """Whether the transaction of a session's last statement is over, or the session (a
    DDL's: ``EngineHost.distrust``). ``state``: the session's ``SessionState``."""
    return bool(state.phase.name == "CLOSED" or (not state.in_transaction and state.idle))


@dataclass(slots=True)
class DdlHolds:
    """Transactions that ran DDL through weir and may still be open (``EngineHost.distrust``:
    no cached read until they ended and the catalog was checked after that)."""

    waiting: list[Callable[[], bool]] = field(default_factory=list)

    def add(self, ended: Callable[[], bool] | None) -> None:
        if ended is not None:
            self.waiting.append(ended)

    def check(self) -> tuple[bool, bool]:
        """(whether one was held, whether one ended since the last check)."""
        if not self.waiting:
            return False, False
        still = [done for done in self.waiting if not done()]
        ended = len(still) < len(self.waiting)
        self.waiting = still
        return True, ended
