"""Incremental aggregate accumulators with SQL semantics over signed weights.

Owns: one class per aggregate function (``ACCUMULATORS``): each takes ``add(value, weight)``
(``value`` None = SQL NULL, skipped by everything but COUNT(*)) and ``value()``.

Invariants: numeric SUM/AVG have PostgreSQL's result scale (the largest scale of the values
currently summed); SUM/AVG/MIN/MAX of no non-NULL values is NULL; COUNT(col) counts non-NULL
values; COUNT(DISTINCT) and MIN/MAX keep the multiset of values so that retracting the current
extremum is answered locally. Integer and numeric sums are exact; float sums are running sums
(PostgreSQL's float SUM depends on row order too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import cython_ext
from engine.dataflow import pgjson, pgmath
from engine.dataflow.ordering import order_key, value_key
from engine.plan.ir import SortKey
from engine.values import oids as T
from engine.values.collation import key_function


class Acc:
    __slots__ = ("oid",)

    def __init__(self, oid: int) -> None:
        self.oid = oid

    def add(self, value: Any, weight: int) -> None:
        raise NotImplementedError

    def value(self) -> Any:
        raise NotImplementedError


class CountStar(Acc):
    __slots__ = ("n",)

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.n = 0

    def add(self, value: Any, weight: int) -> None:
        self.n += weight

    def value(self) -> Any:
        return self.n


class Count(CountStar):
    __slots__ = ()

    def add(self, value: Any, weight: int) -> None:
        if value is not None:
            self.n += weight


class Sum(Acc):
    __slots__ = ("nonnull", "total")

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.total: Any = 0
        self.nonnull = 0

    def add(self, value: Any, weight: int) -> None:
        if value is not None:
            self.total = pgmath.add_values(self.total, value * weight if weight != 1 else value)
            self.nonnull += weight
            if self.nonnull == 0:
                self.total = 0

    def value(self) -> Any:
        return pgmath.finish_sum(self.total, self.nonnull, self.oid)


class IntSum(Sum):
    """SUM over integers (exact with Python ints; no Decimal handling needed)."""

    __slots__ = ()

    def add(self, value: Any, weight: int) -> None:
        if value is not None:
            self.total += value * weight
            self.nonnull += weight


class NumericSum(Acc):
    """SUM/AVG into numeric: exact (wide context) and with PostgreSQL's result scale - the
    largest scale among the values summed, which can shrink when values are retracted.
    NaN and +/-Infinity are counted apart (retracting them restores the finite sum)."""

    __slots__ = ("finite", "max_ok", "maxscale", "nan", "ninf", "nonnull", "pinf", "scales",
                 "seen", "total")

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.total = Decimal(0)
        self.nonnull = self.finite = self.nan = self.pinf = self.ninf = 0
        self.scales: dict[int, int] = {}  # scale -> number of finite values with it
        self.maxscale = self.seen = 0  # largest live scale; largest scale in ``total``
        self.max_ok = True

    def add(self, value: Any, weight: int) -> None:
        if value is None:
            return
        self.nonnull += weight
        scale = 0
        if value.__class__ is Decimal:
            if not value.is_finite():
                if value.is_nan():
                    self.nan += weight
                elif value > 0:
                    self.pinf += weight
                else:
                    self.ninf += weight
                return
            scale = decimal_scale(value)
        ctx = pgmath.CTX
        if weight == 1:
            self.total = ctx.add(self.total, value)
        elif weight == -1:
            self.total = ctx.subtract(self.total, value)
        else:
            self.total = ctx.add(self.total, ctx.multiply(value, weight))
        self.finite += weight
        scales = self.scales
        n = scales.get(scale, 0) + weight
        if n:
            scales[scale] = n
            if scale > self.maxscale:
                self.maxscale = scale
        else:
            del scales[scale]
            self.max_ok = False
        if scale > self.seen:
            self.seen = scale
        if not self.finite:
            self.total, self.seen, self.maxscale, self.max_ok = Decimal(0), 0, 0, True

    def exact_total(self) -> Decimal:
        if self.nan or (self.pinf and self.ninf):
            return Decimal("NaN")
        if self.pinf or self.ninf:
            return Decimal("Infinity" if self.pinf else "-Infinity")
        if not self.max_ok:
            self.maxscale = max(self.scales, default=0)
            self.max_ok = True
        if self.seen == self.maxscale:
            return self.total
        return self.total.quantize(Decimal(1).scaleb(-self.maxscale), context=pgmath.CTX)

    def value(self) -> Any:
        return pgmath.finish_sum(self.exact_total(), self.nonnull, self.oid)


def decimal_scale(value: Decimal) -> int:
    """Digits after the point of a finite Decimal (its PostgreSQL display scale); parsing
    ``str`` is several times faster than ``as_tuple``."""
    text = str(value)
    e = text.find("E")
    if e < 0:
        dot = text.find(".")
        return 0 if dot < 0 else len(text) - dot - 1
    mantissa = text[:e]
    dot = mantissa.find(".")
    frac = 0 if dot < 0 else len(mantissa) - dot - 1
    return max(0, frac - int(text[e + 1:]))


class NumericAvg(NumericSum):
    __slots__ = ()

    def value(self) -> Any:
        return pgmath.finish_avg(self.exact_total(), self.nonnull, self.oid)


class Avg(Sum):
    __slots__ = ()

    def value(self) -> Any:
        return pgmath.finish_avg(self.total, self.nonnull, self.oid)


class Multiset(Acc):
    __slots__ = ("values",)

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.values: Counter[Any] = Counter()

    def add(self, value: Any, weight: int) -> None:
        if value is not None:
            n = self.values[value] + weight
            if n:
                self.values[value] = n
            else:
                del self.values[value]


class CountDistinct(Multiset):
    __slots__ = ()

    def value(self) -> Any:
        return len(self.values)


class Min(Multiset):
    __slots__ = ()

    def value(self) -> Any:
        return min(self.values, key=value_key) if self.values else None


class Max(Multiset):
    __slots__ = ()

    def value(self) -> Any:
        return max(self.values, key=value_key) if self.values else None


class CollatedPick(Multiset):
    """min / max of text under a libc collation (``engine.values.collation``): the multiset
    of values, the least or greatest picked in the collation's order."""

    __slots__ = ("key", "pick")

    def __init__(self, oid: int, func: str, collation: str) -> None:
        super().__init__(oid)
        self.key = key_function(collation)
        self.pick: Callable[..., Any] = min if func == "min" else max

    def value(self) -> Any:
        return self.pick(self.values, key=self.key) if self.values else None


