"""Running the cache host's fills against the upstream.

Owns: :class:`FillRunner` — the engine's ``RunFill`` effects queued (``proxy.fillqueue``:
admission, the bounded queue, batches per table set, back-off), at most ``max_fills``
upstream reads at once on the fill pool, each reading ``pg_current_snapshot()``, then the
upstream's WAL insert position (the batch's *position*), then the base rows, writing nothing
(``proxy.fillsql``; DESIGN §6); the rows handed to the engine, a failed fill abandoned (the
reads waiting for its keys go upstream); each batch installed once the replication stream's
position reaches the batch's (``cdc.barrier.Barriers.at``; docs/architecture.md "Fills at a
position"); the fill statistics (``SHOW WEIR STATUS``, ``/metrics``). A fill over local bases
only is installed at once instead (``proxy.localfills``).

Fill connections run under :data:`FILL_SETTINGS`: the same text forms pgoutput produces, so a
row from a fill and the same row from the stream decode equal. It sees the cache host through
:class:`FillHost` (``proxy.caching.EngineHost`` meets it).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import asyncpg

from cdc import PROBE_PATIENCE, UNFLUSHED_PATIENCE, LocalBases
from engine import Engine, RunFill, Snapshot
from proxy import localfills
from proxy.fillqueue import Admission, FillPolicy, FillQueue, Queued
from proxy.fillsql import fetch_all
from proxy.metrics import Buckets
from proxy.seen import Coverage

log = logging.getLogger("weir.cache")

#: Output settings of fill connections: the same text forms pgoutput produces.
FILL_SETTINGS = {
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "extra_float_digits": "3",
    "bytea_output": "hex",
    "application_name": "weir-fill",
    # (fills write nothing; the host's second pool shares these settings, and what it runs
    # must never wait for a synchronous standby)
    "synchronous_commit": "local",
    # a fill never queues behind someone's lock for long: it fails, and its tables back off;
    # below PostgreSQL's default deadlock_timeout (1s), so in a lock cycle with a client weir
    # gives up first and the client never gets "deadlock detected" (as registry's describe)
    "lock_timeout": "200ms",
}

#: fills whose request-to-install times the median is taken over
RECENT = 1024

Row = tuple[Any, ...]


class FillHost(Protocol):
    """What the fills use of the cache host (``proxy.caching.EngineHost``)."""

    @property
    def engine(self) -> Engine: ...  # (replaced when every cache is reset)

    @property
    def local(self) -> LocalBases | None: ...

    @property
    def coverage(self) -> Coverage: ...

    def perform(self, effects: Sequence[object]) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def at_position(self, lsn: int, call: Callable[[], object], patience: float) -> None:
        """Call ``call`` once the replication stream's position reaches ``lsn`` (at once if
        it has; else from the stream, between two transactions: ``Barriers.at``, whose
        fallback barrier comes after ``patience`` seconds)."""


def parse_snapshot(text: str) -> Snapshot:
    """``pg_current_snapshot()`` text form ``xmin:xmax:xip,xip``."""
    xmin, xmax, xip = text.split(":")
    return Snapshot(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))


class FillRunner:
    """The fills of one cache host (see the module docstring). ``await start(url)`` opens
    the fill pool, ``await stop()`` closes it."""

    def __init__(self, host: FillHost, max_fills: int = 8,
                 policy: FillPolicy | None = None) -> None:
        self.host = host
        self.max_fills = max_fills
        self._fill_slots = asyncio.Semaphore(max_fills)
        self.policy = policy or FillPolicy()
        self.queue = FillQueue(self.policy)  # fills waiting for a slot (``proxy.fillqueue``)
        self.admission = Admission(self.policy.admission, self.policy.doorkeeper)
        self._draining = False  # a task hands queued fills to free slots
        self._fill_pool: asyncpg.Pool | None = None  # fill reads only
        self.running = 0  # batches being read upstream now
        self.done = 0  # fills completed
        self.transactions = 0  # upstream reads (snapshots) that ran them (fills are batched)
        self.seconds = 0.0
        self.latency = Buckets()  # each fill's time from request to rows (``/metrics``)
        self.failures = 0  # fill transactions that failed (their tables back off)
        self.rows = 0  # base rows fetched by completed fills (``SHOW WEIR STATUS`` fill_rows)
        #: batches whose position lay past the WAL flushed when it was read (``SHOW WEIR
        #: STATUS`` fill_positions_unflushed: their fallback barrier is not delayed)
        self.unflushed = 0
        #: where fill time goes, summed over fills (seconds): waiting in the queue for a
        #: slot, the upstream read (snapshot, position, rows), from the rows handed to the
        #: engine until the stream reached the batch's position (``position_wait``), and the
        #: engine's own work on the batch (``Engine.fill_response`` and the install,
        #: ``Engine.position_reached``: event-loop
        #: CPU, which every fill of the batch waits out) (``SHOW WEIR STATUS``)
        self.phases = {"queue": 0.0, "fetch": 0.0, "position_wait": 0.0, "install": 0.0}
        #: the latest fills' times from their request until installed (rows in and position
        #: reached; seconds): ``SHOW WEIR STATUS`` fill_ms_p50
        self.installed: deque[float] = deque(maxlen=RECENT)

    async def start(self, upstream_url: str) -> None:
        self._fill_pool = await asyncpg.create_pool(
            upstream_url, min_size=1, max_size=self.max_fills,
            server_settings=FILL_SETTINGS, reset=keep_session)

    async def stop(self) -> None:
        if self._fill_pool is not None:
            await self._fill_pool.close()

    async def warm(self, connections: int) -> None:
        """Open up to ``connections`` fill connections now (the pool keeps them while idle):
        a cache just created is read at once, and its first fills would otherwise open their
        connections while the misses that queued them flood the event loop (issue 18's cold
        start: the first fill batches waited 50-80 ms). Failures are left to the fills."""
        pool = self._fill_pool
        if pool is None:
            return
        held = []
        try:
            for _ in range(min(connections, self.max_fills)):
                held.append(await pool.acquire(timeout=5.0))
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pass
        finally:
            for conn in held:
                await pool.release(conn)

    def queue_fill(self, run: RunFill) -> None:
        """Fills wait for a slot (at most ``max_fills`` upstream transactions at once, at most
        ``per_table`` of them reading one table); those that waited together run in one
        transaction (see :meth:`_fetch`). A fill over local bases only is installed at once
        instead (``proxy.localfills``)."""
        host = self.host
        if host.local is not None:
            effects = localfills.fill(host.engine, host.local, run)
            if effects is not None:
                host.perform(effects)
                return
        tables = frozenset(r.table.oid for r in run.requests) | frozenset(
            r.via.table.oid for r in run.requests if r.via is not None)
        self.queue.push(run, tables, time.monotonic())
        self._kick()

    def _kick(self) -> None:
        if not self._draining and self.queue.waiting:
            self._draining = True
            self.host.spawn(self._drain())

    async def _drain(self) -> None:
        try:
            if self.policy.linger > 0 and self.running:
                # let the misses of the next moment join the batch (only while another batch
                # is being read: on an idle upstream a fill starts at once)
                await asyncio.sleep(self.policy.linger)
            while self.queue.waiting:
                await self._fill_slots.acquire()
                batch, gone = self.queue.take(time.monotonic())
                for q in gone:  # a table they read failed recently: their keys miss on
                    self._abandon(q.run, "a table it reads is backing off after a failure")
                if not batch:  # the rest wait for a table's fills to finish (``_fill``)
                    self._fill_slots.release()
                    break
                self.host.spawn(self._fill(batch))
        finally:
            self._draining = False

    async def _fill(self, queued: list[Queued]) -> None:
        """Run a batch of fills (holding one slot) and hand each response to the engine;
        install them once the stream reached the batch's position. A failure is not
        retried: the batch's tables back off (``FillQueue.finished``) and their keys miss
        (answered upstream) until a later read fills them again."""
        batch = [q.run for q in queued]
        engine = self.host.engine
        fetched: tuple[Snapshot, int, int, list[list[list[Row]]]] | None = None
        started = time.monotonic()  # (before the statement: coverage's send time)
        self.phases["queue"] += sum(started - q.at for q in queued)
        self.running += 1
        try:
            fetched = await self._fetch(batch)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("fills %s failed: %s", [r.fill_id for r in batch], exc)
        except Exception:
            log.exception("fills %s failed", [r.fill_id for r in batch])
        finally:
            self.running -= 1
            self._fill_slots.release()
            self.queue.finished(queued, fetched is not None, time.monotonic())
            self._kick()
        self.failures += fetched is None
        if self.host.engine is not engine:
            return  # every cache was reset meanwhile: these fills went with the old engine
        if fetched is None:
            for run in batch:
                self._abandon(run)
            return
        snapshot, position, flushed, rows = fetched
        self.done += len(batch)
        self.transactions += 1
        self.rows += sum(len(r) for per_fill in rows for r in per_fill)
        now = time.monotonic()
        self.phases["fetch"] += (now - started) * len(batch)
        self.seconds += sum(now - q.at for q in queued)
        for q in queued:
            self.latency.observe(now - q.at)
        for run, run_rows in zip(batch, rows, strict=True):
            try:
                effects = engine.fill_response(run.fill_id, snapshot, run_rows)
            except Exception:
                log.exception("installing fill %d failed", run.fill_id)
                self._abandon(run)
                continue
            self.host.perform(effects)
        handed = time.monotonic()
        self.phases["install"] += (handed - now) * len(batch)
        asked = [q.at for q in queued]
        # WAL not yet flushed below the position (a page prune written by a read, an
        # asynchronous commit) is decoded only after the next flush, which nothing may bring
        # for up to wal_writer_delay: the fallback barrier comes at once rather than after
        # the usual patience (docs/architecture.md "Fills at a position")
        unflushed = flushed < position
        self.unflushed += unflushed
        self.host.at_position(
            position, lambda: self._reached(engine, batch, started, handed, asked),
            UNFLUSHED_PATIENCE if unflushed else PROBE_PATIENCE)

    def _reached(self, engine: Engine, batch: list[RunFill], started: float, handed: float,
                 asked: list[float]) -> None:
        """The stream reached the batch's position: every transaction its snapshot sees has
        been applied (docs/architecture.md "Fills at a position"), so its fills install
        (``Engine.position_reached``), and it covers the sessions as a probe sent at
        ``started`` would (``proxy.seen``)."""
        if self.host.engine is not engine:
            return
        reached = time.monotonic()
        self.phases["position_wait"] += (reached - handed) * len(batch)
        for run in batch:
            try:
                effects = engine.position_reached(run.fill_id)
            except Exception:  # (as for ``fill_response``: its reads go upstream)
                log.exception("installing fill %d failed", run.fill_id)
                self._abandon(run)
                continue
            self.host.perform(effects)
        self.host.coverage.passed(started, fill=True)
        now = time.monotonic()
        self.phases["install"] += (now - reached) * len(batch)
        self.installed.extend(now - at for at in asked)

    def _abandon(self, run: RunFill, reason: str = "the fill failed upstream") -> None:
        """Give up on a fill: the reads waiting for its keys go upstream, and the engine
        forgets it (it would otherwise hold back the log's pruning)."""
        try:
            self.host.perform(self.host.engine.abandon_fill(run.fill_id, reason))
        except Exception:
            log.exception("abandoning fill %d failed", run.fill_id)

    async def _fetch(self, batch: list[RunFill]
                     ) -> tuple[Snapshot, int, int, list[list[list[Row]]]]:
        """One upstream read for a batch of fills: one snapshot, the position read after it,
        the WAL flush position read after that, the base rows (``proxy.fillsql.fetch_all``:
        one statement for a batch of one integer-keyed shape, else a REPEATABLE READ READ
        ONLY transaction)."""
        async with self._fills().acquire() as conn:
            text, position, flushed, rows = await fetch_all(
                conn, [run.requests for run in batch])
        return parse_snapshot(text), position, flushed, rows

    def _fills(self) -> asyncpg.Pool:
        assert self._fill_pool is not None, "EngineHost.start() first"
        return self._fill_pool

    def p50(self) -> float | None:
        """The median time (seconds) from a fill's request until it was installed, over the
        latest :data:`RECENT` fills; None before any."""
        if not self.installed:
            return None
        return statistics.median(self.installed)


async def keep_session(conn: Any) -> None:
    """The fill pools' reset: nothing. Their connections carry no session state beyond their
    fixed settings (transactions end before release), so asyncpg's default reset (advisory
    unlock, CLOSE ALL, UNLISTEN, RESET ALL: a round trip per fill) is not needed."""
