"""Window functions over one partition's rows: row_number, rank, dense_rank, lag, lead, and
the running aggregates count(*), count, sum, avg, min, max.

Owns: ``apply_windows``, the recompute of a lookup's windows from its rows (used by the
reference evaluator, and the model ``window_state.Partition`` - what the reader maintains
change by change - is tested against), and ``partition_key``. A partition is one lookup's
rows, or, when the window is also partitioned on columns that are not lookup keys
(``ir.Window.partition``), the lookup's rows with one value of those columns.

Invariants: rows tied on a window's ORDER BY get equal rank/dense_rank; row_number, lag and
lead are only planned with an ORDER BY that cannot tie (PostgreSQL numbers tied rows in an
arbitrary order); ties are still broken by the whole row, so results are deterministic. A
running aggregate's value at a row is the aggregate (``ops.accumulators``: PostgreSQL's result
types, scales and NULL rules) of the rows up to that row's last peer (``Window.rows``: up to the
row itself, planned only with an ORDER BY that cannot tie); without ORDER BY every row is a peer.
A sliding frame's (``Window.frame``) value is the aggregate of its rows, added in window order
from the frame's first row (as PostgreSQL does when it restarts an aggregate: integer and
numeric results do not depend on that order, float sum/avg (``window_floats``) do and are
only planned over an ORDER BY that cannot tie). A RANGE/GROUPS frame, or one with EXCLUDE
(``Window.ranged``: ``range_values``), is aggregated afresh per row over the rows its measure
(the integer key, the peer group number, the position) puts in the frame, less the excluded.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from engine.dataflow.ordering import order_key, row_key
from engine.dataflow.pgmath import EvalError
from engine.dataflow.window_floats import window_accumulator
from engine.plan import ir
from engine.values.types import TextValue

Row = tuple[Any, ...]

#: The running aggregates (``ir.Window.func``) and the ones whose value is a count (no NULL).
AGGREGATES = frozenset({"count_star", "count", "sum", "avg", "min", "max"})


def running_values(w: ir.Window, keys: Sequence[Any], args: Sequence[Any],
                   seed: Sequence[Any] = ()) -> list[Any]:
    """Aggregate window ``w``'s values at the positions of ``args`` (its argument per row in
    window order; ``keys`` their peer keys on the window's ORDER BY), after the rows ``seed``
    (the arguments before them, the first of them not a peer of ``keys[0]``)."""
    acc = window_accumulator(w)
    for v in seed:
        acc.add(v, 1)
    out: list[Any] = [None] * len(args)
    start, n = 0, len(args)
    for p in range(n):
        acc.add(args[p], 1)
        if w.rows or p + 1 == n or keys[p + 1] != keys[p]:
            value = acc.value()
            for q in range(start, p + 1):
                out[q] = value
            start = p + 1
    return out


def frame_values(w: ir.Window, args: Sequence[Any], lo: int, hi: int) -> list[Any]:
    """Sliding-frame window ``w``'s values at positions ``lo .. hi`` (``args``: its argument
    per row of the partition in window order), each aggregated afresh over its frame."""
    assert w.frame is not None
    start, end = w.frame
    n = len(args)
    out = []
    for p in range(lo, hi + 1):
        acc = window_accumulator(w)
        for q in range(max(p + start, 0), min(p + end, n - 1) + 1):
            acc.add(args[q], 1)
        out.append(acc.value())
    return out


def range_values(w: ir.Window, peers: Sequence[Any], keys: Sequence[Any],
                 args: Sequence[Any]) -> list[Any]:
    """RANGE/GROUPS-frame window ``w``'s values (``ir.RangeFrame``) over one partition in
    window order: ``peers`` the rows' peer keys, ``keys`` their RANGE key values (the one
    ORDER BY column; unused under GROUPS), ``args`` their arguments. Each frame is aggregated
    afresh in window order."""
    r = w.ranged
    assert r is not None
    n = len(args)
    group, starts = [], []  # each row's peer group number; each group's first position
    for p in range(n):
        if p == 0 or peers[p] != peers[p - 1]:
            starts.append(p)
        group.append(len(starts) - 1)
    ends = [*starts[1:], n]
    if r.mode != "range":
        measure: list[Any] = group if r.mode == "groups" else list(range(n))
    else:
        sign = -1 if w.order[0].descending else 1
        size = micros if r.micros else _same
        measure = [None if k is None else sign * size(k) for k in keys]
    lo = next((p for p in range(n) if measure[p] is not None), n)
    hi = next((p + 1 for p in range(n - 1, -1, -1) if measure[p] is not None), lo)
    known = measure[lo:hi]  # non-decreasing
    out = []
    for p in range(n):
        m = measure[p]
        if m is None:  # a NULL key: its frame's offset ends are its peers (the NULL rows)
            a = 0 if r.start is None else starts[group[p]]
            b = n if r.end is None else ends[group[p]]
        else:
            a = 0 if r.start is None else lo + bisect_left(known, m + r.start)
            b = n if r.end is None else lo + bisect_right(known, m + r.end)
        acc = window_accumulator(w)
        g0, g1 = starts[group[p]], ends[group[p]]
        for q in range(a, b):
            if r.exclude is not None and (q == p if r.exclude == "current" else (
                    g0 <= q < g1 and (r.exclude == "group" or q != p))):
                continue
            acc.add(args[q], 1)
        out.append(acc.value())
    return out


def _same(value: Any) -> Any:
    return value


_EPOCH = datetime(2000, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=UTC)


def micros(value: Any) -> int | float:
    """A date / timestamp / timestamptz RANGE key in microseconds (``ir.RangeFrame.micros``):
    a date at its midnight, ``infinity`` as an infinite float (infinity plus an interval is
    infinity in PostgreSQL too). Other values Python cannot hold (BC, after 9999) raise
    ``EvalError``: the read goes upstream."""
    if isinstance(value, datetime):
        delta = value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)
    elif isinstance(value, date):
        delta = datetime(value.year, value.month, value.day) - _EPOCH
    elif isinstance(value, TextValue) and value.text in ("infinity", "-infinity"):
        return float(value.text.replace("infinity", "inf"))
    else:
        raise EvalError("0A000", f"a RANGE key weir cannot measure: {value!r}")
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class _Nan:
    """The partition key of a NaN (equal to every NaN, as ``=`` says in PostgreSQL)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Nan)

    def __hash__(self) -> int:
        return 0x7FF8


