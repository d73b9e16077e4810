"""Pass lanes that forward misses: the held statements whose reads a lane may send upstream
for a session, and the reading of what the lanes so forwarded.

Owns: :func:`forwardable` (which held statements, when: only with ``--lane-misses on``,
the default), :func:`keeping_up`, :func:`lag` and :class:`Pace` (lanes forward misses only
while the event loop keeps up with them, but for first reads the doorkeeper keeps, which
cost it a count), :class:`Doorkeeper` (the first read of a key,
only counted: its twin in ``cython_ext.lanes`` runs in the lanes), :func:`count` (the
forwarded Binds read as misses: ``proxy.missfast.count``) and :func:`returned` (a session
back), with how often ``proxy.lanes`` reads them (:data:`COUNT_EVERY`) and how long a
session whose lane answered no misses waits before it is given one again
(:data:`MISS_SKIP`).

Why forwarding from a lane keeps every guarantee: the lane forwards a held statement's run
only when it has no stamped answer for it (a stamped one hands the session back, and the
event loop checks every gate of the session first), and only the runs ``proxy.missfast``
forwards (the drivers' Bind [Describe] Execute Sync of a statement the upstream holds as
the client parsed it); the client gets PostgreSQL's own answer, relayed only when it needs
no look (as any pass session's), and what the lane relayed marks seen(s) pending when the
session comes back (``HitLanes.reclaim``), so no later cached read shows an older state.
The ledger observes the forwarded Binds as the relay would have (``proxy.lane_replay``).
Admission, the miss counters and the fills are the event loop's: it reads the forwarded
Binds every :data:`COUNT_EVERY` seconds and when the session comes back, behind the gates
of a miss (``missfast.count``), so a key's second read is admitted as on the event loop, a
few ms later at most. Reading a Bind costs the event loop some 30 µs of Python, so the
lanes read the first read of a key themselves (:class:`Doorkeeper`: a key read once is
refused by admission anyway, ``proxy.fillqueue.Admission``): they count it, and pass the
proxy the Binds of later reads only, which admission then takes as seen before; a uniform
key space larger than what is read (mostly one-off reads) costs the event loop a count per
wake-up, not a Bind read per miss.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cython_ext
from proxy import aftermiss, missfast

#: seconds between two reads of the misses pass lanes forwarded (``missfast.count``)
COUNT_EVERY = 0.005
#: the event loop keeps up while the replication stream lags the upstream by at most this
#: many seconds (:func:`lag`: barriers and fills wait for that much) ...
KEEP_UP_LAG = 0.5
#: ... and at most this many fills wait for an upstream transaction: past either, lanes
#: forward no misses (each costs the event loop its count, and its fill): the sessions come
#: back and their misses go through the event loop, which paces them (:func:`keeping_up`)
KEEP_UP_QUEUE = 64
#: ... and the session barriers that landed lately took at most this many seconds on
#: average (:class:`Pace`: a hit after a miss waits for one), sampled every this many
KEEP_UP_BARRIER = 0.010
PACE_SAMPLE = 8
#: misses a session answers on the event loop after its lane forwarded one miss at most
#: (its reads were mostly hits: a lane stint and the hand-back would cost more than they save)
MISS_SKIP = 8


class Doorkeeper:
    """The hashes of reads (never 0) pass lanes forwarded lately, with how many times each
    was kept, ``capacity`` at most (then it starts over; 0: off, every read is passed on:
    ``--admission always``). The first ``keep`` reads of one are only counted (kept), not
    passed on; later ones are (admission's ``keep``, ``proxy.fillqueue.Admission``, told by
    the proxy: it admits a key on the read after those; 1 while fills pay, so a key's first
    read is kept and its second passed on)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.keep = 1
        self._kept: dict[int, int] = {}

    def kept(self, h: int) -> bool:
        """Whether the read ``h`` is only counted (then remembered), not passed on."""
        if not self.capacity:
            return False
        n = self._kept.get(h, 0)
        if n >= self.keep:
            return False
        if not n and len(self._kept) >= self.capacity:
            self._kept.clear()
        self._kept[h] = n + 1
        return True

    def would_keep(self, h: int) -> bool:
        """Whether :meth:`kept` would say so now (nothing remembered): one of a key's first
        ``keep`` reads, which costs the event loop only a count; while it is behind
        (:class:`Pace`) the lanes still forward those."""
        return bool(self.capacity) and self._kept.get(h, 0) < self.keep

    def seen_before(self, h: int) -> bool:
        """Whether the read ``h`` was kept before (it goes by :meth:`kept` too)."""
        before = bool(self.capacity) and h in self._kept
        self.kept(h)
        return before


