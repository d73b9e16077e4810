"""After a miss: the session settles its seen(s) when the answer comes, and goes back to a lane.

Owns: :func:`answered`, which the relay calls when an upstream answer ending idle was relayed
to a session whose cached read went upstream as a miss (``Seen.missed``; the Python relay
path, ``Session.relay_from_upstream``, and the relay core's quiet path, through
``HitLanes.offer_pass``).

What it does: nothing is outstanding upstream then, so every answer the session got has
arrived and ``seen(s)`` may be fixed to *now* (``Seen.settle``: the rule of ``proxy.seen``,
only earlier than the next cached read would fix it, so the barrier it needs is sent one
client round trip sooner: at once, ``Coverage.when``). When the lanes run and the session
holds statements they may answer, the session is handed back to its lane as soon as the
applier passes that barrier (``HitLanes.enter``, with every condition of a hand-over: quiet,
every gate of the hit path open, which includes the session being covered); before it, its
next read takes the event loop (a hit waits there for the same barrier). Without this a
session stayed on the event loop after a miss until its next memoized answer there.
"""

from __future__ import annotations

import time
from typing import Any


def answered(session: Any) -> None:
    """The session's upstream answers all came, the last ending idle (module docstring)."""
    ctx = session.ctx
    if ctx is None or not ctx.seen.missed:
        return
    state = session.state
    service = session.server.service
    host = service.host
    if host is None or not state.idle or state.swallowing or state.transaction_status != "I":
        return
    ctx.seen.settle(time.monotonic())
    if service.settings.read_your_writes != "on":
        _back(session)
        return
    host.coverage.when(ctx.seen.at, lambda: _back(session))


def _back(session: Any) -> None:
    lanes = session.server.service.lanes
    if lanes is None or session.lane or not session.state.held:
        return
    fd = session.lane_fd
    if fd is not None and fd >= 0:
        lanes.enter(session, fd)
