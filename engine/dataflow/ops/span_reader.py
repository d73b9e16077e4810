"""The reader of a range-partial cache: filled intervals of one column instead of keys.

Owns: ``SpanReaderNode`` - per value of its equality key (``()`` without one) a ``Strip``:
the rows (filtered, projected) with that key whose span column lies in one of the strip's
filled pieces (``intervals.Pieces``), sorted by that column (a stretch is found by
bisection) - and the finished answer per lookup key ``(key values..., Span)``: the rows of
the span (or, with ``first``, its first rows in ascending order), sorted, as output
columns. ``docs/architecture.md`` "range-partial state" states the design.

Invariants: R - every row of the reader's input whose value lies in a piece is held,
and no other row is; a piece is only added over an interval the base's pieces cover, and a
base row of a piece that stops being stored reaches the reader as an eviction row, which
drops the piece holding it. Any change that reaches the reader drops its memoized answers.
An eviction row whose span column or equality key is UNKNOWN (or a value with no order)
drops every piece of every strip - except an UNKNOWN span value of a fixed-width type over
filters, projections and joins of bases, which stands for no row of a piece (``fixed``).
Keyed on another table of the join than the span (``cross``): the replay is driven from
the key's table and each join value's base pieces answer a stretch (``PullCtx.cover``);
eviction rows drop by key and value (``_cross_evict``), never skipping an UNKNOWN value.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable
from typing import Any

from engine.dataflow.node import Node, PullCtx, Runtime
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.ops.filter import FilterNode
from engine.dataflow.ops.join import JoinNode
from engine.dataflow.ops.project import ProjectNode
from engine.dataflow.ops.reader import Answer, ReaderNode
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import UNKNOWN, Delta, Row, exact_key, has_unknown, key_of, row_size
from engine.dataflow.state.intervals import Pieces, Point, Span, from_points
from engine.plan import ir
from engine.values import oids as T

_ALL = object()  # a value whose piece cannot be told: every piece
#: span column types whose values are never TOASTed (``SpanReaderNode.fixed``)
_FIXED = frozenset({T.INT2, T.INT4, T.INT8, T.DATE, T.TIMESTAMP, T.TIMESTAMPTZ})


def _plain(node: Node) -> bool:
    """Whether ``node`` and everything below it are filters, projections, joins and base
    tables (no node with state of its own)."""
    if type(node) is BaseNode:
        return True
    return type(node) in (FilterNode, ProjectNode, JoinNode) \
        and all(_plain(n) for n in node.inputs)


class Strip:
    """One equality-key value's filled pieces and the rows in them, sorted by the span
    column with each row's point on the line (a stretch is found by bisection)."""

    __slots__ = ("pieces", "points", "rows")

    def __init__(self, template: Span) -> None:
        self.pieces = Pieces(template)
        self.points: list[Point] = []
        self.rows: list[Row] = []

    def count(self, start: Point, end: Point) -> int:
        return bisect_left(self.points, end) - bisect_left(self.points, start)

    def inside(self, start: Point, end: Point, first: int | None = None,
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


class SpanReaderNode(ReaderNode):
    def __init__(self, nid: int, source: Node, plan: ir.Reader, runtime: Runtime) -> None:
        super().__init__(nid, source, plan, runtime)
        assert plan.span is not None
        self.col = plan.span
        self.template = Span(self.col, plan.input.columns[self.col].type_oid)
        traced = source.span_columns((*self.key, self.col))  # (through joins too)
        #: the equality key is on another table of the join than the span column: the
        #: span's base keeps pieces per join value, the replay is driven from the key's
        #: table (``JoinNode.pull``), and eviction rows drop by ``_cross_evict``
        self.cross = traced is None and bool(self.key)
        if self.cross:
            traced = source.span_columns((self.col,))
        if traced is None:
            raise ValueError("a range-partial reader needs its range column (and its key "
                             "columns, unless on another table of a join) traced to a base")
        self.base: Any = traced[0]
        self.base_col: int = traced[1][self.col]  # type: ignore[assignment]
        #: the base columns of a fill: the equality key's, then the span column's
        self.base_cols: tuple[int, ...] = (*(traced[1][c] for c in self.key),  # type: ignore
                                           self.base_col) if not self.cross else ()
        #: per equality-key value (``()`` without an equality key)
        self.strips: dict[Row, Strip] = {}
        #: the memoized answers' keys per equality-key value (a change drops its own)
        self.asked: dict[Row, set[Row]] = {}
        #: the span column is of a fixed-width type, never an unchanged TOAST value, and the
        #: input is filters, projections and joins of base tables only: an eviction row whose
        #: span value is UNKNOWN then stands for no row of a piece. Every UNKNOWN such a
        #: graph makes is a base's key row (an index key made missing: the rows it unstores
        #: come as rows of their own), an unchanged TOAST value of a row the base does not
        #: store, or a join's unknown partner (the rows of a side, for a join value, that
        #: its base does not store; the stored ones come paired as rows of their own, each
        #: dropping the piece holding it). By invariant R a piece's rows are stored, and so
        #: are the other sides' rows its replay joined them with (their keys stay present
        #: while the piece does: their eviction's rows drop it). So a write to a join's
        #: other side drops only the pieces holding its partners. An aggregate or another
        #: stateful node below may emit UNKNOWN for rows it does hold: every piece, then.
        self.fixed = self.template.type_oid in _FIXED and _plain(source) and not self.cross

    def _put(self, strip: Strip, row: Row, w: int) -> bool:
        """Add ``w`` copies of ``row`` (remove them when negative); False when a row to
        remove is not there (then the caller drops everything)."""
        p = self.template.point(row[self.col])  # (NULL: the point past every value)
        points, rows = strip.points, strip.rows
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
    def _piece(self, row: Row) -> tuple[Strip | None, Span | object | None]:
        """The strip of ``row``'s equality values and the piece holding its value (``_ALL``
        when that cannot be told)."""
        prefix = key_of(row, self.key)
        value = row[self.col]
        if value is UNKNOWN or has_unknown(prefix):
            return None, _ALL
        strip = self.strips.get(prefix)
        if strip is None:
            return None, None
        try:
            return strip, strip.pieces.holding(value)
        except (TypeError, ValueError):
            return None, _ALL

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        changed: set[Row] = set()
        for row, w in deltas[0]:
            strip, where = self._piece(row)
            if where is _ALL or (strip is not None and where is not None
                                 and not self._put(strip, row, w)):
                self._drop_all()
                return [], []
            if where is not None:
                changed.add(key_of(row, self.key))
        for prefix in changed:
            self._drop_answers(prefix)
        return [], []

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        if self.cross:
            self._cross_evict(rows[0])
            return []
        for row in rows[0]:
            if self.fixed and row[self.col] is UNKNOWN:
                continue  # (no row of a piece: see ``fixed``)
            strip, where = self._piece(row)
            if where is _ALL:
                self._drop_all()
                return []
            if strip is not None and isinstance(where, Span):
                self._drop_piece(key_of(row, self.key), strip, where)
        return []

    def _cross_evict(self, rows: list[Row]) -> None:
        """Eviction rows of a reader keyed on another table than its span: a row's pieces
        rest on the rows of both tables, so an UNKNOWN span value with a known key drops
        that key's strip (a key-side row whose span-side partners are not all stored), an
        UNKNOWN key with a known value drops the piece holding it in every strip (a
        span-side row whose key-side partner is not stored), both UNKNOWN drop everything;
        a known row drops the piece holding it (invariant R, ``docs/architecture.md``)."""
        for row in rows:
            prefix = key_of(row, self.key)
            value = row[self.col]
            if has_unknown(prefix):
                if value is UNKNOWN:
                    self._drop_all()
                    return
                for strip_key, strip in list(self.strips.items()):
                    if not self._drop_holding(strip_key, strip, value):
                        return
            elif value is UNKNOWN:
                gone = self.strips.pop(prefix, None)
                if gone is not None:
                    self.bytes -= sum(row_size(r) for r in gone.rows)
                self._drop_answers(prefix)
            else:
                mine = self.strips.get(prefix)
                if mine is not None and not self._drop_holding(prefix, mine, value):
                    return

    def _drop_holding(self, prefix: Row, strip: Strip, value: Any) -> bool:
        """Drop the piece of ``strip`` holding ``value``; False after dropping everything
        (a value with no order)."""
        try:
            piece = strip.pieces.holding(value)
        except (TypeError, ValueError):
            self._drop_all()
            return False
        if piece is not None:
            self._drop_piece(prefix, strip, piece)
        return True

    def evict_key(self, key: Hashable) -> list[Row]:
        """An answer's key: its equality value's strip goes with it (a strip and the
        answers read from it are one unit of recency)."""
        prefix = key[:-1]  # type: ignore[index]
        strip = self.strips.pop(prefix, None)
        if strip is not None:
            self.bytes -= sum(row_size(r) for r in strip.rows)
        self._drop_answers(prefix)
        if key in self.answers:  # (a NULL or empty span's answer: no strip)
            self._forget(key)
        return []

    def clear(self) -> None:
        self._drop_all()

    def _remember(self, key: Row, answer: Answer) -> None:
        self.answers[key] = answer
        self.asked.setdefault(key[:-1], set()).add(key)

    def _forget(self, key: Row) -> None:
        if self.rt.watched:
            self.rt.dropping(self.nid, key)
        del self.answers[key]
        self.rt.forget(self.nid, key)
        keys = self.asked.get(key[:-1])
        if keys is not None:
            keys.discard(key)

    def _drop_answers(self, prefix: Row | None = None) -> None:
        """The memoized answers of one equality value (None: all of them)."""
        if prefix is None:
            keys = list(self.answers)
            self.asked = {}
        else:
            keys = list(self.asked.pop(prefix, ()))
        for k in keys:
            if k in self.answers:
                self._forget(k)

    def _drop_piece(self, prefix: Row, strip: Strip, piece: Span) -> None:
        strip.pieces.remove(piece)
        i, j = bisect_left(strip.points, piece.start), bisect_left(strip.points, piece.end)
        self.bytes -= sum(row_size(r) for r in strip.rows[i:j])
        del strip.points[i:j], strip.rows[i:j]
        self._drop_answers(prefix)

    def _drop_all(self) -> None:
        self.strips = {}
        self.bytes = 0
        self._drop_answers()

    # ------------------------------------------------------------------ reads
    def lookup(self, key: Row) -> Answer | None:
        answer = self.answers.get(key)
        if answer is None:
            answer = self._answer(key)
            if answer is None:
                return None
            self._remember(key, answer)
        self.rt.touch(self.nid, key)
        return answer

    def _answer(self, key: Row) -> Answer | None:
        """The answer when the pieces hold it, else None."""
        span: Span = key[-1]
        if span.empty or span.start >= span.end or None in key:
            return ()
        strip = self.strips.get(key[:-1])
        if strip is None:
            return None
        if span.from_top:  # the top rows: the coverage contiguous below the end
            down = strip.pieces.reach_down(span.end)
            if down is None:
                return None
            start = max(down[0], span.start)
            if down[0] > span.start and strip.count(start, span.end) < (span.first or 0):
                return None
            return self._finish_span(span, strip.inside(start, span.end, span.first, True))
        reach = strip.pieces.reach(span.start)
        if reach is None:
            return None
        if reach[0] >= span.end:
            end = span.end
        elif span.first is not None and strip.count(span.start, reach[0]) >= span.first:
            end = reach[0]
        else:
            return None
        return self._finish_span(span, strip.inside(span.start, end, span.first))

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
        prefix = key[:-1]
        while True:
            answer = self._answer(key)
            if answer is not None:
                self._remember(key, answer)
                self.rt.touch(self.nid, key)
                return answer
            strip = self.strips.get(prefix) or Strip(self.template)
            if self.cross:
                if not self._fill_cross(strip, prefix, span, ctx):
                    return None
                continue
            slots = self.base.store.spans.get(self.base_cols)
            pieces = slots.get(prefix) if slots is not None else None
            if span.from_top:
                part = self._hole_down(strip, prefix, span, pieces, ctx)
            else:
                part = self._hole_up(strip, prefix, span, pieces, ctx)
            if part is None:
                return None
            rows = self.inputs[0].pull((*self.key, self.col), (*prefix, part), ctx)
            if rows is None:
                return None
            self.strips[prefix] = strip
            self._add(strip, part, rows)

    def _fill_cross(self, strip: Strip, prefix: Row, span: Span, ctx: PullCtx) -> bool:
        """One replay of the hole of a reader keyed on another table than its span: the
        whole hole (with the rows still needed as ``first``) is pulled through the join,
        driven from the key's table (``JoinNode.pull``); each join value's base pull
        answers the stretch its pieces cover, or misses it (a fill per join value). The
        piece added is the hole up to the nearest stretch end (``PullCtx.cover``): every
        join value's rows there are in; False when something is missing."""
        if span.from_top:
            down = strip.pieces.reach_down(span.end)
            near = (span.end, span.hi) if down is None else down
            have = strip.count(max(down[0], span.start), span.end) if down else 0
            hole = from_points(span, (span.start, span.lo), near,
                               max((span.first or 0) - have, 1) if span.first else None,
                               from_top=True)
        else:
            reach = strip.pieces.reach(span.start)
            near = (span.start, span.lo) if reach is None else reach
            need = None
            if span.first is not None:
                have = strip.count(span.start, near[0]) if reach is not None else 0
                need = max(span.first - have, 1)
            hole = from_points(span, near, (span.end, span.hi), need)
        cover, ctx.cover = ctx.cover, []
        try:
            rows = self.inputs[0].pull((*self.key, self.col), (*prefix, hole), ctx)
            ends = ctx.cover
        finally:
            ctx.cover = cover
        if rows is None:
            return False
        if span.from_top:
            far = max(ends, default=(hole.start, hole.lo), key=lambda e: e[0])
            part = from_points(span, far, near)
        else:
            far = min(ends, default=(hole.end, hole.hi), key=lambda e: e[0])
            part = from_points(span, near, far)
        self.strips[prefix] = strip
        col = self.col
        self._add(strip, part, [r for r in rows if part.holds(r[col])])
        return True

    def _missing(self, prefix: Row, hole: Span, ctx: PullCtx) -> None:
        ctx.missing.add((self.base.nid, self.base_cols, (*prefix, hole.on(self.base_col))))

    def _hole_up(self, strip: Strip, prefix: Row, span: Span, pieces: Pieces | None,
                 ctx: PullCtx) -> Span | None:
        """The part of the hole above the coverage from ``span``'s start that the base
        covers, or None after recording the base's first gap as missing."""
        reach = strip.pieces.reach(span.start)
        start = (span.start, span.lo) if reach is None else reach
        need = None
        if span.first is not None:  # rows the pieces hold already count
            have = strip.count(span.start, start[0]) if reach is not None else 0
            need = max(span.first - have, 1)
        hole = from_points(span, start, (span.end, span.hi), need)
        breach = pieces.reach(hole.start) if pieces is not None else None
        if breach is None:
            self._missing(prefix, hole, ctx)
            return None
        return from_points(span, start, breach if breach[0] < span.end else (span.end, span.hi))

    def _hole_down(self, strip: Strip, prefix: Row, span: Span, pieces: Pieces | None,
                   ctx: PullCtx) -> Span | None:
        """:meth:`_hole_up` mirrored: the hole below the coverage that reaches the end."""
        down = strip.pieces.reach_down(span.end)
        end = (span.end, span.hi) if down is None else down
        have = strip.count(max(down[0], span.start), span.end) if down else 0
        need = max((span.first or 0) - have, 1)
        hole = from_points(span, (span.start, span.lo), end, need, from_top=True)
        below = pieces.reach_down(hole.end) if pieces is not None else None
        if below is None:
            self._missing(prefix, hole, ctx)
            return None
        return from_points(span, below if below[0] > span.start else (span.start, span.lo), end)

    def _add(self, strip: Strip, part: Span, rows: list[Row]) -> None:
        col = self.col
        fresh = [r for r in rows if not strip.pieces.contains(r[col])]
        strip.pieces.add(part)  # (answers stay: a fill changes no row of a filled piece)
        for row in fresh:
            self._put(strip, row, 1)
