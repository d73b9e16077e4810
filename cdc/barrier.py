"""Barriers: a transactional logical message emitted upstream, resolved when the applier
passes it (DESIGN §6), and the replication lag it measures.

Owns: the registry of pending barriers (id -> future), emitting
``pg_logical_emit_message(true, 'weir', id)`` on a plain upstream connection in the stream's
database, and the lag figures: bytes (the upstream's WAL position at emission minus what was
applied then) and seconds (emission to application). Also :meth:`Barriers.pipelined`, the
sessions' barriers (``proxy.seen``): emitted on a second connection of their own, each sent
at once without waiting for the answer of the one before (PostgreSQL runs them in order, each
its own transaction), and resolved only by the applier passing them: their latency is one
commit plus the stream's, never a queue behind another barrier's round trip or the
heartbeat's.

:meth:`Barriers.covering` is what the sessions use: a *probe* first, ``SELECT
pg_current_wal_insert_lsn()`` on that connection (no transaction ID, no WAL, no commit), which
returns a position ``L`` at or after the end of every commit record a statement that finished
before the probe was sent could have seen; the probe passes once the stream's position
(``Stream.position``: the end of the last applied commit, or a keepalive's position with no
transaction open) reaches ``L``: the walsender sends transactions in commit order and a
keepalive only after everything it decoded before it, so every commit ending at or before
``L`` has then been applied. When no commit or keepalive carries the stream that far within
:data:`PROBE_PATIENCE` (WAL past the last flush waits for the next flush), a barrier is
emitted after all, whose commit flushes it.

:meth:`Barriers.at` is what fills use (``proxy.fillrun``): a call made once the stream's
position reaches a given LSN (a fill's position, read by its own statement), with the same
fallback (one barrier, shared by every wait that started before it was sent).

Invariant: a barrier resolves only after every transaction that committed before its message
was applied (F1: commit order); markers emitted before a loss of continuity fail with
:class:`BarrierLost` instead of hanging (``barrier()`` then emits a new one).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from cdc.connection import ConnectParams, PgConnection, UpstreamError
from cdc.pgoutput import parse_lsn

log = logging.getLogger("weir.cdc.barrier")

#: how long a probe waits for the stream to reach its position before a barrier is emitted
#: (PostgreSQL's walsender decodes only flushed WAL: a position past the last flush is reached
#: at the next commit or WAL writer flush; a barrier's commit flushes it)
PROBE_PATIENCE = 0.02
#: the same for a fill whose position lay past the WAL flushed when it was read (WAL inserted
#: but not flushed: a page prune written by a read, an asynchronous commit): only a flush
#: lets the stream reach it, and the WAL writer may take wal_writer_delay (200 ms) to come
UNFLUSHED_PATIENCE = 0.002
_PROBE = "SELECT pg_current_wal_insert_lsn()"
#: ``Barriers.probe_floor`` when no probe waits (no position reaches it)
NO_PROBE = 1 << 64


class BarrierLost(Exception):
    """The stream lost continuity (new slot, new system) before the barrier passed."""


@dataclass(frozen=True, slots=True)
class BarrierResult:
    id: str
    message_lsn: int
    applied_lsn: int
    lag_bytes: int
    lag_seconds: float


class Barriers:
    """Pending barriers. The applier calls :meth:`passed`; callers await :meth:`barrier`."""

    def __init__(self, params: ConnectParams, applied_lsn: Callable[[], int]) -> None:
        self._params = params
        self._applied_lsn = applied_lsn
        self._pending: dict[str, asyncio.Future[int]] = {}
        self._conn: PgConnection | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._prefix = f"{os.getpid()}-{id(self):x}-"
        #: The most recent barrier that passed (replication lag as last measured).
        self.last: BarrierResult | None = None
        self.emitted = 0  # markers emitted (SHOW WEIR STATUS)
        # the pipelined connection, its connecting task, and the markers sent on it whose
        # emitting statement has not answered yet (in order)
        self._pipe: PgConnection | None = None
        self._pipe_opening: asyncio.Task[PgConnection] | None = None
        self._pipe_sent: deque[tuple[str, bool]] = deque()  # (id, is a probe)
        self._pipe_reader: asyncio.Task[None] | None = None
        self._on_pass: dict[str, Callable[[], object]] = {}  # (``pipelined``)
        #: answered probes the stream has not reached yet, (position, id), smallest first
        self._probes: list[tuple[int, str]] = []
        #: the smallest position a probe waits for (the stream calls :meth:`reached` when its
        #: position gets there: one comparison per message otherwise)
        self.probe_floor = NO_PROBE
        self.probes = 0  # probes sent (SHOW WEIR STATUS)
        self.probes_fell_back = 0  # probes the stream did not reach in time (then a barrier)
        self.emit_seconds = 0.0  # from the call to the emitting statement's answer, summed
        #: probes the stream had already reached when their answer came (no wait for it)
        self.probes_at_answer = 0
        self.probe_answer_seconds = 0.0  # probe sent to its answer read, summed
        self.probe_stream_seconds = 0.0  # answer read to the stream reaching it, summed
        self.probes_waited = 0  # probes the stream reached after their answer came
        self._probe_times: dict[str, float] = {}  # probe id -> when sent, then when answered
        self.sent = 0  # barrier statements sent (heartbeat's, sessions', fallbacks')
        #: waits of :meth:`at` (their calls are in ``_on_pass``)
        self._waits: set[str] = set()
        self._nudged = float("-inf")  # when the last fallback barrier of :meth:`at` was sent
        self.waits_fell_back = 0  # fallback barriers of :meth:`at` (SHOW WEIR STATUS)
        self._nudges: set[asyncio.Task[None]] = set()

    def passed(self, barrier_id: str, lsn: int) -> None:
        on_pass = self._on_pass.pop(barrier_id, None)
        if on_pass is not None:
            try:  # (a waiting read's failure must not stop the stream or the pipe's reader)
                on_pass()
            except Exception:
                log.exception("a session waiting for coverage failed")
        future = self._pending.pop(barrier_id, None)
        if future is not None and not future.done():
            future.set_result(lsn)

    def lose_all(self, reason: str) -> None:
        for wait_id in self._waits:  # (what they waited for belongs to the state reset away)
            self._on_pass.pop(wait_id, None)
        self._waits.clear()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(BarrierLost(reason))
        self._pending.clear()

    async def _emit_once(self, barrier_id: str, timeout: float) -> tuple[int, int]:
        called = time.monotonic()
        async with self._lock:
            try:
                row = await asyncio.wait_for(self._query(barrier_id), timeout)
            except (OSError, ConnectionError, TimeoutError):
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.abort()
                raise
        self.emitted += 1
        self.emit_seconds += time.monotonic() - called
        return parse_lsn(row[0] or "0/0"), parse_lsn(row[1] or "0/0")

    async def _query(self, barrier_id: str) -> tuple[str | None, ...]:
        if self._conn is None:
            self._conn = await PgConnection.connect(self._params)
        self.sent += 1
        result = await self._conn.query(
            f"SELECT pg_logical_emit_message(true, 'weir', '{barrier_id}'), pg_current_wal_lsn()")
        return result.rows[0]

    async def _emit(self, barrier_id: str, deadline: float) -> tuple[int, int]:
        """Emit the marker, reconnecting (with backoff) while the upstream is unreachable or
        silent (each attempt is bounded, so a partitioned connection is replaced)."""
        delay = 0.05
        while True:
            attempt = min(5.0, max(0.1, deadline - time.monotonic()))
            try:
                return await self._emit_once(barrier_id, attempt)
            except (OSError, ConnectionError, TimeoutError):
                if time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)

    async def barrier(self, timeout: float = 30.0) -> BarrierResult:
        """Emit a fresh marker and wait until the applier has applied it.

        If continuity is lost meanwhile (every cache was reset), a new marker is emitted:
        the result then means "everything committed before the call is applied or was
        reset away".
        """
        started = time.monotonic()
        applied_before = self._applied_lsn()
        while True:
            try:
                return await self._one(started, timeout, applied_before)
            except BarrierLost:
                if time.monotonic() > started + timeout:
                    raise

    async def _one(self, started: float, timeout: float, applied_before: int) -> BarrierResult:
        barrier_id = self._prefix + str(next(self._ids))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[barrier_id] = future
        try:
            message_lsn, current = await self._emit(barrier_id, started + timeout)
            remaining = max(0.0, started + timeout - time.monotonic())
            applied = await asyncio.wait_for(future, remaining)
        finally:
            self._pending.pop(barrier_id, None)
        self.last = BarrierResult(barrier_id, message_lsn, applied,
                                  max(0, current - applied_before), time.monotonic() - started)
        return self.last

    async def pipelined(self, timeout: float = 30.0,
                        on_pass: Callable[[], object] | None = None) -> None:
        """Emit a fresh marker on the pipelined connection (module docstring) and wait until
        the applier has passed it; raises when it cannot be emitted, when continuity is lost
        (:class:`BarrierLost`) or after ``timeout`` seconds. ``on_pass`` is called by the
        applier itself as it passes the marker (no turn of the event loop in between)."""
        barrier_id = self._prefix + str(next(self._ids))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[barrier_id] = future
        if on_pass is not None:
            self._on_pass[barrier_id] = on_pass
        try:
            await self._send_pipe(
                barrier_id, f"SELECT pg_logical_emit_message(true, 'weir', '{barrier_id}')",
                timeout)
            await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(barrier_id, None)
            self._on_pass.pop(barrier_id, None)

    async def _send_pipe(self, barrier_id: str, sql: str, timeout: float,
                         probe: bool = False) -> None:
        conn = self._pipe
        if conn is None:
            if self._pipe_opening is None:
                self._pipe_opening = asyncio.ensure_future(self._open_pipe())
            conn = await asyncio.wait_for(asyncio.shield(self._pipe_opening), timeout)
        conn.send_query(sql)
        self._pipe_sent.append((barrier_id, probe))
        self.sent += not probe

    def covering(self, timeout: float = 30.0, on_pass: Callable[[], object] | None = None
                 ) -> Coroutine[Any, Any, None]:
        """Wait until the applier has applied every commit that a statement answered before
        the call could have seen: a probe, then (when the stream does not reach the probe's
        position within :data:`PROBE_PATIENCE`) a barrier (module docstring). ``on_pass`` as
        for :meth:`pipelined`; the result raises as :meth:`pipelined` does (a probe whose
        statement fails is followed by a barrier). The probe is sent
        before this returns when the connection is open (not a turn of the event loop later,
        when the returned coroutine first runs)."""
        return self._covering(self._probe(on_pass), timeout, on_pass)

    async def _covering(self, probe: tuple[str, asyncio.Future[int], bool], timeout: float,
                        on_pass: Callable[[], object] | None) -> None:
        try:
            if await self._probed(probe, min(PROBE_PATIENCE, timeout)):
                return
        except UpstreamError as exc:  # (the probe's statement failed: a barrier may not)
            log.debug("coverage probe failed: %s", exc)
        self.probes_fell_back += 1
        await self.pipelined(timeout, on_pass)

    async def probed(self, patience: float,
                     on_pass: Callable[[], object] | None = None) -> bool:
        """Send a probe on the pipelined connection (module docstring); True once the stream
        reached its position, False when it did not within ``patience`` seconds. Raises when
        the probe cannot be sent or fails, or continuity is lost (:class:`BarrierLost`)."""
        return await self._probed(self._probe(on_pass), patience)

    def _probe(self, on_pass: Callable[[], object] | None
               ) -> tuple[str, asyncio.Future[int], bool]:
        """A probe registered, and sent at once when the connection is open: (id, its future,
        whether it was sent)."""
        probe_id = self._prefix + "p" + str(next(self._ids))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending[probe_id] = future
        if on_pass is not None:
            self._on_pass[probe_id] = on_pass
        self.probes += 1
        conn = self._pipe
        if conn is None:
            return probe_id, future, False
        conn.send_query(_PROBE)
        self._pipe_sent.append((probe_id, True))
        self._probe_times[probe_id] = time.monotonic()
        return probe_id, future, True

    async def _probed(self, probe: tuple[str, asyncio.Future[int], bool], patience: float
                      ) -> bool:
        probe_id, future, sent = probe
        try:
            if not sent:
                await self._send_pipe(probe_id, _PROBE, patience, probe=True)
                self._probe_times[probe_id] = time.monotonic()
            await asyncio.wait_for(future, patience)
            return True
        except TimeoutError:
            return False
        finally:
            self._pending.pop(probe_id, None)
            self._on_pass.pop(probe_id, None)
            self._probe_times.pop(probe_id, None)

    def _probe_answered(self, probe_id: str, lsn: int) -> None:
        if probe_id not in self._pending:
            return  # (gave up waiting)
        now = time.monotonic()
        sent = self._probe_times.get(probe_id)
        if sent is not None:
            self.probe_answer_seconds += now - sent
            self._probe_times[probe_id] = now
        if self._applied_lsn() >= lsn:
            self.probes_at_answer += 1
            self.passed(probe_id, lsn)
            return
        heapq.heappush(self._probes, (lsn, probe_id))
        self.probe_floor = self._probes[0][0]

    def at(self, lsn: int, call: Callable[[], object],
           patience: float = PROBE_PATIENCE) -> None:
        """Call ``call`` once the stream's position (``Stream.position``) reaches ``lsn``:
        at once if it has, else from the stream between two transactions (as the applier
        passes a commit ending at or after ``lsn``, or takes a keepalive at or after it with
        no transaction open). When it has not within ``patience`` seconds (WAL past the last
        flush is decoded only after the next flush), one barrier is emitted, unless one was
        sent since this wait began (or one is still on its way: then it looks again after
        ``patience`` again): its commit, after ``lsn``, flushes the WAL up to it and carries
        the stream past it. Never called once continuity is lost (:meth:`lose_all`)."""
        if self._applied_lsn() >= lsn:
            call()
            return
        wait_id = self._prefix + "w" + str(next(self._ids))
        self._on_pass[wait_id] = lambda: self._waited(wait_id, call)
        self._waits.add(wait_id)
        heapq.heappush(self._probes, (lsn, wait_id))
        self.probe_floor = self._probes[0][0]
        asyncio.get_running_loop().call_later(patience, self._overdue, wait_id,
                                              time.monotonic(), patience)

    def _waited(self, wait_id: str, call: Callable[[], object]) -> None:
        self._waits.discard(wait_id)
        call()

    def _overdue(self, wait_id: str, began: float, patience: float) -> None:
        if wait_id not in self._waits or self._nudged >= began:
            return  # (passed, lost, or a barrier sent since it began will carry it)
        if self._nudges:  # one fallback barrier at a time (a stream that merely lags is not
            # hurried by more): look again once more patience has passed
            asyncio.get_running_loop().call_later(patience, self._overdue, wait_id, began,
                                                  patience)
            return
        self._nudged = time.monotonic()
        self.waits_fell_back += 1
        task = asyncio.ensure_future(self._nudge())
        self._nudges.add(task)
        task.add_done_callback(self._nudges.discard)

    async def _nudge(self) -> None:
        try:
            await self.pipelined(30.0)
        except Exception as exc:  # (the heartbeat's next barrier carries the stream too)
            log.debug("a fill's fallback barrier failed: %s", exc)

    def reached(self, position: int) -> None:
        """The stream's position (``Stream.position``) reached ``position``: every commit
        ending at or before it is applied. Passes the probes waiting for it."""
        probes = self._probes
        while probes and probes[0][0] <= position:
            lsn, probe_id = heapq.heappop(probes)
            answered = self._probe_times.get(probe_id)
            if answered is not None:
                self.probe_stream_seconds += time.monotonic() - answered
                self.probes_waited += 1
            self.passed(probe_id, lsn)
        self.probe_floor = probes[0][0] if probes else NO_PROBE

    async def _open_pipe(self) -> PgConnection:
        try:
            conn = await PgConnection.connect(self._params)
        finally:
            self._pipe_opening = None
        self._pipe = conn
        self._pipe_reader = asyncio.ensure_future(self._read_pipe(conn))
        return conn

    async def _read_pipe(self, conn: PgConnection) -> None:
        """Read the pipelined statements' answers in order; a failed one fails its barrier,
        a broken connection every barrier sent on it (the next one opens a new one)."""
        try:
            while True:
                try:
                    result = await conn.result()
                    done, probe = self._pipe_sent.popleft()
                    if probe:
                        self._probe_answered(done, parse_lsn(result.rows[0][0] or "0/0"))
                except UpstreamError as exc:
                    self._fail(self._pipe_sent.popleft()[0], exc)
        except (OSError, ConnectionError, IndexError) as exc:
            if self._pipe is conn:
                self._pipe = None
            conn.abort()
            sent, self._pipe_sent = self._pipe_sent, deque()
            for barrier_id, _ in sent:
                self._fail(barrier_id, ConnectionError(f"barrier connection lost: {exc}"))

    def _fail(self, barrier_id: str, exc: Exception) -> None:
        future = self._pending.pop(barrier_id, None)
        if future is not None and not future.done():
            future.set_exception(exc)

    async def close(self) -> None:
        for task in list(self._nudges):
            task.cancel()
        opening = self._pipe_opening
        if opening is not None:
            opening.cancel()
        reader, self._pipe_reader = self._pipe_reader, None
        if reader is not None:
            reader.cancel()
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            await pipe.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
