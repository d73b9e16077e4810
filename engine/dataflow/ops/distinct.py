"""DISTINCT: each distinct input row once, kept as a count per row.

State: row -> multiplicity, partial by the state key ``d`` (some of the row's columns).
Emits ``+row`` when a row's count goes 0 -> positive and ``-row`` when it returns to 0, so it
is distributive and works with partial state (unlike Noria's full-only distinct).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from engine.dataflow.node import Cols, Node, Runtime
from engine.dataflow.ops.keyed import KeyedNode
from engine.dataflow.records import Delta, Row, row_size


class DistinctNode(KeyedNode):
    def __init__(self, nid: int, source: Node, key_pos: Cols, runtime: Runtime) -> None:
        every = tuple(range(source.width))
        super().__init__(nid, source, source.width, every, key_pos, key_pos, runtime)
        self.counts: dict[Row, int] = {}

    def output_rows(self, g: Row) -> list[Row]:
        return [g] if self.counts.get(g, 0) > 0 else []

    def drop_group(self, g: Row) -> None:
        if self.counts.pop(g, None) is not None:
            self.bytes -= row_size(g) + 16

    def adopt(self, g: Row, state: object) -> None:
        if g not in self.counts:
            self.bytes += row_size(g) + 16
        self.counts[g] = state  # type: ignore[assignment]

    def build(self, rows: Iterable[Row]) -> dict[Row, object]:
        return dict(Counter(rows))

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        out: Delta = []
        has, counts = self.has, self.counts
        for row, w in deltas[0]:
            if not has(self.d_of(row)):
                continue
            old = counts.get(row, 0)
            new = old + w
            if new == 0:
                self.drop_group(row)
                self.forget_group(row)
            else:
                self.adopt(row, new)
                self.note_group(row)
            if old <= 0 < new:
                out.append((row, 1))
            elif new <= 0 < old:
                out.append((row, -1))
        return out, []
