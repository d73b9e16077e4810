"""The extended query protocol for statements weir answers itself.

Owns: statements weir *holds* (the client's Parse was answered by weir and not sent
upstream: cached SELECTs and admin commands), portals bound from them, and answering
Parse/Bind/Describe/Execute/Close/Sync/Flush for those — ParseComplete, BindComplete,
ParameterDescription, RowDescription with the Bind's result formats, DataRows honouring the
Execute row limit (PortalSuspended, then the rest on the next Execute), CommandComplete,
CloseComplete and ReadyForQuery.

Rules that keep the client's view identical to PostgreSQL's:
- the messages of one batch (up to Sync) are answered in order: weir answers a message itself
  only while nothing of the batch has gone upstream; once something has, the rest of the batch
  goes upstream too;
- a held statement or local portal that must be used upstream after all (the session entered
  a transaction, the cache declined the read, a binary format weir cannot produce, ...) is
  first recreated upstream from the client's own Parse/Bind bytes, and the upstream's
  ParseComplete/BindComplete for them are swallowed (``SessionState.injected``); a statement
  recreated upstream stays held (later runs outside a transaction block are answered by weir
  again), and closing it closes the upstream's copy too;
- a batch answered entirely by weir ends with weir's own ReadyForQuery.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.sql.cacheable import Unsupported
from proxy.admin import CreateCache, Show, parse_admin
from proxy.hitpath import Hit, bind_rest
from proxy.params import ParamError, decode_param, formats_for
from proxy.results import OutputSettings, encode_rows
from proxy.router import Route
from proxy.session import deallocation
from proxy.wire import backend as be
from proxy.wire import frontend as fe

if TYPE_CHECKING:
    from proxy.relay import Session

log = logging.getLogger("weir.extended")

#: Result columns of the admin commands (all text), for Describe.
ADMIN_COLUMNS: dict[str, tuple[str, ...]] = {
    "caches": ("name", "query_id", "query", "memory_bytes"),
    "proxied": ("query_id", "query", "supported", "count"),
    "supported": ("query_id", "query", "supported", "count"),
    "status": ("name", "value"),
    "tables": ("table", "oid", "caches"),
    "last": ("destination", "reason"),
    "explain": ("query_id", "query", "supported"),
}


#: message classes tested on every forwarded message (tuples: a ``X | Y`` union would be
#: built again on each test)
_NAMED = (fe.Describe, fe.Close)
_BATCH_ENDS = (fe.Sync, fe.Flush)
#: the portal weir closes upstream to place its own answers in order (no client's portal:
#: the name is not one a driver makes, and closing a portal that does not exist is no error)
PLACEHOLDER_PORTAL = "\x7fweir placeholder"
#: the statement weir binds a portal from when the client's statement is gone
PLACEHOLDER_STATEMENT = "\x7fweir statement"
_EXTENDED = (fe.Parse, fe.Bind, fe.Describe, fe.Execute, fe.Close)


@dataclass(slots=True)
class HeldStatement:
    parse: fe.Parse
    route: Route  # destination "cache" (with a cache entry) or "admin"
    upstream: bool = False  # recreated upstream already
    #: the hit path's memo for this statement and the output settings it was taken for
    memo: dict[bytes, Hit] | None = None
    memo_sid: int = -1

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Admin result columns (None when the command returns no rows)."""
        cmd = self.route.admin
        if isinstance(cmd, Show):
            return ADMIN_COLUMNS[cmd.what]
        if isinstance(cmd, CreateCache) and cmd.explain_only:
            return ADMIN_COLUMNS["explain"]
        return None


@dataclass(slots=True)
class LocalPortal:
    statement: HeldStatement
    bind: fe.Bind
    keys: list[tuple[Any, ...]] | None
    params: tuple[Any, ...]
    result: bytes | None = None  # admin: the whole answer, computed at first Execute
    rows: list[bytes] | None = None  # cache: encoded DataRows, computed at first Execute
    sent: int = 0
    #: for the hit path's memo: the Bind after the statement name (unnamed portal only),
    #: and the engine answers the rows were encoded from
    rest: bytes | None = None
    reads: list[tuple[str, tuple[Any, ...], object]] | None = None


