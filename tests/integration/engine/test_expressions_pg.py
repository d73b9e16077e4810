"""The engine's scalar semantics against real PostgreSQL: same value (and numeric scale),
or an error with the same SQLSTATE, for each expression."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
import pytest

from engine.dataflow.expr import compile_expr
from engine.dataflow.pgmath import EvalError
from engine.plan import ir
from engine.values import oids as T

I4, I8, NU, F8, TX, B = T.INT4, T.INT8, T.NUMERIC, T.FLOAT8, T.TEXT, T.BOOL


def c(v: object, t: int) -> ir.Const:
    return ir.Const(v, t)


def n(v: str) -> ir.Const:
    return ir.Const(Decimal(v), NU)


CASES: list[tuple[str, ir.Expr]] = [
    ("1::numeric / 3::numeric", ir.Arith("/", n("1"), n("3"), NU)),
    ("10::numeric / 4::numeric", ir.Arith("/", n("10"), n("4"), NU)),
    ("1.50::numeric / 1::numeric", ir.Arith("/", n("1.50"), n("1"), NU)),
    ("123456789.123::numeric / 0.007::numeric", ir.Arith("/", n("123456789.123"), n("0.007"), NU)),
    ("0.0001::numeric / 7::numeric", ir.Arith("/", n("0.0001"), n("7"), NU)),
    ("2.5::numeric * 1.25::numeric", ir.Arith("*", n("2.5"), n("1.25"), NU)),
    ("-7::numeric % 3::numeric", ir.Arith("%", n("-7"), n("3"), NU)),
    ("(-7)::int4 / 2::int4", ir.Arith("/", c(-7, I4), c(2, I4), I4)),
    ("(-7)::int4 % 2::int4", ir.Arith("%", c(-7, I4), c(2, I4), I4)),
    ("2147483647::int4 + 1::int4", ir.Arith("+", c(2**31 - 1, I4), c(1, I4), I4)),
    ("1::int4 / 0::int4", ir.Arith("/", c(1, I4), c(0, I4), I4)),
    ("1e308::float8 * 10::float8", ir.Arith("*", c(1e308, F8), c(10.0, F8), F8)),
    ("2.5::numeric::int4", ir.Cast(n("2.5"), I4)),
    ("(-2.5)::numeric::int4", ir.Cast(n("-2.5"), I4)),
    ("2.5::float8::int4", ir.Cast(c(2.5, F8), I4)),
    ("3.5::float8::int4", ir.Cast(c(3.5, F8), I4)),
    ("0.1::float8::numeric", ir.Cast(c(0.1, F8), NU)),
    ("' 42 '::text::int4", ir.Cast(c(" 42 ", TX), I4)),
    ("'x'::text::int4", ir.Cast(c("x", TX), I4)),
    ("round(2.5::numeric)", ir.Func("round", (n("2.5"),), NU)),
    ("round(-2.345::numeric, 2)", ir.Func("round", (n("-2.345"), c(2, I4)), NU)),
    ("round(2.5::float8)", ir.Func("round", (c(2.5, F8),), F8)),
    ("substr('abcdef', 0, 3)", ir.Func("substr", (c("abcdef", TX), c(0, I4), c(3, I4)), TX)),
    ("substr('abcdef', -2, 5)", ir.Func("substr", (c("abcdef", TX), c(-2, I4), c(5, I4)), TX)),
    ("concat('a', NULL::text, 1)", ir.Func("concat", (c("a", TX), c(None, TX), c(1, I4)), TX)),
    ("'a' || NULL::text", ir.Func("textcat", (c("a", TX), c(None, TX)), TX)),
    ("'a' || 1.50::numeric", ir.Func("textcat", (c("a", TX), n("1.50")), TX)),
    ("btrim('xxhixx', 'x')", ir.Func("btrim", (c("xxhixx", TX), c("x", TX)), TX)),
    ("length('héllo')", ir.Func("length", (c("héllo", TX),), I4)),
    ("'a_c' LIKE 'a\\_c'", ir.Like(c("a_c", TX), c("a\\_c", TX))),
    ("'abc' LIKE 'a%'", ir.Like(c("abc", TX), c("a%", TX))),
    ("'ABC' ILIKE 'a_c'", ir.Like(c("ABC", TX), c("a_c", TX), case_insensitive=True)),
    ("1 IN (2, NULL)", ir.InList(c(1, I4), (c(2, I4), c(None, I4)))),
    ("1 NOT IN (2, NULL)", ir.InList(c(1, I4), (c(2, I4), c(None, I4)), negated=True)),
    ("2 BETWEEN 3 AND 1", ir.Between(c(2, I4), c(3, I4), c(1, I4))),
    ("NULL::bool AND false", ir.BoolOp("and", (c(None, B), c(False, B)))),
    ("NULL::bool OR true", ir.BoolOp("or", (c(None, B), c(True, B)))),
    ("nullif(3, 3)", ir.NullIf(c(3, I4), c(3, I4), I4)),
    ("coalesce(NULL::int4, 7)", ir.Coalesce((c(None, I4), c(7, I4)), I4)),
    ("'NaN'::float8 = 'NaN'::float8", ir.Compare("=", c(float("nan"), F8), c(float("nan"), F8))),
    ("'NaN'::float8 > 1e308::float8", ir.Compare(">", c(float("nan"), F8), c(1e308, F8))),
    ("abs(-2147483648::int4)", ir.Func("abs", (c(-(2**31), I4),), I4)),
]


def _pg(conn: psycopg.Connection[Any], sql: str) -> tuple[str, object]:
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {sql}")
            row = cur.fetchone()
            assert row is not None
            return "ok", row[0]
    except psycopg.Error as exc:
        conn.rollback()
        return "error", exc.sqlstate


def _ours(expr: ir.Expr) -> tuple[str, object]:
    try:
        return "ok", compile_expr(expr)(())
    except EvalError as exc:
        return "error", exc.sqlstate


@pytest.mark.parametrize(("sql", "expr"), CASES, ids=[s for s, _ in CASES])
def test_expression_matches_postgres(pg: Any, sql: str, expr: ir.Expr) -> None:
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        want = _pg(conn, sql)
    got = _ours(expr)
    if want[0] == "ok" and got[0] == "ok" and isinstance(want[1], Decimal | float):
        assert str(got[1]) == str(want[1]) or (want[1] != want[1] and got[1] != got[1])
    else:
        assert got == want
