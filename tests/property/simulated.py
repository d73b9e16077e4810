"""A simulated upstream PostgreSQL and host for the engine (no I/O, deterministic).

``Upstream`` holds the tables as dicts, commits transactions (emitting the changes the CDC
applier would produce with REPLICA IDENTITY DEFAULT: old rows carry only the primary key,
unchanged TOASTed text columns may be left out), keeps the stream of committed transactions
and fill markers, and takes snapshots. Visibility can lag behind commit (DESIGN 6, fact F2):
a snapshot sees a prefix of the committed transactions that only ever grows.

``Host`` drives an ``Engine`` against it: it runs fills when asked (under a snapshot), delivers
responses and stream events in any order the test chooses, and checks every answer the engine
gives against the reference evaluator over the data as of the engine's applied position.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from engine.api import Engine, ReadFailed, ReadReady, ReadResult, TakeSnapshot
from engine.changes import (
    UNCHANGED_TOAST,
    ChangeKind,
    RowChange,
    Snapshot,
    Transaction,
)
from engine.dataflow.fills import FillRequest, RunFill
from engine.dataflow.ops.aggregate import AggregateNode
from engine.dataflow.ordering import row_key
from engine.dataflow.state.intervals import span_of
from engine.plan import ir
from engine.plan.evaluate import evaluate_reader

Row = tuple[Any, ...]
Data = dict[int, dict[Row, Row]]  # table oid -> primary key -> row


def copy_data(data: Data) -> Data:
    return {oid: dict(rows) for oid, rows in data.items()}


def apply_to(data: Data, tables: dict[int, ir.TableRef], txn: Transaction) -> None:
    """Apply a transaction's changes (as the engine receives them) to full data."""
    for ch in txn.changes:
        t = tables[ch.table_oid]
        rows = data[ch.table_oid]
        if ch.kind is ChangeKind.TRUNCATE:
            rows.clear()
            continue
        prev = None
        if ch.kind is not ChangeKind.INSERT:
            old = ch.old if ch.old is not None else ch.new
            assert old is not None
            prev = rows.pop(tuple(old[i] for i in t.primary_key))
        if ch.new is not None:
            assert prev is not None or ch.kind is ChangeKind.INSERT
            new = tuple(prev[i] if v is UNCHANGED_TOAST and prev else v
                        for i, v in enumerate(ch.new))
            rows[tuple(new[i] for i in t.primary_key)] = new


@dataclass
class Upstream:
    tables: dict[int, ir.TableRef]
    data: Data
    next_xid: int = 2**32 - 3  # crosses an epoch boundary early
    committed: list[Transaction] = field(default_factory=list)
    visible_upto: int = 0  # snapshots see committed[:visible_upto] (monotone)
    initial: Data = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.initial = copy_data(self.data)

    def commit(self, changes: Sequence[RowChange]) -> Transaction:
        txn = Transaction(self.next_xid, len(self.committed) + 1, tuple(changes))
        self.next_xid += 1
        apply_to(self.data, self.tables, txn)
        self.committed.append(txn)
        return txn

    def snapshot(self, rng: random.Random, lag: bool) -> tuple[Snapshot, Data]:
        """A snapshot (possibly not yet seeing the latest commits) and the data it sees."""
        n = len(self.committed)
        self.visible_upto = rng.randint(self.visible_upto, n) if lag else n
        hidden = self.committed[self.visible_upto:]
        xmin = hidden[0].xid if hidden else self.next_xid
        snap = Snapshot(xmin, self.next_xid, frozenset(t.xid for t in hidden))
        data = copy_data(self.initial)
        for t in self.committed[:self.visible_upto]:
            apply_to(data, self.tables, t)
        return snap, data