_NAN = _Nan()


def _part_value(v: Any) -> Any:
    t = v.__class__
    if (t is float and v != v) or (t is Decimal and v.is_nan()):
        return _NAN
    return v


def partition_key(w: ir.Window) -> Callable[[Row], Row]:
    """A row -> the key of its partition for window ``w`` (``ir.Window.partition``: the
    values of those columns, equal as PostgreSQL's ``=`` (1.0 = 1.00, NaN = NaN, -0 = 0);
    ``()`` when the lookup is one partition)."""
    cols = w.partition
    if not cols:
        return lambda row: ()
    return lambda row: tuple([_part_value(row[c]) for c in cols])


def apply_windows(rows: Sequence[Row], windows: Sequence[ir.Window]) -> list[Row]:
    """``rows`` (one lookup) with each window's value written into its column."""
    if not windows:
        return list(rows)
    out = [list(r) for r in rows]
    # ties broken by the whole row: one sort by the row, then a stable sort per window
    by_row = sorted(range(len(rows)), key=lambda i: row_key(rows[i]))
    for w in windows:
        parts: dict[Row, list[int]] = {}
        pkey = partition_key(w)
        for i in by_row:
            parts.setdefault(pkey(rows[i]), []).append(i)
        for members in parts.values():
            _apply_window(w, rows, members, out)
    return [tuple(r) for r in out]


def _apply_window(w: ir.Window, rows: Sequence[Row], members: list[int],
                  out: list[list[Any]]) -> None:
    """Write window ``w``'s values over one partition (``members``: its rows' indexes in
    whole-row order) into ``out``."""
    sort_key = order_key(w.order, tie_break=False)
    order = sorted(members, key=lambda i: sort_key(rows[i]))
    if w.func in AGGREGATES:
        arg = w.arg
        args = [None if arg is None else rows[i][arg] for i in order]
        if w.ranged is not None:
            values = range_values(w, [sort_key(rows[i]) for i in order],
                                  [rows[i][w.order[0].column] if w.order else None
                                   for i in order], args)
        else:
            values = (running_values(w, [sort_key(rows[i]) for i in order], args)
                      if w.frame is None else frame_values(w, args, 0, len(args) - 1))
        for i, v in zip(order, values, strict=True):
            out[i][w.column] = v
        return
    if w.func in ("lag", "lead"):
        step = -w.offset if w.func == "lag" else w.offset
        assert w.arg is not None
        for p, i in enumerate(order):
            q = p + step
            out[i][w.column] = rows[order[q]][w.arg] if 0 <= q < len(order) else None
        return
    peers = order_key(w.order, tie_break=False)
    previous: Any = object()
    rank = dense = 0
    for p, i in enumerate(order):
        if w.func == "row_number":
            out[i][w.column] = p + 1
            continue
        key = peers(rows[i])
        if key != previous:
            rank, dense, previous = p + 1, dense + 1, key
        out[i][w.column] = rank if w.func == "rank" else dense
