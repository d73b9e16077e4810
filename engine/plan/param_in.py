"""A ``$n`` parameter as the tested value of ``NOT IN``, cut by the host.

Owns: ``param_tested_not_in`` - the top-level conjuncts ``$n NOT IN (SELECT y FROM ...
[WHERE ...])`` and ``$n NOT IN (c1, c2, ...)`` (constants). Uncorrelated, the set S does not
depend on the outer row: the subquery's ``y`` values become one array (``array_agg(y ORDER BY
y)``, a global aggregate: one row, NULL when S is empty) LEFT JOINed on a constant as a hidden
column; the constants become one constant array column. Correlated by equalities (``WHERE
inner = outer AND rest``), the arrays are grouped by the inner correlation columns and LEFT
JOINed on the outer ones: an outer row without partners gets a NULL array (S empty, the row
kept, as PostgreSQL's NOT IN of an empty set is true). The host
cut (``RangeCut`` op ``not_in``, ``engine.plan.ranges.iter_cut``) keeps the row when the
array is NULL or empty, or when ``$n`` is not NULL, equals no element and no element is
NULL - PostgreSQL's NOT IN (false or NULL otherwise, and WHERE keeps only true). One cache
serves every value of ``$n``.

Only element types whose equality Python reproduces on the canonical values are accepted
(``param_antijoins.MEMBER_TYPES``); ``$n`` may be cast to the element's own type only.
Constants are integers (int4, or int8 when one does not fit) or strings (text), typed as
PostgreSQL types ``$n`` from them, plus NULL.
"""

from __future__ import annotations

from typing import Any

from engine.plan import ir
from engine.plan.blocks import with_computed
from engine.plan.exprs import correlated
from engine.plan.from_clause import PlanContext
from engine.plan.param_antijoins import (
    _element,
    _grouped,
    _left_join,
    _param_number,
)
from engine.plan.pgtypes import CAST_TYPES
from engine.plan.ranges import NOT_ANY_NODE
from engine.plan.scope import Bound, PlanError
from engine.plan.subqueries import Subquery, _check_pairs, _correlation, _plain_select
from engine.values import oids as T

Node = dict[str, Any]

_INT4 = range(-2**31, 2**31)


def tested_param(node: Node) -> int | None:
    """``n`` when ``node`` is ``$n`` (or ``$n::type``)."""
    return _param_number(node)


def param_tested_not_in(ctx: PlanContext, subquery: Subquery, bound: Bound,
                        conj: Node) -> tuple[Bound, Node] | None:
    """``bound`` with the array column and the ``not_in`` cut conjunct, for a WHERE conjunct
    ``$n NOT IN (SELECT ...)`` (a NOT over the sublink) or ``$n NOT IN (list)`` (an IN
    expression with ``<>``); None for other shapes."""
    body = conj.get("BoolExpr")
    negated = body is not None and body.get("boolop") == "NOT_EXPR" and len(
        body.get("args", [])) == 1
    link = body["args"][0].get("SubLink") if negated else None  # type: ignore[index]
    if link is not None and link.get("subLinkType") == "ANY_SUBLINK" and not link.get(
            "operName") and tested_param(link.get("testexpr") or {}) is not None:
        return _subquery(ctx, subquery, bound, link)
    expr = conj.get("A_Expr")
    if expr is not None and expr.get("kind") == "AEXPR_IN" and tested_param(
            expr.get("lexpr") or {}) is not None:
        names = [n["String"]["sval"] for n in expr.get("name", []) if "String" in n]
        if names == ["<>"]:
            return _constants(ctx, bound, expr)
    return None


def _subquery(ctx: PlanContext, subquery: Subquery, bound: Bound,
              link: Node) -> tuple[Bound, Node]:
    number = tested_param(link["testexpr"])
    assert number is not None
    select = _plain_select(link, "NOT IN subquery")
    if len(select.get("targetList", [])) != 1:
        raise PlanError("subquery has too many columns")
    y = select["targetList"][0]["ResTarget"]["val"]
    outer, inner = _correlation(bound.scope, select, "$n NOT IN subquery") if correlated(
        bound.scope, link) else ([], [])
    # SELECT inner..., array_agg(y ORDER BY y) FROM ... [GROUP BY inner...]
    arrays = _grouped(select, inner, y)
    if correlated(bound.scope, {"subselect": {"SelectStmt": arrays}}):
        raise PlanError("$n NOT IN a subquery correlated beyond equalities")
    positions = [bound.scope.lookup(f) for f in outer]
    sub = subquery(ctx, {"SelectStmt": arrays})
    if positions:
        _check_pairs(ctx, bound, positions, sub)
    element = _element(ctx, y, link["testexpr"], sub, "$n NOT IN")
    joined = _left_join(bound, sub, positions, list(range(len(positions))))
    # uncorrelated: left, its constant join column, the array and its constant column;
    # correlated: left, the inner correlation columns, the array
    position = len(joined.scope.cols) - (1 if positions else 2)
    return joined, _cut(position, number, element)


def _constants(ctx: PlanContext, bound: Bound, expr: Node) -> tuple[Bound, Node]:
    number = tested_param(expr["lexpr"])
    assert number is not None
    values: list[Any] = []
    kinds: set[type] = set()
    items = expr.get("rexpr") or {}
    for item in items.get("List", {}).get("items", []) if isinstance(items, dict) else items:
        const = item.get("A_Const")
        if const is None:
            raise PlanError("$n NOT IN a list of other than constants")
        if const.get("isnull"):
            values.append(None)
        elif "ival" in const:
            values.append(int(const["ival"].get("ival", 0)))
            kinds.add(int)
        elif "sval" in const:
            values.append(const["sval"]["sval"])
            kinds.add(str)
        else:
            raise PlanError("$n NOT IN a list of other than integers and strings")
    if len(kinds) != 1:
        raise PlanError("$n NOT IN a list of mixed or only NULL constants")
    if kinds == {str}:
        element = T.TEXT
    else:
        element = T.INT4 if all(v is None or v in _INT4 for v in values) else T.INT8
    cast = expr["lexpr"].get("TypeCast")
    if cast is not None:
        names = [n["String"]["sval"] for n in cast["typeName"].get("names", [])
                 if "String" in n]
        if names and CAST_TYPES.get(names[-1]) == T.INT8 and element == T.INT4:
            element = T.INT8  # ``$1::int8 NOT IN (1, 2)``: the constants widen
        if cast["typeName"].get("typmods") or cast["typeName"].get("arrayBounds") or \
                not names or CAST_TYPES.get(names[-1]) != element:
            raise PlanError("$n NOT IN a list, the parameter cast to another type")
    array = T.ARRAY_OF[element]
    joined = with_computed(bound, [ir.Const(tuple(values), array)], ctx)
    return joined, _cut(len(joined.scope.cols) - 1, number, element)


def _cut(position: int, number: int, element: int) -> Node:
    return {NOT_ANY_NODE: {"position": position, "param": number, "type": element,
                           "op": "not_in"}}
