"""PostgreSQL arithmetic and conversion rules on canonical Python values.

Owns: integer range checks, numeric division scale (``select_div_scale``), float overflow
and float4 rounding, and the scalar casts between the numeric, boolean and text types.

Invariant: every function either returns exactly the value PostgreSQL computes or raises
``EvalError`` with the SQLSTATE PostgreSQL would raise; it never wraps or silently rounds
where PostgreSQL raises.
"""

from __future__ import annotations

import decimal
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from engine.values import oids as T
from engine.values.codec import decode_text, encode_text

#: Exact decimal arithmetic: enough digits for any numeric PostgreSQL accepts in practice.
CTX = decimal.Context(prec=2000, rounding=decimal.ROUND_HALF_UP, Emax=999999, Emin=-999999)

INT_RANGES = {T.INT2: (-(2**15), 2**15 - 1), T.INT4: (-(2**31), 2**31 - 1),
              T.INT8: (-(2**63), 2**63 - 1)}
INT_TYPES = frozenset(INT_RANGES)
FLOAT_TYPES = frozenset({T.FLOAT4, T.FLOAT8})
TEXT_TYPES = frozenset({T.TEXT, T.VARCHAR, T.BPCHAR, T.NAME})


class EvalError(Exception):
    """An error PostgreSQL would raise evaluating the expression (``sqlstate`` as PG's)."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def check_int(value: int, oid: int) -> int:
    lo, hi = INT_RANGES[oid]
    if not lo <= value <= hi:
        name = {T.INT2: "smallint", T.INT4: "integer", T.INT8: "bigint"}[oid]
        raise EvalError("22003", f"{name} out of range")
    return value


def to_float4(value: float) -> float:
    """Round a double to the nearest float4 (raises on overflow like PostgreSQL)."""
    if math.isinf(value) or math.isnan(value):
        return value
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError as exc:
        raise EvalError("22003", "value out of range: overflow") from exc


def check_float(result: float, *operands: float, oid: int = T.FLOAT8) -> float:
    if math.isinf(result) and not any(math.isinf(x) for x in operands):
        raise EvalError("22003", "value out of range: overflow")
    return to_float4(result) if oid == T.FLOAT4 else result


def _dscale(d: Decimal) -> int:
    exp = d.as_tuple().exponent
    return max(0, -exp) if isinstance(exp, int) else 0


def _weight_first(d: Decimal) -> tuple[int, int]:
    """PostgreSQL's (weight, first base-10000 digit) of a non-zero numeric."""
    a = abs(d)
    intpart = int(a)
    if intpart:
        digits = str(intpart)
        weight = (len(digits) - 1) // 4
        lead = len(digits) - weight * 4
        return weight, int(digits[:lead])
    # pure fraction: find first non-zero base-10000 group after the point
    frac = format(a, "f").split(".")[1] if "." in format(a, "f") else "0"
    frac = frac + "0" * (-len(frac) % 4)
    for i in range(0, len(frac), 4):
        group = int(frac[i:i + 4])
        if group:
            return -(i // 4) - 1, group
    return 0, 0


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` for numeric with PostgreSQL's result scale (select_div_scale)."""
    if b == 0:
        raise EvalError("22012", "division by zero")
    if a.is_nan() or b.is_nan():
        return Decimal("NaN")
    w1, f1 = _weight_first(a) if a != 0 else (0, 0)
    w2, f2 = _weight_first(b)
    qweight = w1 - w2
    if f1 <= f2:
        qweight -= 1
    rscale = 16 - qweight * 4
    rscale = max(rscale, _dscale(a), _dscale(b), 0)
    rscale = min(rscale, 1000)
    quotient = CTX.divide(a, b)
    return quotient.quantize(Decimal(1).scaleb(-rscale), context=CTX)


def int_div(a: int, b: int, oid: int) -> int:
    if b == 0:
        raise EvalError("22012", "division by zero")
    q = abs(a) // abs(b)
    return check_int(q if (a >= 0) == (b >= 0) else -q, oid)


def int_mod(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("22012", "division by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def round_half_even(value: float) -> float:
    """C's rint(): round half to even (used by float -> int casts and round(float))."""
    return float(round(value))


# ----------------------------------------------------------------------------- casts


def _to_int(oid: int) -> Callable[[Any, int], int]:
    def convert(value: Any, src: int) -> int:
        if isinstance(value, bool):
            if oid != T.INT4:
                raise EvalError("42846", "cannot cast boolean")
            return int(value)
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise EvalError("22003", "integer out of range")
            return check_int(int(round_half_even(value)), oid)
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise EvalError("22003", "cannot convert NaN to integer")
            return check_int(int(value.to_integral_value(rounding=decimal.ROUND_HALF_UP)), oid)
        if isinstance(value, str):
            return check_int(_parse(oid, value.strip()), oid)
        return check_int(int(value), oid)

    return convert


def _parse(oid: int, text: str) -> Any:
    try:
        return decode_text(oid, text)
    except (ValueError, ArithmeticError) as exc:
        raise EvalError("22P02", f"invalid input syntax for type {oid}: {text!r}") from exc


def _to_numeric(value: Any, src: int) -> Decimal:
    if isinstance(value, float):
        if math.isnan(value):
            return Decimal("NaN")
        if math.isinf(value):
            raise EvalError("0A000", "cannot convert infinity to numeric")
        digits = 6 if src == T.FLOAT4 else 15
        return Decimal(format(value, f".{digits}g"))
    if isinstance(value, str):
        return Decimal(_parse(T.NUMERIC, value.strip()))
    return Decimal(int(value)) if isinstance(value, int) else Decimal(value)


def _to_float(oid: int) -> Callable[[Any, int], float]:
    def convert(value: Any, src: int) -> float:
        if isinstance(value, str):
            result = float(_parse(oid, value.strip()))
        elif isinstance(value, Decimal) and not value.is_finite():
            result = float("nan")
        else:
            result = float(value)
            if math.isinf(result) and not (isinstance(value, float) and math.isinf(value)):
                raise EvalError("22003", "value out of range: overflow")
        return to_float4(result) if oid == T.FLOAT4 else result

    return convert


def _to_bool(value: Any, src: int) -> bool:
    if isinstance(value, str):
        return bool(_parse(T.BOOL, value.strip()))
    if isinstance(value, int) and src == T.INT4:
        return value != 0
    if isinstance(value, bool):
        return value
    raise EvalError("42846", f"cannot cast type {src} to boolean")


def _to_text(value: Any, src: int) -> str:
    if isinstance(value, str):
        return value
    return encode_text(src, value)


CASTS: dict[int, Callable[[Any, int], Any]] = {
    T.INT2: _to_int(T.INT2), T.INT4: _to_int(T.INT4), T.INT8: _to_int(T.INT8),
    T.NUMERIC: _to_numeric, T.FLOAT4: _to_float(T.FLOAT4), T.FLOAT8: _to_float(T.FLOAT8),
    T.BOOL: _to_bool, T.TEXT: _to_text, T.VARCHAR: _to_text, T.NAME: _to_text,
}


def cast(value: Any, src: int, dst: int) -> Any:
    """``value::dst`` where ``value`` is of type ``src`` (None stays None)."""
    if value is None or src == dst:
        return value
    convert = CASTS.get(dst)
    if convert is not None:
        return convert(value, src)
    if src in TEXT_TYPES and isinstance(value, str):
        return _parse(dst, value)
    raise EvalError("42846", f"cannot cast type {src} to {dst}")


# ----------------------------------------------------------------------------- aggregates


def add_values(a: Any, b: Any) -> Any:
    """Exact running-sum addition (Decimal with the wide context, else Python's +)."""
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return CTX.add(Decimal(a), Decimal(b))
    return a + b


def finish_sum(total: Any, nonnull: int, oid: int) -> Any:
    """SUM's result: NULL over no non-NULL input, else ``total`` as the result type."""
    if nonnull == 0:
        return None
    if oid == T.NUMERIC:
        return total if isinstance(total, Decimal) else Decimal(total)
    if oid in INT_TYPES:
        return check_int(int(total), oid)
    if oid in FLOAT_TYPES:
        return check_float(float(total), oid=oid)
    return total


def finish_avg(total: Any, nonnull: int, oid: int) -> Any:
    """AVG's result: NULL over no non-NULL input; numeric division with PG's scale."""
    if nonnull == 0:
        return None
    if oid == T.NUMERIC:
        return numeric_div(total if isinstance(total, Decimal) else Decimal(total),
                           Decimal(nonnull))
    if oid in FLOAT_TYPES:
        return check_float(float(total) / nonnull, oid=oid)
    raise EvalError("0A000", f"avg of type {oid} is not supported")
