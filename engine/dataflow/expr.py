"""Scalar expressions with PostgreSQL semantics, compiled to Python closures.

Owns: ``compile_expr`` (IR ``Expr`` -> ``row -> value``), ``compile_predicate`` (TRUE only),
the function table ``FUNCTIONS``, three-valued logic, comparison (NaN sorts above every
float and equals itself, as in PostgreSQL), LIKE/ILIKE matching, and ``columns_of``.

Invariants: NULL (None) propagates through every strict operator and function; AND/OR/NOT
follow SQL's three-valued logic and evaluate left to right, stopping at the first operand that
decides the result; errors PostgreSQL raises surface as ``pgmath.EvalError``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any

from engine.dataflow import pgmath, pgtime
from engine.dataflow.functions import FUNCTIONS, NULL_TOLERANT
from engine.dataflow.pgmath import EvalError
from engine.plan import ir
from engine.values import oids as T
from engine.values.collation import key_function

Row = Sequence[Any]
Fn = Callable[[Row], Any]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


def _nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def compare(op: str, a: Any, b: Any) -> bool | None:
    """SQL ``a op b`` on non-NULL canonical values of one type (None if either is NULL)."""
    if a is None or b is None:
        return None
    if _nan(a) or _nan(b):
        ka, kb = (1 if _nan(a) else 0), (1 if _nan(b) else 0)
        if ka == kb == 0:  # pragma: no cover - unreachable
            return _ORDER[op](a, b)
        return _ORDER[op](ka, kb) if ka != kb else op in ("=", "<=", ">=")
    return _ORDER[op](a, b)


def columns_of(expr: ir.Expr) -> frozenset[int]:
    """The input column positions ``expr`` reads."""
    if isinstance(expr, ir.ColumnRef):
        return frozenset({expr.index})
    out: frozenset[int] = frozenset()
    for child in _children(expr):
        out |= columns_of(child)
    return out


def walk(expr: ir.Expr) -> list[ir.Expr]:
    """``expr`` and all of its sub-expressions."""
    out = [expr]
    for child in _children(expr):
        out.extend(walk(child))
    return out


def _children(expr: ir.Expr) -> tuple[ir.Expr, ...]:
    if isinstance(expr, ir.BoolOp | ir.Coalesce | ir.Func):
        return expr.args
    if isinstance(expr, ir.Not | ir.IsNull | ir.Negate | ir.Cast):
        return (expr.arg,)
    if isinstance(expr, ir.Compare | ir.Arith | ir.NullIf):
        return (expr.left, expr.right)
    if isinstance(expr, ir.Case):
        flat = tuple(e for pair in expr.whens for e in pair)
        return flat + ((expr.default,) if expr.default is not None else ())
    if isinstance(expr, ir.Like):
        return (expr.arg, expr.pattern)
    if isinstance(expr, ir.Regex):
        return (expr.arg,)
    if isinstance(expr, ir.InList):
        return (expr.arg, *expr.items)
    if isinstance(expr, ir.Between):
        return (expr.arg, expr.low, expr.high)
    return ()


def compile_expr(expr: ir.Expr, params: Sequence[Any] = ()) -> Fn:
    """A function computing ``expr`` on an input row (``params[n-1]`` binds ``$n``)."""
    builder = _BUILDERS.get(type(expr))
    if builder is None:
        raise TypeError(f"not an expression: {expr!r}")
    return builder(expr, params)


def compile_predicate(expr: ir.Expr, params: Sequence[Any] = ()) -> Callable[[Row], bool]:
    fn = compile_expr(expr, params)
    return lambda row: fn(row) is True


def _column(e: ir.ColumnRef, p: Sequence[Any]) -> Fn:
    return operator.itemgetter(e.index)


def _const(e: ir.Const, p: Sequence[Any]) -> Fn:
    value = e.value
    return lambda row: value


def _param(e: ir.Param, p: Sequence[Any]) -> Fn:
    value = p[e.number - 1]
    return lambda row: value


def _boolop(e: ir.BoolOp, p: Sequence[Any]) -> Fn:
    fns = [compile_expr(a, p) for a in e.args]
    decisive: bool = e.op == "or"  # OR: a TRUE decides; AND: a FALSE decides

    def run(row: Row) -> bool | None:
        saw_null = False
        for fn in fns:
            v = fn(row)
            if v is None:
                saw_null = True
            elif bool(v) == decisive:
                return decisive
        return None if saw_null else not decisive

    return run


def _not(e: ir.Not, p: Sequence[Any]) -> Fn:
    fn = compile_expr(e.arg, p)

    def run(row: Row) -> bool | None:
        v = fn(row)
        return None if v is None else not v

    return run


def _compare(e: ir.Compare, p: Sequence[Any]) -> Fn:
    lf, rf, op = compile_expr(e.left, p), compile_expr(e.right, p), e.op
    floaty = e.left.type_oid in pgmath.FLOAT_TYPES or e.right.type_oid in pgmath.FLOAT_TYPES
    if floaty:
        return lambda row: compare(op, lf(row), rf(row))
    fast = _ORDER[op]
    if e.collation is not None:  # text under a libc collation: compare its sort keys
        coll = key_function(e.collation)

        def collated(row: Row) -> bool | None:
            a = lf(row)
            if a is None:
                return None
            b = rf(row)
            return None if b is None else fast(coll(a), coll(b))

        return collated

    def run(row: Row) -> bool | None:
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        return None if b is None else fast(a, b)

    return run


def _isnull(e: ir.IsNull, p: Sequence[Any]) -> Fn:
    fn, neg = compile_expr(e.arg, p), e.negated
    return lambda row: (fn(row) is None) != neg


def _arith_op(op: str, oid: int, lt: int, rt: int) -> Callable[[Any, Any], Any]:
    if oid in pgmath.INT_TYPES and lt in pgmath.INT_TYPES and rt in pgmath.INT_TYPES:
        ops: dict[str, Callable[[Any, Any], Any]] = {
            "+": lambda a, b: pgmath.check_int(a + b, oid),
            "-": lambda a, b: pgmath.check_int(a - b, oid),
            "*": lambda a, b: pgmath.check_int(a * b, oid),
            "/": lambda a, b: pgmath.int_div(a, b, oid),
            "%": pgmath.int_mod,
        }
        return ops[op]
    if oid == T.NUMERIC:
        return _numeric_op(op)
    if oid in pgmath.FLOAT_TYPES:
        return _float_op(op, oid)
    temporal = pgtime.ARITH.get((op, lt, rt))
    if temporal is not None:
        return temporal
    plain: dict[str, Callable[[Any, Any], Any]] = {
        "+": operator.add, "-": operator.sub, "*": operator.mul}
    if op not in plain:
        raise TypeError(f"unsupported arithmetic {op} for type {oid}")
    return plain[op]


def _numeric_op(op: str) -> Callable[[Any, Any], Any]:
    def conv(x: Any) -> Decimal:
        return x if isinstance(x, Decimal) else Decimal(x)

    ops: dict[str, Callable[[Any, Any], Any]] = {
        "+": lambda a, b: pgmath.CTX.add(conv(a), conv(b)),
        "-": lambda a, b: pgmath.CTX.subtract(conv(a), conv(b)),
        "*": lambda a, b: pgmath.CTX.multiply(conv(a), conv(b)),
        "/": lambda a, b: pgmath.numeric_div(conv(a), conv(b)),
        "%": lambda a, b: _numeric_mod(conv(a), conv(b)),
    }
    return ops[op]


def _numeric_mod(a: Decimal, b: Decimal) -> Decimal:
    if b == 0:
        raise EvalError("22012", "division by zero")
    return pgmath.CTX.remainder(a, b)


def _float_op(op: str, oid: int) -> Callable[[Any, Any], Any]:
    def div(a: float, b: float) -> float:
        if b == 0:
            raise EvalError("22012", "division by zero")
        return pgmath.check_float(float(a) / b, a, b, oid=oid)

    ops: dict[str, Callable[[Any, Any], Any]] = {
        "+": lambda a, b: pgmath.check_float(float(a) + b, a, b, oid=oid),
        "-": lambda a, b: pgmath.check_float(float(a) - b, a, b, oid=oid),
        "*": lambda a, b: pgmath.check_float(float(a) * b, a, b, oid=oid),
        "/": div,
    }
    if op not in ops:
        raise TypeError("% is not defined for float")
    return ops[op]


def _arith(e: ir.Arith, p: Sequence[Any]) -> Fn:
    lf, rf = compile_expr(e.left, p), compile_expr(e.right, p)
    fn = _arith_op(e.op, e.type_oid, e.left.type_oid, e.right.type_oid)

    def run(row: Row) -> Any:
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        return None if b is None else fn(a, b)

    return run


def _negate(e: ir.Negate, p: Sequence[Any]) -> Fn:
    fn, oid = compile_expr(e.arg, p), e.type_oid

    def run(row: Row) -> Any:
        v = fn(row)
        if v is None:
            return None
        return pgmath.check_int(-v, oid) if oid in pgmath.INT_TYPES else -v

    return run


def _cast(e: ir.Cast, p: Sequence[Any]) -> Fn:
    fn, src, dst = compile_expr(e.arg, p), e.arg.type_oid, e.type_oid
    temporal = pgtime.CASTS.get((src, dst))
    if temporal is not None:
        return lambda row: None if (v := fn(row)) is None else temporal(v, src)
    return lambda row: pgmath.cast(fn(row), src, dst)


def _case(e: ir.Case, p: Sequence[Any]) -> Fn:
    whens = [(compile_expr(c, p), compile_expr(v, p)) for c, v in e.whens]
    default = compile_expr(e.default, p) if e.default is not None else None

    def run(row: Row) -> Any:
        for cond, value in whens:
            if cond(row) is True:
                return value(row)
        return default(row) if default is not None else None

    return run


def _coalesce(e: ir.Coalesce, p: Sequence[Any]) -> Fn:
    fns = [compile_expr(a, p) for a in e.args]

    def run(row: Row) -> Any:
        for fn in fns:
            v = fn(row)
            if v is not None:
                return v
        return None

    return run


def _nullif(e: ir.NullIf, p: Sequence[Any]) -> Fn:
    lf, rf = compile_expr(e.left, p), compile_expr(e.right, p)

    def run(row: Row) -> Any:
        a = lf(row)
        return None if compare("=", a, rf(row)) is True else a

    return run


@lru_cache(maxsize=1024)
def like_regex(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    """LIKE pattern -> anchored regex (``%`` any string, ``_`` one char, ``\\`` escapes)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern):
                raise EvalError("22025", "LIKE pattern must not end with escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    flags = re.DOTALL | (re.IGNORECASE if case_insensitive else 0)
    return re.compile("".join(out), flags)


def _like(e: ir.Like, p: Sequence[Any]) -> Fn:
    af, pf = compile_expr(e.arg, p), compile_expr(e.pattern, p)
    ci, neg = e.case_insensitive, e.negated

    def run(row: Row) -> bool | None:
        a = af(row)
        if a is None:
            return None
        pat = pf(row)
        if pat is None:
            return None
        return (like_regex(pat, ci).fullmatch(a) is not None) != neg

    return run


def _regex(e: ir.Regex, p: Sequence[Any]) -> Fn:
    af, neg = compile_expr(e.arg, p), e.negated
    search = re.compile(e.python, re.DOTALL | (re.IGNORECASE | re.ASCII
                                               if e.case_insensitive else 0)).search

    def run(row: Row) -> bool | None:
        a = af(row)
        if a is None:
            return None
        return (search(a) is not None) != neg

    return run


def _inlist(e: ir.InList, p: Sequence[Any]) -> Fn:
    af, items, neg = compile_expr(e.arg, p), [compile_expr(i, p) for i in e.items], e.negated

    def run(row: Row) -> bool | None:
        a = af(row)
        if a is None:
            return None
        saw_null = False
        for item in items:
            r = compare("=", a, item(row))
            if r is None:
                saw_null = True
            elif r:
                return not neg
        return None if saw_null else neg

    return run


def _between(e: ir.Between, p: Sequence[Any]) -> Fn:
    both = ir.BoolOp("and", (ir.Compare(">=", e.arg, e.low, e.collation),
                             ir.Compare("<=", e.arg, e.high, e.collation)))
    return compile_expr(ir.Not(both) if e.negated else both, p)


def _func(e: ir.Func, p: Sequence[Any]) -> Fn:
    impl = FUNCTIONS.get(e.name)
    if impl is None:
        raise TypeError(f"unsupported function {e.name}")
    fns = [compile_expr(a, p) for a in e.args]
    types = tuple(a.type_oid for a in e.args)
    if e.name in NULL_TOLERANT:
        return lambda row: impl([f(row) for f in fns], types)

    def run(row: Row) -> Any:
        args = [f(row) for f in fns]
        if any(a is None for a in args):
            return None
        return impl(args, types)

    return run


_BUILDERS: dict[type, Callable[[Any, Sequence[Any]], Fn]] = {
    ir.ColumnRef: _column, ir.Const: _const, ir.Param: _param, ir.BoolOp: _boolop,
    ir.Not: _not, ir.Compare: _compare, ir.IsNull: _isnull, ir.Arith: _arith,
    ir.Negate: _negate, ir.Cast: _cast, ir.Case: _case, ir.Coalesce: _coalesce,
    ir.NullIf: _nullif, ir.Like: _like, ir.Regex: _regex, ir.InList: _inlist,
    ir.Between: _between,
    ir.Func: _func,
}
