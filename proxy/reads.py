"""Cached reads: the rows of a routed read from the caches, and their encoded answers.

Owns: :class:`ReadPath` — a read's gates in order (role defaults, the role's privileges:
``proxy.gates``; the staleness bound; read-your-writes: the session's ``seen(s)`` covered,
``proxy.seen``), the read itself (every key of an IN list from one state of the cache; with
``--misses upstream``, ``proxy.misses``), and encoding the rows (the column encoders
memoized per cache, formats and output settings; the session's output settings and their
small id, which the hit path's memos are kept by). The rules are written once, in
:meth:`ReadPath.read_rows_now`: it answers without waiting, or says what the read must wait
for (:class:`Wait`: the role's defaults or privileges read upstream, a read-your-writes
barrier, a fill); the relay's synchronous path and a local portal's Execute stop there,
:meth:`ReadPath.read_rows` performs the wait and asks it again.

Every failure turns into "forward upstream" with the reason recorded for EXPLAIN LAST
STATEMENT; the client never sees an error it would not get from PostgreSQL.
"""

from __future__ import annotations

import enum
import time
from typing import Any, Protocol

from engine import merge_lookups
from pgwire import backend as be
from proxy import aftermiss, transactions
from proxy.caching import DROPPED, FAILED, EngineHost, ReadOutcome
from proxy.gates import Gates, stale
from proxy.hitpath import HitMemos
from proxy.misses import BEHIND, MISS, read_now
from proxy.results import OutputSettings, column_encoder, encode_rows, supports
from proxy.router import Route, SessionContext, output_unsupported, zone_mismatch, zone_unsupported
from proxy.seen import covered
from proxy.session import SessionState
from proxy.settings import Settings

#: (cache, key, engine answer) for each key read (the hit path's memo keeps them)
Reads = list[tuple[str, tuple[Any, ...], object]]
#: rows (None: go upstream) and the reason
Read = tuple[tuple[Any, ...] | None, str]
#: passes a read of several keys (an IN list) makes to take them all from one state, when
#: keys it waited for were evicted again before it could (then the read goes upstream)
ONE_STATE_ATTEMPTS = 3


class Wait(enum.Enum):
    """What a cached read must wait for before it can go on (:meth:`ReadPath.read_rows_now`);
    :meth:`ReadPath.read_rows` performs it and asks again."""

    DEFAULTS = "the role's and database's defaults, read upstream"
    GRANT = "the role's privileges, checked upstream"
    BARRIER = "a barrier sent after the session's last upstream answer (read-your-writes)"
    FILL = "a missing key's fill"


class HostOwner(Protocol):
    """Where the running cache host is found (``proxy.service.CacheService``)."""

    @property
    def host(self) -> EngineHost | None: ...


