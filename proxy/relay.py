"""One client session relayed to its own upstream connection (asyncio protocols).

Owns: the life of a session — startup and the relayed authentication (``proxy.handshake``),
then the relay of every message in both directions, byte for byte, while the session state
(``proxy.session``) and its identity (``proxy.identity``) observe them, handing the client's
messages to weir's own answering from the first that needs it on (``proxy.answering``; the
hit path before it: ``proxy.hitpath``) and the end of the session.

Invariants:
- bytes are forwarded in the order received, whole messages at a time, with one write per
  received chunk;
- an oversized message, or a malformed one weir must read, ends the session with FATAL 08P01
  (others go upstream for PostgreSQL's own ERROR: ``forwarding.decode_client``);
- the upstream going away is reported to the client as a FATAL error, never a hang;
- backpressure: when one side's write buffer passes its high-water mark, reading from the
  other side pauses, so a slow client cannot make weir buffer without bound.

The hot path: the transports deliver data to ``relay_entries``' callables. With the compiled
relay core (``Relay`` in ``cython_ext/relay_scan.pyx``) a READY session's quiet chunks — the
hit path declined, every message one ``forward_client`` observes without decoding, or an
upstream run ending with ReadyForQuery (a write's INSERT, UPDATE, DELETE or MERGE tag
included: ``router.wrote`` and ``aftermiss.answered`` are called from there) — are
observed and forwarded without a Python frame;
any other chunk goes, whole and untouched, to :meth:`Session.client_data` /
:meth:`Session.upstream_data`, which are also the core's pure-Python twin (same contract).
A run of a prepared statement the session learnt writes, after a cached read
(``proxy.write_position``), goes upstream with the read of the write's WAL position after it
(the core calls ``write_position.append`` as :meth:`Session.forward_client` does), and while
that read is outstanding with nothing else swallowed the core cuts its answer out
(``Tail.feed``) and relays the rest as above, or hands it to :meth:`Session.relay_fed`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

import cython_ext
from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.classes import ANSWER_WRITE
from pgwire.events import Phase
from pgwire.framing import UPSTREAM_MAX_MESSAGE_LENGTH, Framer, ProtocolViolation
from proxy import aftermiss, identity, limits, missfast_position, write_position
from proxy.answering import Answering
from proxy.endpoints import UpstreamEndpoint
from proxy.extended import Extended
from proxy.forwarding import (
    TO_PUMP,
    ForwardMemos,
    bind_names,
    decode_client,
    judged_upstream,
    plain_query,
)
from proxy.handshake import Handshake, context
from proxy.hitpath import try_answer
from proxy.metrics import own_error, own_violation
from proxy.missfast import try_forward
from proxy.roles import HandshakeServer
from proxy.router import Route, SessionContext, observe_set, wrote
from proxy.rules import CONTENT_FREE, READ_ONLY_TAGS, WATCHED_WORDS, answer_class, with_writes
from proxy.service import CacheService
from proxy.session import PLAIN_REQUESTS, SessionState

_FLUSH = fe.Flush().encode()
log = logging.getLogger("weir.relay")

_T_ERROR = ord("E")
_T_COPY_DATA = ord("d")
_T_TERMINATE = ord("X")
_T_QUERY = ord("Q")
_T_SYNC = ord("S")
_T_DESCRIBE = ord("D")
_PORTAL = ord("P")  # a Describe's kind: a portal's (held ones are local portals)
_T_BIND = ord("B")
_T_PARSE = ord("P")
_T_COMMAND_COMPLETE = ord("C")
#: backend messages whose content the session state needs.
_DECODED_BACKEND = frozenset(map(ord, "ZSE"))
#: backend messages the relay looks at one by one (when not summed up by ``scan_backend``)
_OBSERVED_BACKEND = frozenset(map(ord, "ZSE123nTCIs"))


__all__ = ["Phase", "Session", "context"]


class RelayServer(HandshakeServer, Protocol):
    """What a session needs of its server (``proxy.server.Server``)."""

    @property
    def service(self) -> CacheService: ...

    def release_key(self, key: tuple[int, int]) -> None: ...


class Session:
    """A relayed client session (see the module docstring)."""

    def __init__(self, server: RelayServer, transport: asyncio.Transport,
                 endpoint: asyncio.Protocol) -> None:
        self.server, self.client, self.endpoint = server, transport, endpoint
        self.upstream: asyncio.Transport | None = None
        #: the session core: phase, hot flags, request ledger, held statements and portals
        #: (``proxy.session_core``; its ledger rules: ``SessionState``)
        self.state = SessionState(Phase.STARTUP)
        self.state.caching = server.service.enabled  # weir answers some statements itself
        self.key: tuple[int, int] | None = None
        self.cframer = Framer(limits.before_login(server.settings), startup=True)
        self.uframer = Framer(UPSTREAM_MAX_MESSAGE_LENGTH)
        self.terminated = False  # the client said Terminate (or closed its side)
        self.fatal_relayed = False  # the upstream already told the client why it is closing
        self.ctx: SessionContext | None = None
        self._route = Route("upstream", "")
        self.extended = Extended(self, server.service)
        self.routing = server.service.routing  # the statements' routing (``proxy.routing``)
        self.memos = ForwardMemos()  # forwarded messages seen before (see ``_forward_seen``)
        self.handshake = Handshake(self)
        self.answering = Answering(self)  # weir's own answers (``proxy.answering``)
        self.lane_fd: int | None = None  # the client socket a lane may read (-1: none)
        self.upstream_lane_fd: int | None = None  # the upstream socket a lane may read
        self.lane_miss_skip = 0  # misses before a lane may forward its misses (proxy.lanes)
        self.lane_miss_run = 0  # cycles its last lane forwarding misses relayed (lane_misses)
        self.lane_recent = 0  # its last 8 held runs, 1 a miss (proxy.lane_switch)
        #: upstream bytes held for one write while a chunk is answered (``Answering.now``)
        self.corked: list[bytes] | None = None
        #: a miss's position read outstanding on this connection (``proxy.missfast_position``)
        self.miss_tail: missfast_position.Tail | None = None
        #: its prepared statements whose runs wrote (``proxy.write_position``; never replaced:
        #: the relay core holds it)
        self.writers: dict[str, Any] = {}
        #: its seen(s) when the stream has not reached that position yet, and the parked
        #: reads it releases then (``proxy.missfast_position``, ``proxy.aftermiss.park``)
        self.miss_waiting: tuple[float, list[Callable[[], object]]] | None = None
        transport.set_write_buffer_limits(high=server.settings.write_buffer_bytes)
        server.sessions.add(self)
        #: what the transports deliver data to (see ``relay_entries``)
        self.client_received, self.upstream_received = relay_entries(self, _core)

    @property
    def phase(self) -> Phase:
        """Where the session is in its life (the session core's ``phase``)."""
        return self.state.phase  # type: ignore[no-any-return]

    @property
    def lane(self) -> int:
        """The token of the lane reading the client (``proxy.lanes``), or 0."""
        return self.state.lane

    def pause_client(self, why: str) -> None:
        """Stop reading from the client for ``why`` (connecting upstream, the upstream's or
        the client's own send buffer full, weir answering held messages); reading resumes
        once every reason is gone."""
        paused = self.state.paused
        if not paused:
            self.client.pause_reading()
        paused.add(why)

    def resume_client(self, why: str) -> None:
        paused = self.state.paused
        if why in paused:
            paused.discard(why)
            if not paused and self.state.phase is not Phase.CLOSED:
                self.client.resume_reading()

    # -- client side ------------------------------------------------------------------------

    def client_data(self, data: bytes) -> None:
        try:
            if self.state.phase is Phase.READY:
                raw, index = self.cframer.take(data)
                if not raw:
                    return
                if self.state.local_busy:
                    self.state.waiting.extend(raw[start - 5 : end] for _, start, end in index)
                else:
                    self._process_client(raw, index)
                return
            self.cframer.feed(data)
            self.handshake.received()
        except ProtocolViolation as exc:
            self.client_violation(exc)

    def client_violation(self, exc: ProtocolViolation) -> None:
        """The client sent something malformed: tell it why and end the session."""
        log.warning("protocol violation from client: %s", exc.message)
        self.fatal(own_violation(exc))

    def _process_client(self, raw: bytes, index: list[tuple[int, int, int]]) -> None:
        """Observe and forward client messages until one needs weir's own answer; from there
        on the asynchronous pump takes over (reading from the client pauses meanwhile)."""
        if self.ctx is not None and try_answer(self, raw, index):  # hit path: memoized
            lanes = self.server.service.lanes
            if lanes is not None:
                lanes.offer(self, raw)
            return
        self.forward_client(raw, index)

    def forward_client(self, raw: bytes, index: list[tuple[int, int, int]]) -> None:
        """:meth:`_process_client` after the hit path declined."""
        if self.ctx is not None and aftermiss.park(self, raw, index):
            return  # a hit that waits for seen(s) coverage (proxy.aftermiss)
        # (the statement before this chunk, for a write's position read: write_position)
        before = self.ctx.last if self.writers and self.ctx is not None else None
        ext = self.extended
        state = self.state
        local = self.state.caching and self.ctx is not None
        if local and self.memos.current(self.routing):
            ext.adopt()  # caches changed: statements prepared upstream may now be served
        if local and try_forward(self, raw, index):
            return  # a miss of a held statement, forwarded as it is (proxy.missfast)
        # stays so in this loop: only a local answer (it ends it) holds
        quiet = ext.quiet and not identity.unsettled(self.ctx)
        # with statements held, a run of one prepared upstream needs no look either
        # (``Extended.passing``): its Bind seen before, Describe of a portal (libpq sends
        # one with every prepared run), Execute, Sync, Flush
        passing = quiet or (ext.passing and not identity.unsettled(self.ctx))
        held = state.held
        written = 0  # bytes of ``raw`` already sent upstream
        for i, (mtype, start, end) in enumerate(index):
            if mtype == _T_COPY_DATA:
                continue
            if passing:
                kind = CONTENT_FREE.get(mtype)
                if kind is not None and (quiet or mtype != _T_DESCRIBE
                                         or (end > start and raw[start] == _PORTAL)):
                    # Execute/Sync/Flush/Describe with nothing held locally: no decoding on
                    # the hot path (PostgreSQL validates their content itself)
                    state.expect(kind)
                    identity.executed(self, mtype, raw, start, end)
                    if mtype == _T_SYNC:
                        state.batch_upstream = False
                    elif kind:  # a Flush leaves the batch as it is
                        state.batch_upstream = True
                    continue
                if mtype == _T_BIND:  # seen before: only its names matter
                    bind = self.memos.binds.get(bind_names(raw, start, end))
                    if bind is not None and (quiet or bind.statement not in held):
                        state.frontend(bind)
                        ext.observe_forwarded(bind)
                        continue
                elif quiet and self._forward_seen(mtype, raw, start, end, local):
                    continue
            msg = decode_client(mtype, raw[start:end], quiet, state, self.ctx, self.routing)
            if msg is None:  # malformed: upstream as it is, for PostgreSQL's own ERROR
                continue
            if msg is TO_PUMP or (local and self._needs_local(mtype, msg)):
                self.upstream_write(raw[written : start - 5])
                self.answering.now([raw[s - 5 : e] for _, s, e in index[i:]])
                return
            if mtype == _T_QUERY and local:
                if state.held:  # weir may send statements first (UpstreamCopies.before_statement)
                    self.upstream_write(raw[written : start - 5])
                    written = start - 5
                self.upstream_query(self._route, msg)  # type: ignore[arg-type]
                self._remember(raw[start:end], msg)  # type: ignore[arg-type]
            elif mtype == _T_PARSE:
                self._note_hidden(msg)
                self._remember(raw[start:end], msg)  # type: ignore[arg-type]
            elif mtype == _T_BIND and not self._note_hidden(msg):
                self.memos.remember_bind(raw, start, end, msg)  # type: ignore[arg-type]
            state.frontend(msg)
            identity.forwarded(self, msg)
            self.extended.observe_forwarded(msg)
            if mtype == _T_TERMINATE:
                self.terminated = True
        if written:
            self.upstream_write(raw[written:])
        else:  # (a write's run: its position read after it, proxy.write_position)
            self.upstream_write(write_position.append(self, raw, index, before)
                                if self.writers else raw)

    # -- forwarding what was seen before ----------------------------------------------------

    def _forward_seen(self, mtype: int, raw: bytes, start: int, end: int, local: bool) -> bool:
        """Observe a plain Query or a Parse seen before (nothing held locally) without
        decoding or routing it again; False otherwise."""
        if mtype == _T_QUERY:
            if local:
                last = self.memos.plain_last
                if last is None or not plain_query(raw, start, end, self.routing):
                    return False
                self.ctx.last = last  # type: ignore[union-attr]
            elif not plain_query(raw, start, end, self.routing):
                return False
            self.state.expect("query")
            return True
        if mtype == _T_PARSE:
            parse = self.memos.parses.get(raw[start:end])
            if parse is None:
                return False
            self.state.frontend(parse)
            self.extended.observe_forwarded(parse)
            return True
        return False

    def _remember(self, payload: bytes, msg: fe.Query | fe.Parse) -> None:
        """Learn from a Query or Parse just forwarded (see ``_forward_seen``)."""
        routing = self.routing
        if isinstance(msg, fe.Parse):
            # the registry, when running, may route the statement (Extended._holdable)
            if routing.registry is None or not self.state.caching:
                self.memos.remember_parse(payload, msg)
            return
        route = self._route
        if self.memos.plain_last is None and route.destination == "upstream" \
                and route.classified is None and plain_query(payload, 0, len(payload), routing):
            assert self.ctx is not None
            self.memos.plain_last = self.ctx.last

    def _needs_local(self, mtype: int, msg: object) -> bool:
        if mtype == _T_QUERY:
            assert isinstance(msg, fe.Query) and self.ctx is not None
            self._route = self.routing.route(msg.query, self.state, self.ctx)
            return self._route.destination != "upstream" \
                or self.extended.copies.releases(msg.query) or self.extended.wait_settle
        return self.extended.involves(msg)

    def upstream_write(self, data: bytes) -> None:
        if data and self.upstream is not None:
            (self.upstream.write if self.corked is None else self.corked.append)(data)
            if not self.state.upstream_since:
                self.state.upstream_since = time.monotonic()
            if self.ctx is not None:
                self.ctx.seen.pending = True  # its answer moves seen(s) (``proxy.seen``)

    def upstream_flush(self, data: bytes) -> None:
        """Write bytes held by ``corked`` (their bookkeeping was done as they came)."""
        if self.upstream is not None:
            self.upstream.write(data)

    def _note_hidden(self, msg: object) -> bool:
        """Read-your-writes for writes behind read-only tags (``Routing.hides_write``; a
        data-modifying WITH whose own statement writes is not one, ``rules.with_writes``):
        a Parse of such a statement is remembered (and the Bind memos, which skip this, are
        forgotten), a Bind of one counts as a write; True for such a Bind (not memoized)."""
        ctx = self.ctx
        if ctx is None:
            return False
        if isinstance(msg, fe.Bind):
            if msg.statement in ctx.hiding:
                wrote(ctx, self.state.transaction_status)
                return True
        elif isinstance(msg, fe.Parse):
            # (a WITH whose statement writes hides nothing: its tag tells, ``with_writes``)
            if self.routing.hides_write(msg.query) and not with_writes(msg.query.lower()):
                ctx.hiding.add(msg.name)
                self.memos.binds.clear()
            else:
                ctx.hiding.discard(msg.name)
        return False

    def forward(self, msg: object, raw: bytes) -> None:
        """Send one client message upstream, as the client sent it."""
        self.extended.flush()  # weir's earlier answers come first
        identity.observe(self.ctx, msg, self.routing.identity_functions, self.state)
        self._note_hidden(msg)
        self.state.frontend(msg)
        identity.forwarded(self, msg)
        if isinstance(msg, fe.Terminate):
            self.terminated = True
        self.upstream_write(raw)

    def forward_malformed(self, mtype: int, raw: bytes) -> None:
        """Send a malformed client message upstream as the client sent it, for PostgreSQL's
        own ERROR (``forwarding.judged_upstream``)."""
        self.extended.flush()  # weir's earlier answers come first
        judged_upstream(mtype, self.state, self.ctx)
        self.upstream_write(raw)

    def inject(self, msg: fe.Parse | fe.Bind | fe.Close, replace: bytes = b"",
               skipped: Callable[[], object] | None = None) -> None:
        """Send a message of weir's own upstream; its answer is not relayed (``replace``
        is sent to the client in its place; ``skipped`` runs if it does not succeed)."""
        self._note_hidden(msg)
        self.state.injected(msg, replace, skipped)
        if self.upstream is not None:  # (its answer shows the client nothing: seen(s) stays)
            (self.upstream.write if self.corked is None else self.corked.append)(msg.encode())

    def inject_flush(self) -> None:
        """Ask the upstream for the answers to weir's own requests now (a Flush)."""
        self.upstream_write(_FLUSH)

    def upstream_query(self, route: Route, msg: fe.Query) -> None:
        """Bookkeeping for a Query that goes upstream."""
        assert self.ctx is not None
        self.ctx.last = ("upstream", route.reason)
        self.extended.copies.before_statement(msg.query)
        self.extended.simple_query()
        self.routing.note_upstream(route, self.ctx)
        observe_set(msg.query, self.ctx, self.state.in_transaction)
        if self.routing.hides_write(msg.query):
            self.ctx.seen.pending = True  # read-your-writes: as if its tag said it wrote

    def client_eof(self) -> bool:
        """The client closed its sending side: finish what it sent, then end the session."""
        self.terminated = True
        if self.upstream is not None and not self.upstream.is_closing():
            self.upstream.write(fe.Terminate().encode())
            return True  # keep our sending side open for the last results
        self.close()
        return False

    def client_lost(self) -> None:
        self.terminated = True
        if self.upstream is not None and not self.upstream.is_closing():
            self.upstream.write(fe.Terminate().encode())
            self.upstream.close()
        self._release()

    # -- upstream side ----------------------------------------------------------------------

    def upstream_data(self, data: bytes) -> None:
        if self.lane:
            self.server.service.lanes.reclaim(self)  # type: ignore[union-attr]
        try:
            if self.state.phase is Phase.READY:
                self.relay_from_upstream(data)
                return
            self.uframer.feed(data)
            self.handshake.upstream_received()
        except ProtocolViolation as exc:
            log.error("protocol violation from upstream: %s", exc.message)
            self.fatal(
                own_error("08P01", f"invalid message from upstream: {exc.message}",
                          severity="FATAL")
            )

    def upstream_protocol(self) -> asyncio.Protocol:
        return UpstreamEndpoint(self)

    def relay_from_upstream(self, data: bytes) -> None:
        """Relay whole messages; the session state observes runs that end with
        ReadyForQuery in one step (``scan_backend``), the rest message by message."""
        tail = self.miss_tail
        if tail is not None:  # its answer is cut out (proxy.missfast_position)
            data = tail.feed(data)
        self.relay_fed(data, tail)

    def relay_fed(self, data: bytes, tail: missfast_position.Tail | None) -> None:
        """:meth:`relay_from_upstream` once ``tail`` (the session's position read
        outstanding, if any) cut its answer out of ``data`` (the relay core calls it too)."""
        state = self.state
        raw, statuses, marks = self.uframer.take_backend(
            data, READ_ONLY_TAGS, not state.swallowing)
        if statuses:
            state.ready(statuses)
        if marks:
            raw = self._observe_upstream(raw, marks)
        if self.extended.deferred:  # a miss's local answers come first (Extended.deferred)
            raw = self.extended.take_deferred() + raw
        if raw:
            self.client.write(raw)
        if tail is not None and tail.done:
            missfast_position.arrived(self, tail)
        if self.ctx is not None and self.ctx.seen.missed:
            aftermiss.answered(self)  # seen(s) settles now; back to a lane (proxy.aftermiss)

    def _observe_upstream(self, raw: bytes, marks: list[tuple[int, int, int]]) -> bytes:
        """Observe messages one by one; ``raw`` without the answers weir swallows."""
        state = self.state
        swallowed: list[tuple[int, int, bytes]] = []
        for mtype, start, end in marks:
            if mtype not in _OBSERVED_BACKEND:
                continue
            if mtype in _DECODED_BACKEND:
                msg = be.decode_backend(mtype, raw[start:end])
                state.backend(msg)
                self.server.service.gates.transaction_ended()  # (privilege changes: proxy.grants)
                if mtype == _T_ERROR and getattr(msg, "severity", "") in ("FATAL", "PANIC"):
                    self.fatal_relayed = True
            elif state.answer(mtype):
                swallowed.append((start - 5, end, state.replacement))
            elif mtype == _T_COMMAND_COMPLETE and self.ctx is not None and answer_class(
                    mtype, raw[start : start + 8], READ_ONLY_TAGS) == ANSWER_WRITE:
                wrote(self.ctx, state.transaction_status, raw[start : start + 8])
                self.server.service.gates.wrote(raw[start:end], state)
        return _without(raw, swallowed) if swallowed else raw

    def upstream_lost(self) -> None:
        if self.state.phase is Phase.CLOSED:
            return
        if self.lane:
            self.server.service.lanes.reclaim(self, replay=False)  # type: ignore[union-attr]
        if not self.terminated and not self.fatal_relayed:
            self.fatal(
                own_error("08006", "the upstream server closed the connection unexpectedly",
                          severity="FATAL")
            )
            return
        self.close()

    # -- ending -----------------------------------------------------------------------------

    def fatal(self, error: bytes) -> None:
        """Tell the client why, then end the session."""
        if self.state.phase is not Phase.CLOSED and not self.client.is_closing():
            self.client.write(error)
        self.close()

    def close(self) -> None:
        if self.state.phase is Phase.CLOSED:
            return
        if self.lane:
            self.server.service.lanes.reclaim(self, replay=False)  # type: ignore[union-attr]
        self.state.phase = Phase.CLOSED
        if self.upstream is not None and not self.upstream.is_closing():
            if not self.terminated:
                self.upstream.write(fe.Terminate().encode())
            self.upstream.close()
        if not self.client.is_closing():
            self.client.close()
        self._release()

    def _release(self) -> None:
        self.handshake.login.stop()
        self.state.phase = Phase.CLOSED
        self.extended.wake()  # a pump waiting for the upstream's answers stops waiting
        self.server.sessions.discard(self)
        if self.key is not None:
            self.server.release_key(self.key)
            self.key = None


def _without(raw: bytes, spans: list[tuple[int, int, bytes]]) -> bytes:
    """``raw`` with each byte range in ``spans`` (ascending, disjoint) replaced by the
    bytes given with it."""
    out, pos = [], 0
    for start, end, instead in spans:
        out.append(raw[pos:start])
        out.append(instead)
        pos = end
    out.append(raw[pos:])
    return b"".join(out)


def relay_entries(session: Session, core: ModuleType | None
                  ) -> tuple[Callable[[bytes], None], Callable[[bytes], None]]:
    """The callables ``session``'s transports deliver data to: with ``core`` (the compiled
    ``cython_ext.relay_scan``), its ``Relay``'s methods, which handle the quiet cases of a
    READY session in C and hand everything else to the session's own methods; without it,
    :meth:`Session.client_data` and :meth:`Session.upstream_data` (the pure-Python twin)."""
    if core is None:
        return session.client_data, session.upstream_data
    if not core.configured():
        core.configure(try_answer, Phase.READY, ProtocolViolation, PLAIN_REQUESTS,
                       READ_ONLY_TAGS, WATCHED_WORDS, plain_query, CONTENT_FREE)
        core.configure_writes(wrote, aftermiss.answered)
        core.configure_write_position(write_position.append, missfast_position.arrived)
    relay = core.Relay(session)
    return relay.client_data, relay.upstream_data


_core = cython_ext.load("relay_scan")
