"""After a miss: the session settles its seen(s) when the answer comes, and goes back to a lane.

Owns: :func:`answered`, which the relay calls when an upstream answer ending idle was relayed
to a session whose cached read went upstream as a miss (``Seen.missed``; the Python relay
path, ``Session.relay_from_upstream``, and the relay core's quiet path, through
``HitLanes.offer_pass``), and :func:`park`, which holds a hit that is not covered yet at the
door (``Session.forward_client``, both relay paths) until it is; and :func:`learn`, which of
the session's prepared statements write (``answered`` after a write's answer: their runs read
the write's position, ``proxy.write_position``).

What it does: nothing is outstanding upstream then, so every answer the session got has
arrived and ``seen(s)`` may be fixed to *now* (``Seen.settle``: the rule of ``proxy.seen``,
only earlier than the next cached read would fix it, so the barrier it needs is sent one
client round trip sooner: at once, ``Coverage.when``). When the lanes run and the session
holds statements they may answer, the session is handed back to its lane as soon as the
applier passes that barrier (``HitLanes.enter``, with every condition of a hand-over: quiet,
every gate of the hit path open, which includes the session being covered); before it, its
next read takes the event loop (a hit waits there for the same barrier). Without this a
session stayed on the event loop after a miss until its next memoized answer there.

:func:`park`: a chunk the hit path declined only because the session is not covered — a run
of a prepared statement whose memoized answer is current, every other gate open — waits
with the client's reading paused until the applier passes a barrier sent after ``seen(s)``
(``Coverage.when``), and is then handled again from the start: the hit path answers it from
the memo (in C with the compiled twin) and the session goes back to its lane, instead of the
general path reading, waiting and encoding it in Python. Nothing else waits: a read that
misses (no current memo) is forwarded upstream at once, since PostgreSQL's answer is never
older than what the session saw. After ``--read-timeout`` without coverage (or a barrier that
failed) the chunk takes the general path with ``Seen.expired`` set, which sends the read
upstream at once (``ReadPath._wait``: the bound is not waited twice). Sound because parking
only delays: the answer is given by the same gates, coverage included, when it is handled
again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pgwire.events import Phase
from proxy.hitpath import hit_once_covered
from proxy.seen import may_serve

#: why a parked session's client is not read (``Session.pause_client``)
_PARKED = "seen(s) coverage"
#: cycles the last pass lane that forwarded a session's misses relayed, from which its reads
#: count as mostly misses lately (:func:`mostly_misses`; the lanes' own run of misses
#: amid which they forward a stamped read too is as long, ``MISS_RUN`` in ``cython_ext.lanes``)
MISS_RUN = 6

#: misses among a session's last 8 held runs at most, for its reads to be mostly hits lately
#: (:func:`mostly_hits`)
HIT_RUN_MISSES = 2

#: statements a session remembers as writing (a bound: a client that prepares many writes
#: gets the read for the first ones; the others take the probe)
MAX_WRITERS = 16


#: why a cached read not covered yet went upstream at once (:func:`worth_waiting`)
NOT_WORTH_WAITING = ("not covered yet since the session's last upstream answer, and fills "
                     "do not pay lately (mostly one-off reads): upstream rather than wait "
                     "(monotonic reads)")


def worth_waiting(host: Any) -> bool:
    """Whether a cached read that is not covered yet (after the session's last upstream
    answer: monotonic reads, read-your-writes) waits for coverage, or goes upstream at once:
    not while admission is strict (``Admission.strict``: fills were followed by fewer hits
    than fills, mostly one-off reads), where such a read is a rare hit amid misses and a
    coverage wait (a barrier through the replication stream, tens of ms under load) costs
    the client far more than PostgreSQL's answer, which is never older than what the
    session saw. A skewed workload keeps fills paying, and its hits wait as before (going
    upstream moves seen(s) on, so the next hit would not be covered either)."""
    return not host.fills.admission.strict


def mostly_misses(session: Any) -> bool:
    """Whether the session's reads are mostly misses lately: its last pass lane that forwarded
    misses relayed :data:`MISS_RUN` cycles or more (``Session.lane_miss_run``, set when such a
    lane hands it back: ``proxy.lane_misses.returned``; 0 again once a hit answered it: in a
    hit lane, ``HitLanes.reclaim``, or on the event loop, ``proxy.hitpath`` and
    ``proxy.extended``). Then its next read is likely a miss,
    which needs no coverage: none is asked for after its miss (``proxy.lane_misses.settled``,
    ``proxy.missfast_position.append``); a hit that finds it not covered asks (:func:`park`)."""
    return bool(session.lane_miss_run >= MISS_RUN)


def mostly_hits(session: Any) -> bool:
    """Whether the session's reads are mostly hits lately: at most :data:`HIT_RUN_MISSES` of
    its last 8 held statements' runs were misses (``Session.lane_recent``, the miss whose
    answer just came included: a 1 per miss ``proxy.missfast`` forwarded, a 0 per hit a hit
    lane or the event loop answered). Then its next read is likely a hit, and after a miss
    the session goes back to its hit lane once covered rather than to a pass lane that
    forwards misses (``proxy.missfast_position.arrived``): such a stay would mostly be
    handed back at its first read, a hit, which the event loop then answers after taking
    the pass session back (cold Zipf over 100,000 keys, 8 clients: one stay per 9-10
    misses, each forwarding about one miss; without them 0.36x and 0.37x -> 0.46x and
    0.59x direct, runs interleaved on a loaded machine)."""
    return bin(session.lane_recent & 0xFF).count("1") <= HIT_RUN_MISSES


def answered(session: Any, cover: bool = True) -> None:
    """The session's upstream answers all came, the last ending idle (module docstring);
    ``cover`` False: seen(s) settles, and the caller decides whether to :func:`cover` it."""
    ctx = session.ctx
    if ctx is None or not ctx.seen.missed:
        return
    state = session.state
    service = session.server.service
    host = service.host
    if host is None:  # (no caching yet, nothing to cover: a write's mark, ``router.wrote``,
        ctx.seen.missed = False  # must not keep the lanes' pass offers on the miss branch)
        return
    if not state.idle or state.swallowing or state.transaction_status != "I":
        return
    if ctx.seen.wrote:  # (its statement: its next run reads its position, write_position)
        learn(session)
    ctx.seen.settle(time.monotonic())
    if cover:
        cover_now(session)


def learn(session: Any) -> None:
    """A write's answer came, ending idle (``aftermiss.answered``, with ``Seen.wrote``): the
    statement last bound to the unnamed portal is one that writes (unless weir holds it: a
    cached read, bound after the write in the same batch; nor one whose write hides behind a
    read-only tag, ``Session._note_hidden``: a ``SELECT ... FOR UPDATE`` marks the session
    at each Bind, and pass lanes relay its runs)."""
    writers, state = session.writers, session.state
    name = state.portal_statements.get("")
    if not name or name in state.held or name in session.ctx.hiding:
        return
    prepared = state.statements.get(name)
    if prepared is not None and (name in writers or len(writers) < MAX_WRITERS):
        writers[name] = prepared


def cover_now(session: Any) -> None:
    """Ask for coverage of the session's settled seen(s) now, and hand it back to its hit
    lane once covered (at once without read-your-writes). Only latency depends on it: a
    hit that finds the session not covered asks itself (:func:`park`)."""
    service, ctx = session.server.service, session.ctx
    if service.host is None or ctx is None:
        return
    if service.settings.read_your_writes != "on":
        back(session)
        return
    service.host.coverage.when(ctx.seen.at, lambda: back(session))


def back(session: Any) -> None:
    """Hand the session back to its hit lane (every hand-over condition is checked there)."""
    lanes = session.server.service.lanes
    if lanes is None or session.lane or not session.state.held:
        return
    fd = session.lane_fd
    if fd is not None and fd >= 0:
        lanes.enter(session, fd)


def park(session: Any, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """Hold ``raw`` until the session is covered, then handle it again (module docstring);
    False (nothing done) when it is not a hit that only waits for coverage."""
    ctx = session.ctx
    service = session.server.service
    host = service.host
    if ctx is None or host is None or service.settings.read_your_writes != "on" \
            or ctx.seen.expired or session.lane or not worth_waiting(host):
        return False  # (not worth waiting: the general path sends it upstream at once)
    seen = ctx.seen
    coverage = host.coverage
    if may_serve(seen, coverage.covered) or not hit_once_covered(session, raw, index):
        return False
    seen.settle(time.monotonic())  # (caught up: every answer the client waits for came)
    if may_serve(seen, coverage.covered):
        return False  # (settled into coverage: the hit path may answer it now)
    done = False

    def again(expired: bool) -> None:
        nonlocal done
        if done:
            return
        done = True
        timer.cancel()
        session.resume_client(_PARKED)
        coverage.parks += 1
        coverage.parks_after_write += seen.by_write
        coverage.park_seconds += time.monotonic() - parked
        if expired:  # (a covered one is counted by ``Coverage.when``)
            coverage.waits += 1
            coverage.wait_seconds += time.monotonic() - parked
            coverage.waits_failed += 1
        if session.phase is Phase.CLOSED:
            return
        if expired:
            seen.expired = True
            session.forward_client(raw, index)
        else:
            session._process_client(raw, index)

    parked = time.monotonic()
    session.pause_client(_PARKED)
    timer = asyncio.get_running_loop().call_later(service.settings.read_timeout, again, True)
    waiting = session.miss_waiting
    if waiting is not None and waiting[0] == seen.at:  # the stream reaching the position its
        waiting[1].append(lambda: again(False))  # miss read covers it (proxy.missfast_position)
    else:
        coverage.when(seen.at, lambda: again(False))
    return True
