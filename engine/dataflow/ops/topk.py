"""Top-k per group: ORDER BY ... LIMIT k [OFFSET o] within each group of columns.

State per group: the first ``o + k + buffer`` rows in sort order (``buffer = k``) and whether
they are *all* of the group's rows (``complete``). Partial by the state key ``d`` (a subset of
the group columns).

Invariants: the kept rows are exactly the smallest rows of the group; a row sorting after the
last kept row of an incomplete group is not kept (it cannot be in the window). When removals
leave an incomplete group with fewer than ``o + k`` rows, its key is evicted - the refill is
the next pull, a replay from the base store (or a fill) - so the window is never wrong.
Rows tied on all sort keys are ordered by the whole row (one of PostgreSQL's valid orders).

Install (``build``, from a replay of the whole group - an upstream fill fetches every row of
the group's base key): a group larger than ``cap`` is cut first by the sort keys without the
whole-row tie-break (``heapq.nsmallest``), keeping every row tied with the ``cap``-th; only
those candidates get full keys and are sorted.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from typing import Any

from engine.dataflow.node import Cols, Node, Runtime
from engine.dataflow.ops.keyed import KeyedNode
from engine.dataflow.ordering import order_key
from engine.dataflow.records import Delta, Row, consolidate, exact_key, key_of, row_size
from engine.plan.ir import SortKey


class Top:
    __slots__ = ("complete", "keys", "rows")

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.rows: list[Row] = []
        self.complete = True


class TopKNode(KeyedNode):
    def __init__(self, nid: int, source: Node, group_by: Cols, order_by: Sequence[SortKey],
                 limit: int, offset: int, key_pos: Cols, runtime: Runtime) -> None:
        key_out = tuple(group_by[i] for i in key_pos)
        super().__init__(nid, source, source.width, group_by, key_pos, key_out, runtime)
        self.sort_key = order_key(order_by)
        self.rank_key = order_key(order_by, tie_break=False)  # (cheaper: for selecting)
        self.lo, self.hi = offset, offset + limit
        self.cap = offset + 2 * limit
        self.tops: dict[Row, Top] = {}

    def _window(self, top: Top | None) -> list[Row]:
        return top.rows[self.lo:self.hi] if top is not None else []

    def output_rows(self, g: Row) -> list[Row]:
        return self._window(self.tops.get(g))

    def drop_group(self, g: Row) -> None:
        top = self.tops.pop(g, None)
        if top is not None:
            self.bytes -= sum(row_size(r) + 80 for r in top.rows)

    def adopt(self, g: Row, state: object) -> None:
        top: Top = state  # type: ignore[assignment]
        self.tops[g] = top
        self.bytes += sum(row_size(r) + 80 for r in top.rows)

    def build(self, rows: Iterable[Row]) -> dict[Row, object]:
        by_group: dict[Row, list[Row]] = {}
        for row in rows:
            by_group.setdefault(key_of(row, self.group), []).append(row)
        out: dict[Row, object] = {}
        for g, members in by_group.items():
            top = Top()
            top.complete = len(members) <= self.cap
            kept = members if top.complete else self._candidates(members)
            keys = list(map(self.sort_key, kept))
            order = sorted(range(len(kept)), key=keys.__getitem__)[:self.cap]
            top.rows = [kept[i] for i in order]
            top.keys = [keys[i] for i in order]
            out[g] = top
        return out

    def _candidates(self, members: list[Row]) -> list[Row]:
        """The rows of a group of more than ``cap`` rows that can be among its ``cap``
        smallest: those not ranked after the ``cap``-th smallest rank (the sort keys without
        the whole-row tie-break: a C-compared tuple for numbers, and no ``row_key`` per row)."""
        if self.cap == 0:
            return []
        ranks = list(map(self.rank_key, members))
        bound = heapq.nsmallest(self.cap, ranks)[-1]
        return [r for r, k in zip(members, ranks, strict=True) if not bound < k]

    def _insert(self, top: Top, row: Row) -> None:
        k = self.sort_key(row)
        if not top.complete and (not top.keys or not k < top.keys[-1]):
            return
        i = bisect.bisect_right(top.keys, k)
        top.keys.insert(i, k)
        top.rows.insert(i, row)
        self.bytes += row_size(row) + 80
        if len(top.rows) > self.cap:
            top.keys.pop()
            self.bytes -= row_size(top.rows.pop()) + 80
            top.complete = False

    def _remove(self, top: Top, row: Row) -> None:
        k = self.sort_key(row)
        x = exact_key(row)
        i = bisect.bisect_left(top.keys, k)
        while i < len(top.rows) and top.keys[i] == k:  # equal values may print differently
            if exact_key(top.rows[i]) == x:
                del top.keys[i]
                del top.rows[i]
                self.bytes -= row_size(row) + 80
                return
            i += 1

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        touched: dict[Row, list[Row]] = {}
        for row, w in deltas[0]:
            g = key_of(row, self.group)
            if not self.has(self.d_of(g)):
                continue
            top = self.tops.get(g)
            if top is None:
                top = Top()
                self.adopt(g, top)
                self.note_group(g)
            if g not in touched:
                touched[g] = self._window(top)
            for _ in range(abs(w)):
                (self._insert if w > 0 else self._remove)(top, row)
        return self._emit(touched)

    def _emit(self, touched: dict[Row, list[Row]]) -> tuple[Delta, list[Row]]:
        out: Delta = []
        underflow: set[Row] = set()
        for g, old in touched.items():
            top = self.tops[g]
            if not top.complete and len(top.rows) < self.hi:
                underflow.add(self.d_of(g))
                out.extend((r, -1) for r in old)  # retract what was shown; key goes missing
                continue
            out.extend(consolidate([*((r, 1) for r in self._window(top)),
                                    *((r, -1) for r in old)]))
            if top.complete and not top.rows:
                self.drop_group(g)
                self.forget_group(g)
        evict: list[Row] = []
        for d in underflow:
            evict.extend(self.evict_key(d))
        return out, evict
