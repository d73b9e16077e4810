"""What a session observes when a pass lane hands it back (``proxy.lanes``): the cycles the
lane relayed, summed up, and the messages it sent upstream whose answers are still to come —
what ``Session.forward_client`` and ``SessionState.ready`` would have observed had the event
loop relayed them.

Owns: :func:`observe_cycles` and :func:`observe_sent`, over the parts of a session they use
(:class:`ReplaySession`), and :func:`resume`, which applies a pass lane's ``leave`` result
and lets the session go on.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from pgwire import frontend as fe
from pgwire.events import Phase
from pgwire.framing import scan_messages
from proxy.extended import Extended
from proxy.forwarding import ForwardMemos
from proxy.router import SessionContext
from proxy.rules import CONTENT_FREE
from proxy.session import SessionState

_T_BIND = ord("B")
#: EXPLAIN LAST STATEMENT after a held statement's read a pass lane forwarded
FORWARDED = ("no answer for these parameters in the lanes: forwarded upstream by a lane "
             "(a miss; its fill, if admitted, runs in the background)")
_T_PARSE = ord("P")
_T_SYNC = ord("S")
_T_QUERY = ord("Q")


class ReplaySession(Protocol):
    """What observing a pass lane's work uses of a session (``proxy.relay.Session``)."""

    @property
    def state(self) -> SessionState: ...

    @property
    def extended(self) -> Extended: ...

    @property
    def memos(self) -> ForwardMemos: ...

    @property
    def ctx(self) -> SessionContext | None: ...


def observe_cycles(session: ReplaySession, binds: list[tuple[int, bytes, int]],
                    parses: list[tuple[int, bytes]], queried: int, batch: bool) -> None:
    """What observing a pass lane's relayed cycles leaves in the session: each Bind and
    Parse it relayed observed once, and the last simple Query, in the order of their last
    use (what the last one says is what stays: EXPLAIN LAST STATEMENT), every run of a Bind
    counted, the cycles answered."""
    state, ext, memos = session.state, session.extended, session.memos
    steps: list[tuple[int, int, bytes, int]] = [(used, _T_BIND, key, runs)
                                                for used, key, runs in binds]
    steps.extend((used, _T_PARSE, payload, 0) for used, payload in parses)
    if queried:
        steps.append((queried, _T_QUERY, b"", 0))
    steps.sort()
    ctx = session.ctx
    for _, mtype, key, runs in steps:
        msg: fe.Bind | fe.Parse
        if mtype == _T_QUERY:
            if session.state.caching and ctx is not None and memos.plain_last is not None:
                ctx.last = memos.plain_last
            continue
        if mtype == _T_BIND:
            bind = memos.binds.get(key)
            if bind is None:
                portal, statement, _ = key.split(b"\0")
                bind = fe.Bind(portal.decode(), statement.decode())
            msg = bind
        else:
            parse = memos.parses.get(key)
            msg = parse if parse is not None else cast(fe.Parse,
                                                        fe.decode_frontend(_T_PARSE, key))
        state.frontend(msg)
        ext.observe_forwarded(msg)
        if isinstance(msg, fe.Bind):
            if runs > 1:
                ext.count_runs(msg.statement, runs - 1)
            if ctx is not None and msg.statement in state.held:
                ctx.last = ("upstream", FORWARDED)  # a held statement's read (proxy.lanes)
    state.expect("sync")
    state.ready(b"I")
    state.batch_upstream = batch


def observe_sent(session: ReplaySession, raw: bytes) -> None:
    """What ``Session.forward_client`` observes for messages a pass lane already sent
    upstream (each of a kind the relay forwards without routing it again)."""
    state, ext = session.state, session.extended
    found, _ = scan_messages(raw, 0, len(raw))
    for mtype, start, end in found:
        kind = CONTENT_FREE.get(mtype)
        if kind is not None:
            state.expect(kind)
            if mtype == _T_SYNC:
                state.batch_upstream = False
            elif kind:
                state.batch_upstream = True
            continue
        msg = fe.decode_frontend(mtype, raw[start:end])
        ctx = session.ctx
        if mtype == _T_QUERY and session.state.caching and ctx is not None \
                and session.memos.plain_last is not None:
            ctx.last = session.memos.plain_last
        state.frontend(msg)
        ext.observe_forwarded(msg)
        if isinstance(msg, fe.Bind) and ctx is not None and msg.statement in state.held:
            ctx.last = ("upstream", FORWARDED)


def resume(session: Any, result: tuple[Any, ...], replay: bool, pause: str) -> None:
    """Apply what a pass session's lane did (``cython_ext.lanes``: ``Lanes.leave``'s
    ``result``), then go on with what it did not handle (``replay``: the session goes on;
    ``pause``: why its client was paused)."""
    (cycles, binds, parses, queried, batch, unread, unsent, upstream_unread,
     upstream_unsent, inflight) = result[:10]
    if unsent:
        session.client.write(unsent)
    if cycles:
        observe_cycles(session, binds, parses, queried, batch)
    if inflight:
        observe_sent(session, inflight)
    upstream = session.upstream
    if upstream is None:
        return
    if upstream_unsent:
        upstream.write(upstream_unsent)
    if not replay or session.phase is Phase.CLOSED:
        return
    upstream.resume_reading()
    session.resume_client(pause)
    if upstream_unread:
        session.upstream_received(upstream_unread)
    if unread and session.phase is not Phase.CLOSED:
        session.client_received(unread)
