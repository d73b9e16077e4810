"""Property: a window partition maintained change by change (``window_state.Partition``)
answers as the recompute (``windows.apply_windows`` over the rows, then the reader's order,
OFFSET and LIMIT) after every batch of random inserts, deletes and updates.

Rows are (id, a, b, t, w0, w1, w2): a unique id, small integers and short texts with NULLs
(many ties), and three window placeholder columns. Windows are row_number, rank, dense_rank,
lag and lead (offsets 1..3) over one to three sort keys, ASC/DESC, NULLS FIRST/LAST/default;
the reader's order may read a window column (sorted at the read). A second property keeps
copies of equal rows (bag multiplicities) under rank/dense_rank. A third runs the running
aggregates (count(*), count, sum, avg, min, max of integers, numerics of several scales and
texts; float sum/avg over an order that cannot tie) over RANGE (peers share a value), ROWS,
sliding ROWS frames (offsets PRECEDING and FOLLOWING on either side, empty frames too) and no
ORDER BY (the whole partition). Each window may be partitioned on columns of the row (not
lookup keys: ``ir.Window.partition``), so that one key's rows are several partitions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dataflow.ordering import order_key, row_key
from engine.dataflow.window_state import Partition
from engine.dataflow.windows import apply_windows, frame_values
from engine.plan import ir
from engine.values import oids as T

Row = tuple[Any, ...]
FUNCS = ("row_number", "rank", "dense_rank", "lag", "lead")


def _value(r: random.Random, col: int) -> Any:
    if r.random() < 0.2:
        return None
    return r.randint(0, 4) if col != 3 else r.choice(("a", "b", "B", "é", ""))


def _row(r: random.Random, rid: int) -> Row:
    return (rid, _value(r, 1), _value(r, 2), _value(r, 3), None, None, None)


def _sort_keys(r: random.Random, columns: tuple[int, ...]) -> tuple[ir.SortKey, ...]:
    cols = r.sample(columns, r.randint(1, min(3, len(columns))))
    return tuple(ir.SortKey(c, r.random() < 0.5, r.choice((None, True, False)))
                 for c in cols)


def _windows(r: random.Random, funcs: tuple[str, ...]) -> tuple[ir.Window, ...]:
    out = []
    for column in range(4, 4 + r.randint(1, 3)):
        func = r.choice(funcs)
        arg = r.choice((0, 1, 3)) if func in ("lag", "lead") else None
        out.append(ir.Window(func, column, _sort_keys(r, (0, 1, 2, 3)), arg,  # type: ignore[arg-type]
                             r.randint(1, 3), partition=_partition(r)))
    return tuple(out)


def _partition(r: random.Random) -> tuple[int, ...]:
    """PARTITION BY columns that are not lookup keys, now and then (NULLs, ties, texts)."""
    return r.choice(((), (), (1,), (3,), (2, 3)))


def _model(rows: list[Row], windows: tuple[ir.Window, ...], order_by: tuple[ir.SortKey, ...],
           output: tuple[int, ...], lo: int, hi: int | None) -> list[Row]:
    full = apply_windows(rows, windows)
    if order_by:
        full.sort(key=order_key(order_by))
    return [tuple(row[i] for i in output) for row in full[lo:hi]]


def _check(part: Partition, rows: list[Row], windows: tuple[ir.Window, ...],
           order_by: tuple[ir.SortKey, ...], output: tuple[int, ...], lo: int,
           hi: int | None) -> None:
    got = list(part.answer())
    want = _model(rows, windows, order_by, output, lo, hi)
    if not order_by:  # no order: the rows in any order
        got, want = sorted(got, key=row_key), sorted(want, key=row_key)
    assert got == want
    assert repr(got) == repr(want)  # numeric scales too (1.0 is not 1.00)


def _exercise(r: random.Random, part: Partition, make_row: Callable[[random.Random, int], Row],
              check: Callable[[list[Row]], None]) -> None:
    """Random rows into ``part``, then rounds of random inserts, deletes and updates; after the
    first fill and after each round, ``check`` compares ``part`` with the rows it holds."""
    rows = {i: make_row(r, i) for i in range(r.randint(0, 12))}
    next_id = len(rows)
    for row in rows.values():
        part.change(row, 1)
    check(list(rows.values()))
    for _ in range(r.randint(1, 12)):
        for _ in range(r.randint(1, 4)):
            kind = r.random()
            if kind < 0.4 or not rows:
                rows[next_id] = make_row(r, next_id)
                part.change(rows[next_id], 1)
                next_id += 1
            elif kind < 0.7:
                part.change(rows.pop(r.choice(list(rows))), -1)
            else:
                rid = r.choice(list(rows))
                old, new = rows[rid], make_row(r, rid)
                part.change(old, -1)
                part.change(new, 1)
                rows[rid] = new
        check(list(rows.values()))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_partition_matches_the_recompute(seed: int) -> None:
    r = random.Random(seed)
    windows = _windows(r, FUNCS)
    columns = tuple(range(4 + len(windows)))
    order_by = (*_sort_keys(r, columns), ir.SortKey(0, False, None)) if r.random() < 0.8 else ()
    numbered = [w.column for w in windows if w.func == "row_number"]
    if numbered and r.random() < 0.3:  # ORDER BY rn [DESC] (the answer follows its list)
        order_by = (ir.SortKey(numbered[0], r.random() < 0.5, None), *order_by)
    output = tuple(r.sample(columns, r.randint(1, len(columns))))
    lo = r.choice((0, 0, 1, 3))
    hi = None if not order_by or r.random() < 0.6 else lo + r.randint(0, 6)
    lo = lo if order_by else 0
    part = Partition(windows, order_by, output, lo, hi)
    _exercise(r, part, _row,
              lambda rows: _check(part, rows, windows, order_by, output, lo, hi))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32))
def test_copies_of_a_row_under_rank(seed: int) -> None:
    r = random.Random(seed)
    windows = _windows(r, ("rank", "dense_rank"))
    output = tuple(range(4 + len(windows)))
    rows: list[Row] = []
    part = Partition(windows, (), output, 0, None)
    for _ in range(r.randint(1, 20)):
        if rows and r.random() < 0.4:
            row = rows.pop(r.randrange(len(rows)))
            w = -1
        else:
            row = (0, *_row(r, 0)[1:]) if r.random() < 0.5 or not rows else r.choice(rows)
            rows.append(row)
            w = 1
        part.change(row, w)
        _check(part, rows, windows, (), output, 0, None)


AGGREGATES = ("count_star", "count", "sum", "avg", "min", "max")


def _agg_row(r: random.Random, rid: int) -> Row:
    num = None if r.random() < 0.2 else Decimal(r.choice(("1", "2.5", "-0.25", "3.10", "0")))
    flt = None if r.random() < 0.2 else r.choice((0.1, 0.2, -0.0, 1e16, -1e16, 3.0, 1e-3))
    return (rid, _value(r, 1), _value(r, 2), _value(r, 3), num, None, None, None, flt)


def _agg_windows(r: random.Random) -> tuple[ir.Window, ...]:
    out = []
    for column in range(5, 5 + r.randint(1, 3)):
        func = r.choice(AGGREGATES)
        arg: int | None
        arg_oid: int | None
        arg, arg_oid, oid = r.choice(((1, T.INT4, T.INT8), (4, T.NUMERIC, T.NUMERIC),
                                      (3, T.TEXT, T.TEXT)))
        if func == "count_star":
            arg, arg_oid = None, None
        if func in ("count", "count_star"):
            oid = T.INT8
        elif func in ("sum", "avg"):
            arg, arg_oid, oid = r.choice(((1, T.INT4, T.INT8 if func == "sum" else T.NUMERIC),
                                          (4, T.NUMERIC, T.NUMERIC)))
        rows = r.random() < 0.5
        if rows and func in ("sum", "avg") and r.random() < 0.4:  # float: in window order
            arg, arg_oid, oid = 8, T.FLOAT8, T.FLOAT8
        order = (*_sort_keys(r, (1, 2, 3)), ir.SortKey(0, False, None)) if rows else (
            _sort_keys(r, (0, 1, 2, 3, 4)) if r.random() < 0.8 else ())
        frame = None
        if rows and r.random() < 0.6:  # a sliding frame, now and then an empty one
            start = r.randint(-3, 2)
            frame = (start, start + r.randint(-1 if r.random() < 0.1 else 0, 4))
        ranged = None
        if arg_oid != T.FLOAT8:
            ranged = _ranged(r)
            if ranged is not None:
                rows, frame = False, None
                if ranged.mode == "range":  # RANGE offsets measure one integer key
                    order = (ir.SortKey(r.choice((1, 2)), r.random() < 0.5,
                                        r.choice((None, True, False))),)
                elif not order:
                    order = _sort_keys(r, (1, 2, 3))
        out.append(ir.Window(func, column, order, arg, 1, oid, arg_oid,  # type: ignore[arg-type]
                             rows, frame, r.choice(((), (), (2,), (4,), (1, 3))), ranged))
    return tuple(out)


def _ranged(r: random.Random) -> ir.RangeFrame | None:
    """Now and then a RANGE/GROUPS frame: offsets on either side (or CURRENT ROW, or
    unbounded), empty frames too, and an EXCLUDE."""
    if r.random() < 0.6:
        return None
    def bound() -> int | None:
        return r.choice((None, 0, r.randint(-3, 3)))
    return ir.RangeFrame(r.choice(("range", "range", "groups", "rows")), bound(), bound(),
                         r.choice((None, None, "current", "group", "ties")))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_running_aggregates_match_the_recompute(seed: int) -> None:
    r = random.Random(seed)
    windows = _agg_windows(r)
    columns = tuple(range(5 + len(windows)))
    order_by = (*_sort_keys(r, columns), ir.SortKey(0, False, None)) if r.random() < 0.8 else ()
    output = tuple(r.sample(columns, r.randint(1, len(columns))))
    lo = r.choice((0, 0, 1, 3)) if order_by else 0
    hi = None if not order_by or r.random() < 0.6 else lo + r.randint(0, 6)
    part = Partition(windows, order_by, output, lo, hi)
    _exercise(r, part, _agg_row,
              lambda rows: _check(part, rows, windows, order_by, output, lo, hi))


def test_sliding_frame_values() -> None:
    """frame_values against frames written out by hand (NULLs skipped, empty frames NULL)."""
    args = [1, None, 3, 4, 10]
    def values(func: str, frame: tuple[int, int], oid: int = T.INT8) -> list[Any]:
        w = ir.Window(func, 0, (), 0, 1, oid, T.INT4, True, frame)  # type: ignore[arg-type]
        return frame_values(w, args, 0, len(args) - 1)
    assert values("sum", (-1, 0)) == [1, 1, 3, 7, 14]
    assert values("sum", (0, 2)) == [4, 7, 17, 14, 10]
    assert values("count", (-2, 1)) == [1, 2, 3, 3, 3]
    assert values("count_star", (-2, 1)) == [2, 3, 4, 4, 3]
    assert values("max", (1, 1)) == [None, 3, 4, 10, None]
    assert values("min", (-3, -2)) == [None, None, 1, 1, 3]
    assert values("sum", (1, 0)) == [None] * 5  # start after end: every frame is empty
    assert values("avg", (-1, 1), T.NUMERIC) == [Decimal(1), Decimal(2), Decimal("3.5"),
                                                 Decimal("5.6666666666666667"), Decimal(7)]
