"""Float sum and avg over a window frame, step for step as PostgreSQL computes them.

Owns: ``FloatSum`` (``sum(float4)`` / ``sum(float8)``: PostgreSQL's ``float4pl`` /
``float8pl`` transition, strict, so the first non-NULL value is the state and every later one
is added to it, in float4 or float8 arithmetic) and ``FloatAvg`` (``avg(float4)`` /
``avg(float8)``: ``float8_accum``'s count, sum and Youngs-Cramer sum of squares from zero,
the result ``sum / count`` as float8), and ``window_accumulator``, which picks them for a
window's float sum/avg and ``ops.accumulators`` for everything else.

Invariants: values are added in the order given, one at a time (weight 1: these aggregates
have no inverse transition in PostgreSQL, so a frame is always aggregated afresh from its
first row in window order, and the caller does the same). An addition whose result is
infinite from finite operands raises ``EvalError`` 22003 (PostgreSQL's "value out of range:
overflow"), as does avg's sum of squares, which PostgreSQL checks too; an infinite or NaN
input makes the sum of squares NaN (so no error later). The callers only plan these over an
ORDER BY that cannot tie, so the order of additions is PostgreSQL's.
"""

from __future__ import annotations

import math
from typing import Any

from engine.dataflow.ops.accumulators import Acc, accumulator
from engine.dataflow.pgmath import EvalError, to_float4
from engine.plan import ir
from engine.values import oids as T

FLOATS = frozenset({T.FLOAT4, T.FLOAT8})


def _overflow() -> EvalError:
    return EvalError("22003", "value out of range: overflow")


class FloatSum(Acc):
    """sum(float4) / sum(float8): the first value, then ``state + value`` per value."""

    __slots__ = ("state",)

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.state: float | None = None

    def add(self, value: Any, weight: int) -> None:
        assert weight == 1, "a float sum has no inverse transition"
        if value is None:
            return
        value = float(value)
        if self.state is None:
            self.state = value
            return
        a = self.state
        result = a + value
        if self.oid == T.FLOAT4:
            result = to_float4(result)  # float4 arithmetic (raises on overflow)
        if math.isinf(result) and not math.isinf(a) and not math.isinf(value):
            raise _overflow()
        self.state = result

    def value(self) -> Any:
        return self.state


class FloatAvg(Acc):
    """avg(float4) / avg(float8): ``float8_accum``'s (N, Sx, Sxx), then ``Sx / N``."""

    __slots__ = ("n", "sx", "sxx")

    def __init__(self, oid: int) -> None:
        super().__init__(oid)
        self.n = self.sx = self.sxx = 0.0

    def add(self, value: Any, weight: int) -> None:
        assert weight == 1, "a float avg has no inverse transition"
        if value is None:
            return
        new = float(value)
        old_n, old_sx = self.n, self.sx
        n = old_n + 1.0
        sx = old_sx + new
        sxx = self.sxx
        if old_n > 0.0:
            tmp = new * n - sx
            sxx += tmp * tmp / (n * old_n)
            if math.isinf(sx) or math.isinf(sxx):
                if not math.isinf(old_sx) and not math.isinf(new):
                    raise _overflow()
                sxx = math.nan
        elif math.isnan(new) or math.isinf(new):
            sxx = math.nan
        self.n, self.sx, self.sxx = n, sx, sxx

    def value(self) -> Any:
        return None if self.n == 0.0 else self.sx / self.n


def window_accumulator(w: ir.Window) -> Acc:
    """A fresh accumulator for window ``w``'s aggregate."""
    if w.func in ("sum", "avg") and w.arg_oid in FLOATS:
        return FloatSum(w.type_oid) if w.func == "sum" else FloatAvg(w.type_oid)
    return accumulator(w.func, w.type_oid, w.arg_oid, collation=w.collation)
