"""The engine's facade: caches, reads, upstream transactions, fills and memory - sans-I/O.

Owns: ``Engine`` and the effects it returns (``RunFill`` from ``engine.dataflow.fills``,
``ReadReady``, ``ReadFailed``, ``TakeSnapshot``). The host (the proxy's asyncio loop; a
simulated upstream in tests) performs effects and reports back; nothing here blocks or does
I/O.

Protocol:
- ``read(cache, key)`` -> ``ReadResult``: ``rows`` when the key is present (a hit) or could be
  replayed locally from present state; otherwise ``rows`` is None and the answer comes later
  as a ``ReadReady(cache, key, rows)`` effect (concurrent reads of one missing key share one
  fill and all get that effect). ``ReadFailed`` means the query raises for that key (e.g.
  division by zero): the host forwards the read upstream.
- ``apply(txn)`` applies one upstream transaction atomically (in commit order).
- ``fill_response(fill_id, snapshot, rows)`` and ``position_reached(fill_id)`` - in either
  order - install a fill; installation may start dependent fills (a replay looked up a key
  that is missing) and completes waiting reads. ``abandon_fill(fill_id)`` when the host
  gives up on one.
  ``fill_local(fill_id, rows)`` installs a fill at once from local bases that are exactly at
  the applied position (no snapshot, position wait or patch).
- ``lookup(cache, key)`` is the hit path (rows or None, no effects). ``snapshot_probe`` feeds
  the log's pruning; ``apply`` asks for one with a ``TakeSnapshot`` effect once the log holds
  ``probe_every`` transactions (the host may also probe on its own, e.g. with a heartbeat).
- Memory: ``memory_budget`` bytes (None = unlimited); after every call the least recently
  used present keys are evicted (with their downstream dependents) until the estimate is
  within budget; the keys a waiting read replayed from or waits for stay pinned until it
  completes, so the budget may be exceeded while reads wait (never livelocks).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar

from engine.changes import Snapshot, Transaction
from engine.dataflow.fills import FillManager, Pending, RunFill
from engine.dataflow.frequency import Frequency
from engine.dataflow.graph import Graph
from engine.dataflow.node import BaseKey, PullCtx, Runtime
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.ops.reader import ReaderNode
from engine.dataflow.pgmath import EvalError
from engine.plan import ir

Row = tuple[Any, ...]

#: share of the budget above which a fill must be worth the eviction it causes
#: (``Engine.worth_filling``)
FULL = 0.95
#: least recently used keys looked at for the next eviction's victim
VICTIM_SCAN = 16


@dataclass(frozen=True, slots=True)
class ReadReady:
    cache: str
    key: Row
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class ReadFailed:
    cache: str
    key: Row
    sqlstate: str
    message: str


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """Effect: run ``SELECT pg_current_snapshot()`` upstream (any session) and report it with
    ``Engine.snapshot_probe``, so that the recent-transaction log can be pruned."""


Effect = RunFill | ReadReady | ReadFailed | TakeSnapshot


@dataclass(frozen=True, slots=True)
class ReadResult:
    rows: tuple[Row, ...] | None
    effects: tuple[Effect, ...] = ()


_T = TypeVar("_T")


def _in_order(items: Collection[_T]) -> list[_T]:
    """``items`` in a deterministic order (by ``repr``), as effects and fills are issued;
    one item (a point lookup's fill: the usual case) without formatting its ``repr``."""
    return list(items) if len(items) < 2 else sorted(items, key=repr)


@dataclass(slots=True)
class _Waiter:
    reader: ReaderNode
    key: Row
    caches: set[str] = field(default_factory=set)
    waiting: set[BaseKey] = field(default_factory=set)
    pins: set[tuple[int, Hashable]] = field(default_factory=set)


@dataclass(slots=True)
class Stats:
    hits: int = 0
    misses: int = 0
    fills: int = 0
    evictions: int = 0
    retries: int = 0
    #: fills refused at the budget: the key was read less often than the next eviction's
    #: victim (``Engine.worth_filling``)
    not_worth: int = 0


class Engine:
    def __init__(self, memory_budget: int | None = None, log_cap: int = 100_000,
                 probe_every: int = 1000) -> None:
        self.rt = Runtime()
        self.graph = Graph(self.rt)
        self.fills = FillManager(log_cap=log_cap)
        self.budget = memory_budget
        if memory_budget is not None:  # (admission at the budget: ``worth_filling``)
            self.rt.freq = Frequency()
        self.stats = Stats()
        #: hits by cache (as ``stats.hits`` counts them), for /metrics
        self.hits_by_cache: dict[str, int] = {}
        self.applied_lsn = 0
        self.probe_every = probe_every
        self._probe_pending = False
        self._readers: dict[str, ReaderNode] = {}
        self._waiters: dict[tuple[int, Row], _Waiter] = {}
        self._by_key: dict[BaseKey, set[tuple[int, Row]]] = {}
        #: called before a change that may replace or drop any answer a reader handed out
        #: (a cache dropped, the engine reset): the proxy's hit lanes stop using everything
        #: they stamped; an answer replaced or dropped one by one (a write, an eviction) is
        #: reported to ``rt.on_drop`` instead, when it is in ``rt.watched``
        self.on_change: Callable[[], None] | None = None
        #: called before evicting, so that the recency of reads answered outside (the hit
        #: lanes) is recorded first (``rt.lru``)
        self.before_evict: Callable[[], None] | None = None

    # ------------------------------------------------------------------ caches
    def add_cache(self, name: str, plan: ir.Reader) -> None:
        self._readers[name] = self.graph.add_cache(name, plan)
        self.hits_by_cache[name] = 0

    def drop_cache(self, name: str) -> None:
        reader, _ = self.graph.caches[name]
        self._changing()
        for wid, w in list(self._waiters.items()):
            w.caches.discard(name)
            if not w.caches and w.reader is reader:
                self._drop_waiter(wid)
        self.graph.drop_cache(name)
        del self._readers[name]
        self.hits_by_cache.pop(name, None)

    def caches(self) -> tuple[str, ...]:
        return tuple(self.graph.caches)

    def caches_over(self, table_oid: int) -> tuple[str, ...]:
        """The caches whose dataflow reads table ``table_oid``."""
        base = self.graph.bases.get(table_oid)
        if base is None:
            return ()
        return tuple(name for name, (_, nids) in self.graph.caches.items() if base.nid in nids)

    # ------------------------------------------------------------------ reads
    def lookup(self, cache: str, key: Row) -> tuple[Row, ...] | None:
        """The hit path: the answer when ``key`` (a tuple) is present, else None (then call
        ``read`` to start or join a fill). Counts a hit, never has effects."""
        reader = self._readers[cache]
        rows = reader.lookup(key)
        if rows is not None:
            self.stats.hits += 1
            self.hits_by_cache[cache] += 1
        elif reader.rt.freq is not None:  # (a hit counts in ``Runtime.touch_answer``)
            reader.rt.freq.add(hash((reader.nid, key)))
        return rows

    def worth_filling(self, cache: str, key: Row, also: int = 0) -> bool:
        """Whether filling the missing ``key`` (a tuple) pays under the memory budget
        (TinyLFU's admission): always while the state is below :data:`FULL` of the budget;
        at the budget, only when the key was read more often lately (``Runtime.freq``,
        plus ``also`` reads counted elsewhere: the lanes' doorkeeper) than the answer the next
        eviction would take. Otherwise its fill would evict a key read more often, which
        is then missed and filled again: churn that costs fills and evictions and buys no
        hits. Counts the refusals (``stats.not_worth``); never has effects."""
        freq = self.rt.freq
        if freq is None or self.budget is None or self.memory_total() < FULL * self.budget:
            return True
        if self.before_evict is not None:  # (the lanes' reads since: recency and counts)
            self.before_evict()
        victim = self._victim()
        if victim is None:
            return True
        reader = self._readers[cache]
        if freq.estimate(hash((reader.nid, key))) + also > freq.estimate(hash(victim)):
            return True
        self.stats.not_worth += 1
        return False

    def _victim(self) -> tuple[int, Hashable] | None:
        """The answer (reader nid, key) the next eviction takes first or soon: the first
        unpinned reader key among the least recently used :data:`VICTIM_SCAN` keys (the
        keys of states below readers carry their readers' recency, ``Runtime.deps``)."""
        readers = {r.nid for r in self._readers.values()}
        pinned = self.rt.pinned
        for item in islice(self.rt.lru, VICTIM_SCAN):
            if item[0] in readers and item not in pinned:
                return item
        return None

    def filling(self, cache: str, key: Row) -> bool:
        """Whether a fill of ``key`` (a tuple) is pending for ``cache``'s reader: only then
        may a ``ReadReady`` for it come (a miss that started or joined no fill gets none)."""
        waiter = self._waiters.get((self.graph.caches[cache][0].nid, key))
        return waiter is not None and cache in waiter.caches

    def current(self, cache: str, key: Row, answer: object) -> bool:
        """Whether ``answer`` (returned by :meth:`lookup` before) is still the answer for
        ``key``: the proxy's check of an answer it encoded earlier. True counts a hit and
        records the read's recency, as a hit of :meth:`lookup` does; never has effects
        otherwise. (An answer a reader holds is replaced, never changed, when the key's rows
        change, and dropped when the key is evicted.)"""
        reader = self._readers[cache]
        if reader.answers.get(key) is not answer:
            return False
        item = (reader.nid, key)  # Runtime.touch_answer, inlined: runs for every cached answer
        rt = reader.rt
        lru = rt.lru
        if rt.freq is not None:
            rt.freq.add(hash(item))
        deps = rt.deps.get(item)
        if deps is not None:
            for dep in deps:
                if dep in lru:
                    lru.move_to_end(dep)
        try:
            lru.move_to_end(item)
        except KeyError:
            lru[item] = None
        self.stats.hits += 1
        self.hits_by_cache[cache] += 1
        return True

    def read(self, cache: str, key: Sequence[Any], count: bool = True) -> ReadResult:
        """The rows for ``key``, or None with the effects of the fill started for it;
        ``count=False`` when the proxy reads the key again for the same client read (after a
        miss it waited on), which ``stats`` counted already."""
        reader = self.graph.caches[cache][0]
        k = tuple(key)
        rows = reader.lookup(k)
        if rows is not None:
            if count:
                self.stats.hits += 1
                self.hits_by_cache[cache] += 1
            return ReadResult(rows)
        if count:
            self.stats.misses += 1
        wid = (reader.nid, k)
        waiter = self._waiters.get(wid)
        if waiter is not None:
            waiter.caches.add(cache)
            return ReadResult(None)
        waiter = self._waiters[wid] = _Waiter(reader, k, {cache})
        effects: list[Effect] = []
        rows = self._attempt(wid, waiter, effects)
        self._enforce()
        return ReadResult(rows, tuple(effects))

    def _attempt(self, wid: tuple[int, Row], w: _Waiter, effects: list[Effect]) -> Any:
        """Try to replay the waiter's key; on success remove it and return the rows."""
        ctx = PullCtx()
        try:
            rows = w.reader.fill(w.key, ctx)
        except EvalError as exc:
            self._drop_waiter(wid)
            effects.extend(ReadFailed(c, w.key, exc.sqlstate, str(exc)) for c in sorted(w.caches))
            return None
        if rows is not None:
            self._drop_waiter(wid)
            return rows
        # pin what this attempt replayed from and what it waits for, so that the budget
        # cannot evict them before the retry (otherwise tiny budgets livelock)
        # (accumulated over its attempts: a replay discovers what it needs step by step)
        fresh = (set(ctx.used) | {(bk[0], (bk[1], bk[2])) for bk in ctx.missing}) - w.pins
        for item in fresh:
            self.rt.pinned[item] = self.rt.pinned.get(item, 0) + 1
        w.pins |= fresh
        w.waiting = set(ctx.missing)
        for bk in ctx.missing:
            self._by_key.setdefault(bk, set()).add(wid)
        run = self.fills.issue([(bk, self._base(bk).table) for bk in _in_order(ctx.missing)],
                               ctx.prefetch)
        if run is not None:
            self.stats.fills += 1
            effects.append(run)
        return None

    def _base(self, bk: BaseKey) -> BaseNode:
        node = self.graph.nodes[bk[0]]
        assert isinstance(node, BaseNode)
        return node

    def _unpin(self, w: _Waiter) -> None:
        for item in w.pins:
            n = self.rt.pinned.get(item, 0) - 1
            if n > 0:
                self.rt.pinned[item] = n
            else:
                self.rt.pinned.pop(item, None)
        w.pins = set()

    def _drop_waiter(self, wid: tuple[int, Row]) -> None:
        w = self._waiters.pop(wid)
        self._unpin(w)
        for bk in w.waiting:
            ids = self._by_key.get(bk)
            if ids is not None:
                ids.discard(wid)
                if not ids:
                    del self._by_key[bk]

    # ------------------------------------------------------------------ upstream
    def apply(self, txn: Transaction) -> tuple[Effect, ...]:
        """Apply one upstream transaction (skipped if its commit LSN was applied already)."""
        if txn.commit_lsn <= self.applied_lsn:
            return ()
        self.applied_lsn = txn.commit_lsn
        # (no ``on_change``: a reader reports each answer it replaces or drops that is kept
        # outside, ``Runtime.watched``, before it does)
        oids = self.graph.apply(txn)
        self.fills.record(txn, self.graph.bases, oids)
        self._enforce()
        if len(self.fills.log) >= self.probe_every and not self._probe_pending:
            self._probe_pending = True
            return (TakeSnapshot(),)
        return ()

    def snapshot_probe(self, snapshot: Snapshot) -> None:
        """A snapshot the host took (asked for by ``TakeSnapshot``, or periodically)."""
        self._probe_pending = False
        self.fills.probe(snapshot)

    def fill_response(self, fill_id: int, snapshot: Snapshot,
                      rows: Sequence[Sequence[Row]]) -> tuple[Effect, ...]:
        ready = self.fills.response(fill_id, snapshot, tuple(tuple(r) for r in rows))
        return self._install(ready) if ready is not None else ()

    def position_reached(self, fill_id: int) -> tuple[Effect, ...]:
        """Every transaction visible in fill ``fill_id``'s snapshot has been applied (the
        stream reached the fill's position: ``proxy.fillrun``); installs it once its rows
        are in too. The host calls it between two applied transactions."""
        ready = self.fills.reached(fill_id)
        return self._install(ready) if ready is not None else ()

    def fill_local(self, fill_id: int, rows: Sequence[Sequence[Row]]) -> tuple[Effect, ...]:
        """Install fill ``fill_id`` with ``rows`` (per request, as ``fill_response``) read from
        local bases that are exactly at the applied position now: at once, with no snapshot,
        position wait or patch. The host must call it before the next ``apply``."""
        ready = self.fills.local(fill_id, tuple(tuple(r) for r in rows))
        return self._install(ready) if ready is not None else ()

    def abandon_fill(self, fill_id: int, reason: str = "fill abandoned") -> tuple[Effect, ...]:
        """The host gave up on a fill (the upstream failed): the reads waiting for its keys
        fail (``ReadFailed``, go upstream); a later read of those keys starts a new fill.
        Without this, the fill would hold back the log's pruning forever."""
        effects: list[Effect] = []
        for bk in self.fills.abandon(fill_id):
            for wid in _in_order(self._by_key.get(bk, set())):
                w = self._waiters.get(wid)
                if w is not None:
                    caches = sorted(w.caches)
                    self._drop_waiter(wid)
                    effects.extend(ReadFailed(c, w.key, "", reason) for c in caches)
        return tuple(effects)

    def _install(self, fill: Pending) -> tuple[Effect, ...]:
        # no ``_changing()``: installing rows of missing base keys replaces or drops no answer
        # a reader handed out (readers' answers change only through deltas and evictions, and
        # an installed key equals the applied state, which every present answer shows), so
        # the hit lanes keep their stamps across fills (an eviction by ``_enforce`` below
        # drops the evicted keys' stamps: ``Runtime.watched``)
        effects: list[Effect] = []
        done: list[BaseKey] = []
        retry: list[BaseKey] = []
        for bk, rows in self.fills.finish(fill):
            base = self.graph.nodes.get(bk[0])
            if not isinstance(base, BaseNode):
                continue
            if rows is None:
                self.fills.installed_as.pop(bk, None)
                retry.append(bk)
                continue
            base.install(bk[1], self.fills.installed_as.pop(bk, bk[2]), rows)
            done.append(bk)
        self._wake(done, retry, effects)
        self._enforce()
        return tuple(effects)

    def _wake(self, done: list[BaseKey], retry: list[BaseKey], effects: list[Effect]) -> None:
        if retry:
            self.stats.retries += 1
            run = self.fills.issue([(bk, self._base(bk).table) for bk in retry])
            if run is not None:
                effects.append(run)
        ready: set[tuple[int, Row]] = set()
        for bk in done:
            for wid in self._by_key.pop(bk, set()):
                w = self._waiters.get(wid)
                if w is not None:
                    w.waiting.discard(bk)
                    if not w.waiting:
                        ready.add(wid)
        for wid in _in_order(ready):
            w = self._waiters[wid]
            caches = sorted(w.caches)
            rows = self._attempt(wid, w, effects)
            if rows is not None:
                effects.extend(ReadReady(c, w.key, rows) for c in caches)

    def _changing(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ memory
    def memory_total(self) -> int:
        return sum(n.bytes for n in self.graph.nodes.values())

    def memory_by_cache(self) -> dict[str, int]:
        """Bytes per cache (state shared between caches is counted in each of them)."""
        nodes = self.graph.nodes
        return {name: sum(nodes[n].bytes for n in nids)
                for name, (_, nids) in self.graph.caches.items()}

    def _enforce(self) -> None:
        if self.budget is None:
            return
        total = self.memory_total()
        if total > self.budget and self.before_evict is not None:
            self.before_evict()
        lru, pinned = self.rt.lru, self.rt.pinned
        skipped: list[tuple[int, Hashable]] = []
        rounds = 2 * len(lru) + 16  # bound: evicting never re-adds keys, but never loop
        while total > self.budget and lru and rounds > 0:
            rounds -= 1
            item, _ = lru.popitem(last=False)
            if item in pinned:
                skipped.append(item)
                continue
            self.graph.evict(*item)  # (readers report watched answers they drop)
            self.stats.evictions += 1
            total = self.memory_total()
        for item in reversed(skipped):
            lru[item] = None
            lru.move_to_end(item, last=False)
