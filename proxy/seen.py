"""seen(s): a session never sees a cache state older than something it already saw (DESIGN §12).

Owns: :class:`Seen`, the per-session record of when the session last got an answer from the
upstream (a forwarded read, a write's commit, a miss answered upstream), :func:`may_serve`,
the check a cached read must pass, and :class:`Coverage`, the host's record of how far the
applier has provably caught up (the send time of the newest barrier, probe or fill position
it has passed) with the coalesced barrier requests of the sessions that are behind it (each a
probe, then a barrier if the stream does not reach the probe soon: ``Barriers.covering``),
and :func:`observers` (what on the upstream would see a miss's position read on the session's
own connection, ``proxy.missfast_position``).

The rule: a barrier (a transactional logical message, DESIGN §6) that was *sent* at
``time.monotonic() = t`` lands in the WAL after every commit any upstream answer received
before ``t`` could have shown; once the applier has passed it, the caches include all of
them. So a cached read for session ``s`` is allowed when ``seen(s).at <= covered``. A probe
(the upstream's WAL insert position, read at ``t``) passed by the stream proves the same
without a commit (``cdc.barrier``).

Answers arrive in the relay without weir looking at them, so :class:`Seen` records only that
something went upstream (``pending``); the first cached read after it fixes ``at`` to *now*
(the router sends a session with requests outstanding upstream to the upstream, so at a
cached read every answer has arrived: now is later than all of them; conservative). Read-your-
writes is the case where the answer is a write's commit.

Why a cached read that is not yet covered waits (bounded) for a barrier instead of going
upstream: a session whose reads keep going upstream keeps moving ``seen(s)`` past every
barrier sent before its last answer, so a busy session would never be covered again; one
short wait for a barrier sent after ``seen(s)`` ends that (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("weir.seen")

NEVER = float("-inf")


@dataclass(slots=True)
class Seen:
    """seen(s) for one session. ``pending``: something went upstream since ``at`` was last
    fixed (set by the relay; :meth:`settle` turns it into a time)."""

    at: float = NEVER
    pending: bool = False
    #: a cached read of the session went upstream as a miss, or a statement wrote
    #: (``proxy.router.wrote``), since ``at`` was last fixed: the relay settles ``at`` as soon
    #: as its answer has come (``proxy.aftermiss``)
    missed: bool = False
    #: a read waited for coverage up to ``--read-timeout`` in vain (``proxy.aftermiss.park``):
    #: the general path sends it upstream without waiting again (``ReadPath._wait``)
    expired: bool = False
    #: a statement wrote since ``at`` was last fixed (``proxy.router.wrote``), and whether one
    #: had when it was last fixed: only counts why hits park (``session_parks_after_write``)
    wrote: bool = False
    by_write: bool = False

    def upstream(self) -> None:
        """The session sent something upstream: its answer will be newer than ``at``."""
        self.pending = True

    def settle(self, now: float) -> float:
        """Fix ``at`` when something went upstream since (call only when no answer is
        outstanding: then ``now`` is later than every answer the session got)."""
        if self.pending:
            self.at = now
            self.pending = False
            self.by_write, self.wrote = self.wrote, False
        self.missed = False
        return self.at


def may_serve(seen: Seen, covered: float) -> bool:
    """Whether a cached read may answer the session now: nothing went upstream that was not
    settled, and the applier passed a barrier sent after the session's last upstream answer."""
    return not seen.pending and seen.at <= covered


@dataclass(slots=True)
class _Want:
    need: float
    future: asyncio.Future[bool] = field(repr=False)


#: coverage requests in flight at once: a session that falls behind while one is in flight
#: does not wait for it to land before its own is sent (the average wait is then about one
#: request's latency, not one and a half). They are pipelined on a connection of their own
#: (``cdc.barrier.Barriers.covering``): a probe, which costs one cheap statement there (a
#: barrier, a transaction ID and a marker, only when the stream does not reach the probe
#: soon). Four were a bound on transaction IDs while each was a barrier; with probes, eight
#: (cold Zipf point lookup, 8 clients, load 4-6: wait 2.4 -> 1.9 ms, 0.53x -> 0.66x direct)
MAX_IN_FLIGHT = 8


