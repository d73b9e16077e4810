"""Scalar expression semantics (PostgreSQL's answers written out by hand)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.dataflow.expr import compile_expr
from engine.dataflow.pgmath import EvalError
from engine.plan import ir
from engine.values import oids as T


def c(v: object, t: int = T.INT4) -> ir.Const:
    return ir.Const(v, t)


def ev(e: ir.Expr, row: tuple[object, ...] = ()) -> object:
    return compile_expr(e)(row)


NULLB = c(None, T.BOOL)
TRUE, FALSE = c(True, T.BOOL), c(False, T.BOOL)


def test_three_valued_logic() -> None:
    assert ev(ir.BoolOp("and", (NULLB, FALSE))) is False
    assert ev(ir.BoolOp("and", (NULLB, TRUE))) is None
    assert ev(ir.BoolOp("or", (NULLB, TRUE))) is True
    assert ev(ir.BoolOp("or", (NULLB, FALSE))) is None
    assert ev(ir.Not(NULLB)) is None
    assert ev(ir.Compare("=", c(None), c(1))) is None
    assert ev(ir.IsNull(c(None))) is True
    assert ev(ir.IsNull(c(1), negated=True)) is True


def test_short_circuit_avoids_error() -> None:
    div = ir.Compare(">", ir.Arith("/", c(10), ir.ColumnRef(0, T.INT4), T.INT4), c(1))
    guard = ir.Compare("<>", ir.ColumnRef(0, T.INT4), c(0))
    assert ev(ir.BoolOp("and", (guard, div)), (0,)) is False


def test_integer_overflow_and_division() -> None:
    with pytest.raises(EvalError) as err:
        ev(ir.Arith("+", c(2**31 - 1), c(1), T.INT4))
    assert err.value.sqlstate == "22003"
    assert ev(ir.Arith("+", c(2**31 - 1, T.INT8), c(1, T.INT8), T.INT8)) == 2**31
    assert ev(ir.Arith("/", c(-7), c(2), T.INT4)) == -3
    assert ev(ir.Arith("%", c(-7), c(2), T.INT4)) == -1
    with pytest.raises(EvalError):
        ev(ir.Arith("/", c(1), c(0), T.INT4))
    with pytest.raises(EvalError):
        ev(ir.Negate(c(-(2**31)), T.INT4))


@pytest.mark.parametrize(("a", "b", "out"), [
    ("1", "3", "0.33333333333333333333"),
    ("3", "2", "1.5000000000000000"),
    ("30", "2", "15.0000000000000000"),
    ("10000", "3", "3333.3333333333333333"),
    ("1.50", "1", "1.50000000000000000000"),
    ("2", "3.000000000000000000001", "0.666666666666666666666"),
])
def test_numeric_division_scale(a: str, b: str, out: str) -> None:
    got = ev(ir.Arith("/", c(Decimal(a), T.NUMERIC), c(Decimal(b), T.NUMERIC), T.NUMERIC))
    assert str(got) == out


def test_casts() -> None:
    assert ev(ir.Cast(c(Decimal("2.5"), T.NUMERIC), T.INT4)) == 3
    assert ev(ir.Cast(c(Decimal("-2.5"), T.NUMERIC), T.INT4)) == -3
    assert ev(ir.Cast(c(2.5, T.FLOAT8), T.INT4)) == 2
    assert ev(ir.Cast(c(" 42 ", T.TEXT), T.INT4)) == 42
    assert ev(ir.Cast(c(0.1, T.FLOAT8), T.NUMERIC)) == Decimal("0.1")
    assert ev(ir.Cast(c(12, T.INT4), T.TEXT)) == "12"
    with pytest.raises(EvalError):
        ev(ir.Cast(c(2**40, T.INT8), T.INT4))
    with pytest.raises(EvalError):
        ev(ir.Cast(c("x", T.TEXT), T.INT4))


def test_like_in_between_case() -> None:
    s = c("Hello_World", T.TEXT)
    assert ev(ir.Like(s, c("H%\\_W%", T.TEXT))) is True
    assert ev(ir.Like(s, c("h%", T.TEXT))) is False
    assert ev(ir.Like(s, c("h%", T.TEXT), case_insensitive=True)) is True
    assert ev(ir.Like(s, c("H____", T.TEXT), negated=True)) is True
    assert ev(ir.InList(c(1), (c(2), c(None)))) is None
    assert ev(ir.InList(c(1), (c(1), c(None)))) is True
    assert ev(ir.InList(c(1), (c(2), c(None)), negated=True)) is None
    assert ev(ir.Between(c(2), c(1), c(3))) is True
    assert ev(ir.Between(c(2), c(None), c(1))) is False
    case = ir.Case(((NULLB, c(1)), (TRUE, c(2))), None, T.INT4)
    assert ev(case) == 2
    assert ev(ir.Coalesce((c(None), c(3)), T.INT4)) == 3
    assert ev(ir.NullIf(c(3), c(3), T.INT4)) is None


def test_string_functions() -> None:
    t = T.TEXT
    assert ev(ir.Func("substr", (c("abcdef", t), c(0), c(3)), t)) == "ab"
    assert ev(ir.Func("substr", (c("abcdef", t), c(-1), c(1)), t)) == ""
    assert ev(ir.Func("substr", (c("abcdef", t), c(3)), t)) == "cdef"
    assert ev(ir.Func("concat", (c("a", t), c(None, t), c(1)), t)) == "a1"
    assert ev(ir.Func("textcat", (c("a", t), c(None, t)), t)) is None
    assert ev(ir.Func("btrim", (c("  x ", t),), t)) == "x"
    assert ev(ir.Func("length", (c("héllo", t),), T.INT4)) == 5
    assert ev(ir.Func("upper", (c("abc", t),), t)) == "ABC"


def test_float_nan_equality_and_overflow() -> None:
    nan = c(float("nan"), T.FLOAT8)
    assert ev(ir.Compare("=", nan, nan)) is True
    assert ev(ir.Compare(">", nan, c(1e308, T.FLOAT8))) is True
    with pytest.raises(EvalError):
        ev(ir.Arith("*", c(1e308, T.FLOAT8), c(10.0, T.FLOAT8), T.FLOAT8))
