"""weir's own answers inside a relayed session: the client's messages from the first that
needs one on.

Owns: :class:`Answering` — once a client message needs weir's own answer (a simple Query
routed to a cache or to weir's commands, a message of a statement weir holds:
``relay.Session.forward_client`` decides), that message and every one after it in the chunk
are handled one by one, without waiting while they can be (:meth:`Answering.now`), then by
the asynchronous pump (:meth:`Answering.pump`; reading from the client pauses meanwhile, and
messages arriving meanwhile wait in the session core's ``waiting``). Simple Queries are routed
here and answered from the caches (``proxy.reads``), by an admin command, or forwarded;
the extended protocol's messages go to ``proxy.extended``. A Query that deallocates a
statement only weir holds is answered here too (``UpstreamCopies.release``).

It sees its session through :class:`AnsweringSession` (``proxy.relay.Session`` meets it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.events import Phase
from pgwire.framing import ProtocolViolation
from proxy.extended import Extended
from proxy.forwarding import JUDGED_UPSTREAM
from proxy.hitpath import remember_query
from proxy.metrics import own_error, own_violation
from proxy.router import Route, SessionContext
from proxy.service import CacheService
from proxy.session import SessionState

log = logging.getLogger("weir.relay")

_T_COPY_DATA = ord("d")
_T_QUERY = ord("Q")


class AnsweringServer(Protocol):
    """What answering uses of the server (``proxy.server.Server``)."""

    @property
    def service(self) -> CacheService: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...


class AnsweringSession(Protocol):
    """What answering uses of its session (``proxy.relay.Session``)."""

    @property
    def state(self) -> SessionState: ...

    @property
    def ctx(self) -> SessionContext | None: ...

    @property
    def extended(self) -> Extended: ...

    @property
    def server(self) -> AnsweringServer: ...

    @property
    def client(self) -> asyncio.Transport: ...

    def forward(self, msg: object, raw: bytes) -> None: ...

    def upstream_write(self, data: bytes) -> None: ...

    corked: list[bytes] | None
    lane_miss_run: int  # (reset by a hit: ``proxy.aftermiss.mostly_misses``)
    lane_recent: int  # (a 0 shifted in by a hit: ``proxy.lane_switch.switch_args``)

    def upstream_flush(self, data: bytes) -> None: ...

    def upstream_query(self, route: Route, msg: fe.Query) -> None: ...

    def pause_client(self, why: str) -> None: ...

    def resume_client(self, why: str) -> None: ...

    def fatal(self, error: bytes) -> None: ...


class Answering:
    """The local answering of one session (see the module docstring)."""

    def __init__(self, session: AnsweringSession) -> None:
        self.session = session

    def now(self, pending: list[bytes]) -> None:
        """Handle messages one by one without waiting; hand the rest to the asynchronous
        pump at the first that must wait (reading from the client pauses meanwhile). What
        goes upstream meanwhile (a miss: its portal, Execute, Sync) leaves in one write: on
        a loaded machine each write is a wake-up of the backend, most of a miss's price."""
        session = self.session
        session.corked = []
        try:
            self._each(pending)
        finally:
            held, session.corked = session.corked, None
            if held:
                session.upstream_flush(b"".join(held))

    def _each(self, pending: list[bytes]) -> None:
        session = self.session
        for j, raw in enumerate(pending):
            mtype = raw[0]
            if mtype == _T_COPY_DATA:
                session.upstream_write(raw)
                continue
            msg = _decoded(mtype, raw)
            done = (session.extended.malformed(mtype, raw) if msg is None
                    else self._query_now(msg, raw) if mtype == _T_QUERY
                    else session.extended.handle_now(msg, raw))
            if not done:
                session.extended.flush()
                session.state.local_busy = True
                session.pause_client("answering")
                session.state.waiting = pending[j:] + session.state.waiting
                session.server.spawn(self.pump())
                return
        session.extended.flush()

    def _query_now(self, msg: object, raw: bytes) -> bool:
        """A simple Query answered or forwarded without waiting; False if it must wait."""
        session = self.session
        assert isinstance(msg, fe.Query) and session.ctx is not None
        if session.extended.wait_settle:
            return False  # (the pump waits first)
        service = session.server.service
        route = service.routing.route(msg.query, session.state, session.ctx)
        if route.destination == "upstream":
            self._forward_query(route, msg, raw)
            return True
        if route.destination != "cache":
            return False
        reads: list[tuple[str, tuple[Any, ...], object]] = []
        served = service.reads.serve_now(route, session.ctx, session.state.parameters, reads)
        if served is None:
            return False
        self._finish_query(msg, raw, *served)
        if served[0] is not None:
            remember_query(session, raw, reads, served[0])
        return True

    def _finish_query(self, msg: fe.Query, raw: bytes, answer: bytes | None, reason: str) -> None:
        session = self.session
        assert session.ctx is not None
        session.ctx.last = ("cache", reason) if answer is not None else ("upstream", reason)
        session.extended.simple_query(answered=answer is not None)
        if answer is None:
            session.forward(msg, raw)
        else:
            self._answered(answer)

    def _answered(self, answer: bytes) -> None:
        """Write weir's own ``answer`` to a simple Query, after the earlier local answers,
        with its ReadyForQuery."""
        session = self.session
        session.extended.flush()
        session.client.write(answer + be.ReadyForQuery(session.state.transaction_status).encode())

    def _forward_query(self, route: Route, msg: fe.Query, raw: bytes) -> None:
        """A Query that goes upstream — unless it deallocates a statement only weir holds:
        weir answers that itself (``UpstreamCopies.release``)."""
        session = self.session
        answer = session.extended.copies.release(msg.query)
        session.upstream_query(route, msg)
        if answer is None:
            session.forward(msg, raw)
            return
        session.extended.simple_query(answered=True)
        self._answered(answer)

    async def pump(self) -> None:
        """Process held client messages in order, answering weir's own ones."""
        session = self.session
        state = session.state
        try:
            while state.waiting and state.phase is not Phase.CLOSED:
                raw = state.waiting.pop(0)
                mtype = raw[0]
                if mtype == _T_COPY_DATA:
                    session.upstream_write(raw)
                    continue
                msg = _decoded(mtype, raw)
                if msg is None:
                    await session.extended.settle()
                    session.extended.malformed(mtype, raw)
                elif mtype == _T_QUERY:
                    assert isinstance(msg, fe.Query)
                    await session.extended.settle()
                    await self._query(msg, raw)
                else:
                    await session.extended.handle(msg, raw)
        except ProtocolViolation as exc:
            session.fatal(own_violation(exc))
        except Exception:
            log.exception("the session's local answering failed")
            session.fatal(own_error("XX000", "weir: internal error", severity="FATAL"))
        finally:
            state.local_busy = False
            if state.phase is not Phase.CLOSED:
                session.extended.flush()
                session.resume_client("answering")

    async def _query(self, msg: fe.Query, raw: bytes) -> None:
        """A simple-protocol Query: answered by weir (admin or cache) or forwarded."""
        session = self.session
        service = session.server.service
        ctx = session.ctx
        assert ctx is not None
        route = service.routing.route(msg.query, session.state, ctx)
        if route.destination == "upstream":
            self._forward_query(route, msg, raw)
            return
        if route.destination == "admin":
            session.extended.simple_query(answered=True)
            answer = await service.admin(route, ctx)
            if getattr(route.admin, "what", "") != "last":
                ctx.last = ("admin", route.reason)
            if session.state.phase is not Phase.CLOSED:
                self._answered(answer)
            return
        reads: list[tuple[str, tuple[Any, ...], object]] = []
        served = await service.reads.serve(route, ctx, session.state.parameters, reads)
        if session.state.phase is not Phase.CLOSED:
            self._finish_query(msg, raw, *served)
            if served[0] is not None:
                remember_query(session, raw, reads, served[0])


def _decoded(mtype: int, raw: bytes) -> fe.FrontendMessage | None:
    """The client message ``raw``, or None for a malformed one PostgreSQL answers with an
    ERROR (``forwarding.JUDGED_UPSTREAM``: ``Extended.malformed`` sends it upstream); any
    other malformed message raises ProtocolViolation."""
    try:
        return fe.decode_frontend(mtype, raw[5:])
    except ProtocolViolation:
        if mtype not in JUDGED_UPSTREAM:
            raise
        return None
