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
import dataclasses
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pgwire import backend as be
from pgwire import frontend as fe
from proxy import portal_reads
from proxy.admin import Show, parse_admin
from proxy.held import (
    PLACEHOLDER_PORTAL,
    PLACEHOLDER_STATEMENT,
    HeldStatement,
    LocalPortal,
    adopt,
    bind_keys,
    next_rows,
    opens_block,
    param_types,
    row_description,
)
from proxy.hitpath import Hit, bind_rest
from proxy.roles import ExtendedService, ExtendedSession
from proxy.router import Route
from proxy.session import SessionState, deallocation
from proxy.transactions import isolation_named

log = logging.getLogger("weir.extended")

#: message classes tested on every forwarded message (tuples: a ``X | Y`` union would be
#: built again on each test)
_NAMED = (fe.Describe, fe.Close)
_BATCH_ENDS = (fe.Sync, fe.Flush)
_EXTENDED = (fe.Parse, fe.Bind, fe.Describe, fe.Execute, fe.Close)


@dataclass(slots=True)
class Extended:
    """Per-session state for held statements; driven by the session's message pump."""

    session: ExtendedSession
    service: ExtendedService
    #: the session core (``proxy.session_core``): the held statements (``held``) and local
    #: portals (``held_portals``), the batch flags, the reasons and routes of what went
    #: upstream live there, where the relay core and the hit path read them
    core: SessionState = field(init=False)
    #: local answers not yet written: one socket write per batch, flushed before anything
    #: goes upstream, at Sync/Flush and when the pump stops
    out: list[bytes] = field(default_factory=list)
    #: an unnamed Parse/Bind/Execute batch the hit path may learn: (memo, batch bytes,
    #: whether it describes the portal); dropped at Sync or when anything goes upstream
    recording: tuple[dict[bytes, Hit], bytes, bool] | None = None
    #: a batch whose outcome changes held statements (a Parse or Close of one, a statement
    #: recreated upstream) was synced: messages after it wait until PostgreSQL answered it
    wait_settle: bool = False
    _settled: asyncio.Event | None = None

    def __post_init__(self) -> None:
        self.core = self.session.state
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
            adopt(self.core.held, session.state.statements, registry, ctx.search_path)

    def releases(self, query: str) -> bool:
        """Whether a simple query deallocates a statement weir holds (see :meth:`release`)."""
        found = deallocation(query) if self.core.held else None
        return found is not None and (found[0] != "name" or found[1] in self.core.held)

    def release(self, query: str) -> bytes | None:
        """A DEALLOCATE/DISCARD ALL of statements weir holds goes upstream next: they stop
        being held, and the upstream deallocates its own copies. Returns weir's own answer
        (CommandComplete) when the command names a statement only weir holds and the session
        is idle — then the query must not go upstream, which would say it does not exist."""
        found = deallocation(query) if self.core.held else None
        state = self.core
        if found is None or state.transaction_status == "E":  # PostgreSQL refuses it there
            return None
        kind, name = found
        if kind != "name":
            if not (kind == "discard" and state.in_transaction):
                self.core.held.clear()  # (DISCARD ALL fails inside a transaction block)
            return None
        held = self.core.held.get(name)
        if held is None:
            return None
        if not held.upstream and not (state.caught_up and not self.core.batch_upstream):
            self._materialize(name)  # requests are pending upstream: answer in their order
        del self.core.held[name]
        return None if held.upstream else be.CommandComplete("DEALLOCATE").encode()

    @property
    def quiet(self) -> bool:
        """Nothing is held or answered locally, and no outcome is awaited: content-free
        messages need no look."""
        return not (self.core.held or self.core.held_portals or self.core.batch_local
                    or self.core.uncertain)

    def observe_forwarded(self, msg: object) -> None:
        """A message went upstream on the synchronous path: keep the bookkeeping right."""
        if isinstance(msg, fe.Sync):
            self.core.batch_upstream = self.core.batch_local = False
            self.core.held_portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.core.uncertain > 0
        elif isinstance(msg, _EXTENDED):
            if not self.core.batch_upstream:
                self._switch()
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
            self.service.note_upstream(route, self.session.ctx, times)

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
        route = service.route(msg.query, session.state, session.ctx)
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
                        self._materialize_portal(msg.portal)
                        self.forward(msg, raw)
                        return
        self.handle_now(msg, raw)

    def forward(self, msg: object, raw: bytes) -> None:
        self.recording = None
        if not self.core.batch_upstream and not isinstance(msg, _BATCH_ENDS):
            self._switch()
        self.session.forward(msg, raw)
        if isinstance(msg, fe.Sync):
            self.core.batch_upstream = self.core.batch_local = False
            self.core.held_portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.core.uncertain > 0
        elif not isinstance(msg, fe.Flush):
            self.core.batch_upstream = True

    def _answer(self, data: bytes) -> None:
        self.core.batch_local = True
        self.out.append(data)

    def flush(self) -> None:
        """Write the buffered local answers."""
        if self.out:
            data = b"".join(self.out)
            self.out.clear()
            self.session.client.write(data)

    def _switch(self) -> None:
        """The first message of the batch goes upstream: every local portal that has not
        run yet is created upstream now, so that PostgreSQL holds it from this point of the
        batch as it would have (later in the batch, a statement it was bound from may be
        closed or replaced). Portals that ran keep their rows: what they still owe is
        answered in order through :meth:`_placeholder`."""
        for name in [n for n, p in self.core.held_portals.items()
                     if p.rows is None and p.result is None
                     and p.statement.route.destination != "admin"]:
            self._materialize_portal(name)

    def _placeholder(self, answer: bytes) -> None:
        """Send weir's own ``answer`` after what went upstream before it: a request of
        weir's whose answer takes its place (closing a portal no client names) goes upstream,
        so the answer reaches the client in order, and not at all when an error earlier in
        the batch makes PostgreSQL skip the rest of it."""
        self.flush()
        self.session.inject(fe.Close("P", PLACEHOLDER_PORTAL), answer)

    def before_statement(self, text: str) -> None:
        """A statement goes upstream: one that opens a transaction block first makes every
        statement weir alone holds exist upstream too. Inside the block their runs go
        upstream, and once it fails PostgreSQL refuses to parse them (so weir could not
        recreate them) while a Bind must still find its statement to fail as it does. Not
        before a BEGIN naming an isolation level (a Parse first takes a snapshot: PostgreSQL
        would refuse the level); those are recreated at their first use in the block."""
        if not self.core.held or not opens_block(text) or isolation_named(text):
            return
        for name, held in list(self.core.held.items()):
            # weir's own commands never exist upstream (PostgreSQL cannot parse them: its
            # error would make it skip the statement that opens the block)
            if name and not held.upstream and held.route.destination != "admin":
                self._recreate(held)

    def simple_query(self, answered: bool = False) -> None:
        """A simple Query runs: PostgreSQL drops the unnamed statement and portal first.
        When weir ``answered`` it, the upstream's unnamed statement is closed the same way
        (answer swallowed, and flushed at once so the session is soon idle again)."""
        self.core.held.pop("", None)
        self.core.held_portals.pop("", None)
        if answered and "" in self.core.statements:
            self.session.inject(fe.Close("S", ""))
            self.session.inject_flush()

    def _materialize(self, statement: str) -> None:
        """Recreate a held statement upstream (its ParseComplete is swallowed). It stays
        held: later runs outside a transaction block are answered by weir again."""
        held = self.core.held.get(statement)
        if held is not None and not held.upstream:
            self._recreate(held)

    def _materialize_portal(self, portal: str) -> None:
        """Recreate a local portal (and its statement) upstream, answers swallowed."""
        local: LocalPortal | None = self.core.held_portals.pop(portal, None)
        if local is None:
            return
        held = local.statement
        if self.core.held.get(held.parse.name) is held:
            if not held.upstream:
                self._recreate(held)
            self.session.inject(local.bind)
            return
        # the client closed or replaced the statement since (its portal lives on): bound
        # from a statement of weir's own, closed again at once
        parse = held.parse
        self.session.inject(fe.Parse(PLACEHOLDER_STATEMENT, parse.query, parse.param_types))
        self.session.inject(dataclasses.replace(local.bind, statement=PLACEHOLDER_STATEMENT))
        self.session.inject(fe.Close("S", PLACEHOLDER_STATEMENT))

    def _recreate(self, held: HeldStatement) -> None:
        """Send a held statement's Parse upstream (answer swallowed); it counts as held
        upstream unless PostgreSQL skips it (an error earlier in the batch) or refuses it."""
        held.upstream = self.core.transaction_status != "E"  # (else it fails)
        self.session.inject(held.parse, skipped=partial(setattr, held, "upstream", False))

    def _parse(self, msg: fe.Parse, raw: bytes) -> None:
        route = self._holdable(msg)
        if route is not None and not self._can_answer(HeldStatement(msg, route)):
            route = None
        if msg.name and (msg.name in self.core.held or msg.name in self.core.statements):
            route = None  # let PostgreSQL say "already exists"
        if route is None:
            self.before_statement(msg.query)
            if msg.name:
                self._materialize(msg.name)  # PostgreSQL then says it exists already
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
            self._materialize_portal(msg.portal)
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
                else self.service.shape_reason(held.route.cache)
                or "a parameter is not usable as a cache key")
        self._materialize(msg.statement)
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
            self._materialize(msg.name) if msg.kind == "S" else self._materialize_portal(msg.name)
            self.forward(msg, raw)
            return
        if msg.kind == "S":
            held = self.core.held[msg.name]
            types = param_types(held)
            if types is None or not self._describable(held):
                self._materialize(msg.name)
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
            self._materialize_portal(msg.portal)
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
                if read is None:
                    return False  # a miss (its fill is running) or a barrier: wait in handle()
                rows = portal_reads.encode(service, ctx, local, read, prepared)
                local.reads = reads
            if rows is None:
                self._materialize_portal(msg.portal)
                self.forward(msg, raw)
                return True
            local.rows = rows
        whole = local.sent == 0 and (msg.max_rows <= 0 or msg.max_rows > len(local.rows))
        body = next_rows(local, msg)
        if whole:
            self._remember(local, body)
        self._answer(body)
        return True


    def _remember(self, local: LocalPortal, body: bytes) -> None:
        """Give a whole cached answer of the unnamed portal to the hit path's memo."""
        session = self.session
        held = local.statement
        if local.rest is None or local.reads is None or session.ctx is None \
                or held.route.cache is None:
            return
        service = self.service
        _, sid = service.reads.output_settings_id(session.state, session.ctx)
        description = row_description(held, local.bind.result_formats)
        reads = tuple(local.reads)
        service.hits.remember(service.hits.statement_memo(held, sid), local.rest,
                              Hit(reads, description, body, session.ctx.last))
        if self.recording is not None and self.core.held.get("") is held:
            memo, batch, describe = self.recording
            self.recording = None
            answer = (be.PARSE_COMPLETE.encode() + be.BIND_COMPLETE.encode()
                      + (description if describe else b"") + body)
            service.hits.remember(memo, batch, Hit(reads, b"", answer, session.ctx.last,
                                                   statement=held))


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
