"""Project: computes one output column per expression.

Stateless. Key provenance: an output column that is a plain column reference traces to that
input column; a computed column has none, so a pull on it pulls the input on the traceable
columns only and filters afterwards. In eviction rows a computed column is ``UNKNOWN`` when
an input column it reads is. A row whose expressions raise becomes an eviction row.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from engine.dataflow.expr import columns_of, compile_expr
from engine.dataflow.node import Cols, Node, PullCtx
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import UNKNOWN, Arrival, Delta, Row, arrival
from engine.dataflow.state.intervals import Span
from engine.plan import ir


class ProjectNode(Node):
    def __init__(self, nid: int, source: Node, exprs: Sequence[ir.Expr]) -> None:
        super().__init__(nid, (source,), len(exprs))
        self.fns = [compile_expr(e) for e in exprs]
        self.src = [e.index if isinstance(e, ir.ColumnRef) else None for e in exprs]
        self.uses = [tuple(columns_of(e)) for e in exprs]
        if len(exprs) > 1 and None not in self.src:  # columns only: one C call per row
            self._map = operator.itemgetter(*self.src)  # type: ignore[method-assign,assignment]

    def _map(self, row: Row) -> Row:
        return tuple([f(row) for f in self.fns])

    def _partial(self, row: Row) -> Row:
        out: list[object] = []
        for fn, uses in zip(self.fns, self.uses, strict=True):
            if any(row[c] is UNKNOWN for c in uses):
                out.append(UNKNOWN)
                continue
            try:
                out.append(fn(row))
            except EvalError:
                out.append(UNKNOWN)
        return tuple(out)

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        out: Delta = []
        evict: list[Row] = []
        for row, w in deltas[0]:
            try:
                out.append((self._map(row), w))
            except EvalError:
                evict.append(arrival(self._partial(row)))
        return out, evict

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        return [arrival(self._partial(r)) if isinstance(r, Arrival) else self._partial(r)
                for r in rows[0]]

    def base_columns(self) -> tuple[Node, list[int | None]] | None:
        below = self.inputs[0].base_columns()
        if below is None:
            return None
        base, cols = below
        return base, [cols[s] if s is not None else None for s in self.src]

    def span_columns(self, cols: tuple[int, ...]) -> tuple[Node, list[int | None]] | None:
        src = [self.src[c] for c in cols]
        if None in src:
            return None
        below = self.inputs[0].span_columns(tuple(src))  # type: ignore[arg-type]
        if below is None:
            return None
        base, traced = below
        return base, [traced[s] if s is not None else None for s in self.src]

    def count(self, cols: Cols, key: Row, ctx: PullCtx) -> int | None:
        src = self.src
        if None in key or any(src[c] is None for c in cols):
            return super().count(cols, key, ctx)
        bound: dict[int, object] = {}
        for c, v in zip(cols, key, strict=True):
            if bound.setdefault(src[c], v) != v:  # type: ignore[arg-type]
                return 0
        return self.inputs[0].count(tuple(bound), tuple(bound.values()), ctx)

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        if any(v is None for v in key):
            return []
        bound: dict[int, object] = {}
        for c, v in zip(cols, key, strict=True):
            s = self.src[c]
            if s is None:
                continue
            if s in bound and bound[s] != v:
                return []
            bound[s] = v
        rows = self.inputs[0].pull(tuple(bound), tuple(bound.values()), ctx)
        if rows is None:
            return None
        fn = self._partial if ctx.partial else self._map
        mapped = [fn(r) for r in rows]
        if all(self.src[c] is not None for c in cols):
            return mapped  # (each key column is an input column the pull bound, as in count)
        return [r for r in mapped  # (a Span key: the rows lie in it already)
                if all(r[c] == v or r[c] is UNKNOWN or type(v) is Span
                       for c, v in zip(cols, key, strict=True))]