def ordered_value(entries: Iterable[tuple[Any, ...]], order: Sequence[SortKey], func: str,
                  delimiter: str | None, arg_oid: int | None = None) -> Any:
    """string_agg / array_agg / json_agg / jsonb_agg of ``entries`` (each ``(value, sort key
    values...)``, repeated as many times as it occurs) in the call's ORDER BY (``order``:
    positions in the entry); rows tied on it in the order of their values (PostgreSQL leaves
    ties unspecified). ``arg_oid``: the argument's type (the JSON aggregates print by it)."""
    rows = sorted(entries, key=order_key(order))
    if func == "array_agg":
        return tuple(r[0] for r in rows) if rows else None  # NULL elements are kept
    if func in ("json_agg", "jsonb_agg"):
        return pgjson.json_array([r[0] for r in rows], arg_oid or 0) if rows else None
    values = [r[0] for r in rows if r[0] is not None]
    return (delimiter or "").join(values) if values else None


class Ordered(Multiset):
    """The ordered aggregates (string_agg, array_agg, json_agg, jsonb_agg) with ORDER BY: the
    multiset of (value, sort keys) entries."""

    __slots__ = ("arg_oid", "delimiter", "func", "order")

    def __init__(self, oid: int, func: str = "array_agg", order: Sequence[SortKey] = (),
                 delimiter: str | None = None, arg_oid: int | None = None) -> None:
        super().__init__(oid)
        self.func, self.order, self.delimiter = func, tuple(order), delimiter
        self.arg_oid = arg_oid

    def value(self) -> Any:
        return ordered_value(self.values.elements(), self.order, self.func, self.delimiter,
                             self.arg_oid)


#: The aggregates planned with their own ORDER BY (an ``Ordered`` multiset).
ORDERED = frozenset({"string_agg", "array_agg", "json_agg", "jsonb_agg"})

ACCUMULATORS: dict[str, Callable[[int], Acc]] = {
    "count_star": CountStar, "count": Count, "count_distinct": CountDistinct, "sum": Sum,
    "avg": Avg, "min": Min, "max": Max,
}


def accumulator(func: str, result_oid: int, arg_oid: int | None,
                order: Sequence[SortKey] = (), delimiter: str | None = None,
                collation: str | None = None) -> Acc:
    """A fresh accumulator for ``func`` (integer SUM into an integer type takes the fast path;
    string_agg/array_agg get their ORDER BY as positions in their (value, keys...) entries;
    min/max of text under a libc ``collation`` pick by its order)."""
    if func in ORDERED:
        return Ordered(result_oid, func, order, delimiter, arg_oid)
    if collation is not None and func in ("min", "max"):
        return CollatedPick(result_oid, func, collation)
    if func == "sum" and result_oid in pgmath.INT_TYPES and arg_oid in pgmath.INT_TYPES:
        return IntSum(result_oid)
    if func in ("sum", "avg") and result_oid == T.NUMERIC:
        return NumericSum(result_oid) if func == "sum" else NumericAvg(result_oid)
    return ACCUMULATORS[func](result_oid)


#: The pure-Python accumulators (the parity tests compare the Cython twins with these).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
CountStar_python = CountStar
Count_python = Count
IntSum_python = IntSum
NumericSum_python = NumericSum
NumericAvg_python = NumericAvg
decimal_scale_python = decimal_scale

_fast = cython_ext.load("accumulators")
if _fast is not None:
    _fast.configure(pgmath.CTX, pgmath.finish_sum, pgmath.finish_avg, T.NUMERIC)
    CountStar = _fast.CountStar  # type: ignore[misc]
    Count = _fast.Count  # type: ignore[misc]
    IntSum = _fast.IntSum  # type: ignore[misc]
    NumericSum = _fast.NumericSum  # type: ignore[misc]
    NumericAvg = _fast.NumericAvg  # type: ignore[misc]
    decimal_scale = _fast.decimal_scale
    ACCUMULATORS.update(count_star=CountStar, count=Count)
