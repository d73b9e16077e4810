"""Whether a role may read a cache, as PostgreSQL would decide, and when that verdict ends.

Owns: the privilege check (:data:`CHECK`: SELECT on every relation the cache reads, or on
every column of it, USAGE on each relation's schema, no row security on it, the role
existing), the re-check of every
remembered verdict (:data:`RECHECK`, run by each heartbeat before the staleness clock may
advance, so a change made directly upstream is followed within one heartbeat), and
:class:`PrivilegeChanges`: the privilege-changing statements passing through weir whose
transaction has not ended yet. While one is open no verdict is remembered (a check then sees
the state before its commit), and at its end every verdict is forgotten again; a verdict is
remembered only if no change was seen while it was being checked (``generation``).

:class:`Verdicts` holds the verdicts ((role, cache) -> (may read, expiry)) in a dict the
hit paths and the lanes read directly (``CacheService.grants``); it is only ever mutated in
place.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pgwire.events import Phase

log = logging.getLogger("weir.grants")

#: may role ``{role}`` read relation ``c`` as PostgreSQL checks a SELECT of it: USAGE on its
#: schema, no row security, and SELECT on the table or on every one of its columns (a read
#: needs SELECT on each column it names, or on one column when it names none: a role holding
#: every column passes whatever the cache's statement names; one holding some columns only
#: reads upstream, where PostgreSQL decides; a whole-row reference needs them all anyway)
MAY_READ = """
    has_schema_privilege({role}, c.relnamespace, 'USAGE')
    AND NOT c.relrowsecurity
    AND (has_table_privilege({role}, c.oid, 'SELECT')
         OR (has_any_column_privilege({role}, c.oid, 'SELECT')
             AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                               AND NOT has_column_privilege({role}, c.oid, a.attnum,
                                                            'SELECT'))))"""

#: (role, relation oids) -> may the role read them all, as PostgreSQL checks a SELECT
CHECK = """
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) THEN false
           ELSE (SELECT count(c.oid) = cardinality($2::oid[])
                        AND coalesce(bool_and(""" + MAY_READ.format(role="$1") + """), true)
                 FROM pg_class c WHERE c.oid = ANY($2::oid[])) END"""

#: the same for many (index, role, relations) at once: (index, verdict) rows
RECHECK = """
    SELECT v.i, CASE WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v.role) THEN false
           ELSE (SELECT count(c.oid) = cardinality(v.rels)
                        AND coalesce(bool_and(""" + MAY_READ.format(role="v.role") + """), true)
                 FROM pg_class c WHERE c.oid = ANY(v.rels)) END
    FROM jsonb_to_recordset($1::jsonb) AS v(i int, role text, rels oid[])"""

#: how long a verdict lives without a heartbeat re-checking it (a stalled heartbeat must not
#: keep verdicts alive: reads then go upstream for staleness anyway)
VERDICT_TTL = 60.0


class PrivilegeChanges:
    """Privilege changes (GRANT, REVOKE, ALTER ... OWNER/ROW LEVEL SECURITY, DDL) seen in
    sessions whose transaction has not ended (see the module docstring)."""

    __slots__ = ("generation", "open")

    def __init__(self) -> None:
        self.generation = 0  # bumped whenever verdicts are forgotten
        #: id(session core) -> the core (``proxy.session.SessionState``) of each session whose
        #: privilege change's transaction has not ended yet
        self.open: dict[int, Any] = {}

    def seen(self, state: Any) -> None:
        """A privilege-changing statement completed in the session of ``state``."""
        self.generation += 1
        self.open[id(state)] = state

    def ended(self) -> bool:
        """Forget the sessions whose transaction ended (or that closed); True when there
        were any (verdicts must then be forgotten again)."""
        done = [key for key, state in self.open.items() if state.phase is Phase.CLOSED
                or (not state.in_transaction and state.idle)]
        for key in done:
            del self.open[key]
        if done:
            self.generation += 1
        return bool(done)

    def may_remember(self, generation: int) -> bool:
        """Whether a verdict checked from ``generation`` on may be remembered."""
        return not self.open and generation == self.generation


class Verdicts:
    """The remembered verdicts ((role, cache) -> (may read, expiry); ``table`` is read
    directly by the hit paths and the lanes) and the changes that end them."""

    __slots__ = ("changes", "table")

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], tuple[bool, float]] = {}
        self.changes = PrivilegeChanges()

    def granted(self, user: str, cache: str) -> bool | None:
        """The remembered verdict for (role, cache), or None when it must be checked."""
        verdict = self.table.get((user, cache))
        if verdict is None or time.monotonic() > verdict[1]:
            return None
        return verdict[0]

    async def authorized(self, pool: Any, user: str, entry: Any) -> bool:
        """Whether ``user`` may read every relation the cache ``entry`` reads (:data:`CHECK`
        on weir's connection), remembered when no change was seen meanwhile."""
        known = self.granted(user, entry.name)
        if known is not None:
            return known
        generation = self.changes.generation
        try:
            allowed = bool(await pool.fetchval(CHECK, user, list(entry.query.plan.relations)))
        except Exception as exc:  # lost connection: not known to be allowed
            log.info("privilege check for role %s failed: %s", user, exc)
            allowed = False
        if self.changes.may_remember(generation):
            self.table[(user, entry.name)] = (allowed, time.monotonic() + VERDICT_TTL)
        return allowed

    async def recheck(self, pool: Any, caches: dict[str, Any]) -> bool:
        """Check every remembered verdict again (:data:`RECHECK`, one query); False when
        one differs or the check failed (the caller forgets them all), else their expiry
        is renewed. Sessions whose privilege change has ended are let go first."""
        if self.changes.ended():
            return False
        items = [(key, verdict) for key, verdict in self.table.items() if key[1] in caches]
        if not items:
            return True
        generation = self.changes.generation
        request = json.dumps([
            {"i": i, "role": user, "rels": list(caches[cache].query.plan.relations)}
            for i, ((user, cache), _) in enumerate(items)])
        try:
            rows = await pool.fetch(RECHECK, request)
        except Exception as exc:
            log.info("re-checking privileges failed: %s", exc)
            return False
        if generation != self.changes.generation:
            return True  # forgotten meanwhile: nothing left to renew
        fresh = {int(i): bool(ok) for i, ok in rows}
        if any(fresh.get(i) is not verdict[0] for i, (_, verdict) in enumerate(items)):
            return False
        expiry = time.monotonic() + VERDICT_TTL
        for key, verdict in items:
            self.table[key] = (verdict[0], expiry)
        return True

    def forget(self) -> None:
        """Privileges may have changed: no verdict is remembered any more (in place)."""
        self.changes.generation += 1
        self.table.clear()
