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

Owns also ``param_not_in`` — ``x NOT IN (SELECT y FROM ... WHERE [inner = outer AND] c = $n
[AND rest])`` ("stories not among those user $1 voted on"). With S the subquery's ``y`` for
``$n``, PostgreSQL keeps a row when S is empty, or when ``x`` is not NULL, equals no element
and S holds no NULL. Each way to drop the row is "``$n`` is in an array of ``c`` values",
LEFT JOINed as hidden columns and cut by ``not_any``: M (the ``c`` of the correlation group's
rows with ``y = x``; no partner for a NULL ``x``), N (the ``c`` of the group's rows with
``y`` NULL) and R (every ``c`` of the group, read only where ``x`` is NULL: NULL NOT IN a
non-empty S; correlated, ``CASE WHEN x IS NULL THEN R END`` over R joined on the
correlation; uncorrelated, R joined on a flag that is 1 only where ``x`` is NULL, so a write
to the subquery's table re-emits only those rows). M, N and R hold only ``c`` values of the
group, so an empty S keeps the row, and a NULL ``$n`` makes S empty (every row kept). R is
left out when ``x`` cannot be NULL (a base table's primary-key or NOT NULL column, not from
the NULL-extended side of an outer join: ``rules.materialize.traces``). Without correlation
the arrays are over the whole subquery (N is then joined on a constant, which keeps that
join's outer input in full, as the plain uncorrelated NOT IN does).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from engine.plan import ir
from engine.plan.blocks import with_computed
from engine.plan.exprs import correlated, deterministic
from engine.plan.from_clause import PlanContext, conjuncts
from engine.plan.pgtypes import CAST_TYPES, type_name
from engine.plan.ranges import FLAG_NODE, NOT_ANY_NODE
from engine.plan.rules.materialize import traces
from engine.plan.scope import Bound, PlanError, Scope
from engine.plan.subqueries import (
    Subquery,
    _check_pairs,
    _correlation,
    _fields,
    _plain_select,
    _with_constant,
)
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
    found = _param_select(link, "NOT EXISTS subquery")
    if found is None:
        return None
    select, column, param_side, number = found
    outer, inner = _correlation(bound.scope, select, "NOT EXISTS subquery")
    select = _grouped(select, inner, column)
    if correlated(bound.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated NOT EXISTS subquery (correlated beyond equalities)")
    positions = [bound.scope.lookup(f) for f in outer]
    sub = subquery(ctx, {"SelectStmt": select})
    _check_pairs(ctx, bound, positions, sub)
    element = _element(ctx, column, param_side, sub, "NOT EXISTS")
    width = len(bound.scope.cols)
    return _left_join(bound, sub, positions, list(range(len(positions)))), \
        width + len(positions), number, element


def _param_select(link: Node, what: str) -> tuple[Node, Node, Node, int] | None:
    """A copy of the subquery's SELECT without its one ``column = $n`` conjunct, the column,
    the parameter side and ``n``; None when there is no such conjunct."""
    where = link["subselect"].get("SelectStmt", {}).get("whereClause")
    if not any(_param_equality(c) is not None for c in conjuncts(where)):
        return None
    select = _plain_select(link, what)
    split = _split(select)
    if split is None:
        return None
    return select, *split


def _array_agg(arg: Node) -> Node:
    """``array_agg(arg ORDER BY arg)`` (ordered, so the array is one value for one set)."""
    return {"FuncCall": {
        "funcname": [{"String": {"sval": "array_agg"}}], "args": [copy.deepcopy(arg)],
        "agg_order": [{"SortBy": {"node": copy.deepcopy(arg), "sortby_dir": "SORTBY_DEFAULT",
                                  "sortby_nulls": "SORTBY_NULLS_DEFAULT"}}]}}


def param_not_in(ctx: PlanContext, subquery: Subquery, bound: Bound,
                 link: Node) -> tuple[Bound, list[Node]] | None:
    """``x NOT IN (subquery with one c = $n conjunct)``: ``bound`` LEFT JOINed with the arrays
    M (per correlation value and ``y``, on ``x``), N (per correlation value, rows with ``y``
    NULL) and R (per correlation value, joined only to rows whose ``x`` is NULL), and the
    three ``not_any`` cut conjuncts; None without a ``column = $n`` conjunct (planned as a
    plain NOT IN then)."""
    found = _param_select(link, "NOT IN subquery")
    if found is None:
        return None
    select, column, param_side, number = found
    if len(select.get("targetList", [])) != 1:
        raise PlanError("subquery has too many columns")
    y = select["targetList"][0]["ResTarget"]["val"]
    outer, inner = _correlation(bound.scope, select, "NOT IN subquery") if correlated(
        bound.scope, link) else ([], [])
    per_value = _grouped(select, [*inner, y], column)  # M
    nulls = _grouped(select, inner, column)  # N
    nulls["whereClause"] = {"BoolExpr": {"boolop": "AND_EXPR", "args": [
        *conjuncts(select.get("whereClause")),
        {"NullTest": {"arg": copy.deepcopy(y), "nulltesttype": "IS_NULL"}}]}}
    rows = _grouped(select, inner, column)  # R
    if any(correlated(bound.scope, {"subselect": {"SelectStmt": s}}) for s in (
            per_value, nulls, rows)):
        raise PlanError("correlated NOT IN subquery (correlated beyond equalities)")
    positions = [bound.scope.lookup(f) for f in outer]
    x = bound.scope.lookup(_fields(link["testexpr"]))
    subs = [subquery(ctx, {"SelectStmt": s}) for s in (per_value, nulls, rows)]
    element = _element(ctx, column, param_side, subs[0], "NOT IN")
    _check_pairs(ctx, bound, [*positions, x], subs[0])
    x_col = bound.scope.cols[x]
    x_null = ir.IsNull(ir.ColumnRef(x, x_col.type_oid))
    joined, cuts = bound, []
    pairs = [([*positions, x], subs[0]), (positions, subs[1])]
    nullable = not ((x_col.table_pk or x_col.not_null) and traces(bound.rel, x))
    if nullable and not positions:  # R joined on a flag that is 1 only where x is NULL
        joined = with_computed(bound, [ir.Case(((x_null, ir.Const(1, T.INT4)),), None,
                                               T.INT4)], ctx)
        pairs.append(([len(joined.scope.cols) - 1], subs[2]))
    for on, sub in pairs:
        array = len(joined.scope.cols) + len(sub.scope.cols) - 1  # the subquery's last column
        keys = list(range(len(on)))
        if sub is subs[2]:  # joined on the constant 1 = x's NULL flag
            sub = _with_constant(sub)
            keys = [len(sub.scope.cols) - 1]
        elif not on:
            array += 1  # _left_join adds the constant join column to the left first
        joined = _left_join(joined, sub, on, keys)
        cuts.append({NOT_ANY_NODE: {"position": array, "param": number, "type": element}})
    if nullable and positions:
        # R per correlation value (partial state like M and N), read only where x is NULL
        array = len(joined.scope.cols) + len(subs[2].scope.cols) - 1
        joined = _left_join(joined, subs[2], positions, list(range(len(positions))))
        r = ir.ColumnRef(array, subs[2].rel.columns[-1].type_oid)
        joined = with_computed(joined, [ir.Case(((x_null, r),), None, r.type_oid)], ctx)
        cuts.append({NOT_ANY_NODE: {"position": len(joined.scope.cols) - 1, "param": number,
                                    "type": element}})
    return joined, cuts


def _grouped(select: Node, groups: list[Node], column: Node) -> Node:
    """A copy of ``select`` grouped by ``groups``, selecting them and the array of
    ``column``."""
    out = copy.deepcopy(select)
    out["targetList"] = [{"ResTarget": {"val": copy.deepcopy(v)}} for v in (
        *groups, _array_agg(column))]
    out["groupClause"] = copy.deepcopy(groups)
    return out


def _left_join(bound: Bound, sub: Bound, on: list[int], keys: list[int]) -> Bound:
    """``bound`` LEFT JOINed with ``sub`` on ``on`` = its ``keys`` columns (on a constant
    when there are none: ``sub`` then has at most one row), ``sub``'s columns hidden."""
    left, right = bound, sub
    lk, rk = tuple(on), tuple(keys)
    if not on:
        left, right = _with_constant(bound), _with_constant(sub)
        lk, rk = (len(left.scope.cols) - 1,), (len(right.scope.cols) - 1,)
    rel = ir.Join(left.rel, right.rel, lk, rk, "left")
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in right.scope.cols)
    return Bound(rel, Scope(left.scope.cols + hidden))


def _element(ctx: PlanContext, column: Node, param_side: Node, sub: Bound, what: str) -> int:
    """The compared column's type, checked: one whose equality the host reproduces, the
    parameter not cast to another type."""
    array = sub.rel.columns[-1].type_oid
    element = T.ARRAY_ELEMENT.get(array)
    if element not in MEMBER_TYPES:
        raise PlanError(f"{what} comparing a parameter with a column of type "
                        f"{type_name(element) if element is not None else type_name(array)}")
    cast = param_side.get("TypeCast")
    if cast is not None:
        names = [n["String"]["sval"] for n in cast["typeName"].get("names", [])
                 if "String" in n]
        if cast["typeName"].get("typmods") or cast["typeName"].get("arrayBounds") or \
                not names or CAST_TYPES.get(names[-1]) != element:
            raise PlanError(f"{what} comparing a column with a parameter cast to another "
                            "type")
    if element in (T.TEXT, T.VARCHAR):
        coll = sub.scope.cols[-1].collation
        if not deterministic(coll, ctx.catalog):
            raise PlanError(f"{what} comparing {'.'.join(_fields(column))} under a "
                            "nondeterministic collation with a parameter")
    return element
