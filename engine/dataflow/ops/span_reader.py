"""The reader of a range-partial cache: filled intervals of one column instead of keys.

Owns: ``SpanReaderNode`` - the rows (filtered, projected) whose span column lies in one of
its filled pieces (``intervals.Pieces``), one bag, and the finished answer per lookup key
``(Span,)``: the rows of the span (or, with ``first``, its first rows in ascending order),
sorted, as output columns. ``docs/architecture.md`` "range-partial state" states the design.

Invariants: R - every row of the reader's input whose value lies in a piece is in the bag,
and no other row is; a piece is only added over an interval the base's pieces cover, and a
base row of a piece that stops being stored reaches the reader as an eviction row, which
drops the piece holding it. Any change that reaches the reader drops its memoized answers.
An eviction row whose span column is UNKNOWN (or a value with no order) drops every piece.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from engine.dataflow.node import Node, PullCtx, Runtime
from engine.dataflow.ops.reader import Answer, ReaderNode
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import UNKNOWN, Bag, Delta, Row, bag_add, bag_rows, row_size
from engine.dataflow.state.intervals import Pieces, Point, Span, from_points
from engine.plan import ir

_ALL = object()  # a value whose piece cannot be told: every piece


class SpanReaderNode(ReaderNode):
    def __init__(self, nid: int, source: Node, plan: ir.Reader, runtime: Runtime) -> None:
        super().__init__(nid, source, plan, runtime)
        assert plan.span is not None
        self.col = plan.span
        self.pieces = Pieces(Span(self.col, plan.input.columns[self.col].type_oid))
        traced = source.base_columns()
        if traced is None or traced[1][self.col] is None:
            raise ValueError("a range-partial reader needs its column traced to a base column")
        self.base: Any = traced[0]
        self.base_col: int = traced[1][self.col]  # type: ignore[assignment]
        self.bag: Bag = []

    # ------------------------------------------------------------------ changes
    def _piece(self, value: Any) -> Span | object | None:
        if value is UNKNOWN:
            return _ALL
        try:
            return self.pieces.holding(value)
        except (TypeError, ValueError):
            return _ALL

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        bag, col, changed = self.bag, self.col, False
        for row, w in deltas[0]:
            where = self._piece(row[col])
            if where is _ALL:
                self._drop_all()
                return [], []
            if where is not None:
                bag = bag_add(bag, row, w)
                self.bytes += row_size(row) * w
                changed = True
        self.bag = bag
        if changed:
            self._drop_answers()
        return [], []

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        col = self.col
        for row in rows[0]:
            where = self._piece(row[col])
            if where is _ALL:
                self._drop_all()
                return []
            if isinstance(where, Span):
                self._drop_piece(where)
        return []

    def evict_key(self, key: Hashable) -> list[Row]:
        self._drop_all()  # (the pieces are one unit of recency)
        return []

    def clear(self) -> None:
        self._drop_all()

    def _drop_answers(self) -> None:
        for k in list(self.answers):
            if self.rt.watched:
                self.rt.dropping(self.nid, k)
            del self.answers[k]
            self.rt.forget(self.nid, k)

    def _drop_piece(self, piece: Span) -> None:
        self.pieces.remove(piece)
        kept: Bag = []
        size = 0
        for row in bag_rows(self.bag):
            if not piece.holds(row[self.col]):
                kept = bag_add(kept, row, 1)
                size += row_size(row)
        self.bag = kept
        self.bytes = size
        self._drop_answers()

    def _drop_all(self) -> None:
        self.pieces.clear()
        self.bag = []
        self.bytes = 0
        self._drop_answers()

    # ------------------------------------------------------------------ reads
    def lookup(self, key: Row) -> Answer | None:
        answer = self.answers.get(key)
        if answer is None:
            answer = self._answer(key[-1])
            if answer is None:
                return None
            self.answers[key] = answer
        self.rt.touch(self.nid, key)
        return answer

    def _inside(self, start: Point, end: Point) -> list[Row]:
        col, point = self.col, self.pieces.template.point
        out = []
        for row in bag_rows(self.bag):
            p = point(row[col])
            if p is not None and start < p < end:
                out.append(row)
        return out

    def _answer(self, span: Span) -> Answer | None:
        """The answer when the pieces hold it, else None."""
        if span.empty or span.start >= span.end:
            return ()
        if span.from_top:  # the top rows: the coverage contiguous below the end
            down = self.pieces.reach_down(span.end)
            if down is None:
                return None
            rows = self._inside(max(down[0], span.start), span.end)
            if down[0] > span.start and len(rows) < (span.first or 0):
                return None
            return self._finish_span(span, rows)
        reach = self.pieces.reach(span.start)
        if reach is None:
            return None
        if reach[0] >= span.end:
            rows = self._inside(span.start, span.end)
        elif span.first is not None:
            rows = self._inside(span.start, reach[0])
            if len(rows) < span.first:
                return None
        else:
            return None
        return self._finish_span(span, rows)

    def _finish_span(self, span: Span, rows: list[Row]) -> Answer:
        if self.sort is not None:
            try:
                rows.sort(key=self.sort)
            except TypeError as exc:  # infinity among dates, say: upstream answers
                raise EvalError("", f"rows weir cannot order: {exc}") from exc
        if span.first is not None:
            rows = rows[:span.first]
        out = self.output
        return tuple(tuple(r[i] for i in out) for r in rows)

    def fill(self, key: Row, ctx: PullCtx) -> Answer | None:
        """Replay the hole of ``key``'s span that the base's pieces cover, as often as that
        helps; the first part they do not cover is a missing base key (an interval fill)."""
        span: Span = key[-1]
        while True:
            answer = self._answer(span)
            if answer is not None:
                self.answers[key] = answer
                self.rt.touch(self.nid, key)
                return answer
            pieces = self.base.store.spans.get(self.base_col)
            if span.from_top:
                part = self._hole_down(span, pieces, ctx)
            else:
                part = self._hole_up(span, pieces, ctx)
            if part is None:
                return None
            rows = self.inputs[0].pull((self.col,), (part,), ctx)
            if rows is None:
                return None
            self._add(part, rows)

    def _hole_up(self, span: Span, pieces: Pieces | None, ctx: PullCtx) -> Span | None:
        """The part of the hole above the coverage from ``span``'s start that the base
        covers, or None after recording the base's first gap as missing."""
        reach = self.pieces.reach(span.start)
        start = (span.start, span.lo) if reach is None else reach
        need = None
        if span.first is not None:  # rows the pieces hold already count
            have = len(self._inside(span.start, start[0])) if reach is not None else 0
            need = max(span.first - have, 1)
        hole = from_points(span, start, (span.end, span.hi), need)
        breach = pieces.reach(hole.start) if pieces is not None else None
        if breach is None:
            ctx.missing.add((self.base.nid, (self.base_col,), (hole.on(self.base_col),)))
            return None
        return from_points(span, start, breach if breach[0] < span.end else (span.end, span.hi))

    def _hole_down(self, span: Span, pieces: Pieces | None, ctx: PullCtx) -> Span | None:
        """:meth:`_hole_up` mirrored: the hole below the coverage that reaches the end."""
        down = self.pieces.reach_down(span.end)
        end = (span.end, span.hi) if down is None else down
        have = len(self._inside(max(down[0], span.start), span.end)) if down else 0
        need = max((span.first or 0) - have, 1)
        hole = from_points(span, (span.start, span.lo), end, need, from_top=True)
        below = pieces.reach_down(hole.end) if pieces is not None else None
        if below is None:
            ctx.missing.add((self.base.nid, (self.base_col,), (hole.on(self.base_col),)))
            return None
        return from_points(span, below if below[0] > span.start else (span.start, span.lo), end)

    def _add(self, part: Span, rows: list[Row]) -> None:
        col, bag = self.col, self.bag
        fresh = [r for r in rows if not self.pieces.contains(r[col])]
        self.pieces.add(part)  # (answers stay: a fill changes no row of a filled piece)
        for row in fresh:
            bag = bag_add(bag, row, 1)
            self.bytes += row_size(row)
        self.bag = bag

