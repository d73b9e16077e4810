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
    Column,
    Engine,
    FillRequest,
    Reader,
    ReadFailed,
    ReadReady,
    RunFill,
    Snapshot,
    TakeSnapshot,
    Transaction,
    decode_text,
    fill_query,
)
from proxy import localfills, logparams
from proxy.metrics import Buckets
from proxy.publication import Publication, persistent_names

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
}

_FILL_PREFIX = "fill-"
#: most fills that run in one upstream transaction
FILL_BATCH = 32

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
                 replication_slot: str | None = None, local_bases: str | None = None,
                 local_tables: Sequence[str] = ()) -> None:
        self.upstream_url = upstream_url
        self.engine = Engine(memory_budget=memory_budget)
        self.read_timeout = read_timeout
        self._fill_slots = asyncio.Semaphore(max_fills)
        self._queued: list[tuple[RunFill, float]] = []  # fills waiting for a slot, and since
        self._draining = False  # a task hands queued fills to free slots
        self._waiting: dict[tuple[str, Row], list[asyncio.Future[Served]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pool: asyncpg.Pool | None = None
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
        self._nudge = asyncio.Event()  # set by distrust(): check again now
        self._probing = False  # a snapshot probe is in flight
        self.fills_done = 0
        self.fill_transactions = 0  # upstream transactions that ran them (fills are batched)
        self.fill_seconds = 0.0
        self.fill_latency = Buckets()  # each fill's time from request to rows (``/metrics``)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._pool = await asyncpg.create_pool(
            self.upstream_url, min_size=1, max_size=8, server_settings=FILL_SETTINGS,
            reset=_keep_session)
        if self.local is not None:
            await localfills.start(self, self.local)
        await self.stream.start()
        started = time.monotonic()
        await self.stream.barrier(30.0)  # reads are fresh from the first one on
        if self.local is not None:
            self.local.ready = True  # (see proxy.localfills)
        self._set_fresh(started)
        self._spawn(self._heartbeat())

    async def _heartbeat(self, interval: float = 0.5) -> None:
        """Barriers in a loop: ``fresh_as_of`` is the ``time.monotonic()`` before the last
        barrier that passed, so everything committed upstream before it has been applied."""
        while True:
            started, trust = time.monotonic(), self._trust
            self._nudge.clear()
            try:
                await self.stream.barrier(30.0)
                if self.verify is not None:
                    await self.verify()
                if trust == self._trust:
                    self._set_fresh(started)
            except Exception as exc:  # the stream is down or slow: reads will see staleness
                log.debug("heartbeat failed: %s", exc)
            if not self._probing:  # keep the recent-transaction log pruned when idle too
                self._probing = True
                await self._probe()
            if not self._nudge.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._nudge.wait(), interval)

    def distrust(self) -> None:
        """The upstream's catalog may have changed (DDL passed through weir): no cached read
        until a heartbeat begun after now has verified the caches' relations."""
        self._trust += 1
        self._set_fresh(float("-inf"))
        self._nudge.set()

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
        await self.stream.stop()
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
        await self.publication.need(name, relations)
        self.engine.add_cache(name, reader)
        self._plans[name] = reader

    def drop_cache(self, name: str) -> None:
        self.engine.drop_cache(name)
        self._plans.pop(name, None)
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

    async def read(self, cache: str, key: Sequence[Any], count: bool = True) -> Served:
        """The cached rows for ``key``, waiting up to ``read_timeout`` for a fill
        (``count``: as for ``Engine.read``)."""
        if not self.connected:
            return Served(None, ReadOutcome.DOWN)
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
        """Fills wait for a slot (at most ``max_fills`` upstream transactions at once); those
        that waited together run in one transaction (see :meth:`_fetch`). A fill over local
        bases only is installed at once instead (``proxy.localfills``)."""
        if self.local is not None:
            effects = localfills.fill(self.engine, self.local, run)
            if effects is not None:
                self._perform(effects)
                return
        self._queued.append((run, time.monotonic()))
        if not self._draining:
            self._draining = True
            self._spawn(self._drain())

    async def _drain(self) -> None:
        try:
            while self._queued:
                await self._fill_slots.acquire()
                batch, self._queued = self._queued[:FILL_BATCH], self._queued[FILL_BATCH:]
                self._spawn(self._fill(batch))
        finally:
            self._draining = False

    async def _fill(self, queued: list[tuple[RunFill, float]]) -> None:
        """Run a batch of fills (holding one slot) and hand each response to the engine."""
        batch = [run for run, _ in queued]
        rows: list[list[list[Row]]] | None = None
        try:
            for attempt in range(3):
                try:
                    snapshot, rows = await self._fetch(batch)
                    break
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("fills %s failed (attempt %d): %s",
                                [r.fill_id for r in batch], attempt + 1, exc)
                except Exception:
                    log.exception("fills %s failed; their reads go upstream",
                                  [r.fill_id for r in batch])
                    break
        finally:
            self._fill_slots.release()
        if rows is None:
            for run in batch:
                self._abandon(run)
            return
        self.fills_done += len(batch)
        self.fill_transactions += 1
        now = time.monotonic()
        self.fill_seconds += sum(now - at for _, at in queued)
        for _, at in queued:
            self.fill_latency.observe(now - at)
        for run, run_rows in zip(batch, rows, strict=True):
            try:
                effects = self.engine.fill_response(run.fill_id, snapshot, run_rows)
            except Exception:
                log.exception("installing fill %d failed", run.fill_id)
                self._abandon(run)
                continue
            self._perform(effects)

    def _abandon(self, run: RunFill) -> None:
        """Give up on a fill: the reads waiting for its keys go upstream, and the engine
        forgets it (it would otherwise hold back the log's pruning)."""
        try:
            self._perform(self.engine.abandon_fill(run.fill_id, "the fill failed upstream"))
        except Exception:
            log.exception("abandoning fill %d failed", run.fill_id)

    async def _fetch(self, batch: list[RunFill]) -> tuple[Snapshot, list[list[list[Row]]]]:
        """One REPEATABLE READ transaction for a batch of fills: one snapshot, every fill's
        marker, then every fill's base rows (per fill, per request)."""
        async with self.pool.acquire() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            # the first statement takes the transaction's snapshot; the markers, transactional
            # messages, reach the stream with the commit wherever they are sent
            head = await conn.fetchrow(
                "SELECT pg_current_snapshot()::text, (SELECT count(pg_logical_emit_message("
                "true, 'weir', m)) FROM unnest($1::text[]) AS m)",
                [f"{_FILL_PREFIX}{run.fill_id}" for run in batch])
            snapshot = parse_snapshot(head[0])
            rows = [[await _fetch_rows(conn, req) for req in run.requests] for run in batch]
        return snapshot, rows

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
            fill_id = int(content[len(_FILL_PREFIX):])
        except ValueError:
            return
        self._perform(self.engine.marker(fill_id))

    # -- TransactionSink ----------------------------------------------------------------------

    def table_schema(self, schema: TableSchema) -> None:
        self.schemas[schema.oid] = schema

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        log.warning("table %s.%s changed (%s): its caches are reset", schema.namespace,
                    schema.name, reason)
        self.schemas[schema.oid] = schema
        self._reset(reason)

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


