"""The extended query protocol for statements weir answers itself.

Owns: statements weir *holds* (the client's Parse was answered by weir and not sent upstream:
cached SELECTs and admin commands; ``proxy.held``), portals bound from them (their cached
reads: ``proxy.portal_reads``), and answering Parse/Bind/Describe/Execute/Close/Sync/Flush for
those — ParseComplete, BindComplete, ParameterDescription, RowDescription with the Bind's
result formats, DataRows honouring the Execute row limit (PortalSuspended, then the rest on
the next Execute), CommandComplete, CloseComplete and ReadyForQuery.

Rules that keep the client's view identical to PostgreSQL's:
- the messages of one batch (up to Sync) are answered in order: weir answers a message itself
  only while nothing of the batch has gone upstream; once something has, the rest of the batch
  goes upstream too;
- a held statement or local portal that must be used upstream after all (the session entered
  a transaction, the cache declined the read, a binary format weir cannot produce, a schema
  change, ...) is first recreated upstream from the client's own Parse/Bind bytes, and the
  upstream's ParseComplete/BindComplete for them are swallowed (``SessionState.injected``); a
  statement recreated upstream stays held (later runs outside a transaction block are
  answered by weir again), and closing it closes the upstream's copy too; a batch answered
  entirely by weir ends with weir's own ReadyForQuery.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pgwire import backend as be
from pgwire import frontend as fe
from proxy import portal_reads
from proxy.admin import Show, parse_admin
from proxy.forwarding import bind_names
from proxy.held import (
    PLACEHOLDER_PORTAL,
    HeldStatement,
    LocalPortal,
    adopt,
    bind_keys,
    next_rows,
    param_types,
    row_description,
)
from proxy.hitpath import bind_rest
from proxy.reads import Wait
from proxy.roles import ExtendedService, ExtendedSession
from proxy.router import Route, session_zone
from proxy.session import SessionState
from proxy.upstream_copies import UpstreamCopies

log = logging.getLogger("weir.extended")

#: message classes tested on every forwarded message (tuples: a ``X | Y`` union would be
#: built again on each test)
_NAMED = (fe.Describe, fe.Close)
_BATCH_ENDS = (fe.Sync, fe.Flush)
_EXTENDED = (fe.Parse, fe.Bind, fe.Describe, fe.Execute, fe.Close)
_T_BIND, _T_QUERY = ord("B"), ord("Q")


@dataclass(slots=True)
class Extended:
    """Per-session state for held statements; driven by the session's message pump."""

    session: ExtendedSession
    service: ExtendedService
    #: the session core (``proxy.session_core``): the held statements (``held``) and local
    #: portals (``held_portals``), the batch flags, the reasons and routes of what went
    #: upstream live there, where the relay core and the hit path read them
    core: SessionState = field(init=False)
    #: the upstream's copies of the held statements and portals (``proxy.upstream_copies``)
    copies: UpstreamCopies = field(init=False)
    #: local answers not yet written: one socket write per batch, flushed before anything
    #: goes upstream, at Sync/Flush and when the pump stops
    out: list[bytes] = field(default_factory=list)
    #: ``out`` waits for the upstream's first answer and goes in front of it (a miss of a
    #: local portal: the client is woken once, not first for its BindComplete alone)
    deferred: bool = False
    #: an unnamed Parse/Bind/Execute batch the hit path may learn: (batch bytes, whether it
    #: describes the portal); dropped at Sync or when anything goes upstream, and learned
    #: only if it is the batch answered (``hitpath.learned_batch``)
    recording: tuple[bytes, bool] | None = None
    #: a batch whose outcome changes held statements (a Parse or Close of one, a statement
    #: recreated upstream) was synced: messages after it wait until PostgreSQL answered it
    wait_settle: bool = False
    _settled: asyncio.Event | None = None

    def __post_init__(self) -> None:
        self.core = self.session.state
        self.copies = UpstreamCopies(self.session)
        self.core.on_settled = self._on_settled

    def _on_settled(self) -> None:
        self.wait_settle = False
        if self._settled is not None:
            self._settled.set()

    wake = _on_settled  # (the session ends: nothing more will be answered)

    async def settle(self) -> None:
        """Wait until PostgreSQL answered every request whose outcome weir's bookkeeping
        of held statements depends on (so the next batch is handled on what it did)."""
        while self.wait_settle:
            self._settled = asyncio.Event()
            await self._settled.wait()

    # -- deciding ---------------------------------------------------------------------------

    def involves(self, msg: object) -> bool:
        """Whether ``msg`` must go through the asynchronous local path."""
        if self.wait_settle:
            return True
        if isinstance(msg, fe.Parse):
            return self._holdable(msg) is not None or msg.name in self.core.held
        if isinstance(msg, fe.Bind):
            return msg.statement in self.core.held or msg.portal in self.core.held_portals
        if isinstance(msg, _NAMED):
            table = self.core.held if msg.kind == "S" else self.core.held_portals
            return msg.name in table
        if isinstance(msg, fe.Execute):
            return msg.portal in self.core.held_portals
        if isinstance(msg, _BATCH_ENDS):
            return self.core.batch_local
        return False

    def adopt(self) -> None:
        """The caches changed: statements this session prepared upstream whose text a cache
        now serves are held too (``upstream=True``: both have them), so their next runs
        outside a transaction block are answered by weir — a cache created while an
        application keeps its connections and prepared statements serves them at once."""
        session = self.session
        registry, ctx = self.service.registry, session.ctx
        if registry is not None and ctx is not None and ctx.tainted is None:
            adopt(self.core.held, session.state.statements, registry, ctx.search_path,
                  session_zone(session.state.parameters))

    @property
    def quiet(self) -> bool:
        """Nothing is held or answered locally, and no outcome is awaited: content-free
        messages need no look."""
        return not (self.core.held or self.core.held_portals or self.core.batch_local
                    or self.core.uncertain)

    @property
    def passing(self) -> bool:
        """Held statements apart, nothing is answered locally and no outcome is awaited: a
        run of a statement prepared upstream (a Bind seen before naming no held statement,
        Describe of a portal, Execute, Sync, Flush) needs no look (``Session.forward_client``,
        the relay core)."""
        c = self.core
        return not (c.held_portals or c.batch_local or c.uncertain or self.wait_settle)

    def observe_forwarded(self, msg: object) -> None:
        """A message went upstream on the synchronous path: keep the bookkeeping right."""
        if isinstance(msg, fe.Sync):
            self.core.batch_upstream = self.core.batch_local = False
            self.core.held_portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.core.uncertain > 0
        elif isinstance(msg, _EXTENDED):
            if not self.core.batch_upstream:
                self.copies.switch()
            self.core.batch_upstream = True
            if isinstance(msg, fe.Parse):
                self.core.held.pop(msg.name, None)
                self.core.reasons[msg.name] = self.core.last_reason
                self._note_proxied(msg.name)
            elif isinstance(msg, fe.Bind):
                self.core.held_portals.pop(msg.portal, None)
                self.core.portal_statements[msg.portal] = msg.statement
                self._note_upstream(msg.statement)  # (its Execute is not decoded)
                if self.core.routes:
                    self.count_runs(msg.statement)
            elif isinstance(msg, fe.Execute):
                self._note_upstream(self.core.portal_statements.get(msg.portal, ""))

    def _note_proxied(self, name: str) -> None:
        """Remember the route of the statement just parsed upstream, so that each of its
        runs counts for SHOW PROXIED QUERIES and auto mode (:meth:`count_runs`)."""
        route, self.core.last_route = self.core.last_route, None
        if route is not None and route.classified is not None:
            self.core.routes[name] = route
        else:
            self.core.routes.pop(name, None)

    def count_runs(self, statement: str, times: int = 1) -> None:
        """A statement parsed upstream ran again ``times`` times (its Binds went upstream)."""
        route = self.core.routes.get(statement)
        if route is not None and self.session.ctx is not None:
            self.service.routing.note_upstream(route, self.session.ctx, times)

    def _note_upstream(self, statement: str, reason: str | None = None) -> None:
        ctx = self.session.ctx
        if ctx is not None:
            ctx.last = ("upstream",
                        reason or self.core.reasons.get(statement, "not a cached query"))

    def _can_answer(self, held: HeldStatement | None = None) -> bool:
        """Whether weir may answer now: nothing of the batch upstream, nothing pending, and (for
        cached reads, not admin commands) ``portal_reads.session_allows`` (no setting weir does
        not follow, no transaction block it may not serve)."""
        state = self.core
        if held is not None and held.route.destination == "admin":
            return not state.batch_upstream and state.caught_up
        return not state.batch_upstream and state.caught_up \
            and portal_reads.session_allows(state, self.session.ctx)

    def _describable(self, held: HeldStatement, portal: str = "") -> bool:
        c = self.core  # (a named portal outlives Sync inside a block: upstream's alone)
        return not (portal and c.in_transaction) and portal_reads.describable(
            self.service, c, self.session.ctx, held)

    def _why_not(self) -> str:  # (for EXPLAIN LAST STATEMENT)
        return portal_reads.why_not(self.core, self.session.ctx)

    def _holdable(self, msg: fe.Parse) -> Route | None:
        session = self.session
        service = self.service
        if not service.enabled or session.ctx is None:
            return None
        admin = parse_admin(msg.query)
        if admin is not None:
            return Route("admin", "weir command", admin=admin)
        if service.registry is None:
            return None
        route = service.routing.route(msg.query, session.state, session.ctx)
        if route.destination == "cache" or route.cache is not None:
            return route
        self.core.last_reason = route.reason
        self.core.last_route = route
        return None

    # -- the pump ---------------------------------------------------------------------------

    def handle_now(self, msg: object, raw: bytes) -> bool:
        """Answer or forward one client message without waiting; False (and nothing done)
        when it needs :meth:`handle` (a cache miss, a barrier or an admin command)."""
        if self.wait_settle:
            return False  # (handle() waits first)
        if self.core.batch_failed and not isinstance(msg, fe.Sync):
            return True  # PostgreSQL ignores the rest of a failed batch
        if isinstance(msg, fe.Execute):
            return self._execute(msg, raw, wait=False)
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            self.forward(msg, raw)
        else:
            handler(self, msg, raw)
        return True

    async def handle(self, msg: object, raw: bytes) -> None:
        """Answer or forward one client message, waiting for the cache where needed."""
        await self.settle()
        if isinstance(msg, fe.Execute) and not self.core.batch_failed:
            local = self.core.held_portals.get(msg.portal)
            if local is not None and self._can_answer(local.statement):
                if local.statement.route.destination == "admin":
                    await self._execute_admin(local)
                    return
                if local.rows is None:
                    ctx = self.session.ctx
                    assert ctx is not None
                    local.rows = await portal_reads.cached_rows(
                        self.service, self.core, ctx, local)
                    if local.rows is None:
                        self.copies.materialize_portal(msg.portal)
                        self.forward(msg, raw)
                        return
        self.handle_now(msg, raw)

    def forward(self, msg: object, raw: bytes) -> None:
        self.recording = None
        if not self.core.batch_upstream and not isinstance(msg, _BATCH_ENDS):
            self.copies.switch()
        self.session.forward(msg, raw)
        if isinstance(msg, fe.Sync):
            self.core.batch_upstream = self.core.batch_local = False
            self.core.held_portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.core.uncertain > 0
        elif not isinstance(msg, fe.Flush):
            self.core.batch_upstream = True

    def malformed(self, mtype: int, raw: bytes) -> bool:
        """A client message weir cannot decode (one of ``forwarding.JUDGED_UPSTREAM``) goes
        upstream as it is, after weir's earlier answers, for PostgreSQL's own ERROR 08P01;
        the rest of its batch then goes upstream too (PostgreSQL skips it up to the Sync).
        A Bind naming a statement only weir holds first recreates it upstream (PostgreSQL,
        holding it, then finds the message malformed rather than the statement missing). In
        a batch weir failed itself it is ignored, as PostgreSQL ignores any message there.
        False (nothing done) while an outcome is awaited: the pump waits first."""
        if self.wait_settle:
            return False
        if self.core.batch_failed:
            return True
        if mtype == _T_BIND:
            names = bind_names(raw, 5, len(raw))
            if names:
                self.copies.materialize(names[names.index(b"\0") + 1 : -1].decode(
                    "utf-8", "surrogateescape"))
        self.recording = None
        if not self.core.batch_upstream and mtype != _T_QUERY:
            self.copies.switch()
        self.session.forward_malformed(mtype, raw)
        return True

    def _answer(self, data: bytes) -> None:
        self.core.batch_local = True
        self.out.append(data)

    def flush(self) -> None:
        """Write the buffered local answers."""
        if self.out and not self.deferred:
            data = self.take_deferred()
            self.session.client.write(data)

    def take_deferred(self) -> bytes:
        """``out``, joined and emptied (the relay's Python path puts it in front of the
        upstream's first answer while ``deferred``)."""
        data, self.deferred = b"".join(self.out), False
        self.out.clear()
        return data

    def _placeholder(self, answer: bytes) -> None:
        """Send weir's own ``answer`` after what went upstream before it: a request of
        weir's whose answer takes its place (closing a portal no client names) goes upstream,
        so the answer reaches the client in order, and not at all when an error earlier in
        the batch makes PostgreSQL skip the rest of it."""
        self.flush()
        self.session.inject(fe.Close("P", PLACEHOLDER_PORTAL), answer)

    def simple_query(self, answered: bool = False) -> None:
        """A simple Query runs: PostgreSQL drops the unnamed statement and portal first.
        When weir ``answered`` it, the upstream's unnamed statement is closed the same way
        (answer swallowed, and flushed at once so the session is soon idle again)."""
        self.core.held.pop("", None)
        self.core.held_portals.pop("", None)
        if answered and "" in self.core.statements:
            self.session.inject(fe.Close("S", ""))
            self.session.inject_flush()

    def _parse(self, msg: fe.Parse, raw: bytes) -> None:
        route = self._holdable(msg)
        if route is not None and not self._can_answer(HeldStatement(msg, route)):
            route = None
        if msg.name and (msg.name in self.core.held or msg.name in self.core.statements):
            route = None  # let PostgreSQL say "already exists"
        if route is None:
            self.copies.before_statement(msg.query)
            if msg.name:
                self.copies.materialize(msg.name)  # PostgreSQL then says it exists already
                self.forward(msg, raw)
            else:
                # the unnamed statement is replaced (portals bound from it go upstream
                # first, in :meth:`forward`, while it is still the one PostgreSQL holds),
                # even when the Parse fails; not when PostgreSQL skips it
                old = self.core.held.pop("", None)
                self.forward(msg, raw)
                if old is not None:
                    self.core.attach(skipped=partial(self._restore, "", old))
            self.core.reasons[msg.name] = self.core.last_reason
            self._note_proxied(msg.name)
            return
        self.core.held[msg.name] = HeldStatement(msg, route)
        self._answer(be.PARSE_COMPLETE.encode())

    def _bind(self, msg: fe.Bind, raw: bytes) -> None:
        held = self.core.held.get(msg.statement)
        if msg.portal and (msg.portal in self.core.held_portals
                           or msg.portal in self.core.portals):
            # a named portal is not replaced: PostgreSQL says it exists already
            self.copies.materialize_portal(msg.portal)
            held = None
        self.core.held_portals.pop(msg.portal, None)
        if held is not None and self._can_answer(held) and self._describable(held, msg.portal):
            lookup = bind_keys(held, msg)
            if lookup is not None or held.route.destination == "admin":
                keys, params = lookup or (None, ())
                self.core.held_portals[msg.portal] = LocalPortal(held, msg, keys, params,
                                                       rest=bind_rest(raw))
                self._answer(be.BIND_COMPLETE.encode())
                return
        if held is not None:
            self.core.reasons[msg.statement] = (
                self._why_not() if not self._can_answer()
                else self.service.gates.shape_reason(held.route.cache)
                or "a parameter is not usable as a cache key")
        self.copies.materialize(msg.statement)
        self.core.portal_statements[msg.portal] = msg.statement
        if held is None:
            self.count_runs(msg.statement)
        self.forward(msg, raw)

    def _describe(self, msg: fe.Describe, raw: bytes) -> None:
        if msg.name not in (self.core.held if msg.kind == "S" else self.core.held_portals):
            self.forward(msg, raw)
            return
        core = self.core
        held = core.held[msg.name] if msg.kind == "S" else core.held_portals[msg.name].statement
        if msg.kind == "P" and core.batch_upstream and core.held_portals[msg.name].rows is not None:
            local = self.core.held_portals[msg.name]
            self._placeholder(row_description(held, local.bind.result_formats))
            return
        if not self._can_answer(held):
            if msg.kind == "S":
                self.copies.materialize(msg.name)
            else:
                self.copies.materialize_portal(msg.name)
            self.forward(msg, raw)
            return
        if msg.kind == "S":
            held = self.core.held[msg.name]
            types = param_types(held)
            if types is None or not self._describable(held):
                self.copies.materialize(msg.name)
                self.forward(msg, raw)
                return
            self._answer(be.ParameterDescription(types).encode() + row_description(held, ()))
            return
        local = self.core.held_portals[msg.name]
        self._answer(row_description(local.statement, local.bind.result_formats))

    def _execute(self, msg: fe.Execute, raw: bytes, wait: bool) -> bool:
        local = self.core.held_portals.get(msg.portal)
        if local is None:
            self._note_upstream(self.core.portal_statements.get(msg.portal, ""))
            self.forward(msg, raw)
            return True
        if not self._can_answer(local.statement):
            if local.rows is not None and self.core.batch_upstream:
                self._placeholder(next_rows(local, msg))
                return True
            self._note_upstream(local.statement.parse.name, self._why_not())
            self.copies.materialize_portal(msg.portal)
            self.forward(msg, raw)
            return True
        if local.statement.route.destination == "admin":
            if local.result is None:
                return False
            self._answer(local.result)
            return True
        if local.rows is None:
            ctx = self.session.ctx
            assert ctx is not None
            if not ctx.defaults_applied:
                return False
            service = self.service
            prepared = portal_reads.prepare(service, self.core, ctx, local)
            if prepared is None:
                rows = None
            else:
                reads: list[tuple[str, tuple[Any, ...], object]] = []
                read = service.reads.read_rows_now(prepared[0], ctx, reads)
                if isinstance(read, Wait):
                    return False  # a miss (its fill is running) or a barrier: wait in handle()
                portal_reads.note_miss(service, self.core, ctx, local, read, prepared)
                rows = portal_reads.encode(service, ctx, local, read, prepared)
                local.reads = reads
            if rows is None:
                self.copies.materialize_portal(msg.portal)
                # (its answers are swallowed: the relay's Python path sees the first one)
                self.deferred = self.core.swallowing > 0
                self.forward(msg, raw)
                return True
            local.rows = rows
            self.session.lane_miss_run = 0  # (a hit lately: not mostly misses, aftermiss)
            self.session.lane_recent = self.session.lane_recent << 1 & 0xFF  # (lane_switch)
        whole = local.sent == 0 and (msg.max_rows <= 0 or msg.max_rows > len(local.rows))
        body = next_rows(local, msg)
        if whole:
            ctx = self.session.ctx  # (the hit path's memos: ``portal_reads.memoize``)
            self.recording = portal_reads.memoize(self.service, self.core, ctx, local, body,
                                                  self.recording)
        self._answer(body)
        return True


    async def _execute_admin(self, local: LocalPortal) -> None:
        session = self.session
        assert session.ctx is not None
        if local.result is None:
            answer = await self.service.admin(local.statement.route, session.ctx)
            cmd = local.statement.route.admin
            if not (isinstance(cmd, Show) and cmd.what == "last"):
                session.ctx.last = ("admin", "weir command")
            if answer[:1] == b"T":  # Describe already sent the RowDescription
                answer = answer[1 + int.from_bytes(answer[1:5], "big") :]
            local.result = answer
        if local.result[:1] == b"E":
            self.core.batch_failed = True
        self._answer(local.result)

    def _close(self, msg: fe.Close, raw: bytes) -> None:
        table: dict[str, Any] = self.core.held if msg.kind == "S" else self.core.held_portals
        gone = table.pop(msg.name, None)
        if (
            gone is not None
            and not (msg.kind == "S" and gone.upstream)  # the upstream holds it too
            and not self.core.batch_upstream
            and self.core.caught_up
        ):
            self._answer(be.CLOSE_COMPLETE.encode())
            if msg.kind == "S" and not msg.name and "" in self.core.statements:
                # the upstream's older unnamed statement, which the held one replaced in
                # the client's view, must not come back into use
                self.flush()
                self.session.inject(fe.Close("S", ""))
                self.session.inject_flush()
            return
        self.forward(msg, raw)
        if gone is not None and msg.kind == "S":  # held again if PostgreSQL skips the Close
            self.core.attach(skipped=partial(self._restore, msg.name, gone))

    def _restore(self, name: str, held: HeldStatement) -> None:
        """A Parse or Close that replaced or closed a held statement was skipped by
        PostgreSQL (an error earlier in its batch): the statement is still the client's."""
        if name not in self.core.held:
            self.core.held[name] = held

    def _sync(self, msg: fe.Sync, raw: bytes) -> None:
        self.recording = None
        if self.core.batch_upstream or not self.core.batch_local:
            self.forward(msg, raw)
            return
        self.core.batch_local = self.core.batch_failed = False
        self.core.held_portals.clear()  # the implicit transaction ends: its portals are gone
        self.out.append(be.ReadyForQuery(self.core.transaction_status).encode())
        self.flush()

    def _flush(self, msg: fe.Flush, raw: bytes) -> None:
        self.flush()
        if self.core.batch_upstream:
            self.forward(msg, raw)


_HANDLERS: dict[type, Any] = {
    fe.Parse: Extended._parse,
    fe.Bind: Extended._bind,
    fe.Describe: Extended._describe,
    fe.Close: Extended._close,
    fe.Sync: Extended._sync,
    fe.Flush: Extended._flush,
}

__all__ = ["Extended", "HeldStatement", "LocalPortal"]
