"""The cache host: the engine, the replication stream into it, and fills against the upstream.

Owns: one ``engine.api.Engine`` per weir process, the ``cdc`` replication stream that applies
upstream transactions to it (the host is the stream's ``TransactionSink``), performing the
engine's effects — ``RunFill`` by its fill runner (``proxy.fillrun``: queued, batched, one
upstream read per batch, installed at the stream position it read; DESIGN §6), ``ReadReady``/
``ReadFailed`` by waking the reads that wait — the staleness bound's clock (heartbeats), and
the bound on how long a read waits before the caller answers it upstream.

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
    TakeSnapshot,
    Transaction,
)
from proxy import localfills, logparams, transactions
from proxy.fillqueue import FillPolicy
from proxy.fillrun import FILL_SETTINGS, FillRunner, keep_session, parse_snapshot
from proxy.publication import Publication, persistent_names
from proxy.seen import Coverage, observers

log = logging.getLogger("weir.cache")

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
        #: the fills against the upstream (``proxy.fillrun``: queue, slots, statistics)
        self.fills = FillRunner(self, max_fills, policy)
        self.lane_hits: Callable[[], int] = lambda: 0  # answers the lanes gave (proxy.service)
        self._waiting: dict[tuple[str, Row], list[asyncio.Future[Served]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pool: asyncpg.Pool | None = None  # heartbeat checks, probes, privileges, DDL
        self._relations: dict[str, frozenset[int]] = {}  # tables each cache reads
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
        self.stream: ReplicationStream = ReplicationStream(
            StreamConfig(ConnectParams.from_url(upstream_url),
                         publication=self.publication.name, create_publication=False,
                         slot=slot, temporary=slot is None),
            self)
        self.stream.before_slot = self.publication.ensure
        if self.local is not None:
            localfills.attach(self, self.local)
        self._plans: dict[str, Reader] = {}
        self.fresh_as_of = float("-inf")
        #: called after ``fresh_as_of`` or ``stream.up`` changed (the hit lanes' deadline)
        self.on_fresh: Callable[[], None] | None = None
        #: told of each key a fill installed, with its answer (``proxy.fillstamps``)
        self.on_ready: Callable[[str, Row, tuple[Row, ...]], None] | None = None
        self.stream.on_state = lambda up: self._fresh_changed()
        #: run by every heartbeat after its barrier, before ``fresh_as_of`` advances
        self.verify: Callable[[], Awaitable[None]] | None = None
        self._trust = 0  # bumped by distrust(): a heartbeat begun before it does not count
        self._holds = transactions.DdlHolds()  # open DDL transactions (``distrust``)
        self._nudge = asyncio.Event()  # set by distrust(): check again now
        self._probing = False  # a snapshot probe is in flight
        self.heartbeats = 0  # rounds of the heartbeat loop (tests wait for them)
        #: how far the applier has provably caught up, and the sessions' barrier requests
        # (probes, then barriers when a probe is not reached soon, on their own pipelined
        # connection: never queued behind the heartbeat's barrier)
        self.coverage = Coverage(lambda on_pass: self.stream.barriers.covering(30.0, on_pass))
        #: what on the upstream would see a miss's position read (``proxy.missfast_position``)
        self.observers: str | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        # two pools: a fill stuck behind a lock never holds up the heartbeat's schema check,
        # the snapshot probe or a privilege check
        self._pool = await asyncpg.create_pool(
            self.upstream_url, min_size=1, max_size=4, server_settings=FILL_SETTINGS,
            reset=keep_session)
        self.observers = await observers(self._pool)  # (``proxy.missfast_position``)
        await self.fills.start(self.upstream_url)
        if self.local is not None:
            await localfills.start(self, self.local)
        await self.stream.start()
        started = time.monotonic()
        await self.stream.barrier(30.0)  # reads are fresh from the first one on
        localfills.first_barrier_passed(self.local)
        self._set_fresh(started)
        self.coverage.passed(started)
        self.spawn(self._heartbeat())

    async def _heartbeat(self, interval: float = 0.5) -> None:
        """Barriers in a loop: ``fresh_as_of`` is the ``time.monotonic()`` before the last
        barrier that passed, so everything committed upstream before it has been applied."""
        while True:
            started, trust = time.monotonic(), self._trust
            self._nudge.clear()
            try:
                await self.stream.barrier(30.0)
                self.coverage.passed(started)
                await localfills.verify(self, self.local)  # before caches are replanned
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
        await self.fills.stop()
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
        # (its fills' connections, opened before the first reads: per table, as many as may
        # run at once, ``FillPolicy.per_table``)
        self.spawn(self.fills.warm(self.fills.policy.per_table * max(1, len(relations))))

    def drop_cache(self, name: str) -> None:
        self.engine.drop_cache(name)
        self._plans.pop(name, None)
        self._relations.pop(name, None)
        trim = self.publication.release(name)
        if trim is not None:
            self.spawn(trim)
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
            self.perform(result.effects)
            if self.local is not None and result.effects:  # a local fill may have answered
                try:
                    result = self.engine.read(cache, key, False)
                except Exception:
                    return DROPPED if self._dropped(cache) else FAILED  # type: ignore[no-any-return]
                self.perform(result.effects)
        return result.rows

    def read_or_fill(self, cache: str, key: Sequence[Any], count: bool = True,
                     seen_before: int = 0) -> tuple[Row, ...] | None:
        """The rows if present now; None on a miss, whose read the caller answers upstream
        at once (``--misses upstream``): the key's fill is queued in the background when the
        key is admitted (``proxy.fillqueue.Admission``), the queue has room and no table it
        reads is backing off; a key whose fill is pending just misses again. A cache that
        reads only local bases is filled from them at once instead (no admission, no queue).
        ``FAILED`` and ``DROPPED`` as for :meth:`try_read`; ``seen_before``: as for
        ``Admission.admit``."""
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
        queue = self.fills.queue
        if queue.full:
            queue.dropped += 1
        elif queue.backing_off(self._relations.get(cache, ()), time.monotonic()):
            queue.held_back += 1
        elif self._admit((cache, k), seen_before) and self.engine.worth_filling(
                cache, k, seen_before):  # (at the budget: read more than the victim)
            return self.try_read(cache, k, count)  # starts (or joins) the key's fill
        self.engine.stats.misses += 1
        return None

    def _admit(self, key: tuple[str, Row], seen_before: int = 0) -> bool:
        admission = self.fills.admission
        admission.observe(lambda: self.engine.stats.hits + self.lane_hits(),
                          self.engine.stats.fills, time.monotonic())
        return admission.admit(key, seen_before)

    async def read(self, cache: str, key: Sequence[Any], count: bool = True) -> Served:
        """The cached rows for ``key``, waiting up to ``read_timeout`` for a fill
        (``count``: as for ``Engine.read``)."""
        if not self.connected:
            return Served(None, ReadOutcome.DOWN)
        if self.fills.queue.backing_off(self._relations.get(cache, ()), time.monotonic()):
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
        self.perform(result.effects)
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

    def perform(self, effects: Sequence[object]) -> None:
        for effect in effects:
            if isinstance(effect, RunFill):
                self.fills.queue_fill(effect)
            elif isinstance(effect, ReadReady):
                self._wake(effect.cache, effect.key, Served(effect.rows))
                if self.on_ready is not None:
                    self.on_ready(effect.cache, effect.key, effect.rows)
            elif isinstance(effect, TakeSnapshot):
                if not self._probing:
                    self._probing = True
                    self.spawn(self._probe())
            elif isinstance(effect, ReadFailed):
                log.info("cache %s cannot answer key %s (%s): forwarding upstream",
                         effect.cache, logparams.shown(effect.key), effect.sqlstate)
                self._wake(effect.cache, effect.key, Served(None, ReadOutcome.FAILED))

    def _wake(self, cache: str, key: Row, served: Served) -> None:
        for fut in self._waiting.pop((cache, tuple(key)), []):
            if not fut.done():
                fut.set_result(served)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _probe(self) -> None:
        """A snapshot for the engine's recent-transaction log pruning (``TakeSnapshot``)."""
        try:
            text = await self.pool.fetchval("SELECT pg_current_snapshot()::text")
            self.engine.snapshot_probe(parse_snapshot(text))
        except Exception as exc:  # the next request or heartbeat tries again
            log.debug("snapshot probe failed: %s", exc)
        finally:
            self._probing = False

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
        old = self.engine
        hook = old.on_change
        if hook is not None:
            hook()
        self.engine = Engine(memory_budget=old.budget)
        self.engine.on_change = hook
        self.engine.before_evict = old.before_evict  # (the hit lanes: ``HitLanes.attach``)
        self.engine.rt.on_drop = old.rt.on_drop
        for name, reader in self._plans.items():
            self.engine.add_cache(name, reader)
        for key in list(self._waiting):
            self._wake(*key, Served(None, f"cache reset: {reason}"))

    def apply(self, txn: Transaction) -> None:
        self.perform(self.engine.apply(txn))

    def at_position(self, lsn: int, call: Callable[[], object], patience: float) -> None:
        """(``proxy.fillrun.FillHost``) ``call`` once the stream's position reaches ``lsn``."""
        self.stream.barriers.at(lsn, call, patience)

    # -- stats --------------------------------------------------------------------------------

    async def barrier(self, timeout: float = 30.0) -> Any:
        return await self.stream.barrier(timeout)