class ReadPath:
    """The cached reads of one service (see the module docstring)."""

    def __init__(self, owner: HostOwner, settings: Settings, gates: Gates,
                 hits: HitMemos) -> None:
        self.owner = owner
        self.settings = settings
        self.gates = gates
        self.hits = hits
        self._encoders: dict[tuple[str, tuple[int, ...], OutputSettings],
                             tuple[Any, str | None, list[Any]]] = {}

    def forget_encoders(self) -> None:
        """The caches changed: a cache name may now stand for another query."""
        self._encoders.clear()

    async def ensure_defaults(self, ctx: SessionContext) -> None:
        host = self.owner.host
        if not ctx.defaults_applied and host is not None:
            await self.gates.apply_defaults(host, ctx)

    # -- the rows -----------------------------------------------------------------------------

    def read_rows_now(self, route: Route, ctx: SessionContext | None, reads: Reads | None = None,
                      waited: frozenset[Wait] = frozenset()) -> Read | Wait:
        """The cached rows for a routed read, or None and why it must go upstream, or what
        it must wait for first (a :class:`Wait`; :meth:`read_rows` waits and asks again,
        passing what it ``waited`` for). The gates in order: the role's defaults, its
        privileges, the stream up, the staleness bound, read-your-writes (the session's
        seen(s) covered), then every key (``reads``, if given, receives (cache, key, engine
        answer) for each key read); the keys of an IN list are answered from one state of
        the cache, as one upstream snapshot would answer them."""
        host = self.owner.host
        if host is None:
            return None, "caching is not running"
        assert ctx is not None and route.keys is not None
        if not ctx.defaults_applied:
            return Wait.DEFAULTS
        if Wait.GRANT not in waited:  # (a verdict checked just now may not be remembered)
            allowed = self.gates.granted(ctx.user, route.cache.name)
            if allowed is None:
                return Wait.GRANT
            if not allowed:
                return None, _not_allowed(ctx)
        if not host.connected:
            return None, ReadOutcome.DOWN
        lag = host.staleness()
        if lag > self.settings.staleness_bound:
            return None, stale(lag)
        rule = self.settings.read_your_writes == "on" and Wait.BARRIER not in waited
        if self.settings.misses == "upstream":  # a miss goes upstream at once
            read = read_now(host, route, reads, count=Wait.BARRIER not in waited)
            if read[1] is MISS:  # its answer settles seen(s) at once (proxy.aftermiss)
                ctx.seen.missed = True
            if read[0] is None or not rule or covered(ctx.seen, host.coverage, time.monotonic()):
                return read
            if reads is not None:
                reads.clear()
            return Wait.BARRIER  # (a hit the session may not see yet)
        if rule and not covered(ctx.seen, host.coverage, time.monotonic()):
            return Wait.BARRIER
        name = route.cache.name
        tried, ctx.tried = ctx.tried, None
        counted = (len(route.keys) if Wait.FILL in waited
                   else tried[2] if tried is not None and tried[0] == name
                   and tried[1] == route.keys else 0)
        results = []
        for i, key in enumerate(route.keys):
            rows = host.try_read(name, key, count=i >= counted)
            if rows is None:  # its fill is started
                ctx.tried = (name, route.keys, max(counted, i + 1))
                return Wait.FILL
            if rows is FAILED:
                return None, ReadOutcome.FAILED
            if rows is DROPPED:
                return None, ReadOutcome.DROPPED
            results.append(rows)
        return _merged(route, results, reads)

    async def read_rows(self, route: Route, ctx: SessionContext | None,
                        reads: Reads | None = None) -> Read:
        """:meth:`read_rows_now`, performing what it waits for (at most ``--read-timeout``
        each) and asking again, until it answers."""
        waited: set[Wait] = set()
        fills = 0
        while True:
            step = self.read_rows_now(route, ctx, reads, frozenset(waited))
            if not isinstance(step, Wait):
                return step
            assert ctx is not None
            if step is Wait.FILL:
                if fills == ONE_STATE_ATTEMPTS:  # evicted again each time (a memory
                    # budget smaller than the IN list's keys)
                    return None, "the keys of the IN list did not stay cached together"
                fills += 1
                filled = await self._filled(route, ctx)
                if isinstance(filled, str):
                    return None, filled
                if len(filled) == 1:  # one key: the rows its fill answered are one state
                    return _merged(route, filled, reads)
            else:
                why = await self._wait(step, route, ctx)
                if why is not None:
                    return None, why
            waited.add(step)

    async def _wait(self, wait: Wait, route: Route, ctx: SessionContext) -> str | None:
        """Perform ``wait``; None when the read may go on, else why it goes upstream."""
        host = self.owner.host
        assert host is not None
        if wait is Wait.DEFAULTS:
            await self.gates.apply_defaults(host, ctx)
            if ctx.tainted is not None:
                return ctx.tainted
            parameters = parameters_of(ctx)
            reason = output_unsupported(route.cache.fields, {**parameters, **ctx.settings}) \
                or zone_unsupported(route.cache, parameters)
            if reason is None and ctx.block.open:  # the role's default isolation is known now
                reason = transactions.refusal("T", ctx.block, ctx.isolation)
            return reason
        if wait is Wait.GRANT:
            allowed = await self.gates.authorized(host, ctx.user, route.cache)
            return None if allowed else _not_allowed(ctx)
        assert wait is Wait.BARRIER
        if ctx.seen.expired:  # it waited its bound already (proxy.aftermiss.park)
            ctx.seen.expired = False
            return BEHIND
        if not aftermiss.worth_waiting(host):  # (mostly one-off reads: a rare hit)
            return aftermiss.NOT_WORTH_WAITING
        ok = await host.coverage.wait(ctx.seen.at, self.settings.read_timeout)
        return None if ok else BEHIND

    async def _filled(self, route: Route, ctx: SessionContext) -> list[Any] | str:
        """Wait.FILL: every key read, waiting for its fill: their rows, or why the read goes
        upstream. The keys of an IN list are then read again together, from one state
        (:meth:`read_rows_now`)."""
        host = self.owner.host
        assert host is not None and route.keys is not None
        name = route.cache.name
        tried, ctx.tried = ctx.tried, None
        counted = tried[2] if tried is not None and tried[0] == name \
            and tried[1] == route.keys else 0
        results: list[Any] = []
        for i, key in enumerate(route.keys):
            served = await host.read(name, key, count=i >= counted)
            if served.rows is None:
                return served.reason
            results.append(served.rows)
        return results

    # -- the answer ---------------------------------------------------------------------------

    def output_plan(self, entry: Any, formats: tuple[int, ...], settings: OutputSettings
                    ) -> tuple[str | None, list[Any]]:
        """Why a cache's columns cannot be encoded in these formats under these settings
        (None if they can), and their column encoders (memoized)."""
        key = (entry.name, formats, settings)
        found = self._encoders.get(key)
        # (memoized for this very entry: a read that began before its cache was planned
        # again, and resumed after forget_encoders, memoizes the old entry's shapes)
        if found is None or found[0] is not entry:
            if len(self._encoders) > 4096:
                self._encoders.clear()
            reason = settings.reason() or zone_mismatch(entry, settings.timezone) or next(
                (r for f, fmt in zip(entry.fields, formats, strict=True)
                 if (r := supports(f.type_oid, f.type_modifier, fmt, settings)) is not None),
                None)
            encoders = [] if reason is not None else [
                column_encoder(f.type_oid, f.type_modifier, fmt, settings)
                for f, fmt in zip(entry.fields, formats, strict=True)]
            found = self._encoders[key] = (entry, reason, encoders)
        return found[1], found[2]

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
                  reads: Reads | None = None) -> tuple[bytes | None, str] | None:
        """:meth:`serve` without waiting; None when it would have to wait."""
        read = self.read_rows_now(route, ctx, reads)
        return None if isinstance(read, Wait) else self._answer(route, ctx, parameters, read)

    async def serve(self, route: Route, ctx: SessionContext, parameters: dict[str, str],
                    reads: Reads | None = None) -> tuple[bytes | None, str]:
        """The complete text-format answer for a simple-protocol cached read (without
        ReadyForQuery), or None and why not (``reads`` as for :meth:`read_rows`)."""
        read = await self.read_rows(route, ctx, reads)
        return self._answer(route, ctx, parameters, read)

    def _answer(self, route: Route, ctx: SessionContext, parameters: dict[str, str],
                read: Read) -> tuple[bytes | None, str]:
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


def _merged(route: Route, results: list[Any], reads: Reads | None) -> Read:
    """The rows of every key read, as the query's plan merges them."""
    assert route.keys is not None and route.classified is not None
    if reads is not None:
        name = route.cache.name
        reads.extend((name, tuple(key), rows)
                     for key, rows in zip(route.keys, results, strict=True))
    plan = route.classified.query.plan  # type: ignore[union-attr]
    return tuple(merge_lookups(plan, results, route.params)), route.reason


def _not_allowed(ctx: SessionContext) -> str:
    return f"role {ctx.user} is not known to be allowed to read this cache"


def parameters_of(ctx: SessionContext) -> dict[str, str]:
    """The ParameterStatus values of the session a context belongs to."""
    return ctx.parameters if ctx.parameters is not None else {}
