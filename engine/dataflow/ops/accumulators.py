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
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from engine.dataflow import pgmath
from engine.dataflow.ordering import value_key
from engine.values import oids as T


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
    largest scale among the values summed, which can shrink when values are retracted."""

    __slots__ = ("nonnull", "scales", "total")

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.total = Decimal(0)
        self.nonnull = 0
        self.scales: Counter[int | str] = Counter()  # scale -> count; or "nan", "inf", "-inf"

    def add(self, value: Any, weight: int) -> None:
        if value is None:
            return
        if isinstance(value, Decimal) and not value.is_finite():
            self.nonnull += weight
            kind = "nan" if value.is_nan() else "-inf" if value < 0 else "inf"
            self.scales[kind] += weight
            return
        ctx = pgmath.CTX
        if weight == 1:
            self.total = ctx.add(self.total, value)
        elif weight == -1:
            self.total = ctx.subtract(self.total, value)
        else:
            self.total = ctx.add(self.total, ctx.multiply(value, weight))
        self.nonnull += weight
        scale = _scale(value)
        n = self.scales[scale] + weight
        if n:
            self.scales[scale] = n
        else:
            del self.scales[scale]
        if not any(isinstance(k, int) for k in self.scales):
            self.total = Decimal(0)

    def exact_total(self) -> Decimal:
        special = {k for k, n in self.scales.items() if isinstance(k, str) and n > 0}
        if "nan" in special or {"inf", "-inf"} <= special:
            return Decimal("NaN")
        if special:
            return Decimal("-Infinity" if "-inf" in special else "Infinity")
        scale = max((k for k in self.scales if isinstance(k, int)), default=0)
        return self.total.quantize(Decimal(1).scaleb(-scale), context=pgmath.CTX)

    def value(self) -> Any:
        return pgmath.finish_sum(self.exact_total(), self.nonnull, self.oid)


class NumericAvg(NumericSum):
    __slots__ = ()

    def value(self) -> Any:
        return pgmath.finish_avg(self.exact_total(), self.nonnull, self.oid)


def _scale(value: Any) -> int:
    if isinstance(value, Decimal):
        exp = value.as_tuple().exponent
        return max(0, -exp) if isinstance(exp, int) else 0
    return 0


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


ACCUMULATORS: dict[str, Callable[[int], Acc]] = {
    "count_star": CountStar, "count": Count, "count_distinct": CountDistinct, "sum": Sum,
    "avg": Avg, "min": Min, "max": Max,
}


def accumulator(func: str, result_oid: int, arg_oid: int | None) -> Acc:
    """A fresh accumulator for ``func`` (integer SUM into an integer type takes the fast path)."""
    if func == "sum" and result_oid in pgmath.INT_TYPES and arg_oid in pgmath.INT_TYPES:
        return IntSum(result_oid)
    if func in ("sum", "avg") and result_oid == T.NUMERIC:
        return NumericSum(result_oid) if func == "sum" else NumericAvg(result_oid)
    return ACCUMULATORS[func](result_oid)
