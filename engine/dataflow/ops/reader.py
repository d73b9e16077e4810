"""The reader: a cache's parameter-keyed view, the leaf that clients read.

State: key -> bag of rows (``records.bag_add``: rows that print differently stay apart) for
present keys, plus the finished answer per
key (output columns, ORDER BY, OFFSET/LIMIT applied) computed on first read after a change,
so that a hit is a dictionary lookup. With window functions, each present key also has a
``window_state.Partition`` that every delta updates in place (the windows' values are not
recomputed from the key's rows), and the answer is read off it.

Invariants: a key is present (possibly with no rows: empty answers are stored) or missing;
deltas for missing keys are dropped; an eviction row with an UNKNOWN key column evicts every
key; a key containing NULL matches nothing and is answered empty without state; an answer in
``Runtime.watched`` (kept outside: the hit lanes) is reported (``Runtime.dropping``) before it
is replaced or dropped.
"""

from __future__ import annotations

from collections.abc import Hashable

from engine.dataflow.node import Node, PullCtx, Runtime
from engine.dataflow.ordering import order_key
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import (
    Bag,
    Delta,
    Row,
    apply_bag,
    bag_add,
    bag_rows,
    bag_size,
    has_unknown,
    key_of,
    row_size,
)
from engine.dataflow.window_state import Partition
from engine.plan import ir

Answer = tuple[Row, ...]

#: Bytes a present key costs besides its rows (its entries in the reader's dictionaries).
KEY_BYTES = 64


def deps_bytes(deps: tuple[object, ...]) -> int:
    """Bytes a key's ``Runtime.deps`` entry costs (its dictionary slot and tuple; the items
    are the states' own keys, shared)."""
    return 64 + 8 * len(deps)


class ReaderNode(Node):
    stateful = True

    def __init__(self, nid: int, source: Node, plan: ir.Reader, runtime: Runtime) -> None:
        super().__init__(nid, (source,), len(plan.output))
        self.key = plan.key
        self.output = plan.output
        self.sort = order_key(plan.order_by) if plan.order_by else None
        self.windows = plan.windows
        self.plan_order = plan.order_by
        self.lo = plan.offset
        self.hi = None if plan.limit is None else plan.offset + plan.limit
        self.rt = runtime
        self.state: dict[Row, Bag] = {}
        self.answers: dict[Row, Answer] = {}
        #: per present key when the plan has windows: its rows and window values, kept
        #: up to date by each delta (``window_state.Partition``)
        self.parts: dict[Row, Partition] = {}

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        if self.rt.watched:  # copies of answers kept outside are dropped first (Runtime)
            answers, cols, nid, rt = self.answers, self.key, self.nid, self.rt
            for row, _ in deltas[0]:
                k = tuple([row[i] for i in cols])  # (as apply_bag finds the key)
                if k in answers:
                    rt.dropping(nid, k)
        self.bytes += apply_bag(self.state, self.answers, deltas[0], self.key)
        if self.parts:
            parts, cols = self.parts, self.key
            for row, w in deltas[0]:
                part = parts.get(tuple([row[i] for i in cols]))
                if part is not None:
                    part.change(row, w)
                    self.bytes += part.per_row * w
        return [], []

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        for row in rows[0]:
            k = key_of(row, self.key)
            if has_unknown(k):
                for key in list(self.state):
                    self.evict_key(key)
                break
            self.evict_key(k)
        return []

    def evict_key(self, key: Hashable) -> list[Row]:
        k: Row = key  # type: ignore[assignment]
        bag = self.state.pop(k, None)
        if bag is not None:
            self.bytes -= bag_size(bag) + KEY_BYTES
            if self.rt.watched:
                self.rt.dropping(self.nid, k)
            self.answers.pop(k, None)
            part = self.parts.pop(k, None)
            if part is not None:
                self.bytes -= part.per_row * len(part)
            deps = self.rt.deps.pop((self.nid, k), None)
            if deps is not None:
                self.bytes -= deps_bytes(deps)
            self.rt.forget(self.nid, k)
        return []

    def clear(self) -> None:
        for k in list(self.state):
            self.evict_key(k)

    def lookup(self, key: Row) -> Answer | None:
        """The answer for ``key`` or None when the key is missing."""
        answer = self.answers.get(key)
        if answer is None:
            bag = self.state.get(key)
            if bag is None:
                return () if None in key else None
            try:
                answer = self.answers[key] = self._key_answer(key, bag)
            except EvalError:  # a window value PostgreSQL errors on: a miss, whose fill fails
                return None
        self.rt.touch_answer((self.nid, key))
        return answer

    def _key_answer(self, key: Row, bag: Bag) -> Answer:
        """``_finish``, or with windows the key's partition's answer (made on first use)."""
        if not self.windows:
            return self._finish(bag)
        part = self.parts.get(key)
        if part is None:
            part = self.parts[key] = Partition(self.windows, self.plan_order, self.output,
                                               self.lo, self.hi)
            for row in bag_rows(bag):
                part.change(row, 1)
            self.bytes += part.per_row * len(part)
        return part.answer()

    def _finish(self, bag: Bag) -> Answer:
        rows = bag_rows(bag)
        if self.sort is not None:
            rows.sort(key=self.sort)
        if self.lo or self.hi is not None:
            rows = rows[self.lo:self.hi]
        out = self.output
        return tuple(tuple(r[i] for i in out) for r in rows)

    def fill(self, key: Row, ctx: PullCtx) -> Answer | None:
        """Replay ``key`` from the input; None if some base key is missing."""
        rows = self.inputs[0].pull(self.key, key, ctx)
        if rows is None:
            return None
        bag: Bag = []
        for row in rows:
            bag = bag_add(bag, row, 1)
        self.state[key] = bag
        self.bytes += sum(row_size(r) for r in rows) + KEY_BYTES
        item = (self.nid, key)
        deps = self.rt.deps
        old = deps.pop(item, None)
        if old is not None:
            self.bytes -= deps_bytes(old)
        if ctx.used:  # (what the answer was replayed from: recent whenever it is read)
            new = deps[item] = tuple(ctx.used)
            self.bytes += deps_bytes(new)
        self.rt.touch(self.nid, key)
        if key in self.answers and self.rt.watched:
            self.rt.dropping(self.nid, key)
        part = self.parts.pop(key, None)
        if part is not None:  # (a key filled again)
            self.bytes -= part.per_row * len(part)
        answer = self.answers[key] = self._key_answer(key, bag)
        return answer
