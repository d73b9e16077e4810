"""Which sessions the lanes may take as pass sessions, and hit sessions that switch to one at
a miss (``proxy.lanes``, ``cython_ext.lanes``: ``Lanes.enter``'s ``switch``).

Owns: :func:`pass_ready` (the quiet state a pass session needs), :func:`switch_args`
(whether a hit session handed to its lane may switch, in the lane, to a pass session that
forwards misses at its next miss: its reads were mostly misses lately) and :func:`switched`
(what such a session left when it comes back), with :data:`RETRY` and :data:`NEVER`.

Why a switch keeps every guarantee: the lane answers nothing from stamps once it switched
(before, it was a hit session, covered when handed over), the client gets PostgreSQL's own
answers from then on, and what the lane relayed marks seen(s) pending when the session
comes back, as for any pass session (``proxy.seen``); admission only decides which keys get
filled (``proxy.lane_misses``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pgwire.events import Phase
from proxy import aftermiss, identity, lane_misses
from proxy.lane_replay import resume

#: quiet upstream runs a pass session waits before it is offered again after a refusal that
#: may not last (and after one that will: effectively never)
RETRY = 16
NEVER = 1 << 30
#: why a hit session's client is not read (``proxy.lanes``)
PAUSE = "hit lane"


def switch_args(lanes: Any, session: Any, stmts: list[tuple[bytes, int, float]]
                ) -> tuple[Any, ...] | None:
    """``Lanes.enter``'s ``switch`` for ``session``, or None: a hit session whose reads
    are mostly misses lately (``MISS_RUN`` of its last 8 held statements' runs, as the
    pass lanes count them) may switch to a pass session that forwards misses at its next
    miss, in the lane, when it could be handed to such a lane now (``after_miss``'s
    conditions: the held statements ``missfast`` forwards, and every condition of a
    pass session but a quiet Extended: it may hold statements; the lane switches only
    for a miss it would forward then, ``Lanes.open_misses``).
    The miss then costs what a pass-through read costs, with no hand-back to the event
    loop and no position read; a hit after it is handed back by the pass lane and asks
    for coverage itself (``aftermiss.park``). Why it keeps every guarantee: what the lane
    relays marks seen(s) pending when the session comes back, as for any pass session,
    and the lane answers nothing from stamps once it switched."""
    if bin(session.lane_recent & 0xFF).count("1") < aftermiss.MISS_RUN \
            or session.upstream is None:
        return None
    held = lane_misses.forwardable(session, lanes.service, stmts)
    if not held:
        return None
    lanes._pace.tell(lanes.service, lanes.core)  # (behind: the lanes forward first reads only)
    ready = pass_ready(lanes, session, held)
    if isinstance(ready, int):
        return None
    memos = session.memos
    return (ready[1], list(memos.binds), list(memos.parses), lanes._queries[ready[2]], held,
            session.lane_recent & 0xFF)


def pass_ready(lanes: Any, session: Any, held: list[tuple[bytes, int]] | None
               ) -> tuple[int, int, str] | int:
    """Whether ``session`` is quiet enough to be a pass session (``held``: one that
    forwards those statements' misses, which may hold statements): its client and
    upstream descriptors and which simple Queries it forwards, or how many answers to
    wait before it is offered again (``HitLanes._enter_pass``, :func:`switch_args`)."""
    service = lanes.service
    if lanes._stopped or service.settings.caching == "auto":
        return NEVER  # auto mode counts every run as it comes (it creates caches)
    upstream = session.upstream
    if upstream is None:
        return NEVER
    fd = session.lane_fd
    if fd is None:
        fd = session.lane_fd = socket_fd(session.client)
    ufd = session.upstream_lane_fd
    if ufd is None:
        ufd = session.upstream_lane_fd = socket_fd(upstream)
    if fd < 0 or ufd < 0:
        return NEVER
    state, ext, memos = session.state, session.extended, session.memos
    if identity.unsettled(session.ctx):
        return RETRY  # the next client message is looked at and settles it first
    if not (state.phase is Phase.READY and not state.paused and not state.waiting
            and not state.local_busy and state.transaction_status == "I"
            and state.idle and not state.swallowing
            and (ext.quiet if held is None else not (
                state.held_portals or state.batch_local or state.uncertain))
            and not state.batch_upstream and not session.cframer.buffered
            and not session.uframer.buffered
            and session.client.get_write_buffer_size() == 0
            and upstream.get_write_buffer_size() == 0):
        return RETRY
    local = session.state.caching and session.ctx is not None
    routing = service.routing
    if local and (memos.registry_seen is not routing.registry
                  or memos.names_seen is not routing.cached_names):
        return RETRY  # the next client message brings the memos up to date first
    if routing.registry is None:
        return fd, ufd, "ascii"
    if local and memos.plain_last is None:
        return fd, ufd, "none"
    return fd, ufd, "unnamed"


def switched(lanes: Any, session: Any, token: int, result: tuple[Any, ...], replay: bool) -> None:
    """A hit session that switched to a pass session at a miss came back (:func:`switch_args`):
    its answers before the switch, then what it relayed (as a pass session that forwarded
    misses: ``HitLanes.reclaim``)."""
    if result[12]:
        lanes.served_hits(session, result[12], result[13])
    lane_misses.returned(session, token, result, lanes._pace)
    session.lane_recent = result[14] & 0xFF  # (it started from the session's)
    if session.ctx is not None and (result[0] or result[8] or result[9]):
        session.ctx.seen.pending = True  # (as any pass session: proxy.seen)
    resume(session, result, replay, PAUSE)


def ran(session: Any, result: tuple[Any, ...]) -> None:
    """A pass stay that forwarded misses came back (``Lanes.leave``'s ``result``): its held
    runs (``recent``, counted from 0 in the stay, a cycle each) follow the session's."""
    cycles = result[0]
    if cycles:
        kept = session.lane_recent << cycles if cycles < 8 else 0
        session.lane_recent = (kept | result[14]) & 0xFF


def socket_fd(transport: asyncio.BaseTransport) -> int:
    """The descriptor of a plain TCP or Unix socket, or -1 (TLS, or none)."""
    if transport.get_extra_info("ssl_object") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())
