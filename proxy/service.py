"""The caching side of the server: routing statements, answering from caches, admin SQL.

Owns: ``CacheService`` — started lazily (the replication stream and fill pool exist only once
a cache does, in auto mode, or when caches are restored from the state directory), the per-statement
decision (``proxy.router``) with a cheap pre-filter while no cache could match, answering a
cached read (read-your-writes barrier, staleness bound, the read itself — every key of an IN
list from one state of the cache —, encoding the rows), and executing the admin commands
(``proxy.commands`` builds their answers) into complete backend message bytes.

Every failure on the cache side turns into "forward upstream" with the reason recorded for
EXPLAIN LAST STATEMENT; the client never sees an error it would not get from PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import cython_ext
from engine import effective_search_path, merge_lookups
from pgwire import backend as be
from proxy import commands
from proxy.admin import CreateCache, DropCache, Show, parse_admin
from proxy.caching import DROPPED, FAILED, EngineHost, ReadOutcome
from proxy.hitpath import HitMemos
from proxy.lanes import HitLanes, cpu_quota, lane_plan
from proxy.metrics import ADMIN, count_forward, own_error
from proxy.registry import AdminError, Registry
from proxy.results import OutputSettings, column_encoder, encode_rows, supports
from proxy.router import Route, SessionContext, output_unsupported, route_query
from proxy.rules import hides_write, hiding_words, plain_text
from proxy.session import SessionState
from proxy.settings import Settings

log = logging.getLogger("weir.service")

#: CommandComplete tags of statements that may change a relation a cache reads
_DDL_TAGS = (b"ALTER", b"DROP", b"CREATE")
#: passes a read of several keys (an IN list) makes to take them all from one state, when
#: keys it waited for were evicted again before it could (then the read goes upstream)
ONE_STATE_ATTEMPTS = 3



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
        #: (role, database) -> (default settings, time.monotonic() read); ``_apply_defaults``
        self._defaults: dict[tuple[str, str], tuple[dict[str, str], float]] = {}
        #: (role, cache) -> (may read, time.monotonic() it expires); see ``_authorized`` (the
        #: hit path reads it directly)
        self.grants: dict[tuple[str, str], tuple[bool, float]] = {}
        self._encoders: dict[tuple[str, tuple[int, ...], OutputSettings],
                             tuple[str | None, list[Any]]] = {}
        self.hits = HitMemos()  # encoded answers of the hit path (``proxy.hitpath``)
        self.lanes: HitLanes | None = None  # threads answering quiet sessions (``proxy.lanes``)
        self._mutating = asyncio.Lock()  # admin commands and schema checks change the caches

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
                host = EngineHost(s.upstream, memory_budget=s.memory_budget,
                                  read_timeout=s.read_timeout,
                                  replication_slot=s.replication_slot)
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
                self._refresh_names()
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
            self._refresh_names()
        async with self._mutating:
            changed = await registry.changed_relations()
            if not changed:
                if await registry.follow_catalog():  # new tables: learnt routes go
                    self._refresh_names()
                    self.cached_names = _Names(self.cached_names)  # a new object: noticed
                    self.hits.clear()
                    if self.lanes is not None:
                        self.lanes.clear()
                return
            for line in await registry.replan(changed):
                log.warning("%s", line)
            # state built under the old shapes (shared base nodes, their rows) goes too
            registry.host.reset_all("a relation that caches read changed")
            self._refresh_names()
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
        rows = await self.host.pool.fetch(self.WRITERS_QUERY)
        writers = tuple(r[0] for r in rows)
        if writers == self.writers:
            return False
        self.writers, self.hiding = writers, hiding_words(writers)
        return True

    def hides_write(self, text: str) -> bool:
        """Whether a statement may write while its CommandComplete tag says it cannot (only
        while caching runs: read-your-writes has nothing to do otherwise)."""
        return hides_write(text.lower(), self.hiding_now())

    def hiding_now(self) -> tuple[str, ...]:
        """The words that make a statement hide a write while read-your-writes runs."""
        on = self.registry is not None and self.settings.read_your_writes == "on"
        return self.hiding if on else ()

    def is_current(self, entry: Any) -> bool:
        """Whether a cache entry (remembered by a prepared statement) is still the cache of
        its name: not dropped, and not dropped and created again for another query."""
        return self.registry is not None and self.registry.caches.get(entry.name) is entry

    def _refresh_names(self) -> None:
        """After caches changed: the relation names of the pre-filter, and no column
        encoders memoized for a cache name that may now stand for another query."""
        self._encoders.clear()
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
            self._refresh_names()
        except Exception as exc:  # AdminError, the upstream gone: the query stays upstream
            log.info("auto mode could not cache a query: %s", exc)

    # -- cached reads -------------------------------------------------------------------------

    def read_rows_now(self, route: Route, ctx: SessionContext | None,
                      reads: list[tuple[str, tuple[Any, ...], object]] | None = None
                      ) -> tuple[tuple[Any, ...] | None, str] | None:
        """:meth:`read_rows` without waiting: None when it would have to wait (a key is
        missing — its fill is started — or a read-your-writes barrier is due). ``reads``,
        if given, receives (cache, key, engine answer) for each key read."""
        host = self.host
        if host is None:
            return None, "caching is not running"
        assert ctx is not None and route.keys is not None and route.classified is not None
        if ctx.wrote and self.settings.read_your_writes == "on":
            return None
        if not ctx.defaults_applied:
            return None
        allowed = self.granted(ctx.user, route.cache.name)
        if allowed is None:
            return None
        if not allowed:
            return None, f"role {ctx.user} is not known to be allowed to read this cache"
        if not host.connected:
            return None, ReadOutcome.DOWN
        lag = host.staleness()
        if lag > self.settings.staleness_bound:
            return None, _stale(lag)
        results = []
        ctx.tried = None
        for i, key in enumerate(route.keys):
            rows = host.try_read(route.cache.name, key)
            if rows is None:
                ctx.tried = (route.cache.name, route.keys, i + 1)
                return None
            if rows is FAILED:
                return None, ReadOutcome.FAILED
            if rows is DROPPED:
                return None, ReadOutcome.DROPPED
            results.append(rows)
            if reads is not None:
                reads.append((route.cache.name, tuple(key), rows))
        plan = route.classified.query.plan  # type: ignore[union-attr]
        return tuple(merge_lookups(plan, results, route.params)), route.reason

    async def read_rows(self, route: Route, ctx: SessionContext | None,
                        reads: list[tuple[str, tuple[Any, ...], object]] | None = None
                        ) -> tuple[tuple[Any, ...] | None, str]:
        """The cached rows for a routed read, or None and why the read must go upstream
        (``reads`` as for :meth:`read_rows_now`). The keys of an IN list are answered from
        one state of the cache, as one upstream snapshot would answer them."""
        host = self.host
        if host is None:
            return None, "caching is not running"
        assert ctx is not None
        if not ctx.defaults_applied:
            await self._apply_defaults(ctx)
            if ctx.tainted is not None:
                return None, ctx.tainted
            reason = output_unsupported(route.cache.fields, {**parameters_of(ctx), **ctx.settings})
            if reason is not None:
                return None, reason
        if not await self._authorized(ctx.user, route.cache):
            return None, f"role {ctx.user} is not known to be allowed to read this cache"
        lag = host.staleness()
        if lag > self.settings.staleness_bound:
            return None, _stale(lag)
        if ctx.wrote and self.settings.read_your_writes == "on":
            try:
                await host.barrier(self.settings.read_timeout)
            except Exception as exc:  # any barrier failure means: go upstream
                return None, f"read-your-writes barrier did not pass ({exc})"
            ctx.wrote = False
        entry = route.cache
        assert route.keys is not None and route.classified is not None
        tried, ctx.tried = ctx.tried, None
        counted = (tried[2] if tried is not None and tried[0] == entry.name
                   and tried[1] == route.keys else 0)
        results: list[Any] = []
        for _ in range(ONE_STATE_ATTEMPTS):
            results = []
            for i, key in enumerate(route.keys):
                served = await host.read(entry.name, key, count=i >= counted)
                if served.rows is None:
                    return None, served.reason
                results.append(served.rows)
            counted = len(route.keys)  # a later pass counts nothing
            if len(results) == 1:
                break
            # the keys read before a wait are from an older state than those filled after
            # it: take them all again from the current state, with no wait in between
            again = [host.try_read(entry.name, key, count=False) for key in route.keys]
            if any(rows is FAILED for rows in again):
                return None, ReadOutcome.FAILED
            if any(rows is DROPPED for rows in again):
                return None, ReadOutcome.DROPPED
            if all(rows is not None for rows in again):
                results = list(again)
                break
        else:  # evicted again each time (a memory budget smaller than the IN list's keys)
            return None, "the keys of the IN list did not stay cached together"
        if reads is not None:
            reads.extend((entry.name, tuple(key), rows)
                          for key, rows in zip(route.keys, results, strict=True))
        plan = route.classified.query.plan  # type: ignore[union-attr]
        return tuple(merge_lookups(plan, results, route.params)), route.reason

    def output_plan(self, entry: Any, formats: tuple[int, ...], settings: OutputSettings
                    ) -> tuple[str | None, list[Any]]:
        """Why a cache's columns cannot be encoded in these formats under these settings
        (None if they can), and their column encoders (memoized)."""
        key = (entry.name, formats, settings)
        found = self._encoders.get(key)
        if found is None:
            if len(self._encoders) > 4096:
                self._encoders.clear()
            reason = settings.reason() or next(
                (r for f, fmt in zip(entry.fields, formats, strict=True)
                 if (r := supports(f.type_oid, f.type_modifier, fmt, settings)) is not None),
                None)
            encoders = [] if reason is not None else [
                column_encoder(f.type_oid, f.type_modifier, fmt, settings)
                for f, fmt in zip(entry.fields, formats, strict=True)]
            found = self._encoders[key] = (reason, encoders)
        return found

    def output_settings(self, state: SessionState, ctx: SessionContext) -> OutputSettings:
        """The session's output settings, recomputed only when its parameters change."""
        return self.output_settings_id(state, ctx)[0]

    def output_settings_id(self, state: SessionState, ctx: SessionContext
                           ) -> tuple[OutputSettings, int]:
        """:meth:`output_settings` and a small number standing for them (the hit path's
        memos are per settings)."""
        cached = ctx.output
        if cached is not None and cached[0] == state.parameters_version \
                and cached[1] == ctx.settings_version:
            return cached[2]  # type: ignore[no-any-return]
        settings = OutputSettings.from_parameters({**state.parameters, **ctx.settings})
        found = (settings, self.hits.settings_id(settings))
        ctx.output = (state.parameters_version, ctx.settings_version, found)
        return found

    def serve_now(self, route: Route, ctx: SessionContext, parameters: dict[str, str],
                  reads: list[tuple[str, tuple[Any, ...], object]] | None = None
                  ) -> tuple[bytes | None, str] | None:
        """:meth:`serve` without waiting; None when it would have to wait."""
        read = self.read_rows_now(route, ctx, reads)
        return None if read is None else self._answer(route, ctx, parameters, read)

    async def serve(self, route: Route, ctx: SessionContext, parameters: dict[str, str],
                    reads: list[tuple[str, tuple[Any, ...], object]] | None = None
                    ) -> tuple[bytes | None, str]:
        """The complete text-format answer for a simple-protocol cached read (without
        ReadyForQuery), or None and why not (``reads`` as for :meth:`read_rows_now`)."""
        read = await self.read_rows(route, ctx, reads)
        return self._answer(route, ctx, parameters, read)

    def _answer(self, route: Route, ctx: SessionContext, parameters: dict[str, str],
                read: tuple[tuple[Any, ...] | None, str]) -> tuple[bytes | None, str]:
        rows, reason = read
        if rows is None:
            return None, reason
        entry = route.cache
        settings = OutputSettings.from_parameters({**parameters, **ctx.settings})
        reason_not, encoders = self.output_plan(entry, (0,) * len(entry.fields), settings)
        if reason_not is not None:
            return None, reason_not
        try:
            body = encode_rows(rows, encoders)
        except Exception as exc:  # Unencodable and friends: answer from upstream
            return None, f"a cached value cannot be encoded exactly: {exc}"
        return (be.RowDescription(entry.fields).encode() + body
                + be.CommandComplete(f"SELECT {len(rows)}").encode()), reason

    # -- role and database defaults -----------------------------------------------------------

    DEFAULTS_QUERY = """
        SELECT s.setrole <> 0, s.setdatabase <> 0, s.setconfig
        FROM pg_db_role_setting s
        WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = $2))
          AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = $1))"""
    SERVER_QUERY = """
        SELECT name, CASE WHEN source IN ('user', 'database', 'client', 'session')
                          THEN boot_val ELSE setting END
        FROM pg_settings WHERE name IN ('search_path', 'extra_float_digits', 'bytea_output')"""

    async def ensure_defaults(self, ctx: SessionContext) -> None:
        if not ctx.defaults_applied and self.host is not None:
            await self._apply_defaults(ctx)

    async def _apply_defaults(self, ctx: SessionContext) -> None:
        """Follow what ALTER ROLE/DATABASE ... SET (and the server configuration) make the
        session's defaults, which the wire never shows: output settings the client did not
        SET itself, and search_path (a different one sends the session's reads upstream)."""
        key = (ctx.user, ctx.database)
        found = self._defaults.get(key)
        if found is None or time.monotonic() - found[1] > self.GRANT_TTL:
            assert self.host is not None
            try:
                values = dict(await self.host.pool.fetch(self.SERVER_QUERY))
                rows = await self.host.pool.fetch(self.DEFAULTS_QUERY, ctx.user, ctx.database)
            except Exception as exc:
                log.info("reading role defaults for %s failed: %s", ctx.user, exc)
                ctx.tainted = ctx.tainted or "the session's role defaults could not be read"
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
        path = values.get("search_path")
        if (path is not None and ctx.tainted is None
                and effective_search_path(path, ctx.user) != ctx.search_path):
            ctx.tainted = f"the role's or database's search_path is {path}"
        ctx.defaults_applied = True

    # -- authorization ------------------------------------------------------------------------

    GRANT_TTL = 60.0

    def granted(self, user: str, cache: str) -> bool | None:
        """The remembered verdict for (role, cache), or None when it must be checked."""
        verdict = self.grants.get((user, cache))
        if verdict is None or time.monotonic() > verdict[1]:
            return None
        return verdict[0]

    async def _authorized(self, user: str, entry: Any) -> bool:
        """Whether ``user`` may SELECT from every relation the cache reads (checked on
        weir's connection with ``has_table_privilege``, remembered for ``GRANT_TTL``)."""
        known = self.granted(user, entry.name)
        if known is not None:
            return known
        assert self.host is not None
        try:
            allowed = bool(await self.host.pool.fetchval(
                "SELECT coalesce(bool_and(has_table_privilege($1, r, 'SELECT')), true) "
                "FROM unnest($2::oid[]) AS r", user, list(entry.query.plan.relations)))
        except Exception as exc:  # unknown role, lost connection: not known to be allowed
            log.info("privilege check for role %s failed: %s", user, exc)
            allowed = False
        self.grants[(user, entry.name)] = (allowed, time.monotonic() + self.GRANT_TTL)
        return allowed

    def forget_grants(self, tag: bytes = b"") -> None:
        """Privileges may have changed (GRANT, REVOKE, ALTER/DROP ... passed through weir);
        after DDL (``tag`` starts with ALTER, DROP or CREATE) the caches' relations may have
        changed too: no cached read until a heartbeat has checked them."""
        self.grants.clear()
        if self.lanes is not None:
            self.lanes.bump()
        if tag.startswith(_DDL_TAGS) and self.host is not None:
            self.host.distrust()

    # -- admin --------------------------------------------------------------------------------

    async def admin(self, route: Route, ctx: SessionContext) -> bytes:
        """Run an admin command; errors become an ErrorResponse (the session goes on)."""
        ADMIN[0] += 1
        cmd = route.admin
        try:
            if isinstance(cmd, Show) and cmd.what == "last":
                return commands.result_set(["destination", "reason"], [ctx.last], "SELECT 1")
            registry = await self.ensure()
            async with self._mutating:
                if isinstance(cmd, CreateCache):
                    answer = await commands.create(registry, cmd, ctx)
                    self._refresh_names()
                    return answer
                if isinstance(cmd, DropCache):
                    n = registry.drop(cmd.name)
                    self._refresh_names()
                    return be.CommandComplete(
                        "DROP CACHE" if cmd.name else f"DROP ALL CACHES {n}").encode()
            assert isinstance(cmd, Show)
            return commands.show(registry, cmd.what, self.lanes, self.hits,
                                 self.settings.upstream_address)
        except AdminError as exc:
            return own_error("42000", str(exc))
        except Exception as exc:
            log.exception("admin command failed")
            return own_error("XX000", f"weir: {exc}")

def _stale(lag: float) -> str:
    if lag == float("inf"):
        return ("no heartbeat has passed since the caches started or a schema change passed "
                "through weir: the caches' tables are being checked")
    return f"replication lag of up to {lag:.1f}s exceeds the staleness bound"


def parameters_of(ctx: SessionContext) -> dict[str, str]:
    """The ParameterStatus values of the session a context belongs to."""
    return ctx.parameters if ctx.parameters is not None else {}


class _Names(tuple[str, ...]):
    """A names tuple that is a new object even when empty (``()`` is a singleton)."""

    __slots__ = ()
