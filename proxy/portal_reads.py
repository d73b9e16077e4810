"""Cached reads of local portals: what an Execute of a portal weir holds reads and encodes.

Owns: preparing the read of a :class:`~proxy.held.LocalPortal` (its route, the session's
output settings and result formats), following a held statement to the cache that now serves
its text when its own was dropped, reading it (``read_rows``) and encoding the rows
exactly; each step records in ``ctx.last`` (EXPLAIN LAST STATEMENT) why a read goes
upstream instead; a whole answer is given to the hit path's memos (:func:`memoize`). It
needs only the cached-read side of the service (``proxy.roles.CachedReads``; the memos:
``ExtendedService``).
"""

from __future__ import annotations

from typing import Any

from pgwire import backend as be
from proxy.fillstamps import Missed
from proxy.held import HeldStatement, LocalPortal, bind_keys, row_description
from proxy.hitpath import Hit, learned_batch
from proxy.misses import MISS
from proxy.params import formats_for
from proxy.results import OutputSettings, encode_rows
from proxy.roles import CachedReads, ExtendedService, Reads
from proxy.router import Route, SessionContext
from proxy.session import SessionState
from proxy.transactions import refusal

#: a portal's read: its route, the output settings and the result formats
Prepared = tuple[Route, OutputSettings, tuple[int, ...]]


def prepare(service: CachedReads, state: SessionState, ctx: SessionContext,
            local: LocalPortal) -> Prepared | None:
    """The read of a local portal, or None (and why, in EXPLAIN LAST STATEMENT) when
    its cache is gone or its results cannot be encoded exactly."""
    if not service.is_current(local.statement.route.cache) \
            and not renew(service, state, ctx, local):
        ctx.last = ("upstream", f"cache {local.statement.route.cache.name} was "
                    "dropped after this statement was prepared")
        return None
    held = local.statement.route
    entry = held.cache
    route = Route("cache", held.reason, classified=held.classified, cache=entry,
                  keys=local.keys, params=local.params)
    settings = service.reads.output_settings(state, ctx)
    fmts = formats_for(len(entry.fields), local.bind.result_formats)
    reason, _ = service.reads.output_plan(entry, fmts, settings)
    if reason is not None:
        ctx.last = ("upstream", reason)
        return None
    return route, settings, fmts


def follow(service: CachedReads, state: SessionState, ctx: SessionContext,
           held: HeldStatement) -> bool:
    """The cache a held statement was routed to is gone (dropped, or planned again after
    a schema change): route its text again; with a cache for it, the statement follows
    that cache (False: none)."""
    route = service.routing.route(held.parse.query, state, ctx)
    if route.cache is None or route.classified is None:
        return False
    held.route, held.memo, held.memo_sid = route, None, -1
    return True


def session_allows(state: SessionState, ctx: SessionContext | None) -> bool:
    """Whether the session lets weir answer a cached read: no setting weir does not follow,
    and no transaction block weir may not serve (``proxy.transactions``)."""
    if ctx is None:
        return not state.in_transaction
    return ctx.tainted is None \
        and refusal(state.transaction_status, ctx.block, ctx.isolation) is None


def why_not(state: SessionState, ctx: SessionContext | None) -> str:
    """Why :func:`session_allows` (or an idle session) said no."""
    if ctx is not None and ctx.tainted is not None:
        return ctx.tainted
    if ctx is not None and state.in_transaction:
        return refusal(state.transaction_status, ctx.block, ctx.isolation) \
            or "the session is busy upstream"
    return "the session is in a transaction block or busy upstream"


def describable(service: CachedReads, state: SessionState, ctx: SessionContext | None,
                held: HeldStatement) -> bool:
    """Whether weir may bind and describe ``held`` itself now: its cache is current (else
    it follows the one now serving its text) and no schema change may have passed since
    that cache's columns were described (``Gates.shape_known``). Otherwise the
    statement is described and run upstream, so a RowDescription never names a type the
    column no longer has."""
    entry = held.route.cache
    if entry is None or ctx is None:
        return True  # an admin command
    if not service.is_current(entry) and not follow(service, state, ctx, held):
        return False
    return service.gates.shape_known(held.route.cache)


def renew(service: CachedReads, state: SessionState, ctx: SessionContext,
          local: LocalPortal) -> bool:
    """:func:`follow` for a local portal's statement; the portal's keys follow the new
    cache too (False: no cache, or the keys do not fit it)."""
    held = local.statement
    if not follow(service, state, ctx, held):
        return False
    lookup = bind_keys(held, local.bind)
    if lookup is None:
        return False
    local.keys, local.params = lookup
    return True