class Coverage:
    """``covered``: the largest send time of a barrier, probe or fill position the applier
    has passed.
    :meth:`wait` asks for a barrier sent after ``need`` (coalesced: one barrier answers every
    session whose ``seen`` it follows; a new one is sent only when none in flight was sent
    after ``need``, at most :data:`MAX_IN_FLIGHT` at once). ``emit(on_pass)`` emits one and
    returns once the applier passed it; it may call ``on_pass`` as the applier passes it
    (then the waiting reads and ``when`` calls go on with no turn of the event loop)."""

    def __init__(self, emit: Callable[[Callable[[], object]], Awaitable[object]]) -> None:
        self._emit = emit
        self.covered = NEVER
        self._wants: list[_Want] = []
        self._flying: set[asyncio.Task[None]] = set()
        self._last_sent = NEVER  # send time of the newest barrier in flight or passed
        self.barriers = 0  # barriers this object emitted (SHOW WEIR STATUS)
        self.barrier_seconds = 0.0  # their send-to-applied time, summed
        self.waits = 0  # reads that waited for coverage (:meth:`wait`, :meth:`when`)
        self.wait_seconds = 0.0  # how long they waited, summed
        self.waits_failed = 0  # waits that timed out or whose barrier failed
        self.by_fills = 0  # times a fill's position moved ``covered`` (before any barrier)
        #: positions read on a session's own connection after its miss, and those that covered
        #: the session (``proxy.missfast_position``)
        self.positions = 0
        self.positions_passed = 0
        self.positions_failed = 0  # reads of them that failed (then a probe, as without them)
        self.positions_unflushed = 0  # those past the WAL flushed when read (2 ms patience)
        #: of ``positions``, those read after a write's run (``proxy.write_position``), and
        #: of ``positions_passed``, those that covered their session
        self.write_positions = 0
        self.write_positions_passed = 0
        #: hits parked until covered (``proxy.aftermiss.park``), those whose seen(s) a write
        #: moved last, and how long they were parked, summed (``session_waits`` also counts
        #: hand-backs to a lane, which no read waits for)
        self.parks = 0
        self.parks_after_write = 0
        self.park_seconds = 0.0
        self._then: list[tuple[float, Callable[[], object]]] = []  # (need, call): ``when``

    def passed(self, sent_at: float, fill: bool = False) -> None:
        """A barrier or probe, or (``fill``) a fill's position, sent (read) at ``sent_at``
        was reached by the applier."""
        if sent_at <= self.covered:
            return
        self.covered = sent_at
        self.by_fills += fill
        self._last_sent = max(self._last_sent, sent_at)
        if self._wants:
            keep = []
            for want in self._wants:
                if want.need <= sent_at:
                    if not want.future.done():
                        want.future.set_result(True)
                else:
                    keep.append(want)
            self._wants = keep
        if self._then:
            calls = [c for c in self._then if c[0] <= sent_at]
            if calls:
                self._then = [c for c in self._then if c[0] > sent_at]
                for _, call in calls:
                    call()

    def when(self, need: float, call: Callable[[], object]) -> None:
        """Call ``call`` once a barrier, probe or fill position sent at or after ``need`` was
        reached (at once if one was), and make sure one is on its way; never called if
        barriers fail meanwhile (the next :meth:`request` after a failure sends a new one)."""
        if need <= self.covered:
            call()
            return
        asked = time.monotonic()

        def timed() -> object:
            self.waits += 1
            self.wait_seconds += time.monotonic() - asked
            return call()

        self._then.append((need, timed))
        self.request(need)

    async def wait(self, need: float, timeout: float) -> bool:
        """True once the applier passed a barrier sent at or after ``need``; False when that
        did not happen within ``timeout`` seconds (or the barrier failed)."""
        if need <= self.covered:
            return True
        if timeout <= 0:
            self.request(need)
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._wants.append(_Want(need, fut))
        self.request(need)
        asked = time.monotonic()
        # (a timer, not wait_for and shield: the read goes on at the next turn of the loop)
        timer = loop.call_later(timeout, _expire, fut)
        try:
            ok = await fut  # (a timed-out one is dropped from the wants by the next barrier)
        finally:
            timer.cancel()
        self.waits += 1
        self.wait_seconds += time.monotonic() - asked
        self.waits_failed += not ok
        return ok

    def request(self, need: float) -> None:
        """Make sure a barrier sent at or after ``need`` is on its way (a session whose
        ``seen`` is ``need`` is behind ``covered``); when :data:`MAX_IN_FLIGHT` are flying,
        the first to land sends it. ``emit`` is called here, so what it sends before its
        first ``await`` (a probe, ``Barriers.covering``) leaves now, not a turn later."""
        if need <= self._last_sent or len(self._flying) >= MAX_IN_FLIGHT:
            return
        sent = self._last_sent = time.monotonic()
        self.barriers += 1
        landed = False

        def land() -> None:  # (by the applier as it passes the barrier, or after)
            nonlocal landed
            if not landed:
                landed = True
                self.barrier_seconds += time.monotonic() - sent
                self.passed(sent)

        emitted = self._emit(land)
        task = asyncio.get_running_loop().create_task(self._one(emitted, land))
        self._flying.add(task)
        task.add_done_callback(self._flying.discard)
        if isinstance(emitted, Coroutine):  # (one cancelled before it ran is closed unrun)
            task.add_done_callback(lambda _: emitted.close())

    async def _one(self, emitted: Awaitable[object], land: Callable[[], None]) -> None:
        try:
            await emitted
        except Exception as exc:  # the stream is down: the waiting reads go upstream
            log.debug("coverage barrier failed: %s", exc)
            self._last_sent = self.covered  # (the next request sends a new one)
            self._then.clear()
            wants, self._wants = self._wants, []
            for want in wants:
                if not want.future.done():
                    want.future.set_result(False)
            return
        land()
        # wants registered after ``sent`` need a later one; expired ones are dropped
        self._wants = [w for w in self._wants if not w.future.done()]
        needs = [w.need for w in self._wants] + [need for need, _ in self._then]
        if needs:
            self._flying.discard(asyncio.current_task())
            self.request(max(needs))

    def stop(self) -> None:
        for task in list(self._flying):
            task.cancel()


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


