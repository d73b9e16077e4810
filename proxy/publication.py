"""weir's publication: only the tables its caches read, each one weir can follow exactly.

Owns: the name of this weir's publication (``weir_pub_<instance>``; the replication stream
creates it, empty, before its slot), the set of tables each cache needs, bringing the
publication's members in line with them, the replica-identity rule, and dropping the
publication when weir stops.

Why not ``FOR ALL TABLES``: PostgreSQL refuses UPDATE and DELETE on a published table that
has no replica identity, for every client, direct ones included, as long as the publication
exists. So weir publishes a table only while a cache reads it, and only when its changes carry
the key weir needs: a primary key with replica identity DEFAULT or FULL. Any other table makes
``CREATE CACHE`` fail with :class:`NotPublishable` (its queries go upstream with that reason).

Invariants:
- a table is a member before any fill of a cache over it runs: :meth:`Publication.need`
  returns only after the stream has passed a barrier emitted after the ``ALTER PUBLICATION``
  committed, so every change committed after it is decoded with the table published (the
  fill's snapshot is taken later still; DESIGN §6 holds from there);
- publication changes run one at a time, each in a transaction with a short
  ``lock_timeout``: weir never queues behind (and so never blocks) someone's DDL for long;
  a change that cannot get its lock fails the CREATE CACHE with that reason;
- tables no cache needs any longer are removed in the background (best effort: a member with
  a replica identity harms nobody).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import asyncpg

from cdc import PUBLICATION_PREFIX, SLOT_PREFIX, quote_ident

log = logging.getLogger("weir.cache")

#: how long a publication change waits for its table lock in one attempt: below
#: PostgreSQL's default deadlock_timeout (1 s), so in a lock cycle with a client's
#: transaction weir gives up first and the client's transaction goes on (as fills and
#: describes do, ``proxy.fillrun``, ``proxy.registry``)
LOCK_TIMEOUT = "200ms"
#: attempts of a publication change whose lock was not available, :data:`RETRY_PAUSE` apart
#: (about 3 s in all before the change fails with PostgreSQL's lock timeout)
LOCK_ATTEMPTS = 10
RETRY_PAUSE = 0.1

#: each table (and, for a partitioned table, each of its partitions) with what decides whether
#: weir can follow it: kind, replica identity and whether it has a primary key. Catalog rows
#: only (pg_inherits, not pg_partition_tree, which locks each table: behind a client's open
#: DROP TABLE that could wait, and in a lock cycle with it make the client's transaction
#: the deadlock victim)
_TABLES_QUERY = """\
WITH RECURSIVE tree(oid) AS (
    SELECT unnest($1::oid[])
    UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN tree t ON i.inhparent = t.oid
        JOIN pg_catalog.pg_class p ON p.oid = i.inhparent AND p.relkind = 'p')
SELECT c.oid::int8, format('%I.%I', n.nspname, c.relname), c.relkind::text,
       c.relreplident::text,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN (SELECT oid FROM tree)"""

_NAMES_QUERY = """\
SELECT c.oid::int8, format('%I.%I', n.nspname, c.relname), c.relkind::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY($1::oid[])"""

_MEMBERS_QUERY = """\
SELECT pr.prrelid::int8 FROM pg_catalog.pg_publication_rel pr
JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid WHERE p.pubname = $1"""


#: the ``_wanted`` entry of :meth:`Publication.keep_tables` (no cache has this name)
_KEPT = " local bases"


class NotPublishable(Exception):
    """A table weir cannot follow without making someone's writes fail."""


def new_name() -> str:
    return f"{PUBLICATION_PREFIX}{uuid.uuid4().hex[:12]}"


def persistent_names(setting: str) -> tuple[str, str]:
    """The slot and publication names ``--replication-slot`` gives: ``weir_<name>`` and
    ``weir_pub_<name>``, ``<name>`` lower-cased with every character other than a-z, 0-9
    and _ turned into _ (a StatefulSet pod name such as ``weir-0`` becomes ``weir_0``)."""
    name = re.sub(r"[^a-z0-9_]", "_", setting.lower())
    return f"{SLOT_PREFIX}{name}", f"{PUBLICATION_PREFIX}{name}"


def identity_problem(name: str, relkind: str, replident: str, has_pk: bool) -> str | None:
    """Why weir cannot publish table ``name``, or None when it can."""
    if relkind not in ("r", "p"):
        return None  # views are not published; what they read is
    if relkind == "r" and not has_pk:
        return (f"table {name} has no primary key: weir would have to publish it without a "
                "replica identity, which makes its UPDATE and DELETE fail for every client")
    if replident not in ("d", "f"):
        kind = {"n": "NOTHING", "i": "USING INDEX"}.get(replident, replident)
        return (f"table {name} has REPLICA IDENTITY {kind}: weir follows only tables whose "
                "changes carry their primary key (REPLICA IDENTITY DEFAULT or FULL)")
    return None


