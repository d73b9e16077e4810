"""Parity: the Cython twins in ``cython_ext.records`` equal the pure kernels on random input."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from cython_ext import python_twins
from engine.dataflow import records

fast = cython_ext.load_pair("records")
PURE = python_twins(records)


def _pure(name: str) -> Any:
    return PURE[name]


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.records is not built: run `make compile`"

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                   st.text(max_size=8), st.binary(max_size=8),
                   st.decimals(allow_nan=False, places=2), st.dates())
ROWS = st.lists(VALUES, min_size=0, max_size=4).map(tuple)
SMALL_ROWS = st.tuples(st.integers(0, 3), st.sampled_from(("a", "b", None)))
#: Up to 14 distinct rows per key (a small bag outgrows its list) with print variants and NaN.
BAG_ROWS = st.tuples(st.integers(0, 3), st.sampled_from(
    ("a", "b", None, 1, 2, 3, 4, 5, 6, 7, Decimal("1.0"), Decimal("1.00"), float("nan"))))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(SMALL_ROWS, st.integers(-3, 3)), max_size=30))
def test_consolidate(delta: list[tuple[tuple[object, ...], int]]) -> None:
    assert fast is not None
    assert fast.consolidate(delta) == _pure("consolidate")(delta)


@settings(max_examples=100, deadline=None)
@given(ROWS)
def test_exact_key(row: tuple[object, ...]) -> None:
    assert fast is not None
    assert fast.exact_key(row) == _pure("exact_key")(row)


def test_exact_key_separates_what_prints_differently() -> None:
    exact = _pure("exact_key")
    assert exact((Decimal("1.0"),)) != exact((Decimal("1.00"),))
    assert exact((0.0,)) != exact((-0.0,))
    assert exact((float("nan"), 1)) == exact((float("nan"), 1))
    assert exact((1, "a")) == (1, "a")
    mixed = [((Decimal("1.0"),), 1), ((Decimal("1.00"),), -1), ((float("nan"),), 1),
             ((float("nan"),), -1)]
    assert [(str(r[0]), w) for r, w in _pure("consolidate")(mixed)] == [("1.0", 1),
                                                                        ("1.00", -1)]


@settings(max_examples=100, deadline=None)
@given(ROWS)
def test_row_size_and_key_of(row: tuple[object, ...]) -> None:
    assert fast is not None
    assert fast.row_size(row) == _pure("row_size")(row)
    cols = tuple(range(len(row)))[::-1]
    assert fast.key_of(row, cols) == _pure("key_of")(row, cols)
    assert fast.key_of(row, cols[:1]) == _pure("key_of")(row, cols[:1])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(BAG_ROWS, st.integers(-2, 2)), max_size=40),
       st.sets(st.integers(0, 3)))
def test_apply_bag(delta: list[tuple[tuple[object, ...], int]], present: set[int]) -> None:
    """Bags of both forms: keys 0 and 2 start as dicts, 1 and 3 as small lists (which a
    long delta makes outgrow ``SMALL_BAG``)."""
    assert fast is not None
    delta = [(r, w) for r, w in delta if w]
    results = []
    for fn in (fast.apply_bag, _pure("apply_bag")):
        state: dict[tuple[object, ...], Any] = {
            (k,): {(k, v): [(k, v), 5] for v in ("a", None, "b")} if k % 2 == 0 else
            [x for v in ("a", None, "b") for x in ((k, v), 5)] for k in present}
        answers = {(k,): () for k in range(4)}
        before = {k: _pure("bag_size")(bag) for k, bag in state.items()}
        total = fn(state, answers, list(delta), (0,))
        after = {k: _pure("bag_size")(bag) for k, bag in state.items()}
        assert total == sum(after.values()) - sum(before.values())
        results.append((state, answers, total))
    assert results[0] == results[1]


def test_decimal_and_text_sizes() -> None:
    assert fast is not None
    row = (1, Decimal("2.5"), "abc", b"xy", None, True, 1.5)
    assert fast.row_size(row) == _pure("row_size")(row) == 40 + 56 + 32 + 104 + 52 + 35 + 24




def test_row_size_tracks_the_measured_size() -> None:
    """The fixed per-type sizes stay close to what ``sys.getsizeof`` measures."""
    import sys

    rows = [(1, 2**40, "hello world", None, True), (Decimal("12.50"), 3.25, b"\x00" * 10),
            tuple(range(8)), ("x" * 100,)]
    for row in rows:
        measured = sys.getsizeof(row) + sum(
            sys.getsizeof(v) for v in row if v is not None and not isinstance(v, bool))
        estimate = _pure("row_size")(row)
        assert abs(estimate - measured) <= 0.15 * measured, (row, estimate, measured)


@settings(max_examples=100, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_decimal_scale_matches_the_exponent(value: Decimal) -> None:
    from engine.dataflow.ops.accumulators import decimal_scale

    exp = value.as_tuple().exponent
    assert isinstance(exp, int)
    assert decimal_scale(value) == max(0, -exp)


ACC = cython_ext.load_pair("accumulators")
NUMERICS = st.one_of(st.none(), st.integers(-1000, 1000),
                     st.decimals(allow_nan=False, places=3, min_value=-1000, max_value=1000),
                     st.sampled_from((Decimal("NaN"), Decimal("Infinity"),
                                      Decimal("-Infinity"), Decimal("1E+2"),
                                      Decimal("0.00"), Decimal("-0"), Decimal("7E+3000"),
                                      10**1000)))


def test_accumulator_twins_are_built() -> None:
    assert ACC is not None, "cython_ext.accumulators is not built: run `make compile`"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(NUMERICS, st.sampled_from((1, 1, -1, 2))), max_size=12))
def test_accumulator_parity(ops: list[tuple[object, int]]) -> None:
    from engine.dataflow import pgmath
    from engine.dataflow.ops import accumulators as pure
    from engine.values import oids as T

    assert ACC is not None
    ACC.configure(pgmath.CTX, pgmath.finish_sum, pgmath.finish_avg, T.NUMERIC)
    for name, oid, ints_only in (("CountStar", T.INT8, False), ("Count", T.INT8, False),
                                 ("IntSum", T.INT8, True), ("NumericSum", T.NUMERIC, False),
                                 ("NumericAvg", T.NUMERIC, False)):
        a, b = python_twins(pure)[name](oid), getattr(ACC, name)(oid)
        for value, weight in ops:
            if ints_only and isinstance(value, Decimal):
                continue
            a.add(value, weight)
            b.add(value, weight)
        assert str(_value(a)) == str(_value(b)), name
    for value, _ in ops:
        if isinstance(value, Decimal) and value.is_finite():
            assert ACC.decimal_scale(value) == pure.decimal_scale_python(value)


def _value(acc: Any) -> object:
    try:
        return acc.value()
    except Exception as exc:  # the same error on both sides (e.g. avg of nothing overflow)
        return type(exc).__name__


#: Values that are equal but print differently, NaNs (not equal to themselves) and plain ones.
TRICKY = st.sampled_from((Decimal("1.0"), Decimal("1.00"), Decimal(1), Decimal("-0"),
                          Decimal(0), Decimal("NaN"), float("nan"), 0.0, -0.0, 1.0, 1, "a"))
TRICKY_ROWS = st.tuples(st.integers(0, 2), TRICKY)


def _exact_multiset(delta: list[tuple[tuple[object, ...], int]]) -> dict[object, int]:
    out: dict[object, int] = {}
    for row, w in delta:
        k = _pure("exact_key")(row)
        out[k] = out.get(k, 0) + w
    return {k: n for k, n in out.items() if n}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(TRICKY_ROWS, st.integers(-2, 2)), max_size=20))
def test_row_keyed_consolidate_and_bags_equal_exact_keying(
        delta: list[tuple[tuple[object, ...], int]]) -> None:
    """Keying by the row with print-variant pairs gives what keying by ``exact_key`` gives."""
    assert fast is not None
    want = _exact_multiset(delta)
    impls: tuple[dict[str, Any], ...] = (fast.__dict__, PURE)
    for impl in impls:
        got = impl["consolidate"](delta)
        assert [(repr(r), w) for r, w in got] == [
            (repr(r), w) for r, w in _pure("_consolidate_exact")(delta)]
        starts: tuple[Any, ...] = ([], {})
        for start in starts:  # a bag starts as a list (and may outgrow it) or as a dict
            bag: Any = start
            for row, w in delta:
                if w:
                    bag = impl["bag_add"](bag, row, w)
            pairs = [bag] if isinstance(bag, list) else list(bag.values())
            assert all(n != 0 for entry in pairs for n in entry[1::2])
            assert _exact_multiset([(r, 1) for r in impl["bag_rows"](bag)]) == {
                k: n for k, n in want.items() if n > 0}
            assert impl["bag_size"](bag) == sum(
                _pure("row_size")(entry[i]) * entry[i + 1]
                for entry in pairs for i in range(0, len(entry), 2))
        for a, _ in delta:
            for b, _ in delta:
                same = _pure("exact_key")(a) == _pure("exact_key")(b)
                assert impl["row_key"](a) != impl["row_key"](b) or (
                    impl["same_print"](a, b) == same)
