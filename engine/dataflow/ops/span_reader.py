"""The reader of a range-partial cache: filled intervals of one column instead of keys.

Owns: ``SpanReaderNode`` - the rows (filtered, projected) whose span column lies in one of
its filled pieces (``intervals.Pieces``), sorted by that column (a stretch is found by
bisection), and the finished answer per lookup key
``(Span,)``: the rows of the span (or, with ``first``, its first rows in ascending order),
sorted, as output columns. ``docs/architecture.md`` "range-partial state" states the design.

Invariants: R - every row of the reader's input whose value lies in a piece is held,
and no other row is; a piece is only added over an interval the base's pieces cover, and a
base row of a piece that stops being stored reaches the reader as an eviction row, which
drops the piece holding it. Any change that reaches the reader drops its memoized answers.
An eviction row whose span column is UNKNOWN (or a value with no order) drops every piece.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from typing import Any

from engine.dataflow.node import Node, PullCtx, Runtime
from engine.dataflow.ops.reader import Answer, ReaderNode
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import UNKNOWN, Delta, Row, exact_key, row_size
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
        #: the rows (each as often as its multiplicity) sorted by the span column, and
        #: each one's point on the line: a stretch is found by bisection
        self.points: list[Point] = []
        self.rows: list[Row] = []

    def _put(self, row: Row, w: int) -> bool:
        """Add ``w`` copies of ``row`` (remove them when negative); False when a row to
        remove is not there (then the caller drops everything)."""
        p = self.pieces.template.point(row[self.col])
        assert p is not None  # (a row in a piece: never NULL)
        points, rows = self.points, self.rows
        if w > 0:
            i = bisect_right(points, p)
            points[i:i] = [p] * w
            rows[i:i] = [row] * w
            self.bytes += row_size(row) * w
            return True
        exact = exact_key(row)
        for _ in range(-w):
            j = bisect_left(points, p)
            while j < len(points) and points[j] == p and exact_key(rows[j]) != exact:
                j += 1
            if j == len(points) or points[j] != p:
                return False
            del points[j], rows[j]
            self.bytes -= row_size(row)
        return True

    # ------------------------------------------------------------------ changes
    def _piece(self, value: Any) -> Span | object | None:
        if value is UNKNOWN:
            return _ALL
        try:
            return self.pieces.holding(value)
        except (TypeError, ValueError):
            return _ALL

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        col, changed = self.col, False
        for row, w in deltas[0]:
            where = self._piece(row[col])
            if where is _ALL or (where is not None and not self._put(row, w)):
                self._drop_all()
                return [], []
            changed = changed or where is not None
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
        i, j = bisect_left(self.points, piece.start), bisect_left(self.points, piece.end)
        self.bytes -= sum(row_size(r) for r in self.rows[i:j])
        del self.points[i:j], self.rows[i:j]
        self._drop_answers()

    def _drop_all(self) -> None:
        self.pieces.clear()
        self.points, self.rows = [], []
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

    def _inside(self, start: Point, end: Point, first: int | None = None,
                top: bool = False) -> list[Row]:
        """The rows between two cut points; with ``first``, only the ``first`` lowest
        (``top``: highest) of them and the ties of the last one."""
        points = self.points
        i, j = bisect_left(points, start), bisect_left(points, end)
        if first is not None and first <= 0:
            return []
        if first is not None and j - i > first:
            if top:
                i = bisect_left(points, points[j - first], i, j)
            else:
                j = bisect_right(points, points[i + first - 1], i, j)
        return self.rows[i:j]

    def _count(self, start: Point, end: Point) -> int:
        return bisect_left(self.points, end) - bisect_left(self.points, start)

    def _answer(self, span: Span) -> Answer | None:
        """The answer when the pieces hold it, else None."""
        if span.empty or span.start >= span.end:
            return ()
        if span.from_top:  # the top rows: the coverage contiguous below the end
            down = self.pieces.reach_down(span.end)
            if down is None:
                return None
            start = max(down[0], span.start)
            if down[0] > span.start and self._count(start, span.end) < (span.first or 0):
                return None
            return self._finish_span(span, self._inside(start, span.end, span.first, True))
        reach = self.pieces.reach(span.start)
        if reach is None:
            return None
        if reach[0] >= span.end:
            end = span.end
        elif span.first is not None and self._count(span.start, reach[0]) >= span.first:
            end = reach[0]
        else:
            return None
        return self._finish_span(span, self._inside(span.start, end, span.first))

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
            have = self._count(span.start, start[0]) if reach is not None else 0
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
        have = self._count(max(down[0], span.start), span.end) if down else 0
        need = max((span.first or 0) - have, 1)
        hole = from_points(span, (span.start, span.lo), end, need, from_top=True)
        below = pieces.reach_down(hole.end) if pieces is not None else None
        if below is None:
            ctx.missing.add((self.base.nid, (self.base_col,), (hole.on(self.base_col),)))
            return None
        return from_points(span, below if below[0] > span.start else (span.start, span.lo), end)

    def _add(self, part: Span, rows: list[Row]) -> None:
        col = self.col
        fresh = [r for r in rows if not self.pieces.contains(r[col])]
        self.pieces.add(part)  # (answers stay: a fill changes no row of a filled piece)
        for row in fresh:
            self._put(row, 1)

