"""The interval set of range-partial state (``engine.dataflow.state.intervals``) against a
model: integer values and the open gaps between them as *atoms* (value v is atom 2v, the gap
between v and v + 1 atom 2v + 1), a span as the set of atoms it covers."""

from __future__ import annotations

from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dataflow.state.intervals import HIGH, Pieces, Span, value_order
from engine.values import TextValue
from engine.values import oids as T

LOW_ATOM, HIGH_ATOM = -10, 40  # beyond every value drawn (-3..17)
VALUES = range(-3, 18)


def atoms(span: Span) -> set[int]:
    if span.empty:
        return set()
    a = LOW_ATOM if span.lo is None else 2 * span.lo + (0 if span.lo_incl else 1)
    b = HIGH_ATOM if span.hi is None else 2 * span.hi - (0 if span.hi_incl else 1)
    return set(range(a, b + 1))


bound = st.one_of(st.none(), st.integers(-3, 17))
spans = st.builds(lambda lo, li, hi, hi_i: Span(0, T.INT4, lo, li, hi, hi_i),
                  bound, st.booleans(), bound, st.booleans())
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
            if span.lo is None or first not in covered:
                if span.lo is not None:
                    assert reach is None
                continue
            assert reach is not None
            end = first
            while end + 1 in covered:
                end += 1
            point, value = reach
            if point == HIGH:
                assert end >= HIGH_ATOM - 1
            else:  # the reach ends just after ``end``: the cut point of that atom's end
                probe = Span(0, T.INT4, hi=value, hi_incl=point[1] == 2)
                assert max(atoms(probe)) == end
        elif op == "down" and span.hi is not None:
            last = 2 * span.hi - (0 if span.hi_incl else 1)  # the atom just below the end
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
                assert point == pieces.template.start or min(atoms(probe)) == begin
        spans_now = list(pieces)
        assert sum(len(atoms(p)) for p in spans_now) == len(covered)  # disjoint pieces
        for v in VALUES:
            assert pieces.contains(v) == (2 * v in covered)
        assert not pieces.contains(None)


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