def _as_output_text(column: Column) -> str:
    """SQL giving a column's value in its type's output form (what pgoutput sends)."""
    ref = 'q."' + column.name.replace('"', '""') + '"'
    if column.type_oid == 16:  # bool::text is 'true'/'false'; the output form is 't'/'f'
        return f"CASE WHEN {ref} THEN 't' WHEN NOT {ref} THEN 'f' END"
    return f"{ref}::text"


async def _keep_session(conn: Any) -> None:
    """The fill pool's reset: nothing. Its connections carry no session state beyond their
    fixed settings (transactions end before release), so asyncpg's default reset (advisory
    unlock, CLOSE ALL, UNLISTEN, RESET ALL: a round trip per fill) is not needed."""


async def _fetch_rows(conn: Any, req: FillRequest) -> list[Row]:
    """The base rows of one fill request, decoded as the CDC applier decodes them."""
    sql, params = fill_query(req)
    columns = req.table.columns
    casts = ", ".join(_as_output_text(c) for c in columns)
    records = await conn.fetch(f"SELECT {casts} FROM ({sql}) AS q", *params)
    oids = [c.type_oid for c in columns]
    return [tuple(None if v is None else decode_text(oid, v)
                  for oid, v in zip(oids, rec, strict=True))
            for rec in records]

