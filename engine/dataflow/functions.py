"""The scalar functions ``ir.Func`` may name, with PostgreSQL's semantics.

Owns: ``FUNCTIONS`` (name -> ``impl(args, arg_type_oids)``) and ``NULL_TOLERANT`` (functions
that see NULL arguments; every other function returns NULL when any argument is NULL and is
never called with one).

Invariant: results equal PostgreSQL's for the canonical values of the argument types; string
positions count characters, not bytes.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from engine.dataflow import pgarrays, pgjson, pgjsontext, pgmath, pgtime, pgzones
from engine.dataflow.pgmath import EvalError
from engine.values import oids as T

Impl = Callable[[Sequence[Any], Sequence[int]], Any]


def _text(value: Any, oid: int) -> str:
    return pgmath.cast(value, oid, T.TEXT)  # type: ignore[no-any-return]


def _substr(args: Sequence[Any], types: Sequence[int]) -> str:
    s, start = args[0], args[1]
    if len(args) == 2:
        return str(s[max(start, 1) - 1:])
    count = args[2]
    if count < 0:
        raise EvalError("22011", "negative substring length not allowed")
    end = start + count  # exclusive, 1-based
    lo = max(start, 1)
    return str(s[lo - 1:end - 1]) if end > lo else ""


def _trim(side: str) -> Impl:
    def run(args: Sequence[Any], types: Sequence[int]) -> str:
        chars = args[1] if len(args) > 1 else " "
        s: str = args[0]
        if side == "both":
            return s.strip(chars)
        return s.lstrip(chars) if side == "left" else s.rstrip(chars)

    return run


def _concat(args: Sequence[Any], types: Sequence[int]) -> str:
    return "".join(_text(a, t) for a, t in zip(args, types, strict=True) if a is not None)


def _textcat(args: Sequence[Any], types: Sequence[int]) -> str:
    return _text(args[0], types[0]) + _text(args[1], types[1])


def _abs(args: Sequence[Any], types: Sequence[int]) -> Any:
    v = abs(args[0])
    return pgmath.check_int(v, types[0]) if types[0] in pgmath.INT_TYPES else v


def _round(args: Sequence[Any], types: Sequence[int]) -> Any:
    v = args[0]
    if isinstance(v, float):
        if len(args) > 1:
            raise EvalError("42883", "round(double precision, integer) does not exist")
        return pgmath.round_half_even(v)
    d = v if isinstance(v, Decimal) else Decimal(v)
    places = args[1] if len(args) > 1 else 0
    if not d.is_finite():
        return d
    return d.quantize(Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP,
                      context=pgmath.CTX)


def _left(args: Sequence[Any], types: Sequence[int]) -> str:
    s, n = args[0], args[1]
    return str(s[:n] if n >= 0 else s[:max(len(s) + n, 0)])


def _right(args: Sequence[Any], types: Sequence[int]) -> str:
    s, n = args[0], args[1]
    if n >= 0:
        return str(s[len(s) - n:] if n else "")
    return str(s[-n:])


FUNCTIONS: dict[str, Impl] = {
    "lower": lambda a, t: a[0].lower(),
    "upper": lambda a, t: a[0].upper(),
    "length": lambda a, t: len(a[0]),
    "char_length": lambda a, t: len(a[0]),
    "substr": _substr,
    "substring": _substr,
    "btrim": _trim("both"),
    "ltrim": _trim("left"),
    "rtrim": _trim("right"),
    "concat": _concat,
    "textcat": _textcat,
    "abs": _abs,
    "round": _round,
    "replace": lambda a, t: a[0].replace(a[1], a[2]) if a[1] else a[0],
    "left": _left,
    "right": _right,
    "strpos": lambda a, t: a[0].find(a[1]) + 1,
    "position": lambda a, t: a[0].find(a[1]) + 1,
}

FUNCTIONS.update(date_trunc=pgtime.date_trunc, extract=pgtime.extract,
                 timezone=pgzones.timezone, date_trunc_zone=pgzones.date_trunc_zone)
FUNCTIONS.update(pgjson.FUNCTIONS)
FUNCTIONS.update(pgjsontext.FUNCTIONS)
FUNCTIONS.update(pgarrays.FUNCTIONS)

NULL_TOLERANT = frozenset({"concat", "array_any_eq", "array_construct"})
