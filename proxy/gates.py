"""The gates of a cached read besides the cache itself: may the role read it, what the role's
and the database's defaults make the session's settings, is the cache fresh enough.

Owns: :class:`Gates` — the remembered privilege verdicts (``grants``: the hit path and the
lanes read them directly) and the privilege changes seen in flight that end them (GRANT,
REVOKE, DDL: :meth:`Gates.wrote`, :meth:`Gates.transaction_ended`, and every
heartbeat's :meth:`Gates.recheck`), the memo of role and database defaults (``ALTER
ROLE/DATABASE ... SET`` and the server's configuration, which the wire never shows), whether
weir may describe a cache's columns itself (:meth:`Gates.shape_reason`: the cache current and
within the staleness bound), and the reason a read past the staleness bound gives
(:func:`stale`). The checks run on the cache host's pool (:class:`GateHost`); a check that
fails says "not known to be allowed" or taints the session, so its reads go upstream. What
the gates need of the cache side is :class:`CacheSide` (the service meets it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from engine import effective_search_path
from proxy import grants, identity, transactions
from proxy.router import SessionContext

log = logging.getLogger("weir.gates")

#: how long a privilege verdict or a role's defaults are trusted (seconds)
GRANT_TTL = 60.0

DEFAULTS_QUERY = """
    SELECT s.setrole <> 0, s.setdatabase <> 0, s.setconfig
    FROM pg_db_role_setting s
    WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = $2))
      AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = $1))"""
SERVER_QUERY = """
    SELECT name, CASE WHEN source IN ('user', 'database', 'client', 'session')
                      THEN boot_val ELSE setting END
    FROM pg_settings WHERE name IN ('search_path', 'extra_float_digits', 'bytea_output',
                                    'default_transaction_isolation')"""

#: one value that changes whenever a role or database default or the server configuration
#: may have (read by every heartbeat)
DEFAULTS_PRINT = """
    SELECT md5(coalesce((SELECT string_agg(s.setdatabase::text || '/' || s.setrole::text || '/'
                                           || array_to_string(s.setconfig, chr(1)), chr(2)
                                           ORDER BY s.setdatabase, s.setrole)
                         FROM pg_db_role_setting s), '') || pg_conf_load_time()::text)"""
#: CommandComplete tags of statements that may change role or database defaults
DEFAULTS_TAGS = (b"ALTER ROLE", b"ALTER DATABASE", b"ALTER SYSTEM")
DEFAULTS_CHANGED = ("role or database defaults changed after the session logged in, or it "
                    "logged in while weir could not know")
FUNCTIONS_UNWATCHED = ("role unknown: the session logged in before caching ran, when weir did "
                       "not watch calls of user functions that may change its role or "
                       "search_path")


class GateHost(Protocol):
    """What the gates need of the cache host (``proxy.caching.EngineHost``): its pool."""

    @property
    def pool(self) -> Any: ...


#: CommandComplete tags of statements that may change a relation a cache reads
DDL_TAGS = (b"ALTER", b"DROP", b"CREATE")
#: CommandComplete tags after which remembered privilege checks are dropped
PRIVILEGE_TAGS = (b"GRANT", b"REVOKE", *DDL_TAGS, b"SET", b"RESET")


class GatedHost(GateHost, Protocol):
    """What the privilege-change and shape checks need of the running cache host
    (``proxy.caching.EngineHost``)."""

    def distrust(self, until: Callable[[], bool] | None = None) -> None: ...

    def staleness(self) -> float: ...


class Bumped(Protocol):
    """The lanes (``proxy.lanes.HitLanes``): nothing stamped before a bump is answered."""

    def bump(self) -> None: ...


class CacheSide(Protocol):
    """What the gates need of the cache side (``proxy.service.CacheService``)."""

    @property
    def host(self) -> GatedHost | None: ...

    @property
    def lanes(self) -> Bumped | None: ...

    @property
    def registry(self) -> Any: ...

    @property
    def identity_functions(self) -> tuple[str, ...]: ...

    def is_current(self, entry: Any) -> bool: ...


class Gates:
    """Privileges and role defaults, remembered per (role, cache) and (role, database), and
    the shape checks of held statements (``side``: the cache side; ``bound``: the staleness
    bound, seconds)."""

    def __init__(self, side: CacheSide, bound: float) -> None:
        self.side, self.bound = side, bound
        #: the privilege verdicts and the changes that end them (``proxy.grants``)
        self.verdicts = grants.Verdicts()
        #: (role, cache) -> (may read, time.monotonic() it expires): ``verdicts.table``
        self.grants: dict[tuple[str, str], tuple[bool, float]] = self.verdicts.table
        #: (role, database) -> (default settings, time.monotonic() read)
        self._defaults: dict[tuple[str, str], tuple[dict[str, str], float]] = {}
        #: bumped whenever role or database defaults may have changed (ALTER ROLE/DATABASE/
        #: SYSTEM through weir, or a heartbeat finding :data:`DEFAULTS_PRINT` changed): a
        #: session that logged in under another version does not know its defaults
        #: (``SessionContext.defaults_version``, :meth:`apply_defaults`)
        self.defaults_version = 0
        self._defaults_print: str | None = None

    # -- privileges ---------------------------------------------------------------------------

    def granted(self, user: str, cache: str) -> bool | None:
        """The remembered verdict for (role, cache), or None when it must be checked."""
        return self.verdicts.granted(user, cache)

    async def authorized(self, host: GateHost, user: str, entry: Any) -> bool:
        """Whether ``user`` may read every relation the cache reads (``proxy.grants``)."""
        return await self.verdicts.authorized(host.pool, user, entry)

    async def recheck(self, host: GateHost) -> None:
        """Every heartbeat (``proxy.grants``): privilege changes made directly upstream,
        and ALTER ROLE/DATABASE ... SET, are followed from the next heartbeat on."""
        self.forget_defaults()
        try:
            printed: str | None = await host.pool.fetchval(DEFAULTS_PRINT)
        except Exception as exc:
            log.info("reading the defaults' fingerprint failed: %s", exc)
            printed = None
        if printed is None or printed != self._defaults_print:
            if printed is None or self._defaults_print is not None:
                self.defaults_version += 1
            self._defaults_print = printed
        registry = self.side.registry
        if not await self.verdicts.recheck(host.pool, registry.caches if registry else {}):
            self.forget_grants()

    def wrote(self, tag: bytes, state: Any) -> None:
        """A CommandComplete that may have written (``pgwire.classes.ANSWER_WRITE``; ``tag``: its
        first bytes) came in the session of ``state``: a privilege change if its tag is one of
        :data:`PRIVILEGE_TAGS`."""
        if tag.startswith(PRIVILEGE_TAGS):
            self.privileges_changed(tag, state)

    def privileges_changed(self, tag: bytes, state: Any) -> None:
        """A GRANT/REVOKE/ALTER/DROP/CREATE completed in the session of ``state`` (its core):
        verdicts are forgotten now and again when its transaction ends."""
        self.verdicts.changes.seen(state)
        self.forget_grants(tag, state)

    def transaction_ended(self) -> None:
        """A ReadyForQuery was observed: forget verdicts if a privilege change's transaction
        has ended."""
        changes = self.verdicts.changes
        if changes.open and changes.ended():
            self.forget_grants()

    def forget_grants(self, tag: bytes = b"", state: Any = None) -> None:
        """Privileges may have changed (GRANT, REVOKE, ALTER/DROP ... passed through weir);
        after DDL (``tag`` one of :data:`DDL_TAGS`) the caches' relations may have changed
        too: no cached read until a heartbeat has checked them, after the DDL's transaction
        ended (the session ``state``'s: ``EngineHost.distrust``)."""
        self.verdicts.forget()
        self.forget_defaults()  # ALTER ROLE ... SET
        if tag.startswith(DEFAULTS_TAGS):
            self.defaults_version += 1
        lanes, host = self.side.lanes, self.side.host
        if lanes is not None:
            lanes.bump()
        if tag.startswith(DDL_TAGS) and host is not None:
            host.distrust(None if state is None else partial(transactions.ended, state))

    # -- shapes -------------------------------------------------------------------------------

    def shape_known(self, entry: Any) -> bool:
        """Whether weir may describe a cache's columns itself now (RowDescription of a held
        statement or local portal): the cache is current and fresh, so no DDL passed since
        its fields were read. Otherwise the statement is described and run upstream."""
        return self.shape_reason(entry) is None

    def shape_reason(self, entry: Any) -> str | None:
        """Why :meth:`shape_known` says no (None when it says yes)."""
        if entry is None:
            return None
        host = self.side.host
        if host is None or not self.side.is_current(entry):
            return f"cache {entry.name} was dropped after this statement was prepared"
        lag = host.staleness()
        return stale(lag) if lag > self.bound else None

    # -- role and database defaults -----------------------------------------------------------

    def forget_defaults(self) -> None:
        """Role or database defaults may have changed: read them again (every heartbeat,
        and after ALTER ... passed through weir)."""
        self._defaults.clear()

    async def apply_defaults(self, host: GateHost, ctx: SessionContext) -> None:
        """Follow what ALTER ROLE/DATABASE ... SET (and the server configuration) make the
        session's defaults, which the wire never shows: output settings the client did not
        SET itself, and search_path (a different one sends the session's reads upstream)."""
        if ctx.before_caching and self.side.identity_functions:
            # before caching ran, calls of such functions went by unwatched: the session may
            # have called one (a reset it sends alone gives the identity back)
            identity.taint(ctx, (FUNCTIONS_UNWATCHED, True))
        if ctx.defaults_version is not None and ctx.defaults_version != self.defaults_version:
            # the defaults read now may not be those the session started with
            identity.taint_for_life(ctx, (DEFAULTS_CHANGED, True))
            ctx.defaults_applied = True
            return
        key = (ctx.user, ctx.database)
        found = self._defaults.get(key)
        if found is None or time.monotonic() - found[1] > GRANT_TTL:
            try:
                values = dict(await host.pool.fetch(SERVER_QUERY))
                rows = await host.pool.fetch(DEFAULTS_QUERY, ctx.user, ctx.database)
            except Exception as exc:
                log.info("reading role defaults for %s failed: %s", ctx.user, exc)
                identity.taint_for_life(ctx, ("the session's role defaults could not be read",
                                              True))
                ctx.defaults_applied = True
                return
            # precedence: global < database < role < role in database
            for _, _, config in sorted(rows, key=lambda r: (r[0], r[1])):
                for item in config or ():
                    name, _, value = item.partition("=")
                    values[name.lower()] = value
            found = self._defaults[key] = (values, time.monotonic())
        values = found[0]
        for name in ("extra_float_digits", "bytea_output"):
            if name in values and name not in ctx.settings:
                ctx.settings[name] = values[name]
                ctx.settings_version += 1
        ctx.isolation.role = transactions.level_name(
            values.get("default_transaction_isolation", ""))
        identity.taint_for_life(ctx, identity.default_taint(values))
        path = values.get("search_path")
        if path is not None and effective_search_path(path, ctx.user) != ctx.search_path:
            identity.taint_for_life(ctx, (f"the role's or database's search_path is {path}",
                                          False))
        ctx.defaults_applied = True


def stale(lag: float) -> str:
    """Why a read past the staleness bound goes upstream."""
    if lag == float("inf"):
        return ("no heartbeat has passed since the caches started or a schema change passed "
                "through weir: the caches' tables are being checked")
    return f"replication lag of up to {lag:.1f}s exceeds the staleness bound"