def fetch(data: Data, req: FillRequest) -> tuple[Row, ...]:
    """What the fill's SQL returns under the snapshot that ``data`` is (semi-joins too)."""
    rows = data[req.table.oid].values()
    span = span_of(req.key)
    if span is not None:  # an interval fill: engine.plan.fill_sql.span_query's semantics
        col, equal = req.columns[-1], tuple(zip(req.columns, req.key[:-1], strict=False))
        inside = [r for r in rows if span.holds(r[col])
                  and all(r[c] == v for c, v in equal)]
        if span.first is not None and len(inside) > span.first:
            order = sorted((span.point(r[col]) for r in inside), reverse=span.from_top)
            nth = order[span.first - 1]  # (NULL: the point past every value)
            inside = [r for r in inside if (span.point(r[col]) >= nth
                                            if span.from_top else
                                            span.point(r[col]) <= nth)]
        return tuple(inside)
    if req.via is not None:
        via = req.via
        source = [r for r in data[via.table.oid].values()
                  if all(r[c] == v for c, v in zip(via.columns, via.key, strict=True))]
        js = {tuple(r[c] for c in via.join_columns) for r in source}
        return tuple(r for r in rows if tuple(r[c] for c in req.columns) in js)
    return tuple(r for r in rows
                 if all(r[c] == v for c, v in zip(req.columns, req.key, strict=True)))


def check_recency(engine: Engine) -> None:
    """Every present base index key is in the LRU (a join's lookup of a present key relies
    on it: it records no recency), and an aggregate holds a group only while the group's key
    is present or the aggregate is full (its twin relies on that)."""
    lru = engine.rt.lru
    for base in engine.graph.bases.values():
        for cols, idx in base.store.indexes.items():
            for k in idx.present:
                assert (base.nid, (cols, k)) in lru, (base.table.name, cols, k)
    for node in engine.graph.nodes.values():
        if isinstance(node, AggregateNode) and not node.full:
            for g in node.groups:
                assert node.d_of(g) in node.present, (node.nid, g)


def _exact(rows: Sequence[Row]) -> list[Row]:
    """Rows with numerics as text: 1.50 and 1.5 are equal values but print differently."""
    return [tuple(str(v) if isinstance(v, Decimal) else v for v in r) for r in rows]


def same_rows(plan: ir.Reader, got: Sequence[Row], want: Sequence[Row]) -> bool:
    if plan.order_by:
        return _exact(got) == _exact(want)
    return sorted(_exact(got), key=row_key) == sorted(_exact(want), key=row_key)