class Publication:
    """See the module docstring. ``barrier`` waits until the stream has applied everything
    committed before it was called."""

    def __init__(self, pool: Callable[[], asyncpg.Pool],
                 barrier: Callable[[], Awaitable[Any]], name: str | None = None,
                 keep: bool = False) -> None:
        self.name = name or new_name()
        #: kept when weir stops (it belongs to a persistent slot, which decodes with it)
        self.keep = keep
        self._pool = pool
        self._barrier = barrier
        self._wanted: dict[str, frozenset[int]] = {}  # cache -> relations it reads
        self._lock = asyncio.Lock()

    async def ensure(self) -> None:
        """Create the publication (with no table) unless it exists, and make its members the
        wanted tables: the stream runs this before it creates each slot, so a publication
        dropped meanwhile (``weir slots drop`` while the stream reconnected) is whole again
        before any change is decoded for the new slot."""
        async with self._pool().acquire() as conn:
            found = await conn.fetchval(
                "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1", self.name)
            if not found:
                await conn.execute(f"CREATE PUBLICATION {quote_ident(self.name)}")
        await self._sync()

    def keep_tables(self, relations: Iterable[int]) -> None:
        """Members whatever the caches need (the tables of local bases, whose slot decodes
        with this publication); checked and added by the next :meth:`ensure`."""
        self._wanted[_KEPT] = frozenset(relations)

    def tables(self) -> frozenset[int]:
        return frozenset().union(*self._wanted.values())

    async def need(self, cache: str, relations: Iterable[int]) -> None:
        """Make ``relations`` members for ``cache`` (raises :class:`NotPublishable`, or the
        upstream's error such as a lock timeout, and then wants nothing for ``cache``)."""
        self._wanted[cache] = frozenset(relations)
        try:
            if await self._sync(check=self._wanted[cache]):
                await self._barrier()
        except BaseException:
            self._wanted.pop(cache, None)
            raise

    def release(self, cache: str) -> Awaitable[None] | None:
        """``cache`` needs nothing any more; returns the clean-up to run in the background."""
        if self._wanted.pop(cache, None) is None:
            return None
        return self._quiet_sync()

    async def _quiet_sync(self) -> None:
        try:
            await self._sync()
        except Exception as exc:  # a member that stays harms nobody
            log.info("publication %s not trimmed: %s", self.name, exc)

    async def _sync(self, check: frozenset[int] = frozenset()) -> bool:
        """Check the tables in ``check`` (and their partitions), then add the wanted tables
        that are not members and drop the members no cache wants; True if one was added."""
        async with self._lock, self._pool().acquire() as conn:
            if check:
                for r in await conn.fetch(_TABLES_QUERY, sorted(check)):
                    problem = identity_problem(r[1], r[2], r[3], r[4])
                    if problem is not None:
                        raise NotPublishable(problem)
            wanted = self.tables()
            members = {int(r[0]) for r in await conn.fetch(_MEMBERS_QUERY, self.name)}
            names = {int(r[0]): (str(r[1]), str(r[2])) for r in await conn.fetch(
                _NAMES_QUERY, sorted(wanted ^ members))}
            add = [names[o] for o in sorted(wanted - members)
                   if o in names and names[o][1] in ("r", "p")]
            drop = [names[o][0] for o in sorted(members - wanted) if o in names]
            if not add and not drop:
                return False
            pub = quote_ident(self.name)
            changes = []
            if add:
                targets = ", ".join(f"ONLY {n}" if kind == "r" else n for n, kind in add)
                changes.append(f"ALTER PUBLICATION {pub} ADD TABLE {targets}")
            if drop:
                changes.append(f"ALTER PUBLICATION {pub} DROP TABLE {', '.join(drop)}")
            await _locked(conn, changes)
            log.info("publication %s: added %s, dropped %s", self.name,
                     [n for n, _ in add], drop)
            return bool(add)

    async def drop(self) -> None:
        """Remove the publication (weir is stopping) unless it is kept; best effort."""
        if self.keep:
            return
        try:
            async with self._pool().acquire() as conn:
                await _locked(conn, [f"DROP PUBLICATION IF EXISTS {quote_ident(self.name)}"])
        except Exception as exc:
            log.warning("publication %s could not be dropped: %s (weir slots drop removes it)",
                        self.name, exc)


async def _locked(conn: Any, statements: list[str]) -> None:
    """Run ``statements`` in one transaction whose lock waits end after :data:`LOCK_TIMEOUT`,
    again up to :data:`LOCK_ATTEMPTS` times while a lock is not available (the last
    attempt's lock timeout is raised)."""
    for attempt in range(LOCK_ATTEMPTS):
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                for statement in statements:
                    await conn.execute(statement)
            return
        except asyncpg.LockNotAvailableError:
            if attempt == LOCK_ATTEMPTS - 1:
                raise
            await asyncio.sleep(RETRY_PAUSE)
