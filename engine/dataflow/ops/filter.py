"""Filter: passes the rows (and deltas) for which the predicate is TRUE.

Stateless. A row whose predicate raises (e.g. division by zero) cannot be placed: it becomes
an eviction row, so the keys it would touch are refetched (and a read then reports the error).
Eviction rows pass unless the predicate is known to be not TRUE for them.
"""

from __future__ import annotations

from engine.dataflow.expr import columns_of, compile_expr
from engine.dataflow.node import Cols, Node, PullCtx
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import UNKNOWN, Delta, Row, arrival
from engine.plan import ir


class FilterNode(Node):
    def __init__(self, nid: int, source: Node, predicate: ir.Expr) -> None:
        super().__init__(nid, (source,), source.width)
        self.pred = compile_expr(predicate)
        self.uses = tuple(sorted(columns_of(predicate)))

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        pred = self.pred
        out: Delta = []
        evict: list[Row] = []
        for row, w in deltas[0]:
            try:
                if pred(row) is True:
                    out.append((row, w))
            except EvalError:
                evict.append(arrival(row))
        return out, evict

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        return [r for r in rows[0] if self._maybe(r)]

    def _maybe(self, row: Row) -> bool:
        if any(row[c] is UNKNOWN for c in self.uses):
            return True
        try:
            return self.pred(row) is True
        except EvalError:
            return True

    def base_columns(self) -> tuple[Node, list[int | None]] | None:
        return self.inputs[0].base_columns()

    def span_columns(self, cols: tuple[int, ...]) -> tuple[Node, list[int | None]] | None:
        return self.inputs[0].span_columns(cols)

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        rows = self.inputs[0].pull(cols, key, ctx)
        if rows is None:
            return None
        if ctx.partial:
            return [r for r in rows if self._maybe(r)]
        pred = self.pred
        return [r for r in rows if pred(r) is True]
