"""The interval set of range-partial state (``engine.dataflow.state.intervals``) against a
model: integer values and the open gaps between them as *atoms* (value v is atom 2v, the gap
between v and v + 1 atom 2v + 1; NULL one atom past them all), a span as the set of atoms it
covers."""

from __future__ import annotations

from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dataflow.state.intervals import HIGH, TOP, Pieces, Span, value_order
from engine.values import TextValue
from engine.values import oids as T

LOW_ATOM, HIGH_ATOM = -10, 40  # beyond every value drawn (-3..17)
NULL_ATOM = HIGH_ATOM + 1  # NULL: past every value (top-k state over a nullable column)
VALUES = range(-3, 18)


def atoms(span: Span) -> set[int]:
    if span.empty:
        return set()
    if span.only_nulls:
        return {NULL_ATOM}
    a = LOW_ATOM if span.lo is None else 2 * span.lo + (0 if span.lo_incl else 1)
    b = HIGH_ATOM if span.hi is None else 2 * span.hi - (0 if span.hi_incl else 1)
    return set(range(a, b + 1)) | ({NULL_ATOM} if span.nulls else set())


def _span(lo: int | None, li: bool, hi: int | None, hi_i: bool, mode: int) -> Span:
    """mode 0: values only; 1: reaching the NULL point (unbounded above); 2: NULL only."""
    if mode == 2:
        return Span(0, T.INT4, nulls=True, only_nulls=True)
    if mode == 1:
        return Span(0, T.INT4, lo, li, nulls=True)
    return Span(0, T.INT4, lo, li, hi, hi_i)


bound = st.one_of(st.none(), st.integers(-3, 17))
spans = st.builds(_span, bound, st.booleans(), bound, st.booleans(),
                  st.sampled_from([0, 0, 0, 1, 2]))
ops = st.lists(st.tuples(st.sampled_from(["add", "remove", "gaps", "reach", "down"]), spans,
                         st.integers(0, 50)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_pieces_match_the_atom_model(steps: list[tuple[str, Span, int]]) -> None:
    pieces = Pieces(Span(0, T.INT4))
    covered: set[int] = set()
    for op, span, pick in steps:
        if op == "add":
            before = set(covered)
            added = pieces.add(span)
            got = [atoms(p) for p in added]
            assert all(not (g & before) for g in got)  # only what was not filled
            assert set().union(*got) == atoms(span) - before if got else atoms(span) <= before
            covered |= atoms(span)
        elif op == "remove" and len(pieces):
            piece = list(pieces)[pick % len(pieces)]
            assert pieces.remove(piece)
            assert not pieces.remove(piece)
            covered -= atoms(piece)
        elif op == "gaps":
            gaps = pieces.gaps(span)
            union: set[int] = set().union(*(atoms(g) for g in gaps)) if gaps else set()
            assert union == atoms(span) - covered
        elif op == "reach":
            start = span.start
            reach = pieces.reach(start)
            first = LOW_ATOM if span.lo is None else 2 * span.lo + (0 if span.lo_incl else 1)
            if span.only_nulls:
                first = NULL_ATOM
            if (span.lo is None and not span.only_nulls) or first not in covered:
                if span.lo is not None or span.only_nulls:
                    assert reach is None
                continue
            assert reach is not None
            end = first
            while end + 1 in covered:
                end += 1
            point, value = reach
            if point == TOP:
                assert end == NULL_ATOM
            elif point == HIGH:
                assert end >= HIGH_ATOM - 1 and NULL_ATOM not in covered
            else:  # the reach ends just after ``end``: the cut point of that atom's end
                probe = Span(0, T.INT4, hi=value, hi_incl=point[1] == 2)
                assert max(atoms(probe)) == end
        elif op == "down" and (span.hi is not None or span.nulls):
            last = NULL_ATOM if span.nulls else 2 * span.hi - (0 if span.hi_incl else 1)
            down = pieces.reach_down(span.end)
            if last not in covered:
                assert down is None
            else:
                assert down is not None
                begin = last
                while begin - 1 in covered:
                    begin -= 1
                point, value = down
                probe = Span(0, T.INT4, lo=value, lo_incl=point[1] == 0)
                if point == HIGH:
                    assert begin == NULL_ATOM
                else:
                    assert point == pieces.template.start or min(atoms(probe)) == begin
        spans_now = list(pieces)
        assert sum(len(atoms(p)) for p in spans_now) == len(covered)  # disjoint pieces
        for v in VALUES:
            assert pieces.contains(v) == (2 * v in covered)
        assert pieces.contains(None) == (NULL_ATOM in covered)


def test_span_bounds_and_order_of_extremes() -> None:
    span = Span(0, T.DATE, lo=date(2024, 1, 1), lo_incl=False)
    assert not span.holds(date(2024, 1, 1)) and span.holds(date(2024, 1, 2))
    assert span.holds(TextValue(T.DATE, "infinity"))
    assert not span.holds(TextValue(T.DATE, "-infinity")) and not span.holds(None)
    assert value_order(TextValue(T.DATE, "0044-03-15 BC"), T.DATE) < value_order(
        date(1, 1, 1), T.DATE)
    empty = Span(0, T.INT4, lo=5, hi=3)
    pieces = Pieces(Span(0, T.INT4))
    assert pieces.add(empty) == [] and pieces.gaps(empty) == []
    assert not Span(0, T.INT4, empty=True).holds(1)
    text = Span(0, T.TEXT, lo="a", lo_incl=True, hi="b")
    assert text.holds("ab") and not text.holds("b") and not text.holds("B")


def test_null_point_past_every_value() -> None:
    """NULL is one point past HIGH: a span with ``nulls`` holds it, a range never does; the
    gap of a values-only piece under a span with ``nulls`` is the NULL point alone."""
    both = Span(0, T.INT4, lo=3, nulls=True)
    assert both.holds(None) and both.holds(4) and not both.holds(3)
    assert not Span(0, T.INT4, lo=3).holds(None) and not Span(0, T.INT4).holds(None)
    only = Span(0, T.INT4, nulls=True, only_nulls=True)
    assert only.holds(None) and not only.holds(10**9) and only.start == HIGH
    assert only.end == TOP
    pieces = Pieces(Span(0, T.INT4))
    pieces.add(Span(0, T.INT4))
    assert pieces.gaps(Span(0, T.INT4, nulls=True)) == [only]
    assert pieces.holding(None) is None and pieces.add(only) == [only]
    assert pieces.holding(None) == only and pieces.reach(Span(0, T.INT4).start) == (TOP, None)
    assert pieces.reach_down(TOP) == (Span(0, T.INT4).start, None)