def covered(seen: Seen, coverage: Coverage, now: float) -> bool:
    """:func:`may_serve` at a cached read (no answer outstanding upstream, so ``seen`` may
    settle); when not, a barrier is requested at once (the waiting read gets a head start)."""
    if may_serve(seen, coverage.covered):
        return True
    seen.settle(now)
    if may_serve(seen, coverage.covered):
        return True
    coverage.request(seen.at)
    return False


async def observers(pool: Any) -> str | None:
    """What on the upstream would see the read (``--miss-position auto`` does not send it
    then): ``pg_stat_statements`` loaded, every statement logged (for weir's role and
    database, which the pool's connection has); None when nothing. ``pg_settings`` hides
    ``shared_preload_libraries`` from a role that is not a superuser and not a member of
    ``pg_read_all_settings``: then, and when the read fails, it cannot be known (not None)."""
    try:
        rows = await pool.fetch(
            "SELECT name, setting FROM pg_catalog.pg_settings WHERE name IN "
            "('shared_preload_libraries', 'log_statement', 'log_min_duration_statement')")
    except Exception as exc:  # (any failure: caching must start all the same)
        return f"the upstream's settings could not be read ({exc})"
    found = {row[0]: row[1] for row in rows}
    libraries = found.get("shared_preload_libraries")
    if libraries is None:
        return "shared_preload_libraries is hidden from weir's role (pg_read_all_settings)"
    if "pg_stat_statements" in libraries:
        return "pg_stat_statements is loaded"
    if found.get("log_statement") == "all" or found.get("log_min_duration_statement") == "0":
        return "every statement is logged"
    return None
