"""The caching side of the server: its life and its parts by job.

Owns: ``CacheService`` — started lazily (the replication stream and fill pool exist only once
a cache does, in auto mode, or when caches are restored from the state directory), the lanes'
life, the schema checks of every heartbeat (and the routing state they renew: the functions
that may write, the cached relation names), and running the admin commands
(``proxy.commands`` builds their answers). Its parts by job: ``routing`` (``proxy.routing``:
the per-statement decision and its state), ``reads`` (``proxy.reads``: cached reads and their
encoders) and ``gates`` (``proxy.gates``: privileges and the changes in flight that end them,
role defaults, the shape checks of held statements, the staleness bound's reason; they see
the service as a ``gates.CacheSide``).

Every failure on the cache side turns into "forward upstream" with the reason recorded for
EXPLAIN LAST STATEMENT; the client never sees an error it would not get from PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import cython_ext
from proxy import commands, identity
from proxy.caching import EngineHost
from proxy.fillstamps import FillStamps
from proxy.gates import Gates
from proxy.hitpath import HitMemos
from proxy.lane_plan import cpu_quota, lane_plan
from proxy.lanes import HitLanes
from proxy.misses import budgets, fill_policy
from proxy.reads import ReadPath
from proxy.registry import Registry
from proxy.router import Route, SessionContext
from proxy.routing import Routing
from proxy.settings import Settings

log = logging.getLogger("weir.service")


class CacheService:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.host: EngineHost | None = None
        #: the routing of statements and its state (``proxy.routing``), the registry's too
        self.routing = Routing(settings, self._auto_due)
        self._starting: asyncio.Lock | None = None
        self._pending: EngineHost | None = None  # a host being started (``stop`` stops it too)
        self.hits = HitMemos()  # encoded answers of the hit path (``proxy.hitpath``)
        self.admins = identity.admin_roles(settings.admin_roles,
                                           settings.upstream_address.user)
        #: privileges and role defaults (``proxy.gates``; the hit path reads ``gates.grants``)
        self.gates = Gates(self, settings.staleness_bound)
        #: the cached reads and their encoders (``proxy.reads``)
        self.reads = ReadPath(self, settings, self.gates, self.hits)
        self.lanes: HitLanes | None = None  # threads answering quiet sessions (``proxy.lanes``)
        #: what a miss leaves for its fill's install (``proxy.fillstamps``)
        self.fillstamps = FillStamps(self.hits, self.is_current)
        self.mutating = asyncio.Lock()  # admin commands and schema checks change the caches

    @property
    def registry(self) -> Registry | None:
        """The caches, once caching runs (``Routing.registry``)."""
        return self.routing.registry

    @property
    def identity_functions(self) -> tuple[str, ...]:
        """User functions that may change a session's identity (``Routing``)."""
        return self.routing.identity_functions

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
        """Tell the lanes about every change of ``host`` they must not answer across (and
        both the memos and the lanes of the fills it installs)."""
        host.on_ready = self.fillstamps.ready
        lanes = self.lanes
        if lanes is None:
            return
        self.fillstamps.stamp = lanes.stamp
        host.engine.on_change = lanes.bump
        lanes.attach(host.engine)
        host.lane_hits = lambda: int(lanes.core.stats()[0])  # (what fills yield: admission)
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
                self.host, self.routing.registry = host, registry
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
        if self.host is not None:
            await self.gates.recheck(self.host)
        async with self.mutating:
            changed = await registry.changed_relations()
            if not changed:
                if await registry.follow_catalog():  # new tables: learnt routes go
                    self.refresh_names()
                    if not self.routing.cached_names:  # () is one object: sessions would
                        # not notice; a name no query text holds (no NUL)
                        self.routing.cached_names = ("\x00",)
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
        return self.routing.functions(tuple(r[0] for r in rows), functions)

    def is_current(self, entry: Any) -> bool:
        """Whether a cache entry (remembered by a prepared statement) is still the cache of
        its name: not dropped, and not dropped and created again for another query."""
        return self.registry is not None and self.registry.caches.get(entry.name) is entry

    def refresh_names(self) -> None:
        """After caches changed: the relation names of the pre-filter, and no column
        encoders memoized for a cache name that may now stand for another query."""
        self.reads.forget_encoders()
        self.routing.refresh_names()
        if self.lanes is not None:
            self.lanes.routing()

    def _auto_due(self, text: str, search_path: tuple[str, ...], timezone: str | None) -> None:
        """Auto mode: a query routed upstream is due for a cache (``Routing.note_upstream``;
        ``timezone``: the session TimeZone its plan computes in, if any)."""
        asyncio.get_running_loop().create_task(self._auto_create(text, search_path, timezone))

    async def _auto_create(self, text: str, search_path: tuple[str, ...],
                           timezone: str | None) -> None:
        registry = await self.ensure()
        try:
            await registry.create(text, search_path, timezone=timezone)
            self.refresh_names()
        except Exception as exc:  # AdminError, the upstream gone: the query stays upstream
            log.info("auto mode could not cache a query: %s", exc)

    # -- admin --------------------------------------------------------------------------------

    async def admin(self, route: Route, ctx: SessionContext) -> bytes:
        """Run an admin command (``proxy.commands.run``)."""
        return await commands.run(self, route, ctx)