Doorkeeper_python = Doorkeeper
_fast = cython_ext.load("lanes")
if _fast is not None:
    Doorkeeper = _fast.Doorkeeper  # type: ignore[misc]


@dataclass(slots=True)
class Pace:
    """The recent latency of session barriers, sampled from their running totals
    (``Coverage.barriers``, ``barrier_seconds``): slow when those that landed since the
    last sample took over :data:`KEEP_UP_BARRIER` on average."""

    barriers: int = 0
    seconds: float = 0.0
    slow: bool = False
    #: what the lanes were last told (:meth:`tell`), and how often they were told to close
    #: (``lane_miss_closed`` in SHOW WEIR STATUS)
    open: bool = True
    closed: int = 0
    #: the capacity of the lanes' doorkeeper (``Lanes.screen_misses``; None: not told yet),
    #: and the first reads it kept (only counted: ``lane_miss_firsts`` in SHOW WEIR STATUS)
    screen: int | None = field(default=None)
    firsts: int = 0
    #: the reads of a key the lanes' doorkeeper keeps before it passes one on (admission's
    #: ``keep``, told at every :meth:`tell`)
    keep: int = 1

    @property
    def screening(self) -> bool:
        """Whether the lanes count first reads themselves (their Binds not passed on)."""
        return bool(self.screen)

    @property
    def kept(self) -> int:
        """How many reads of a key the lanes' doorkeeper counts and keeps before it passes
        one on (``missfast.count``'s ``seen_before``): 0 when not screening, else
        :attr:`keep`."""
        return 0 if not self.screen else self.keep

    def screens(self, service: Any, core: Any) -> bool:
        """:attr:`screening`, the lanes' ``core`` told its doorkeeper's capacity (admission's)
        first."""
        if self.screen is None and service.host is not None:
            admission = service.host.fills.admission
            self.screen = 0 if admission.always else admission.capacity
            core.screen_misses(self.screen)
        return bool(self.screen)

    def tell(self, service: Any, core: Any) -> bool:
        """Whether lanes may forward misses now (:func:`keeping_up`); a change is told to
        the lanes' ``core`` (and, first, their doorkeeper's capacity: :meth:`screens`)."""
        if self.screens(service, core) and service.host is not None \
                and service.host.fills.admission.keep != self.keep:
            self.keep = service.host.fills.admission.keep
            core.screen_keep(self.keep)
        up = keeping_up(service, self)
        if up != self.open:
            self.open = up
            core.open_misses(up)
            self.closed += not up
        return up

    def sample(self, barriers: int, seconds: float) -> bool:
        """Whether barriers are slow lately (fewer than :data:`PACE_SAMPLE` since the last
        sample: the last verdict stands)."""
        count = barriers - self.barriers
        if count >= PACE_SAMPLE:
            self.slow = (seconds - self.seconds) / count > KEEP_UP_BARRIER
            self.barriers, self.seconds = barriers, seconds
        return self.slow


def keeping_up(service: Any, pace: Pace) -> bool:
    """Whether the event loop keeps up with what lanes forwarding misses give it: a lane
    relays at full speed on its CPU while the event loop counts each forwarded Bind, runs
    the fills and applies the replication stream the barriers wait for; when it falls
    behind, reads that wait for it (a hit after a miss waits for a seen(s) barrier) stall,
    fills land late, keys are not stamped and more reads are forwarded. Measured on a quiet
    machine (``bench/cold.py`` (d)): without this, fills and barriers waited seconds."""
    host = service.host
    if host is None:
        return False
    slow = pace.sample(host.coverage.barriers, host.coverage.barrier_seconds)
    return not slow and lag(host) <= KEEP_UP_LAG \
        and len(host.fills.queue.waiting) <= KEEP_UP_QUEUE


def lag(host: Any) -> float:
    """Seconds by which the applied stream may lag the upstream (an upper bound): since the
    send time of the latest barrier or fill marker the applier passed (``Coverage.covered``:
    session barriers and fills' markers land many times a second under load) or of the
    latest heartbeat barrier (every 0.5 s: ``EngineHost.staleness``, alone too coarse)."""
    return time.monotonic() - float(max(host.fresh_as_of, host.coverage.covered))


