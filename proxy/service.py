"""The caching side of the server: its life, routing statements, and admin SQL.

Owns: ``CacheService`` — started lazily (the replication stream and fill pool exist only once
a cache does, in auto mode, or when caches are restored from the state directory), the lanes'
life, the schema checks of every heartbeat, the per-statement decision (``proxy.router``) with
a cheap pre-filter while no cache could match, and executing the admin commands
(``proxy.commands`` builds their answers) into complete backend message bytes. Its parts by
job: ``reads`` (``proxy.reads``: cached reads and their encoders) and ``gates``
(``proxy.gates``: privileges, role defaults, the staleness bound's reason).

Every failure on the cache side turns into "forward upstream" with the reason recorded for
EXPLAIN LAST STATEMENT; the client never sees an error it would not get from PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from pathlib import Path
from typing import Any

import cython_ext
from proxy import commands, identity, transactions
from proxy.admin import parse_admin
from proxy.caching import EngineHost
from proxy.gates import Gates, stale
from proxy.hitpath import HitMemos
from proxy.lanes import HitLanes, cpu_quota, lane_plan
from proxy.metrics import count_forward
from proxy.misses import budgets, fill_policy
from proxy.reads import ReadPath
from proxy.registry import Registry
from proxy.router import Route, SessionContext, route_query
from proxy.rules import hides_write, hiding_words, plain_text
from proxy.session import SessionState
from proxy.settings import Settings

log = logging.getLogger("weir.service")

#: CommandComplete tags of statements that may change a relation a cache reads
_DDL_TAGS = (b"ALTER", b"DROP", b"CREATE")



class CacheService:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.replicated_db = settings.upstream_address.dbname or settings.upstream_address.user \
            or "postgres"
        self.host: EngineHost | None = None
        self.registry: Registry | None = None
        self._starting: asyncio.Lock | None = None
        self._pending: EngineHost | None = None  # a host being started (``stop`` stops it too)
        self.cached_names: tuple[str, ...] = ()  # relation names used by caches (pre-filter)
        #: functions that may write (volatile, outside the system schemas; lower case) and
        #: the words that make a statement hide a write (``rules.hides_write``)
        self.writers: tuple[str, ...] = ()
        self.hiding = hiding_words(())
        self.hits = HitMemos()  # encoded answers of the hit path (``proxy.hitpath``)
        #: user functions that may change a session's role or search_path (``identity``)
        self.identity_functions: tuple[str, ...] = ()
        self.admins = identity.admin_roles(settings.admin_roles,
                                           settings.upstream_address.user)
        #: privileges and role defaults (``proxy.gates``; the hit path reads ``gates.grants``)
        self.gates = Gates()
        #: the cached reads and their encoders (``proxy.reads``)
        self.reads = ReadPath(self, settings, self.gates, self.hits)
        self.lanes: HitLanes | None = None  # threads answering quiet sessions (``proxy.lanes``)
        self.mutating = asyncio.Lock()  # admin commands and schema checks change the caches

    @property
    def enabled(self) -> bool:
        return self.settings.caching != "off"

    def start_lanes(self) -> None:
        """Start the lanes (``--hit-lanes``) when they are built: they answer cached reads
        and relay pass-through sessions."""
        count, cpus = lane_plan(self.settings, HitLanes.available(), cpu_quota())
        if not count or self.lanes is not None:
            return
        if not HitLanes.available():
            log.warning("--hit-lanes %d: the compiled lanes are not available (WEIR_IMPL=%s); "
                        "the event loop answers every read", count, cython_ext.impl())
            return
        self.lanes = HitLanes(count, self, cpus)
        self.lanes.start()
        if self.host is not None:
            self._watch(self.host)

    def stop_lanes(self, replay: bool = False) -> None:
        if self.lanes is not None:
            self.lanes.stop(replay)

    def _watch(self, host: EngineHost) -> None:
        """Tell the lanes about every change of ``host`` they must not answer across."""
        lanes = self.lanes
        if lanes is None:
            return
        host.engine.on_change = lanes.bump
        host.on_fresh = lanes.fresh
        lanes.fresh()

    async def start_if_restoring(self) -> None:
        """Start at boot in auto mode (queries are counted from the first one on) and when a
        persisted cache catalog exists."""
        state = self._state_file()
        if self.enabled and state is not None and state.exists():
            await self.ensure()
        elif self.settings.caching == "auto":
            try:
                await self.ensure()
            except Exception as exc:  # weir still relays; the next admin command tries again
                log.error("auto mode could not start caching: %s", exc)

    def _state_file(self) -> Path | None:
        d = self.settings.state_dir
        return Path(d) / "caches.json" if d else None

    async def ensure(self) -> Registry:
        if self.registry is not None:
            return self.registry
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.registry is None:
                s = self.settings
                host = EngineHost(s.upstream, memory_budget=budgets(s, self.hits),
                                  read_timeout=s.read_timeout, policy=fill_policy(s),
                                  replication_slot=s.replication_slot,
                                  local_bases=s.local_bases,
                                  local_tables=s.local_table_names)
                self._pending = host
                try:
                    await host.start()
                    registry = Registry(host, s.upstream, self._state_file(),
                                        s.auto_after if s.caching == "auto" else None)
                    await registry.start()
                except BaseException:
                    # a host that did not start keeps no stream or pool behind it
                    await asyncio.shield(host.stop())
                    raise
                finally:
                    self._pending = None
                self.host, self.registry = host, registry
                self._watch(host)
                await self._load_writers()
                self.refresh_names()
                host.verify = self._verify_schema
        assert self.registry is not None
        return self.registry

    async def stop(self) -> None:
        for host in (self.host, self._pending):
            if host is not None:
                await host.stop()

    async def _verify_schema(self) -> None:
        """Run by every heartbeat: caches whose relations changed upstream are planned again
        (or dropped, when their query no longer plans) before reads may use them."""
        registry = self.registry
        if registry is None:
            return
        if await self._load_writers():
            self.refresh_names()
        await self._recheck_grants()
        async with self.mutating:
            changed = await registry.changed_relations()
            if not changed:
                if await registry.follow_catalog():  # new tables: learnt routes go
                    self.refresh_names()
                    if not self.cached_names:  # () is one object: sessions would not notice
                        self.cached_names = ("\x00",)  # a name no query text holds (no NUL)
                    self.hits.clear()
                    if self.lanes is not None:
                        self.lanes.clear()
                return
            # the caches over a changed relation are dropped and created again, so the state
            # built under the old shapes goes with them (their nodes are no one else's);
            # the other caches keep theirs
            for line in await registry.replan(changed):
                log.warning("%s", line)
            self.refresh_names()
            self.hits.clear()
            if self.lanes is not None:
                self.lanes.clear()

    WRITERS_QUERY = """
        SELECT DISTINCT lower(p.proname) FROM pg_proc p
        WHERE p.provolatile = 'v' AND p.pronamespace NOT IN
              ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
        ORDER BY 1"""

    async def _load_writers(self) -> bool:
        """Read the functions that may write (every heartbeat does this too, before the
        staleness bound's clock may advance: a function created upstream is known within
        one); True when they changed."""
        assert self.host is not None
        rows = await self.host.pool.fetch(identity.IDENTITY_FUNCTIONS_QUERY)
        functions = tuple(r[0] for r in rows)
        rows = await self.host.pool.fetch(self.WRITERS_QUERY)
        writers = tuple(r[0] for r in rows)
        if writers == self.writers and functions == self.identity_functions:
            return False
        # a call of a function that may change a session's identity is never plain either
        self.writers, self.identity_functions = writers, functions
        self.hiding = hiding_words(tuple(sorted({*writers, *functions})))
        return True

    def hides_write(self, text: str) -> bool:
        """Whether a statement may write while its CommandComplete tag says it cannot (only
        while caching runs: read-your-writes has nothing to do otherwise)."""
        return hides_write(text.lower(), self.hiding_now())

    def hiding_now(self) -> tuple[str, ...]:
        """The words that make a statement hide a write (or change the session's identity,
        ``proxy.identity``) while caching runs (a hidden write only counts with
        read-your-writes on)."""
        return self.hiding if self.registry is not None else ()

    def is_current(self, entry: Any) -> bool:
        """Whether a cache entry (remembered by a prepared statement) is still the cache of
        its name: not dropped, and not dropped and created again for another query."""
        return self.registry is not None and self.registry.caches.get(entry.name) is entry

    def refresh_names(self) -> None:
        """After caches changed: the relation names of the pre-filter, and no column
        encoders memoized for a cache name that may now stand for another query."""
        self.reads.forget_encoders()
        names: set[str] = set()
        if self.registry is not None:
            for entry in self.registry.caches.values():
                for oid in entry.query.plan.relations:
                    rel = self.registry.planner.catalog.by_oid(oid)
                    if rel is not None:
                        names.add(rel.name.lower())
        self.cached_names = tuple(sorted(names))
        if self.lanes is not None:
            self.lanes.routing()

    # -- routing ------------------------------------------------------------------------------

    def route(self, text: str, state: SessionState, ctx: SessionContext) -> Route:
        registry = self.registry
        # inside a block, or maybe (requests pending: a BEGIN may be among them)
        maybe = state.transaction_status != "I" or not state.idle
        transactions.observe(text, maybe, ctx.block, ctx.isolation,
                             maybe and self.hides_write(text))
        auto = self.settings.caching == "auto"
        if registry is None or (not auto and not self._mentions_cached_table(text)):
            admin = parse_admin(text)
            if admin is not None:
                return Route("admin", "weir command", admin=admin)
            return Route("upstream", "no cache for this query")
        return route_query(text, state, ctx, registry, self.replicated_db)

    def _mentions_cached_table(self, text: str) -> bool:
        if not self.cached_names:
            return False
        lowered = text.lower()
        return any(name in lowered for name in self.cached_names)

    def plain_text(self, text: str) -> bool:
        """Whether a Query text needs no look while caching runs: it names no cached
        relation and hides no write (``forwarding.plain_query``, ``rules.plain_text``)."""
        return plain_text(text.lower(), self.cached_names, self.hiding_now())

    def note_upstream(self, route: Route, ctx: SessionContext, times: int = 1) -> None:
        """Record a query that goes upstream (``times`` runs of it); in auto mode, create its
        cache when due."""
        count_forward(route.reason, times)
        if self.registry is None or route.classified is None:
            return
        text = self.registry.note_proxied(route.classified, ctx.search_path, times)
        if text is not None:
            asyncio.get_running_loop().create_task(self._auto_create(text, ctx.search_path))

    async def _auto_create(self, text: str, search_path: tuple[str, ...]) -> None:
        registry = await self.ensure()
        try:
            await registry.create(text, search_path)
            self.refresh_names()
        except Exception as exc:  # AdminError, the upstream gone: the query stays upstream
            log.info("auto mode could not cache a query: %s", exc)

    async def _recheck_grants(self) -> None:
        """Every heartbeat (``proxy.grants``): privilege changes made directly upstream,
        and ALTER ROLE/DATABASE ... SET, are followed from the next heartbeat on."""
        self.gates.forget_defaults()
        if self.host is not None and not await self.gates.verdicts.recheck(
                self.host.pool, self.registry.caches if self.registry else {}):
            self.forget_grants()

    def privileges_changed(self, tag: bytes, state: Any) -> None:
        """A GRANT/REVOKE/ALTER/DROP/CREATE completed in the session of ``state`` (its core):
        verdicts are forgotten now and again when its transaction ends."""
        self.gates.verdicts.changes.seen(state)
        self.forget_grants(tag, state)

    def transaction_ended(self) -> None:
        """A ReadyForQuery was observed: forget verdicts if a privilege change's transaction
        has ended."""
        changes = self.gates.verdicts.changes
        if changes.open and changes.ended():
            self.forget_grants()

    def forget_grants(self, tag: bytes = b"", state: Any = None) -> None:
        """Privileges may have changed (GRANT, REVOKE, ALTER/DROP ... passed through weir);
        after DDL (``tag`` starts with ALTER, DROP or CREATE) the caches' relations may have
        changed too: no cached read until a heartbeat has checked them, after the DDL's
        transaction ended (the session ``state``'s: ``EngineHost.distrust``)."""
        self.gates.verdicts.forget()
        self.gates.forget_defaults()  # ALTER ROLE ... SET
        if self.lanes is not None:
            self.lanes.bump()
        if tag.startswith(_DDL_TAGS) and self.host is not None:
            self.host.distrust(None if state is None else partial(transactions.ended, state))

    def shape_known(self, entry: Any) -> bool:
        """Whether weir may describe a cache's columns itself now (RowDescription of a held
        statement or local portal): the cache is current and fresh, so no DDL passed since
        its fields were read. Otherwise the statement is described and run upstream."""
        return self.shape_reason(entry) is None

    def shape_reason(self, entry: Any) -> str | None:
        """Why :meth:`shape_known` says no (None when it says yes)."""
        host = self.host
        if entry is None:
            return None
        if host is None or not self.is_current(entry):
            return f"cache {entry.name} was dropped after this statement was prepared"
        lag = host.staleness()
        return stale(lag) if lag > self.settings.staleness_bound else None

    # -- admin --------------------------------------------------------------------------------

    async def admin(self, route: Route, ctx: SessionContext) -> bytes:
        """Run an admin command (``proxy.commands.run``)."""
        return await commands.run(self, route, ctx)
