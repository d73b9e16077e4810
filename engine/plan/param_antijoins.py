"""``NOT EXISTS`` subqueries that compare a column with a ``$n`` parameter, cut by the host.

Owns: ``param_not_exists`` — the top-level conjunct ``NOT EXISTS (SELECT ... FROM ... WHERE
inner = outer AND inner_col = $n [AND inner-only conditions])`` ("stories user $2 has not
voted on") becomes a LEFT JOIN of the outer rows with, per correlation value, the array of
the subquery's ``inner_col`` values (``array_agg(inner_col ORDER BY inner_col)`` grouped by
the inner correlation columns), and a host cut (``RangeCut`` with op ``not_any``, see
``engine.plan.ranges``): the row is kept when no element equals ``$n``. The reader is keyed
on the statement's other keys only, so one cache serves every value of ``$n``.

Semantics (PostgreSQL's): ``inner_col = $n`` is true only for non-NULL equal values, so a
NULL element never matches, a NULL ``$n`` matches nothing (every row kept), and an outer row
without partners (the array NULL after the LEFT JOIN) is kept. Only element types whose
equality Python reproduces on the canonical values are accepted (integers, text and varchar
under a deterministic collation, uuid, date, bool); ``$n`` may be cast to the column's own
type only.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from engine.plan import ir
from engine.plan.exprs import correlated, deterministic
from engine.plan.from_clause import PlanContext, conjuncts
from engine.plan.pgtypes import CAST_TYPES, type_name
from engine.plan.ranges import FLAG_NODE, NOT_ANY_NODE
from engine.plan.scope import Bound, PlanError, Scope
from engine.plan.subqueries import Subquery, _check_pairs, _correlation, _fields, _plain_select
from engine.values import oids as T

Node = dict[str, Any]

#: element types whose SQL equality is Python's on the canonical values
MEMBER_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.TEXT, T.VARCHAR, T.UUID, T.DATE, T.BOOL})


def _param_number(node: Node) -> int | None:
    """``$n`` or ``$n::type`` (the cast checked later against the column's type)."""
    cast = node.get("TypeCast")
    if cast is not None:
        node = cast.get("arg", {})
    ref = node.get("ParamRef")
    return None if ref is None else int(ref["number"])


def _param_equality(conj: Node) -> tuple[Node, Node, int] | None:
    """``column = $n`` (either side): (the column reference, the parameter side, n)."""
    body = conj.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_OP" or \
            [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:] != ["="]:
        return None
    left, right = body.get("lexpr") or {}, body.get("rexpr") or {}
    for col, param in ((left, right), (right, left)):
        number = _param_number(param)
        if "ColumnRef" in col and number is not None:
            return col, param, number
    return None


def _split(select: Node) -> tuple[Node, Node, int] | None:
    """Take the one ``column = $n`` conjunct out of the subquery's WHERE."""
    found: list[Node] = []
    rest: list[Node] = []
    for conj in conjuncts(select.get("whereClause")):
        (found if _param_equality(conj) is not None else rest).append(conj)
    if len(found) != 1:
        return None
    select["whereClause"] = (None if not rest else rest[0] if len(rest) == 1 else
                             {"BoolExpr": {"boolop": "AND_EXPR", "args": rest}})
    return _param_equality(found[0])


def param_not_exists(ctx: PlanContext, subquery: Subquery, bound: Bound,
                     link: Node) -> tuple[Bound, Node] | None:
    """The LEFT JOIN with the per-correlation arrays and the cut conjunct, or None when the
    subquery has no ``column = $n`` conjunct (planned as a plain anti-join then)."""
    return _with_step(NOT_ANY_NODE, param_arrays(ctx, subquery, bound, link))


def param_flag(ctx: PlanContext, subquery: Subquery, bound: Bound,
               link: Node) -> tuple[Bound, Node] | None:
    """``EXISTS (... column = $n ...)`` as a select-list value: the same LEFT JOIN, and a
    placeholder the host replaces by whether an element equals ``$n`` (a ``flag`` step)."""
    return _with_step(FLAG_NODE, param_arrays(ctx, subquery, bound, link))


def _with_step(node: str, found: tuple[Bound, int, int, int] | None
               ) -> tuple[Bound, Node] | None:
    """The joined ``bound`` of :func:`param_arrays` and a ``node`` naming the array's position,
    the parameter's number and the element type (None passed through)."""
    if found is None:
        return None
    joined, position, number, element = found
    return joined, {node: {"position": position, "param": number, "type": element}}


def param_arrays(ctx: PlanContext, subquery: Subquery, bound: Bound,
                 link: Node) -> tuple[Bound, int, int, int] | None:
    """``bound`` LEFT JOINed with the per-correlation arrays, the array's position, ``n``
    and the element type; None without a ``column = $n`` conjunct."""
    where = link["subselect"].get("SelectStmt", {}).get("whereClause")
    if not any(_param_equality(c) is not None for c in conjuncts(where)):
        return None
    select = _plain_select(link, "NOT EXISTS subquery")
    split = _split(select)
    if split is None:
        return None
    column, param_side, number = split
    outer, inner = _correlation(bound.scope, select, "NOT EXISTS subquery")
    select["targetList"] = [{"ResTarget": {"val": ref}} for ref in inner] + [{"ResTarget": {
        "val": {"FuncCall": {
            "funcname": [{"String": {"sval": "array_agg"}}], "args": [copy.deepcopy(column)],
            "agg_order": [{"SortBy": {"node": copy.deepcopy(column),
                                      "sortby_dir": "SORTBY_DEFAULT",
                                      "sortby_nulls": "SORTBY_NULLS_DEFAULT"}}]}}}}]
    select["groupClause"] = copy.deepcopy(inner)
    if correlated(bound.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated NOT EXISTS subquery (correlated beyond equalities)")
    positions = [bound.scope.lookup(f) for f in outer]
    sub = subquery(ctx, {"SelectStmt": select})
    _check_pairs(ctx, bound, positions, sub)
    element = _element(ctx, select, column, param_side, sub)
    k = len(positions)
    rel = ir.Join(bound.rel, sub.rel, tuple(positions), tuple(range(k)), "left")
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in sub.scope.cols)
    return Bound(rel, Scope(bound.scope.cols + hidden)), len(bound.scope.cols) + k, number, \
        element


def _element(ctx: PlanContext, select: Node, column: Node, param_side: Node,
             sub: Bound) -> int:
    """The compared column's type, checked: one whose equality the host reproduces, the
    parameter not cast to another type."""
    array = sub.rel.columns[-1].type_oid
    element = T.ARRAY_ELEMENT.get(array)
    if element not in MEMBER_TYPES:
        raise PlanError("NOT EXISTS comparing a parameter with a column of type "
                        f"{type_name(element) if element is not None else type_name(array)}")
    cast = param_side.get("TypeCast")
    if cast is not None:
        names = [n["String"]["sval"] for n in cast["typeName"].get("names", [])
                 if "String" in n]
        if cast["typeName"].get("typmods") or cast["typeName"].get("arrayBounds") or \
                not names or CAST_TYPES.get(names[-1]) != element:
            raise PlanError("NOT EXISTS comparing a column with a parameter cast to another "
                            "type")
    if element in (T.TEXT, T.VARCHAR):
        coll = sub.scope.cols[-1].collation
        if not deterministic(coll, ctx.catalog):
            raise PlanError(f"NOT EXISTS comparing {'.'.join(_fields(column))} under a "
                            "nondeterministic collation with a parameter")
    return element
