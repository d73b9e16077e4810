"""Intervals of one column's values: the ``Span`` key of range-partial state and ``Pieces``.

Owns: ``value_order`` (a non-NULL value's sort key in PostgreSQL's order for its type),
*cut points* (a position just before or just after a value on that order, or the ends of
the line), ``Span`` (an interval with its SQL bounds, the key of a range lookup and of an
interval fill) and ``Pieces`` (a set of disjoint filled intervals: which are filled, where
the coverage contiguous from a point ends, the gaps of an interval).

An interval is ``[a, b)`` in cut points: ``x > v`` starts just after ``v``, ``x >= v`` just
before it, ``x < v`` ends just before it, ``x <= v`` just after it; an unbounded side is
``LOW`` / ``HIGH``. A value is in ``[a, b)`` when ``a < (order, MID) < b``. NULL is one
point past ``HIGH`` (PostgreSQL's default order puts it above every value: last ascending,
first descending), and only a span with ``nulls`` reaches past it (its end is ``TOP``): a
comparison with NULL is never true, so a range's interval never holds it; top-k state over
a nullable column keeps its NULL rows as that point.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_right
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from engine.values import TextValue
from engine.values import oids as T

_TEMPORAL = frozenset({T.DATE, T.TIMESTAMP, T.TIMESTAMPTZ})
Point = tuple[Any, ...]
BEFORE, MID, AFTER = 0, 1, 2
LOW: Point = ((-9,), BEFORE)
HIGH: Point = ((9,), BEFORE)  # the end of the values
NULL_POINT: Point = ((9,), MID)  # where NULL lies: past every value
TOP: Point = ((9,), AFTER)  # past NULL: the end of a span with ``nulls``


def value_order(value: Any, type_oid: int) -> tuple[Any, ...]:
    """A sort key of a non-NULL value in PostgreSQL's order for its type (``infinity`` /
    ``-infinity``, BC years and years after 9999 kept as text by the codecs; NaN above every
    number)."""
    if isinstance(value, TextValue):
        text = value.text
        if text == "infinity":
            return (3, 0)
        if text == "-infinity":
            return (-3, 0)
        if type_oid in _TEMPORAL and text.endswith(" BC"):
            year, _, rest = text.partition("-")
            return (-2, -int(year), rest)
        if type_oid in _TEMPORAL and text[:5].isdigit():
            year, _, rest = text.partition("-")
            return (2, int(year), rest)
        raise ValueError(f"cannot order {text!r}")
    if isinstance(value, float) and math.isnan(value):
        return (1, 0)
    if isinstance(value, Decimal) and value.is_nan():
        return (1, 0)
    return (0, value)


@dataclass(frozen=True, slots=True)
class Span:
    """Rows whose ``column`` lies between ``lo`` and ``hi`` (None: unbounded; ``*_incl``:
    the bound itself included). ``first``: only the first ``first`` rows of the interval in
    ascending order are needed (a lookup: keyset pagination; a fill: fetch up to the
    ``first``-th value and its ties); ``from_top``: ``first`` counts from the high end
    (descending order). ``column`` is a reader input column in a lookup key, a base column
    in a fill. ``empty``: matches nothing (a NULL bound). ``nulls``: the NULL point (past
    every value) is in the span too (its end is ``TOP``, ``hi`` is None); ``only_nulls``:
    the span starts at ``HIGH`` (no value, only NULL; ``lo`` is None)."""

    column: int
    type_oid: int
    lo: Any = None
    lo_incl: bool = False
    hi: Any = None
    hi_incl: bool = False
    first: int | None = None
    empty: bool = False
    from_top: bool = False
    nulls: bool = False
    only_nulls: bool = False

    @property
    def start(self) -> Point:
        if self.lo is None:
            return HIGH if self.only_nulls else LOW
        return (value_order(self.lo, self.type_oid), BEFORE if self.lo_incl else AFTER)

    @property
    def end(self) -> Point:
        if self.hi is None:
            return TOP if self.nulls else HIGH
        return (value_order(self.hi, self.type_oid), AFTER if self.hi_incl else BEFORE)

    def point(self, value: Any) -> Point:
        """Where ``value`` (of this span's column) is on the line (NULL: ``NULL_POINT``)."""
        return NULL_POINT if value is None else (value_order(value, self.type_oid), MID)

    def holds(self, value: Any) -> bool:
        return not self.empty and self.start < self.point(value) < self.end

    def on(self, column: int) -> Span:
        """The same interval on another column (reader input -> base column)."""
        return dataclasses.replace(self, column=column)


def from_points(template: Span, start: tuple[Point, Any], end: tuple[Point, Any],
                first: int | None = None, from_top: bool = False) -> Span:
    """A span of ``template``'s column from cut points that carry their values
    (``(point, value)``; the value is ignored for ``LOW`` / ``HIGH`` / ``TOP``)."""
    (a, lo), (b, hi) = start, end
    a_end, b_end = a in (LOW, HIGH), b in (HIGH, TOP)
    return Span(template.column, template.type_oid,
                None if a_end else lo, not a_end and a[1] == BEFORE,
                None if b_end else hi, not b_end and b[1] == AFTER, first,
                from_top=from_top and first is not None, nulls=b == TOP, only_nulls=a == HIGH)


def bounds(span: Span) -> tuple[tuple[Point, Any], tuple[Point, Any]]:
    """The span's cut points with the values they stand at."""
    return (span.start, span.lo), (span.end, span.hi)


class Pieces:
    """Disjoint filled intervals of one column, sorted, each kept as the ``Span`` it was
    filled as (so an evicted piece is found by its key); adjacent pieces are not merged."""

    __slots__ = ("ends", "spans", "starts", "template")

    def __init__(self, template: Span) -> None:
        self.template = template  # the column and its type
        self.starts: list[Point] = []
        self.ends: list[Point] = []
        self.spans: list[Span] = []

    def __len__(self) -> int:
        return len(self.spans)

    def __iter__(self) -> Any:
        return iter(self.spans)

    def _at(self, p: Point) -> int:
        """The index of the piece holding point ``p`` (start <= p < end), or -1."""
        i = bisect_right(self.starts, p) - 1
        return i if i >= 0 and p < self.ends[i] else -1

    def holding(self, value: Any) -> Span | None:
        """The piece holding ``value`` (None outside every piece; NULL is in a piece that
        reaches ``TOP`` only)."""
        i = self._at(self.template.point(value))
        return self.spans[i] if i >= 0 else None

    def reach(self, start: Point) -> tuple[Point, Any] | None:
        """Where the coverage contiguous from ``start`` ends (with the value there), or None
        when ``start`` is not covered."""
        i = self._at(start)
        if i < 0:
            return None
        while i + 1 < len(self.spans) and self.starts[i + 1] == self.ends[i]:
            i += 1
        return self.ends[i], self.spans[i].hi

    def reach_down(self, end: Point) -> tuple[Point, Any] | None:
        """Where the coverage contiguous up to ``end`` (the point just below it covered)
        starts (with the value there), or None when it is not covered."""
        i = bisect_right(self.starts, end) - 1
        while i >= 0 and self.starts[i] >= end:
            i -= 1
        if i < 0 or end > self.ends[i]:
            return None
        while i > 0 and self.ends[i - 1] == self.starts[i]:
            i -= 1
        return self.starts[i], self.spans[i].lo

    def gaps(self, span: Span) -> list[Span]:
        """The parts of ``span`` no piece covers (``first`` is not carried)."""
        if span.empty:
            return []
        out: list[Span] = []
        cur: tuple[Point, Any] = (span.start, span.lo)
        end = (span.end, span.hi)
        i = max(bisect_right(self.starts, cur[0]) - 1, 0)
        while i < len(self.spans) and self.starts[i] < end[0]:
            piece = self.spans[i]
            if self.ends[i] <= cur[0]:
                i += 1
                continue
            if self.starts[i] > cur[0]:
                out.append(from_points(span, cur, (self.starts[i], piece.lo)))
            cur = (self.ends[i], piece.hi)
            i += 1
            if cur[0] >= end[0]:
                return out
        if cur[0] < end[0]:
            out.append(from_points(span, cur, end))
        return out

    def add(self, span: Span) -> list[Span]:
        """Mark ``span`` filled; the pieces added (its gaps: pieces stay disjoint)."""
        added = self.gaps(span)
        for piece in added:
            i = bisect_right(self.starts, piece.start)
            self.starts.insert(i, piece.start)
            self.ends.insert(i, piece.end)
            self.spans.insert(i, piece)
        return added

    def remove(self, span: Span) -> bool:
        """Drop the piece ``span`` (as added); whether it was there."""
        i = self._at(span.start) if not span.empty else -1
        if i < 0 or self.spans[i] != span:
            return False
        del self.starts[i], self.ends[i], self.spans[i]
        return True

    def clear(self) -> None:
        self.starts.clear()
        self.ends.clear()
        self.spans.clear()

    def contains(self, value: Any) -> bool:
        return self.holding(value) is not None

    def overlapping(self, span: Span) -> list[Span]:
        """The pieces that share a point with ``span``."""
        a, b = span.start, span.end
        return [p for p, s, e in zip(self.spans, self.starts, self.ends, strict=True)
                if s < b and a < e]


def span_of(key: tuple[Any, ...]) -> Span | None:
    """The span of a lookup or fill key whose last value is one, else None."""
    if key and type(key[-1]) is Span:
        return key[-1]
    return None
