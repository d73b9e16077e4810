"""The cache host: the engine, the replication stream into it, and fills against the upstream.

Owns: one ``engine.api.Engine`` per weir process, the ``cdc`` replication stream that applies
upstream transactions to it (the host is the stream's ``TransactionSink``), performing the
engine's effects — ``RunFill`` as one REPEATABLE READ READ ONLY upstream transaction that
takes ``pg_current_snapshot()``, fetches the requested base rows and emits the fill's marker
(DESIGN §6), ``ReadReady``/``ReadFailed`` by waking the reads that wait — and the bound on
how long a read waits before the caller answers it upstream.

Invariants:
- the engine is only touched from the event loop thread, and every transaction is applied in
  one synchronous call, so no read is served between two changes of one transaction;
- fill rows are fetched as text under fixed output settings and decoded with
  ``engine.values`` exactly as the CDC applier decodes pgoutput text, so a row from a fill and
  the same row from the stream are equal;
- any engine error makes that read go upstream (logged), never an error for the client;
- ``fresh_as_of`` (the staleness bound's clock) advances only when a heartbeat barrier passed
  *and* the ``verify`` hook (the service's check that the relations of every cache still have
  the shape their plans assumed) ran after it, with no :meth:`distrust` in between: schema
  changes are caught within the same bound as data changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from cdc import ConnectParams, ReplicationStream, StreamConfig, TableSchema
from engine import (
    Engine,
    Reader,
    ReadFailed,
    ReadReady,
    RunFill,
    Snapshot,
    TakeSnapshot,
    Transaction,
)
from proxy import localfills, logparams, transactions
from proxy.fillqueue import Admission, FillPolicy, FillQueue, Queued
from proxy.fillsql import fetch_batch
from proxy.metrics import Buckets
from proxy.publication import Publication, persistent_names
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
    # the marker makes a fill transaction write WAL: never wait for synchronous standbys
    "synchronous_commit": "local",
    # a fill never queues behind someone's lock for long: it fails, and its tables back off
    "lock_timeout": "1s",
}

_FILL_PREFIX = "fill-"

Row = tuple[Any, ...]


#: ``EngineHost.try_read``'s answers when the engine failed for the key, and when the cache
#: was dropped after the read was routed to it.
FAILED: Any = object()
DROPPED: Any = object()


class ReadOutcome:
    """Why a read was not answered from the cache (for EXPLAIN LAST STATEMENT)."""

    TIMEOUT = "the cache fill took longer than the read bound"
    FAILED = "the cache could not evaluate the query for this key"
    DROPPED = "the cache was dropped"
    DOWN = "the replication stream is not connected"
    BACKOFF = "a fill of the tables it reads failed recently (backing off)"


@dataclass(frozen=True, slots=True)
class Served:
    """A read's answer: ``rows`` from the cache, or None with the reason to go upstream."""

    rows: tuple[Row, ...] | None
    reason: str = ""


def parse_snapshot(text: str) -> Snapshot:
    """``pg_current_snapshot()`` text form ``xmin:xmax:xip,xip``."""
    xmin, xmax, xip = text.split(":")
    return Snapshot(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))


