"""jsonb and json operators for the planner: which forms are planned and their result types.

Owns: ``json_operator`` (``->``, ``->>``, ``#>``, ``#>>``, ``@>``, ``<@``, ``?`` with a jsonb
left side), called by ``ExprBuilder.op``. Their kernels are ``engine.dataflow.pgjson``.
On ``json`` (which keeps the document's original text: whitespace, duplicate keys) only
``->``, ``->>``, ``#>`` and ``#>>`` exist; their kernels are ``engine.dataflow.pgjsontext``.
A path for ``#>`` / ``#>>`` must be a literal; a jsonb literal is typed to the text
PostgreSQL prints for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.plan import ir, pgtypes
from engine.plan.literals import LiteralError, literal_value
from engine.plan.scope import PlanError
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.exprs import ExprBuilder

JSON_OPERATORS = frozenset({"->", "->>", "#>", "#>>", "@>", "<@", "?"})
_TEXT_ARRAY = T.ARRAY_OF[T.TEXT]


def json_operator(b: ExprBuilder, name: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    """``left name right`` for the jsonb operators above, and json's path operators
    (PlanError for the other types)."""
    if name in ("@>", "<@") and left.type_oid == T.UNKNOWN and right.type_oid == T.JSONB:
        left = _jsonb_literal(b, left)
    json = left.type_oid == T.JSON and name in ("->", "->>", "#>", "#>>")
    if left.type_oid != T.JSONB and not json:
        raise PlanError(f"operator {name} on {pgtypes.type_name(left.type_oid)}")
    kind = "json" if json else "jsonb"  # json: kernels over the original text
    if name in ("->", "->>"):
        suffix = "_text" if name == "->>" else ""
        result = T.TEXT if suffix else left.type_oid
        if right.type_oid in (T.INT2, T.INT4):
            return ir.Func(kind + "_index" + suffix, (left, b.coerce(right, T.INT4)), result)
        return ir.Func(kind + "_field" + suffix, (left, _text(b, name, right)), result)
    if name in ("#>", "#>>"):
        if not (isinstance(right, ir.Const) and right.type_oid == T.UNKNOWN
                and isinstance(right.value, str)):
            raise PlanError(f"operator {name} with a path that is not a literal")
        try:
            path = literal_value(_TEXT_ARRAY, right.value)
        except LiteralError as exc:
            raise PlanError(str(exc)) from exc
        suffix = "_text" if name == "#>>" else ""
        return ir.Func(kind + "_path" + suffix, (left, ir.Const(path, _TEXT_ARRAY)),
                       T.TEXT if suffix else left.type_oid)
    if name == "?":
        return ir.Func("jsonb_exists", (left, _text(b, name, right)), T.BOOL)
    right = _jsonb_literal(b, right)
    if right.type_oid != T.JSONB:
        raise PlanError(f"operator jsonb {name} {pgtypes.type_name(right.type_oid)}")
    return ir.Func("jsonb_contains" if name == "@>" else "jsonb_contained", (left, right),
                   T.BOOL)


def _text(b: ExprBuilder, name: str, expr: ir.Expr) -> ir.Expr:
    expr = b.coerce(expr, T.TEXT)
    if expr.type_oid != T.TEXT:
        raise PlanError(f"operator jsonb {name} {pgtypes.type_name(expr.type_oid)}")
    return expr


def _jsonb_literal(b: ExprBuilder, expr: ir.Expr) -> ir.Expr:
    return b.coerce(expr, T.JSONB) if expr.type_oid == T.UNKNOWN else expr