def forwardable(session: Any, service: Any, statements: list[tuple[bytes, int, float]]
                ) -> list[tuple[bytes, int]]:
    """(Bind names, lane table) of each held statement whose reads a pass lane may forward
    for ``session``, of the hit lane's ``statements`` (name, lane table, gate): those
    ``proxy.missfast`` forwards — prepared upstream as the client parsed them, their role's
    privilege known, not hiding a write — while the session's own gates of a miss are
    open; none otherwise."""
    ctx, state = session.ctx, session.state
    if ctx is None or service.host is None or service.settings.lane_misses != "on" \
            or service.settings.misses != "upstream" \
            or not state.caught_up or not ctx.defaults_applied or ctx.tainted is not None \
            or session.extended.wait_settle:
        return []
    out = []
    for name, table, _ in statements:
        text = name.decode()
        held = state.held[text]
        # (not the unnamed statement: PostgreSQL drops it at any simple Query, which the
        # ledger does not follow, so it may not hold it; ``missfast`` leaves it alone too)
        if text and held.upstream and text not in ctx.hiding \
                and missfast.upstream_holds(state, held.parse):
            out.append((b"\x00" + name + b"\x00", table))
    return out


def count(taken: list[tuple[int, bytes, int]], sessions: dict[int, Any], pace: Pace) -> None:
    """Read what lanes forwarded, (token, Bind messages, first reads) each, as misses of the
    sessions of those tokens: the Binds as ``missfast.count`` reads them (while ``pace`` is
    :attr:`Pace.screening`, the lanes' doorkeeper passes only keys read before), the first
    reads counted as the misses admission refused (``EngineHost.read_or_fill``)."""
    for token, raw, first in taken:
        pace.firsts += first
        session = sessions.get(token)
        if session is None:
            continue
        if first:
            _first_reads(session, first)
        if raw:
            missfast.count(session, raw, pace.kept)


def _first_reads(session: Any, first: int) -> None:
    """``first`` reads the lanes' doorkeeper kept: counted (misses, refused by admission),
    and the session missed (``proxy.aftermiss``)."""
    host, ctx = session.server.service.host, session.ctx
    if host is None or ctx is None or not host.connected:
        return
    host.engine.stats.misses += first
    host.fills.admission.refused += first
    ctx.seen.missed = True


def settled(session: Any, after_miss: Callable[[Any], None]) -> bool:
    """``HitLanes.offer_pass`` of a session whose cached read went upstream as a miss: its
    seen(s) settles (``aftermiss.answered``; not while a write's mark is unsettled, e.g. in a
    block: then a plain pass), ``after_miss`` may give it a lane that forwards misses, and
    coverage is asked for unless its reads are mostly misses lately (:func:`missing`).
    True when it goes to no plain pass lane: in a lane now, or holding statements (to their
    hit lane once covered, ``aftermiss.back``); offered again at its next idle answer."""
    aftermiss.answered(session, cover=False)
    if session.ctx.seen.missed:
        return False
    after_miss(session)
    if not missing(session):
        aftermiss.cover_now(session)
    return bool(session.lane or session.state.held)


def missing(session: Any) -> bool:
    """Whether ``session``, just settled after a miss, is in a lane that forwards misses and
    its last such lane relayed a run of cycles (``aftermiss.mostly_misses``): its reads are
    mostly misses lately, so its next one most likely needs no coverage, and a request for
    it now (a probe, ``proxy.aftermiss.cover_now``) would be wasted. Only latency depends on
    it: the lane hands a stamped read back unless amid such a run, and a hit the event loop
    finds not covered asks for coverage itself (``aftermiss.park``); while it is in the
    lane, coverage could not hand it back to its hit lane anyway (``aftermiss.back``)."""
    return bool(session.lane) and aftermiss.mostly_misses(session)


def returned(session: Any, token: int, result: tuple[Any, ...], pace: Pace) -> None:
    """A session whose lane forwarded misses came back (``Lanes.leave``'s ``result``): what
    was not read yet is read, and a lane that forwarded one miss at most (its reads were
    hits) is not given again for the next :data:`MISS_SKIP` misses."""
    session.lane_miss_run = result[0]
    if result[0] < 2:
        session.lane_miss_skip = MISS_SKIP
    if result[10] or result[11]:
        count([(token, result[10], result[11])], {token: session}, pace)
