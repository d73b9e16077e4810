"""Union all: the bag sum of its inputs (which have the same columns).

Stateless. A pull pulls every input (a fill through a union fills every parent's keys, and
the host fetches them under one snapshot, so the combined answer is consistent).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.dataflow.node import Cols, Node, PullCtx
from engine.dataflow.records import Delta, Row


class UnionNode(Node):
    def __init__(self, nid: int, sources: Sequence[Node]) -> None:
        super().__init__(nid, sources, sources[0].width)

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        return [rw for d in deltas for rw in d], []

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        out: list[Row] = []
        complete = True
        for source in self.inputs:  # pull every input, so one round trip finds all misses
            rows = source.pull(cols, key, ctx)
            if rows is None:
                complete = False
            else:
                out.extend(rows)
        return out if complete else None

    def count(self, cols: Cols, key: Row, ctx: PullCtx) -> int | None:
        total = 0
        complete = True
        for source in self.inputs:  # count every input, as ``pull`` pulls every input
            n = source.count(cols, key, ctx)
            if n is None:
                complete = False
            else:
                total += n
        return total if complete else None