@dataclass
class Host:
    engine: Engine
    up: Upstream
    plans: dict[str, ir.Reader]
    rng: random.Random
    lag: bool = True
    stream: list[tuple[str, Any]] = field(default_factory=list)  # ("txn", T) / ("marker", id)
    applied: Data = field(default_factory=dict)
    to_run: list[RunFill] = field(default_factory=list)
    responses: list[tuple[int, Snapshot, tuple[tuple[Row, ...], ...]]] = field(
        default_factory=list)
    waiting: set[tuple[str, Row]] = field(default_factory=set)
    checked: int = 0
    answers: dict[tuple[str, Row], tuple[Row, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.applied = copy_data(self.up.data)

    # -- upstream side ------------------------------------------------------------------
    def write(self, changes: Sequence[RowChange]) -> None:
        if changes:
            self.stream.append(("txn", self.up.commit(changes)))

    def run_fill(self, i: int) -> None:
        run = self.to_run.pop(i % len(self.to_run))
        snap, data = self.up.snapshot(self.rng, self.lag)
        rows = tuple(fetch(data, req) for req in run.requests)
        self.stream.append(("marker", run.fill_id))
        self.responses.append((run.fill_id, snap, rows))

    def respond(self, i: int) -> None:
        fill_id, snap, rows = self.responses.pop(i % len(self.responses))
        self.effects(self.engine.fill_response(fill_id, snap, rows))

    def deliver(self, n: int) -> None:
        for _ in range(min(n, len(self.stream))):
            kind, item = self.stream.pop(0)
            if kind == "txn":
                apply_to(self.applied, self.up.tables, item)
                self.effects(self.engine.apply(item))
            else:
                self.effects(self.engine.position_reached(item))

    def probe(self) -> None:
        snap, _ = self.up.snapshot(self.rng, self.lag)
        self.engine.snapshot_probe(snap)

    # -- reads --------------------------------------------------------------------------
    def read(self, cache: str, key: Row) -> None:
        result: ReadResult = self.engine.read(cache, key)
        if result.rows is not None:
            self.check(cache, key, result.rows)
        else:
            self.waiting.add((cache, key))
        self.effects(result.effects)

    def check(self, cache: str, key: Row, rows: Sequence[Row]) -> None:
        plan = self.plans[cache]
        want = evaluate_reader(plan, {o: list(r.values()) for o, r in self.applied.items()},
                               key)
        assert same_rows(plan, rows, want), (cache, key, rows, want)
        check_recency(self.engine)
        self.checked += 1
        self.answers[(cache, key)] = tuple(rows)

    def effects(self, effects: Sequence[object]) -> None:
        for e in effects:
            if isinstance(e, RunFill):
                self.to_run.append(e)
            elif isinstance(e, ReadReady):
                self.check(e.cache, e.key, e.rows)
                self.waiting.discard((e.cache, e.key))
            elif isinstance(e, ReadFailed):
                self.waiting.discard((e.cache, e.key))
            elif isinstance(e, TakeSnapshot):
                self.probe()
            else:  # pragma: no cover
                raise AssertionError(e)

    def play(self, ops: Sequence[tuple[int, int]],
             changes: Callable[[random.Random], Sequence[RowChange]],
             key: Callable[[str, random.Random], Row], final_reads: int) -> None:
        """Drive the host with generated ``(op, arg)`` pairs in an adversarial order — 0-2 an
        upstream write, 3-5 a read, 6 run a fill, 7 deliver a fill response, 8 deliver the
        stream, 9 a snapshot probe — then settle and read ``final_reads`` keys of every cache
        (every answer is checked against the reference)."""
        names = sorted(self.plans)
        for op, arg in ops:
            r = random.Random(arg)
            if op <= 2:
                self.write(changes(r))
            elif op <= 5:
                cache = names[arg % len(names)]
                self.read(cache, key(cache, r))
            elif op == 6 and self.to_run:
                self.run_fill(arg)
            elif op == 7 and self.responses:
                self.respond(arg)
            elif op == 8:
                self.deliver(1 + arg % 3)
            else:
                self.probe()
        self.settle()
        for cache in names:
            for k in range(final_reads):
                self.read_settled(cache, key(cache, random.Random(k)))

    def settle(self) -> None:
        """Run every fill, deliver every response and stream event until nothing is left."""
        for _ in range(10_000):
            if self.to_run:
                self.run_fill(0)
            elif self.responses:
                self.respond(0)
            elif self.stream:
                self.deliver(len(self.stream))
            else:
                return
        raise AssertionError("fills did not converge")

    def read_settled(self, cache: str, key: Row) -> None:
        """Read until answered, settling fills in between (every answer is checked)."""
        for _ in range(20):
            before = self.checked
            self.read(cache, key)
            self.settle()
            if self.checked > before and (cache, key) not in self.waiting:
                return
        raise AssertionError(f"read {cache} {key} never completed")


def catalog_host(rng: random.Random, budget: int | None) -> tuple[Upstream, Engine, Host]:
    """The property catalog's tables (``tests.property.catalog``, initial rows from ``rng``)
    upstream, an engine holding every one of its caches (``budget``: its memory budget,
    probing every 5 reads) and the host between them."""
    from tests.property.catalog import PLANS, TABLES, initial_data

    up = Upstream(TABLES, initial_data(rng))
    engine = Engine(memory_budget=budget, probe_every=5)
    for name, plan in PLANS.items():
        engine.add_cache(name, plan)
    return up, engine, Host(engine, up, dict(PLANS), rng)



@dataclass(frozen=True, slots=True)
class Step:
    """One step of :func:`catalog_steps`: ``op`` as drawn (0-2 a write, 3-5 a read of
    ``key``, 6-9 left to the test), on ``cache``."""

    op: int
    cache: str
    key: Row | None = None


def catalog_steps(up: Upstream, host: Host, ops: Iterable[tuple[int, int]]) -> Iterator[Step]:
    """Drive :func:`catalog_host`'s host through ``ops`` (``(op, arg)``, ``arg`` seeding the
    step): ops 0-2 commit random changes upstream, 3-5 read a random key of the cache ``arg``
    picks; each step is yielded after it ran, and ops 6-9 only yielded (the test decides)."""
    from tests.property.catalog import PLANS, key_for, random_changes

    names = sorted(PLANS)
    for op, arg in ops:
        r = random.Random(arg)
        cache = names[arg % len(names)]
        if op <= 2:
            host.write(random_changes(up.data, r))
            yield Step(op, cache)
        elif op <= 5:
            key = key_for(cache, r)
            host.read(cache, key)
            yield Step(op, cache, key)
        else:
            yield Step(op, cache)