class EngineHost:
    """See the module docstring. ``await start()``; ``await read(...)``; ``await stop()``."""

    def __init__(self, upstream_url: str, memory_budget: int | None = None,
                 read_timeout: float = 5.0, max_fills: int = 8,
                 policy: FillPolicy | None = None,
                 replication_slot: str | None = None, local_bases: str | None = None,
                 local_tables: Sequence[str] = ()) -> None:
        self.upstream_url = upstream_url
        self.engine = Engine(memory_budget=memory_budget)
        self.read_timeout = read_timeout
        self.max_fills = max_fills
        self._fill_slots = asyncio.Semaphore(max_fills)
        self.policy = policy or FillPolicy()
        self.queue = FillQueue(self.policy)  # fills waiting for a slot (``proxy.fillqueue``)
        self.admission = Admission(self.policy.admission, self.policy.doorkeeper)
        self._draining = False  # a task hands queued fills to free slots
        self._waiting: dict[tuple[str, Row], list[asyncio.Future[Served]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pool: asyncpg.Pool | None = None  # heartbeat checks, probes, privileges, DDL
        self._fill_pool: asyncpg.Pool | None = None  # fill transactions only
        self._relations: dict[str, frozenset[int]] = {}  # tables each cache reads
        self._marker_sent: dict[str, float] = {}  # a batch's marker -> when it was sent
        self.schemas: dict[int, TableSchema] = {}
        slot, pub = (None, None) if replication_slot is None \
            else persistent_names(replication_slot)
        #: local replica bases (``--local-bases``): their slot and publication are the stream's
        self.local = None if local_bases is None else localfills.open_bases(
            local_bases, upstream_url, local_tables,
            None if slot is None or pub is None else (slot, pub))
        if self.local is not None:
            slot, pub = self.local.slot, self.local.publication
        self.publication = Publication(lambda: self.pool, lambda: self.stream.barrier(30.0),
                                       name=pub, keep=slot is not None)
        self.stream = ReplicationStream(
            StreamConfig(ConnectParams.from_url(upstream_url),
                         publication=self.publication.name, create_publication=False,
                         slot=slot, temporary=slot is None),
            self, on_marker=self._on_marker)
        self.stream.before_slot = self.publication.ensure
        if self.local is not None:
            localfills.attach(self, self.local)
        self._plans: dict[str, Reader] = {}
        self.fresh_as_of = float("-inf")
        #: called after ``fresh_as_of`` or ``stream.up`` changed (the hit lanes' deadline)
        self.on_fresh: Callable[[], None] | None = None
        self.stream.on_state = lambda up: self._fresh_changed()
        #: run by every heartbeat after its barrier, before ``fresh_as_of`` advances
        self.verify: Callable[[], Awaitable[None]] | None = None
        self._trust = 0  # bumped by distrust(): a heartbeat begun before it does not count
        self._holds = transactions.DdlHolds()  # open DDL transactions (``distrust``)
        self._nudge = asyncio.Event()  # set by distrust(): check again now
        self._probing = False  # a snapshot probe is in flight
        self.heartbeats = 0  # rounds of the heartbeat loop (tests wait for them)
        self.fills_done = 0
        self.fill_transactions = 0  # upstream transactions that ran them (fills are batched)
        self.fill_seconds = 0.0
        self.fill_latency = Buckets()  # each fill's time from request to rows (``/metrics``)
        self.fill_failures = 0  # fill transactions that failed (their tables back off)
        #: where fill time goes, summed over fills (seconds): waiting in the queue for a
        #: slot, the upstream transaction (snapshot, marker, rows, commit), and from the
        #: rows' arrival until the applier passed the marker (``SHOW WEIR STATUS``)
        self.fill_phases = {"queue": 0.0, "fetch": 0.0, "marker": 0.0}
        self._rows_at: dict[str, tuple[float, int]] = {}  # a batch's marker -> rows arrived
        #: how far the applier has provably caught up, and the sessions' barrier requests
        self.coverage = Coverage(lambda: self.stream.barrier(30.0))

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        # two pools: a fill stuck behind a lock never holds up the heartbeat's schema check,
        # the snapshot probe or a privilege check
        self._pool = await asyncpg.create_pool(
            self.upstream_url, min_size=1, max_size=4, server_settings=FILL_SETTINGS,
            reset=_keep_session)
        self._fill_pool = await asyncpg.create_pool(
            self.upstream_url, min_size=1, max_size=self.max_fills,
            server_settings=FILL_SETTINGS, reset=_keep_session)
        if self.local is not None:
            await localfills.start(self, self.local)
        await self.stream.start()
        started = time.monotonic()
        await self.stream.barrier(30.0)  # reads are fresh from the first one on
        if self.local is not None:
            self.local.ready = True  # (see proxy.localfills)
        self._set_fresh(started)
        self.coverage.passed(started)
        self._spawn(self._heartbeat())

    async def _heartbeat(self, interval: float = 0.5) -> None:
        """Barriers in a loop: ``fresh_as_of`` is the ``time.monotonic()`` before the last
        barrier that passed, so everything committed upstream before it has been applied."""
        while True:
            started, trust = time.monotonic(), self._trust
            self._nudge.clear()
            try:
                await self.stream.barrier(30.0)
                self.coverage.passed(started)
                if self.verify is not None:
                    await self.verify()
                if trust == self._trust and not self._held():
                    self._set_fresh(started)
            except Exception as exc:  # the stream is down or slow: reads will see staleness
                log.debug("heartbeat failed: %s", exc)
            self.heartbeats += 1
            if not self._probing:  # keep the recent-transaction log pruned when idle too
                self._probing = True
                await self._probe()
            if not self._nudge.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._nudge.wait(), interval)

    def distrust(self, until: Callable[[], bool] | None = None) -> None:
        """The upstream's catalog may have changed (DDL passed through weir): no cached read
        until a heartbeat begun after now, and after the DDL's transaction ended (``until()``
        true), has verified the caches' relations (a check before the commit saw the old)."""
        self._trust += 1
        self._holds.add(until)
        self._set_fresh(float("-inf"))
        self._nudge.set()

    def _held(self) -> bool:
        """Whether a DDL transaction is open or just ended (then the next heartbeat checks)."""
        held, ended = self._holds.check()
        if ended:
            self._trust += 1
            self._nudge.set()
        return held

    def _set_fresh(self, value: float) -> None:
        self.fresh_as_of = value
        self._fresh_changed()

    def _fresh_changed(self) -> None:
        if self.on_fresh is not None:
            self.on_fresh()

    def staleness(self) -> float:
        """Seconds by which cached state may lag the upstream (an upper bound)."""
        return time.monotonic() - self.fresh_as_of

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.coverage.stop()
        await self.stream.stop()
        if self._fill_pool is not None:
            await self._fill_pool.close()
        if self._pool is not None:
            await self.publication.drop()
            await self._pool.close()
        if self.local is not None:
            self.local.close()

    @property
    def pool(self) -> asyncpg.Pool:
        assert self._pool is not None, "EngineHost.start() first"
        return self._pool

    @property
    def connected(self) -> bool:
        return self.stream.up

    # -- caches -------------------------------------------------------------------------------

    async def add_cache(self, name: str, reader: Reader, relations: Iterable[int]) -> None:
        """Serve ``reader`` as cache ``name`` once the tables it reads (``relations``) are
        published (raises :class:`NotPublishable` or the upstream's error otherwise)."""
        relations = frozenset(relations)
        await self.publication.need(name, relations)
        self.engine.add_cache(name, reader)
        self._plans[name] = reader
        self._relations[name] = relations

    def drop_cache(self, name: str) -> None:
        self.engine.drop_cache(name)
        self._plans.pop(name, None)
        self._relations.pop(name, None)
        trim = self.publication.release(name)
        if trim is not None:
            self._spawn(trim)
        for (cache, key), futures in list(self._waiting.items()):
            if cache == name:
                del self._waiting[(cache, key)]
                for fut in futures:
                    if not fut.done():
                        fut.set_result(Served(None, ReadOutcome.DROPPED))

    def try_read(self, cache: str, key: Sequence[Any], count: bool = True
                 ) -> tuple[Row, ...] | None:
        """The rows if present now; None on a miss (its fill is started: call :meth:`read`
        to wait for it; a miss answered at once by a fill over local bases returns its rows);
        ``FAILED`` when the engine cannot answer the key (``count``: as for ``Engine.read``)."""
        try:
            result = self.engine.read(cache, key, count)
        except Exception:
            return DROPPED if self._dropped(cache) else FAILED  # type: ignore[no-any-return]
        if result.rows is None:
            self._perform(result.effects)
            if self.local is not None and result.effects:  # a local fill may have answered
                try:
                    result = self.engine.read(cache, key, False)
                except Exception:
                    return DROPPED if self._dropped(cache) else FAILED  # type: ignore[no-any-return]
                self._perform(result.effects)
        return result.rows

    def read_or_fill(self, cache: str, key: Sequence[Any], count: bool = True
                     ) -> tuple[Row, ...] | None:
        """The rows if present now; None on a miss, whose read the caller answers upstream
        at once (``--misses upstream``): the key's fill is queued in the background when the
        key is admitted (``proxy.fillqueue.Admission``), the queue has room and no table it
        reads is backing off; a key whose fill is pending just misses again. A cache that
        reads only local bases is filled from them at once instead (no admission, no queue).
        ``FAILED`` and ``DROPPED`` as for :meth:`try_read`."""
        k = tuple(key)
        try:
            rows = self.engine.lookup(cache, k)
        except Exception:
            return DROPPED if self._dropped(cache) else FAILED  # type: ignore[no-any-return]
        if rows is not None:
            if not count:  # (read again for the same client read: counted already)
                self.engine.stats.hits -= 1
            return rows
        local = self.local
        if local is not None and local.ready and local.covers(self._relations.get(cache, ())):
            return self.try_read(cache, k, count)  # a fill over local bases answers at once
        queue = self.queue
        if queue.full:
            queue.dropped += 1
        elif queue.backing_off(self._relations.get(cache, ()), time.monotonic()):
            queue.held_back += 1
        elif self.admission.admit((cache, k)):
            return self.try_read(cache, k, count)  # starts (or joins) the key's fill
        self.engine.stats.misses += 1
        return None

    async def read(self, cache: str, key: Sequence[Any], count: bool = True) -> Served:
        """The cached rows for ``key``, waiting up to ``read_timeout`` for a fill
        (``count``: as for ``Engine.read``)."""
        if not self.connected:
            return Served(None, ReadOutcome.DOWN)
        if self.queue.backing_off(self._relations.get(cache, ()), time.monotonic()):
            try:
                rows = self.engine.lookup(cache, tuple(key))
            except Exception:
                rows = None
            if rows is None:  # (no fill starts: a fill of its tables failed just now)
                return Served(None, ReadOutcome.BACKOFF)
        try:
            result = self.engine.read(cache, key, count)
        except Exception:
            return Served(None, ReadOutcome.DROPPED if self._dropped(cache)
                          else ReadOutcome.FAILED)
        if result.rows is not None:
            return Served(result.rows)
        fut: asyncio.Future[Served] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault((cache, tuple(key)), []).append(fut)
        self._perform(result.effects)
        if fut.done():  # answered already (a fill over local bases)
            return fut.result()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.read_timeout)
        except TimeoutError:
            return Served(None, ReadOutcome.TIMEOUT)

    def _dropped(self, cache: str) -> bool:
        """After the engine raised reading ``cache``: whether the cache was dropped meanwhile
        (a read routed before a DROP CACHE that waited, for a read-your-writes barrier say:
        the usual outcome of that race); otherwise the failure is logged as an error."""
        if cache not in self.engine.caches():
            log.debug("read of cache %s after it was dropped", cache)
            return True
        log.exception("engine read failed for cache %s", cache)
        return False

    # -- effects ------------------------------------------------------------------------------

    def _perform(self, effects: Sequence[object]) -> None:
        for effect in effects:
            if isinstance(effect, RunFill):
                self._queue_fill(effect)
            elif isinstance(effect, ReadReady):
                self._wake(effect.cache, effect.key, Served(effect.rows))
            elif isinstance(effect, TakeSnapshot):
                if not self._probing:
                    self._probing = True
                    self._spawn(self._probe())
            elif isinstance(effect, ReadFailed):
                log.info("cache %s cannot answer key %s (%s): forwarding upstream",
                         effect.cache, logparams.shown(effect.key), effect.sqlstate)
                self._wake(effect.cache, effect.key, Served(None, ReadOutcome.FAILED))

    def _wake(self, cache: str, key: Row, served: Served) -> None:
        for fut in self._waiting.pop((cache, tuple(key)), []):
            if not fut.done():
                fut.set_result(served)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _queue_fill(self, run: RunFill) -> None:
        """Fills wait for a slot (at most ``max_fills`` upstream transactions at once, at most
        ``per_table`` of them reading one table); those that waited together run in one
        transaction (see :meth:`_fetch`). A fill over local bases only is installed at once
        instead (``proxy.localfills``)."""
        if self.local is not None:
            effects = localfills.fill(self.engine, self.local, run)
            if effects is not None:
                self._perform(effects)
                return
        tables = frozenset(r.table.oid for r in run.requests) | frozenset(
            r.via.table.oid for r in run.requests if r.via is not None)
        self.queue.push(run, tables, time.monotonic())
        self._kick()

    def _kick(self) -> None:
        if not self._draining and self.queue.waiting:
            self._draining = True
            self._spawn(self._drain())

    async def _drain(self) -> None:
        try:
            if self.policy.linger > 0:  # let the misses of the next moment join the batch
                await asyncio.sleep(self.policy.linger)
            while self.queue.waiting:
                await self._fill_slots.acquire()
                batch, gone = self.queue.take(time.monotonic())
                for q in gone:  # a table they read failed recently: their keys miss on
                    self._abandon(q.run, "a table it reads is backing off after a failure")
                if not batch:  # the rest wait for a table's fills to finish (``_fill``)
                    self._fill_slots.release()
                    break
                self._spawn(self._fill(batch))
        finally:
            self._draining = False

    async def _fill(self, queued: list[Queued]) -> None:
        """Run a batch of fills (holding one slot) and hand each response to the engine. A
        failure is not retried: the batch's tables back off (``FillQueue.finished``) and
        their keys miss (answered upstream) until a later read fills them again."""
        batch = [q.run for q in queued]
        rows: list[list[list[Row]]] | None = None
        started = time.monotonic()
        self.fill_phases["queue"] += sum(started - q.at for q in queued)
        try:
            snapshot, rows = await self._fetch(batch)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("fills %s failed: %s", [r.fill_id for r in batch], exc)
        except Exception:
            log.exception("fills %s failed", [r.fill_id for r in batch])
        finally:
            self._fill_slots.release()
            self.queue.finished(queued, rows is not None, time.monotonic())
            self._kick()
        if rows is None:
            self.fill_failures += 1
            for run in batch:
                self._abandon(run)
            return
        self.fills_done += len(batch)
        self.fill_transactions += 1
        now = time.monotonic()
        self.fill_phases["fetch"] += (now - started) * len(batch)
        marker = _marker(batch)
        if marker in self._marker_sent:  # (else the marker passed before the rows came)
            self._rows_at[marker] = (now, len(batch))
        self.fill_seconds += sum(now - q.at for q in queued)
        for q in queued:
            self.fill_latency.observe(now - q.at)
        for run, run_rows in zip(batch, rows, strict=True):
            try:
                effects = self.engine.fill_response(run.fill_id, snapshot, run_rows)
            except Exception:
                log.exception("installing fill %d failed", run.fill_id)
                self._abandon(run)
                continue
            self._perform(effects)

    def _abandon(self, run: RunFill, reason: str = "the fill failed upstream") -> None:
        """Give up on a fill: the reads waiting for its keys go upstream, and the engine
        forgets it (it would otherwise hold back the log's pruning)."""
        try:
            self._perform(self.engine.abandon_fill(run.fill_id, reason))
        except Exception:
            log.exception("abandoning fill %d failed", run.fill_id)

    async def _fetch(self, batch: list[RunFill]) -> tuple[Snapshot, list[list[list[Row]]]]:
        """One REPEATABLE READ transaction for a batch of fills: one snapshot, one marker
        naming every fill of the batch, then the base rows (``proxy.fillsql``: requests of
        one shape are fetched with one statement)."""
        marker = _marker(batch)
        async with self._fills().acquire() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            # the first statement takes the transaction's snapshot; the marker, a
            # transactional message, reaches the stream with the commit
            self._marker_sent[marker] = time.monotonic()
            try:
                head = await conn.fetchrow(
                    "SELECT pg_current_snapshot()::text, "
                    "pg_logical_emit_message(true, 'weir', $1::text)", marker)
                snapshot = parse_snapshot(head[0])
                rows = await fetch_batch(conn, [run.requests for run in batch])
            except BaseException:
                self._marker_sent.pop(marker, None)
                raise
        return snapshot, rows

    def _fills(self) -> asyncpg.Pool:
        assert self._fill_pool is not None, "EngineHost.start() first"
        return self._fill_pool

    async def _probe(self) -> None:
        """A snapshot for the engine's recent-transaction log pruning (``TakeSnapshot``)."""
        try:
            text = await self.pool.fetchval("SELECT pg_current_snapshot()::text")
            self.engine.snapshot_probe(parse_snapshot(text))
        except Exception as exc:  # the next request or heartbeat tries again
            log.debug("snapshot probe failed: %s", exc)
        finally:
            self._probing = False

    def _on_marker(self, content: str, lsn: int) -> None:
        if not content.startswith(_FILL_PREFIX):
            return
        try:
            fill_ids = [int(x) for x in content[len(_FILL_PREFIX):].split(",")]
        except ValueError:
            return
        for fill_id in fill_ids:
            self._perform(self.engine.marker(fill_id))
        sent = self._marker_sent.pop(content, None)
        if sent is not None:  # a fill marker is a barrier too (``proxy.seen``)
            self.coverage.passed(sent)
        rows_at = self._rows_at.pop(content, None)
        if rows_at is not None:
            self.fill_phases["marker"] += (time.monotonic() - rows_at[0]) * rows_at[1]

    # -- TransactionSink ----------------------------------------------------------------------

    def table_schema(self, schema: TableSchema) -> None:
        self.schemas[schema.oid] = schema

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        """A table's columns changed (DDL upstream, seen with the next change): the caches
        over it restart empty, and no cached read until the schema check planned them."""
        names = self.engine.caches_over(schema.oid)
        log.warning("table %s.%s changed (%s): caches %s are reset", schema.namespace,
                    schema.name, reason, list(names))
        self.schemas[schema.oid] = schema
        self.distrust()
        for name in names:
            self.engine.drop_cache(name)
        for name in names:
            self.engine.add_cache(name, self._plans[name])
        for key in [k for k in self._waiting if k[0] in names]:
            self._wake(*key, Served(None, f"cache reset: {reason}"))

    def reset_all(self, reason: str) -> None:
        log.warning("continuity with the upstream was lost (%s): every cache is reset", reason)
        self._reset(reason)

    def _reset(self, reason: str) -> None:
        """Rebuild the engine with the same caches (their state starts empty again)."""
        hook = self.engine.on_change
        if hook is not None:
            hook()
        self.engine = Engine(memory_budget=self.engine.budget)
        self.engine.on_change = hook
        for name, reader in self._plans.items():
            self.engine.add_cache(name, reader)
        for key in list(self._waiting):
            self._wake(*key, Served(None, f"cache reset: {reason}"))

    def apply(self, txn: Transaction) -> None:
        self._perform(self.engine.apply(txn))

    # -- stats --------------------------------------------------------------------------------

    async def barrier(self, timeout: float = 30.0) -> Any:
        return await self.stream.barrier(timeout)


def _marker(batch: Sequence[RunFill]) -> str:
    """The marker message of a fill batch: every fill it carries."""
    return _FILL_PREFIX + ",".join(str(run.fill_id) for run in batch)


async def _keep_session(conn: Any) -> None:
    """The fill pool's reset: nothing. Its connections carry no session state beyond their
    fixed settings (transactions end before release), so asyncpg's default reset (advisory
    unlock, CLOSE ALL, UNLISTEN, RESET ALL: a round trip per fill) is not needed."""