def encode(service: CachedReads, ctx: SessionContext, local: LocalPortal,
           read: tuple[tuple[Any, ...] | None, str], prepared: Prepared) -> list[bytes] | None:
    """The DataRows of a read, or None (and why) when it must be answered upstream."""
    rows, why = read
    if rows is None:
        ctx.last = ("upstream", why)
        return None
    entry = local.statement.route.cache
    _, encoders = service.reads.output_plan(entry, prepared[2], prepared[1])
    try:
        data = [encode_rows([row], encoders) for row in rows]
    except Exception as exc:  # Unencodable and friends: answer from upstream
        ctx.last = ("upstream", f"a cached value cannot be encoded exactly: {exc}")
        return None
    ctx.last = ("cache", f"served by cache {entry.name}")
    return data


def note_miss(service: CachedReads, state: SessionState, ctx: SessionContext,
              local: LocalPortal, read: tuple[tuple[Any, ...] | None, str],
              prepared: Prepared | None) -> None:
    """A read that went upstream as a miss leaves what its answer is remembered by when
    the key's fill installs (``proxy.fillstamps``)."""
    if read[1] is not MISS or prepared is None or local.rest is None:
        return
    route, settings, fmts = prepared
    if route.cache is None or not _filling(service, route):
        return  # (no fill of its key pending: none will install, nothing to remember)
    stamps = service.fillstamps
    _, sid = service.reads.output_settings_id(state, ctx)
    _, encoders = service.reads.output_plan(route.cache, fmts, settings)
    held = local.statement
    stamps.missed(Missed(stamps.hits.statement_memo(held, sid), local.rest,
                         row_description(held, local.bind.result_formats), encoders, route))


def _filling(service: CachedReads, route: Route) -> bool:
    """Whether the one key of a read has a fill pending (``Engine.filling``): a miss that
    was not admitted, found the queue full or its table backing off leaves nothing behind
    (``proxy.fillstamps`` keeps only what a fill's install uses)."""
    host = service.reads.owner.host
    if host is None or route.keys is None or len(route.keys) != 1 or route.cache is None:
        return False
    try:
        return bool(host.engine.filling(route.cache.name, tuple(route.keys[0])))
    except Exception:  # (a dropped cache: nothing will install)
        return False


async def cached_rows(service: CachedReads, state: SessionState, ctx: SessionContext,
                      local: LocalPortal) -> list[bytes] | None:
    """Read and encode a local portal's rows, waiting for a fill or barrier if needed."""
    if not ctx.defaults_applied:  # output settings may come from the role's defaults
        await service.reads.ensure_defaults(ctx)
    prepared = prepare(service, state, ctx, local)
    if prepared is None:
        return None
    reads: Reads = []
    read = await service.reads.read_rows(prepared[0], ctx, reads)
    local.reads = reads
    note_miss(service, state, ctx, local, read, prepared)
    return encode(service, ctx, local, read, prepared)


def memoize(service: ExtendedService, state: SessionState, ctx: SessionContext | None,
            local: LocalPortal, body: bytes, recording: tuple[bytes, bool] | None
            ) -> tuple[bytes, bool] | None:
    """Give a whole cached answer ``body`` of a local portal to the hit path's memos: the
    statement's, and, for the unnamed statement's portal, the batch ``recording`` (batch
    bytes, whether it describes the portal: ``Extended.recording``). Returns the recording
    left to learn (None once this answer used it)."""
    held = local.statement
    if local.rest is None or local.reads is None or ctx is None or held.route.cache is None:
        return recording
    _, sid = service.reads.output_settings_id(state, ctx)
    description = row_description(held, local.bind.result_formats)
    reads = tuple(local.reads)
    memo = service.hits.statement_memo(held, sid)
    hit = Hit(reads, description, body, ctx.last)
    service.hits.remember(memo, local.rest, hit)
    lanes = service.lanes
    if lanes is not None and memo.get(local.rest) is hit:  # (remembered: not too large)
        lanes.stamp(memo, local.rest, hit)
    if recording is None or state.held.get("") is not held:
        return recording
    batch, describe = recording
    if not learned_batch(batch, held.parse, local.rest):
        return None  # recorded for another batch (this one did not pass the hit path)
    answer = (be.PARSE_COMPLETE.encode() + be.BIND_COMPLETE.encode()
              + (description if describe else b"") + body)
    service.hits.remember(service.hits.batches(ctx.database, ctx.search_path, sid),
                          batch, Hit(reads, b"", answer, ctx.last, statement=held))
    return None