@dataclass(slots=True)
class Extended:
    """Per-session state for held statements; driven by the session's message pump."""

    session: Session
    held: dict[str, HeldStatement] = field(default_factory=dict)
    portals: dict[str, LocalPortal] = field(default_factory=dict)
    batch_upstream: bool = False  # something of the current batch went upstream
    batch_local: bool = False  # weir answered something of the current batch
    batch_failed: bool = False  # weir answered an error: skip the batch until Sync
    #: why each statement the upstream holds went there; which statement each portal runs
    _reasons: dict[str, str] = field(default_factory=dict)
    _portal_statements: dict[str, str] = field(default_factory=dict)
    _last_reason: str = "not a cached query"
    _last_route: Route | None = None  # the last Parse that goes upstream (for statistics)
    #: statements parsed upstream that routing classified: each run (Bind) of one counts for
    #: SHOW PROXIED QUERIES and auto mode
    _routes: dict[str, Route] = field(default_factory=dict)
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
        self.session.state.on_settled = self._on_settled

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
            return self._holdable(msg) is not None or msg.name in self.held
        if isinstance(msg, fe.Bind):
            return msg.statement in self.held or msg.portal in self.portals
        if isinstance(msg, _NAMED):
            table = self.held if msg.kind == "S" else self.portals
            return msg.name in table
        if isinstance(msg, fe.Execute):
            return msg.portal in self.portals
        if isinstance(msg, _BATCH_ENDS):
            return self.batch_local
        return False

    def adopt(self) -> None:
        """The caches changed: statements this session prepared upstream whose text a cache
        now serves are held too (``upstream=True``: both have them), so their next runs
        outside a transaction block are answered by weir — a cache created while an
        application keeps its connections and prepared statements serves them at once."""
        session = self.session
        registry, ctx = session.server.service.registry, session.ctx
        if registry is None or ctx is None or ctx.tainted is not None:
            return
        for name, stmt in session.state.statements.items():
            # (the unnamed statement is not adopted: a simple Query drops it upstream, and
            # clients parse it again for each run anyway)
            if not name or name in self.held or parse_admin(stmt.query) is not None:
                continue
            classified = registry.classify(stmt.query, ctx.search_path)
            entry = registry.cache_for(classified)
            if entry is not None:
                route = Route("cache", f"served by cache {entry.name}", classified=classified,
                              cache=entry)
                self.held[name] = HeldStatement(fe.Parse(name, stmt.query, stmt.param_types),
                                                route, upstream=True)

    def releases(self, query: str) -> bool:
        """Whether a simple query deallocates a statement weir holds (see :meth:`release`)."""
        found = deallocation(query) if self.held else None
        return found is not None and (found[0] != "name" or found[1] in self.held)

    def release(self, query: str) -> bytes | None:
        """A DEALLOCATE/DISCARD ALL of statements weir holds goes upstream next: they stop
        being held, and the upstream deallocates its own copies. Returns weir's own answer
        (CommandComplete) when the command names a statement only weir holds and the session
        is idle — then the query must not go upstream, which would say it does not exist."""
        found = deallocation(query) if self.held else None
        state = self.session.state
        if found is None or state.transaction_status == "E":  # PostgreSQL refuses it there
            return None
        kind, name = found
        if kind != "name":
            if not (kind == "discard" and state.in_transaction):
                self.held.clear()  # (DISCARD ALL fails inside a transaction block)
            return None
        held = self.held.get(name)
        if held is None:
            return None
        if not held.upstream and not (state.idle and not self.batch_upstream):
            self._materialize(name)  # requests are pending upstream: answer in their order
        del self.held[name]
        return None if held.upstream else be.CommandComplete("DEALLOCATE").encode()

    @property
    def quiet(self) -> bool:
        """Nothing is held or answered locally, and no outcome is awaited: content-free
        messages need no look."""
        return not (self.held or self.portals or self.batch_local
                    or self.session.state.uncertain)

    def observe_forwarded(self, msg: object) -> None:
        """A message went upstream on the synchronous path: keep the bookkeeping right."""
        if isinstance(msg, fe.Sync):
            self.batch_upstream = self.batch_local = False
            self.portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.session.state.uncertain > 0
        elif isinstance(msg, _EXTENDED):
            if not self.batch_upstream:
                self._switch()
            self.batch_upstream = True
            if isinstance(msg, fe.Parse):
                self.held.pop(msg.name, None)
                self._reasons[msg.name] = self._last_reason
                self._note_proxied(msg.name)
            elif isinstance(msg, fe.Bind):
                self.portals.pop(msg.portal, None)
                self._portal_statements[msg.portal] = msg.statement
                self._note_upstream(msg.statement)  # (its Execute is not decoded)
                if self._routes:
                    self.count_runs(msg.statement)
            elif isinstance(msg, fe.Execute):
                self._note_upstream(self._portal_statements.get(msg.portal, ""))

    def _note_proxied(self, name: str) -> None:
        """Remember the route of the statement just parsed upstream, so that each of its
        runs counts for SHOW PROXIED QUERIES and auto mode (:meth:`count_runs`)."""
        route, self._last_route = self._last_route, None
        if route is not None and route.classified is not None:
            self._routes[name] = route
        else:
            self._routes.pop(name, None)

    def count_runs(self, statement: str, times: int = 1) -> None:
        """A statement parsed upstream ran again ``times`` times (its Binds went upstream)."""
        route = self._routes.get(statement)
        if route is not None and self.session.ctx is not None:
            self.session.server.service.note_upstream(route, self.session.ctx, times)

    def _note_upstream(self, statement: str, reason: str | None = None) -> None:
        ctx = self.session.ctx
        if ctx is not None:
            ctx.last = ("upstream", reason or self._reasons.get(statement, "not a cached query"))

    def _can_answer(self, held: HeldStatement | None = None) -> bool:
        """Whether weir may answer now: nothing of the batch upstream, nothing pending, and
        (for cached reads, not admin commands) no transaction block and no setting weir does
        not follow (a statement prepared before ``SET search_path`` is re-analyzed by
        PostgreSQL under the new path)."""
        state = self.session.state
        if held is not None and held.route.destination == "admin":
            return not self.batch_upstream and state.idle
        ctx = self.session.ctx
        return not self.batch_upstream and state.idle and not state.in_transaction \
            and (ctx is None or ctx.tainted is None)

    def _why_not(self) -> str:
        """Why :meth:`_can_answer` said no (for EXPLAIN LAST STATEMENT)."""
        ctx = self.session.ctx
        if ctx is not None and ctx.tainted is not None:
            return ctx.tainted
        return "the session is in a transaction block or busy upstream"

    def _holdable(self, msg: fe.Parse) -> Route | None:
        session = self.session
        service = session.server.service
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
        self._last_reason = route.reason
        self._last_route = route
        return None

    # -- the pump ---------------------------------------------------------------------------

    def handle_now(self, msg: object, raw: bytes) -> bool:
        """Answer or forward one client message without waiting; False (and nothing done)
        when it needs :meth:`handle` (a cache miss, a barrier or an admin command)."""
        if self.wait_settle:
            return False  # (handle() waits first)
        if self.batch_failed and not isinstance(msg, fe.Sync):
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
        if isinstance(msg, fe.Execute) and not self.batch_failed:
            local = self.portals.get(msg.portal)
            if local is not None and self._can_answer(local.statement):
                if local.statement.route.destination == "admin":
                    await self._execute_admin(local)
                    return
                if local.rows is None:
                    local.rows = await self._cached_rows(local)
                    if local.rows is None:
                        self._materialize_portal(msg.portal)
                        self.forward(msg, raw)
                        return
        self.handle_now(msg, raw)

    def forward(self, msg: object, raw: bytes) -> None:
        self.recording = None
        if not self.batch_upstream and not isinstance(msg, _BATCH_ENDS):
            self._switch()
        self.session.forward(msg, raw)
        if isinstance(msg, fe.Sync):
            self.batch_upstream = self.batch_local = False
            self.portals.clear()  # local portals end with the implicit transaction
            self.wait_settle = self.session.state.uncertain > 0
        elif not isinstance(msg, fe.Flush):
            self.batch_upstream = True

    def _answer(self, data: bytes) -> None:
        self.batch_local = True
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
        for name in [n for n, p in self.portals.items() if p.rows is None and p.result is None
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
        recreate them) while a Bind must still find its statement to fail as it does."""
        if not self.held or _first_word(text) not in _BEGIN_WORDS:
            return
        for name, held in list(self.held.items()):
            # weir's own commands never exist upstream (PostgreSQL cannot parse them: its
            # error would make it skip the statement that opens the block)
            if name and not held.upstream and held.route.destination != "admin":
                self._recreate(held)

    def simple_query(self, answered: bool = False) -> None:
        """A simple Query runs: PostgreSQL drops the unnamed statement and portal first.
        When weir ``answered`` it, the upstream's unnamed statement is closed the same way
        (answer swallowed, and flushed at once so the session is soon idle again)."""
        self.held.pop("", None)
        self.portals.pop("", None)
        if answered and "" in self.session.state.statements:
            self.session.inject(fe.Close("S", ""))
            self.session.inject_flush()

    def _materialize(self, statement: str) -> None:
        """Recreate a held statement upstream (its ParseComplete is swallowed). It stays
        held: later runs outside a transaction block are answered by weir again."""
        held = self.held.get(statement)
        if held is not None and not held.upstream:
            self._recreate(held)

    def _materialize_portal(self, portal: str) -> None:
        """Recreate a local portal (and its statement) upstream, answers swallowed."""
        local = self.portals.pop(portal, None)
        if local is None:
            return
        held = local.statement
        if self.held.get(held.parse.name) is held:
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
        held.upstream = True
        self.session.inject(held.parse, skipped=partial(setattr, held, "upstream", False))

    def _parse(self, msg: fe.Parse, raw: bytes) -> None:
        route = self._holdable(msg)
        if route is not None and not self._can_answer(HeldStatement(msg, route)):
            route = None
        if msg.name and (msg.name in self.held or msg.name in self.session.state.statements):
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
                old = self.held.pop("", None)
                self.forward(msg, raw)
                if old is not None:
                    self.session.state.attach(skipped=partial(self._restore, "", old))
            self._reasons[msg.name] = self._last_reason
            self._note_proxied(msg.name)
            return
        self.held[msg.name] = HeldStatement(msg, route)
        self._answer(be.PARSE_COMPLETE.encode())

    def _bind(self, msg: fe.Bind, raw: bytes) -> None:
        held = self.held.get(msg.statement)
        if msg.portal and (msg.portal in self.portals
                           or msg.portal in self.session.state.portals):
            # a named portal is not replaced: PostgreSQL says it exists already
            self._materialize_portal(msg.portal)
            held = None
        self.portals.pop(msg.portal, None)
        if held is not None and self._can_answer(held):
            lookup = self._keys(held, msg)
            if lookup is not None or held.route.destination == "admin":
                keys, params = lookup or (None, ())
                self.portals[msg.portal] = LocalPortal(held, msg, keys, params,
                                                       rest=bind_rest(raw))
                self._answer(be.BIND_COMPLETE.encode())
                return
        if held is not None:
            self._reasons[msg.statement] = (
                self._why_not() if not self._can_answer()
                else "a parameter is not usable as a cache key"
            )
        self._materialize(msg.statement)
        self._portal_statements[msg.portal] = msg.statement
        if held is None:
            self.count_runs(msg.statement)
        self.forward(msg, raw)

    def _keys(
        self, held: HeldStatement, msg: fe.Bind
    ) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]] | None:
        """The reader lookups and decoded parameters of a Bind, or None (go upstream)."""
        classified = held.route.classified
        if (
            held.route.cache is None
            or classified is None
            or isinstance(classified.query, Unsupported)
        ):
            return None
        types = self._param_types(held)
        if types is None or len(types) != len(msg.params) \
                or any(code not in (0, 1) for code in msg.result_formats):
            return None  # PostgreSQL tells the client what is wrong with the Bind
        plan = classified.query.plan  # this text's plan: its key sources are its own $n
        declared = held.parse.param_types
        column_types = {number - 1: t for number, t in plan.param_types.items()}
        try:
            formats_for(len(held.route.cache.fields), msg.result_formats)
            formats = formats_for(len(msg.params), msg.param_formats)
            values: list[Any] = []
            for i, value in enumerate(msg.params):
                kind = declared[i] if i < len(declared) else 0
                # parameters that are not keys are LIMIT/OFFSET counts
                values.append(decode_param(value, formats[i], kind, column_types.get(i, 20)))
        except ParamError as exc:
            log.debug("parameter not usable as a cache key: %s", exc)
            return None
        keys = classified.keys(values)
        return None if keys is None else (keys, tuple(values))

    def _describe(self, msg: fe.Describe, raw: bytes) -> None:
        if msg.name not in (self.held if msg.kind == "S" else self.portals):
            self.forward(msg, raw)
            return
        held = self.held[msg.name] if msg.kind == "S" else self.portals[msg.name].statement
        if msg.kind == "P" and self.batch_upstream and self.portals[msg.name].rows is not None:
            local = self.portals[msg.name]
            self._placeholder(self._row_description(held, local.bind.result_formats))
            return
        if not self._can_answer(held):
            self._materialize(msg.name) if msg.kind == "S" else self._materialize_portal(msg.name)
            self.forward(msg, raw)
            return
        if msg.kind == "S":
            held = self.held[msg.name]
            types = self._param_types(held)
            if types is None:
                self._materialize(msg.name)
                self.forward(msg, raw)
                return
            self._answer(be.ParameterDescription(types).encode() + self._row_description(held, ()))
            return
        local = self.portals[msg.name]
        self._answer(self._row_description(local.statement, local.bind.result_formats))

    def _param_types(self, held: HeldStatement) -> tuple[int, ...] | None:
        classified = held.route.classified
        if (
            held.route.cache is None
            or classified is None
            or isinstance(classified.query, Unsupported)
        ):
            return ()
        plan = classified.query.plan
        known: dict[int, int] = dict(enumerate(held.parse.param_types, 1))
        for number, type_oid in plan.param_types.items():
            if not known.get(number):
                known[number] = type_oid
        count = max(known, default=0)
        types = tuple(known.get(i, 0) for i in range(1, count + 1))
        return None if 0 in types else types

    def _row_description(self, held: HeldStatement, formats: tuple[int, ...]) -> bytes:
        entry = held.route.cache
        if entry is None:
            columns = held.columns
            if columns is None:
                return be.NO_DATA.encode()
            fields = tuple(be.FieldDescription(name=c, type_oid=25) for c in columns)
            return be.RowDescription(fields).encode()
        fmts = formats_for(len(entry.fields), formats)
        fields = tuple(
            be.FieldDescription(
                f.name, f.table_oid, f.column_attr, f.type_oid, f.type_size, f.type_modifier, fmt
            )
            for f, fmt in zip(entry.fields, fmts, strict=True)
        )
        return be.RowDescription(fields).encode()

    def _execute(self, msg: fe.Execute, raw: bytes, wait: bool) -> bool:
        local = self.portals.get(msg.portal)
        if local is None:
            self._note_upstream(self._portal_statements.get(msg.portal, ""))
            self.forward(msg, raw)
            return True
        if not self._can_answer(local.statement):
            if local.rows is not None and self.batch_upstream:
                self._placeholder(self._next_rows(local, msg))
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
            if not self.session.ctx.defaults_applied:  # type: ignore[union-attr]
                return False
            prepared = self._prepare(local)
            if prepared is None:
                rows = None
            else:
                reads: list[tuple[str, tuple[Any, ...], object]] = []
                read = self.session.server.service.read_rows_now(
                    prepared[0], self.session.ctx, reads)
                if read is None:
                    return False  # a miss (its fill is running) or a barrier: wait in handle()
                rows = self._encode(local, read, prepared)
                local.reads = reads
            if rows is None:
                self._materialize_portal(msg.portal)
                self.forward(msg, raw)
                return True
            local.rows = rows
        whole = local.sent == 0 and (msg.max_rows <= 0 or msg.max_rows > len(local.rows))
        body = self._next_rows(local, msg)
        if whole:
            self._remember(local, body)
        self._answer(body)
        return True

    @staticmethod
    def _next_rows(local: LocalPortal, msg: fe.Execute) -> bytes:
        """The answer to an Execute of a local portal whose rows are known: the next rows up
        to the row limit, then PortalSuspended when the limit was reached (as PostgreSQL,
        which does not look past it: a portal with exactly that many rows left is
        suspended, and the next Execute completes with none), else CommandComplete."""
        rows = local.rows
        assert rows is not None
        limit = msg.max_rows if msg.max_rows > 0 else len(rows)
        chunk = rows[local.sent : local.sent + limit]
        local.sent += len(chunk)
        tail = (
            be.PORTAL_SUSPENDED.encode()
            if 0 < msg.max_rows == len(chunk)
            else be.CommandComplete(f"SELECT {len(chunk)}").encode()
        )
        return b"".join(chunk) + tail

    def _remember(self, local: LocalPortal, body: bytes) -> None:
        """Give a whole cached answer of the unnamed portal to the hit path's memo."""
        session = self.session
        held = local.statement
        if local.rest is None or local.reads is None or session.ctx is None \
                or held.route.cache is None:
            return
        service = session.server.service
        _, sid = service.output_settings_id(session.state, session.ctx)
        description = self._row_description(held, local.bind.result_formats)
        reads = tuple(local.reads)
        service.hits.remember(service.hits.statement_memo(held, sid), local.rest,
                              Hit(reads, description, body, session.ctx.last))
        if self.recording is not None and self.held.get("") is held:
            memo, batch, describe = self.recording
            self.recording = None
            answer = (be.PARSE_COMPLETE.encode() + be.BIND_COMPLETE.encode()
                      + (description if describe else b"") + body)
            service.hits.remember(memo, batch, Hit(reads, b"", answer, session.ctx.last,
                                                   statement=held))

    def _prepare(self, local: LocalPortal) -> tuple[Route, OutputSettings, tuple[int, ...]] | None:
        """The read of a local portal, or None (and why, in EXPLAIN LAST STATEMENT) when
        its cache is gone or its results cannot be encoded exactly."""
        session = self.session
        assert session.ctx is not None
        service = session.server.service
        if not service.is_current(local.statement.route.cache) and not self._renew(local):
            session.ctx.last = ("upstream", f"cache {local.statement.route.cache.name} was "
                                "dropped after this statement was prepared")
            return None
        held = local.statement.route
        entry = held.cache
        route = Route("cache", held.reason, classified=held.classified, cache=entry,
                      keys=local.keys, params=local.params)
        settings = service.output_settings(session.state, session.ctx)
        fmts = formats_for(len(entry.fields), local.bind.result_formats)
        reason, _ = service.output_plan(entry, fmts, settings)
        if reason is not None:
            session.ctx.last = ("upstream", reason)
            return None
        return route, settings, fmts

    def _renew(self, local: LocalPortal) -> bool:
        """The cache a held statement was routed to is gone (dropped, or planned again after
        a schema change): route its text again; with a cache for it, the statement and the
        portal's keys follow that cache (False: none, or the keys do not fit it)."""
        session = self.session
        assert session.ctx is not None
        held = local.statement
        route = session.server.service.route(held.parse.query, session.state, session.ctx)
        if route.cache is None or route.classified is None:
            return False
        held.route, held.memo, held.memo_sid = route, None, -1
        lookup = self._keys(held, local.bind)
        if lookup is None:
            return False
        local.keys, local.params = lookup
        return True

    def _encode(self, local: LocalPortal, read: tuple[tuple[Any, ...] | None, str],
                prepared: tuple[Route, OutputSettings, tuple[int, ...]]) -> list[bytes] | None:
        session = self.session
        assert session.ctx is not None
        rows, why = read
        if rows is None:
            session.ctx.last = ("upstream", why)
            return None
        entry = local.statement.route.cache
        _, encoders = session.server.service.output_plan(entry, prepared[2], prepared[1])
        try:
            data = [encode_rows([row], encoders) for row in rows]
        except Exception as exc:  # Unencodable and friends: answer from upstream
            session.ctx.last = ("upstream", f"a cached value cannot be encoded exactly: {exc}")
            return None
        session.ctx.last = ("cache", f"served by cache {entry.name}")
        return data

    async def _cached_rows(self, local: LocalPortal) -> list[bytes] | None:
        ctx = self.session.ctx
        assert ctx is not None
        if not ctx.defaults_applied:  # output settings may come from the role's defaults
            await self.session.server.service.ensure_defaults(ctx)
        prepared = self._prepare(local)
        if prepared is None:
            return None
        reads: list[tuple[str, tuple[Any, ...], object]] = []
        read = await self.session.server.service.read_rows(prepared[0], self.session.ctx, reads)
        local.reads = reads
        return self._encode(local, read, prepared)

    async def _execute_admin(self, local: LocalPortal) -> None:
        session = self.session
        assert session.ctx is not None
        if local.result is None:
            answer = await session.server.service.admin(local.statement.route, session.ctx)
            cmd = local.statement.route.admin
            if not (isinstance(cmd, Show) and cmd.what == "last"):
                session.ctx.last = ("admin", "weir command")
            if answer[:1] == b"T":  # Describe already sent the RowDescription
                answer = answer[1 + int.from_bytes(answer[1:5], "big") :]
            local.result = answer
        if local.result[:1] == b"E":
            self.batch_failed = True
        self._answer(local.result)

    def _close(self, msg: fe.Close, raw: bytes) -> None:
        table: dict[str, Any] = self.held if msg.kind == "S" else self.portals
        gone = table.pop(msg.name, None)
        if (
            gone is not None
            and not (msg.kind == "S" and gone.upstream)  # the upstream holds it too
            and not self.batch_upstream
            and self.session.state.idle
        ):
            self._answer(be.CLOSE_COMPLETE.encode())
            if msg.kind == "S" and not msg.name and "" in self.session.state.statements:
                # the upstream's older unnamed statement, which the held one replaced in
                # the client's view, must not come back into use
                self.flush()
                self.session.inject(fe.Close("S", ""))
                self.session.inject_flush()
            return
        self.forward(msg, raw)
        if gone is not None and msg.kind == "S":  # held again if PostgreSQL skips the Close
            self.session.state.attach(skipped=partial(self._restore, msg.name, gone))

    def _restore(self, name: str, held: HeldStatement) -> None:
        """A Parse or Close that replaced or closed a held statement was skipped by
        PostgreSQL (an error earlier in its batch): the statement is still the client's."""
        if name not in self.held:
            self.held[name] = held

    def _sync(self, msg: fe.Sync, raw: bytes) -> None:
        self.recording = None
        if self.batch_upstream or not self.batch_local:
            self.forward(msg, raw)
            return
        self.batch_local = self.batch_failed = False
        self.portals.clear()  # the implicit transaction ends: its portals are gone
        self.out.append(be.ReadyForQuery(self.session.state.transaction_status).encode())
        self.flush()

    def _flush(self, msg: fe.Flush, raw: bytes) -> None:
        self.flush()
        if self.batch_upstream:
            self.forward(msg, raw)


_BEGIN_WORDS = ("begin", "start")


def _first_word(text: str) -> str:
    """The first word of a statement, in lower case ("" if none)."""
    words = text.lstrip(" \t\r\n(").split(None, 1)
    return words[0].lower().rstrip(";") if words else ""


_HANDLERS: dict[type, Any] = {
    fe.Parse: Extended._parse,
    fe.Bind: Extended._bind,
    fe.Describe: Extended._describe,
    fe.Close: Extended._close,
    fe.Sync: Extended._sync,
    fe.Flush: Extended._flush,
}

__all__ = ["Extended", "HeldStatement", "LocalPortal"]
