"""DISTINCT: each distinct input row once, kept as a count per row; and INTERSECT / EXCEPT
[ALL], kept as two counts per row.

State: row -> multiplicity, partial by the state key ``d`` (some of the row's columns).
Emits ``+row`` when a row's count goes 0 -> positive and ``-row`` when it returns to 0, so it
is distributive and works with partial state (unlike Noria's full-only distinct).

``SetOpNode``: the input rows end with a side marker (0 left, 1 right; ``ir.Distinct.setop``);
state: row (marker dropped) -> (left count, right count); output: ``ir.setop_copies`` copies
of the row, a change emitted as the difference of copies before and after. Partial by ``d``
like DISTINCT: a key's rows of both sides are filled together (one pull through the union).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from engine.dataflow.node import Cols, Node, Runtime
from engine.dataflow.ops.keyed import KeyedNode
from engine.dataflow.records import Delta, Row, row_size
from engine.plan import ir


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


class SetOpNode(KeyedNode):
    def __init__(self, nid: int, source: Node, key_pos: Cols, kind: ir.SetOpKind,
                 runtime: Runtime) -> None:
        width = source.width - 1  # the side marker is not output
        super().__init__(nid, source, width, tuple(range(width)), key_pos, key_pos, runtime)
        self.kind: ir.SetOpKind = kind
        self.sides: dict[Row, tuple[int, int]] = {}

    def output_rows(self, g: Row) -> list[Row]:
        sides = self.sides.get(g)
        return [] if sides is None else [g] * ir.setop_copies(self.kind, *sides)

    def drop_group(self, g: Row) -> None:
        if self.sides.pop(g, None) is not None:
            self.bytes -= row_size(g) + 32

    def adopt(self, g: Row, state: object) -> None:
        if g not in self.sides:
            self.bytes += row_size(g) + 32
        self.sides[g] = state  # type: ignore[assignment]

    def build(self, rows: Iterable[Row]) -> dict[Row, object]:
        counts: dict[Row, list[int]] = {}
        for row in rows:
            counts.setdefault(row[:-1], [0, 0])[row[-1]] += 1
        return {g: (left, right) for g, (left, right) in counts.items()}

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        out: Delta = []
        kind, sides = self.kind, self.sides
        for row, w in deltas[0]:
            g = row[:-1]
            if not self.has(self.d_of(g)):
                continue
            left, right = sides.get(g, (0, 0))
            old = ir.setop_copies(kind, left, right)
            if row[-1] == 0:
                left += w
            else:
                right += w
            if left == 0 and right == 0:
                self.drop_group(g)
                self.forget_group(g)
            else:
                self.adopt(g, (left, right))
                self.note_group(g)
            new = ir.setop_copies(kind, left, right)
            if new != old:
                out.append((g, new - old))
        return out, []
