"""Subqueries in WHERE that become anti-joins: ``NOT EXISTS (...)`` and ``x NOT IN (SELECT ...)``.

Owns: ``anti_joins`` — turns top-level WHERE conjuncts of the forms
- ``NOT EXISTS (SELECT ... FROM ... WHERE inner = outer [AND inner-only conditions])``: a LEFT
  JOIN with the DISTINCT correlation columns of the subquery plus a constant marker; the
  conjunct becomes "the marker is NULL" (no partner). An outer NULL matches nothing, so the
  row stays, as NOT EXISTS keeps it.
- ``col NOT IN (SELECT x FROM ...)`` (uncorrelated): PostgreSQL keeps a row when the subquery
  is empty, or when ``col`` is not NULL, equals no ``x`` and no ``x`` is NULL (otherwise the
  NOT IN is NULL or false). The plan LEFT JOINs the DISTINCT ``x`` values with a marker (the
  match) and joins, on a constant, one row of the subquery's ``count(*) = 0`` and
  ``count(x) = count(*)``; the conjunct becomes ``empty OR (col IS NOT NULL AND no match AND
  no NULL)``.

Invariants: as for semi-joins, only top-level conjuncts are rewritten and the joined columns
are hidden (``*`` and name lookup never see them, positions do not move).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.plan import ir
from engine.plan.exprs import correlated
from engine.plan.from_clause import PlanContext
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.subqueries import (
    Subquery,
    _check_pairs,
    _decorrelate,
    _exists,
    _fields,
    _in_subquery,
    _with_constant,
)
from engine.values import oids as T

Node = dict[str, Any]


def _negated(node: Node) -> Node | None:
    body = node.get("BoolExpr")
    if body is None or body.get("boolop") != "NOT_EXPR" or len(body.get("args", [])) != 1:
        return None
    inner: Node = body["args"][0]
    return inner


def _weir(position: int) -> Node:
    return {"WeirColumn": {"position": position}}


def _null_test(arg: Node, negated: bool = False) -> Node:
    return {"NullTest": {"arg": arg, "nulltesttype": "IS_NOT_NULL" if negated else "IS_NULL"}}


def _marked(ctx: PlanContext, bound: Bound, outer: list[int], sub: Bound) -> tuple[Bound, int]:
    """LEFT JOIN ``bound`` with the distinct rows of ``sub`` (one column per outer position)
    plus a constant marker; returns the new bound and the marker's position."""
    if len(sub.scope.cols) != len(outer):
        raise PlanError("subquery has too many columns")
    _check_pairs(ctx, bound, outer, sub)
    marked = _with_constant(sub)
    right = ir.Distinct(marked.rel)
    rel = ir.Join(bound.rel, right, tuple(outer), tuple(range(len(outer))), "left")
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in marked.scope.cols)
    return Bound(rel, Scope(bound.scope.cols + hidden)), len(bound.scope.cols) + len(outer)


def _not_exists(ctx: PlanContext, subquery: Subquery, bound: Bound,
                link: Node) -> tuple[Bound, Node]:
    outer, select = _decorrelate(bound.scope, link)
    positions = [bound.scope.lookup(f) for f in outer]
    bound, marker = _marked(ctx, bound, positions, subquery(ctx, select))
    return bound, _null_test(_weir(marker))


def _not_in(ctx: PlanContext, subquery: Subquery, bound: Bound,
            link: Node) -> tuple[Bound, Node]:
    if correlated(bound.scope, link):
        raise PlanError("correlated NOT IN subquery")
    pos = bound.scope.lookup(_fields(link["testexpr"]))
    sub = subquery(ctx, link["subselect"])
    bound, marker = _marked(ctx, bound, [pos], sub)
    # one row: (count(*) = 0, count(x) = count(*)), joined to every row on a constant
    x = sub.rel.columns[0] if sub.rel.columns else None
    if x is None or len(sub.rel.columns) != 1:
        raise PlanError("subquery has too many columns")
    counts = ir.Aggregate(sub.rel, (), (
        ir.AggCall("count_star", None, T.INT8, "count"),
        ir.AggCall("count", ir.ColumnRef(0, x.type_oid), T.INT8, "count")))
    n, nn = ir.ColumnRef(0, T.INT8), ir.ColumnRef(1, T.INT8)
    stats = ir.Project(counts, (ir.Compare("=", n, ir.Const(0, T.INT8)), ir.Compare("=", nn, n)),
                       ("?empty?", "?no_null?"))
    rte = ctx.new_rte()
    stats_scope = Scope(tuple(ScopeCol(None, name, T.BOOL, None, rte, hidden=True)
                              for name in ("?empty?", "?no_null?")))
    right = _with_constant(Bound(stats, stats_scope))
    left = _with_constant(bound)
    width = len(left.scope.cols)
    rel = ir.Join(left.rel, right.rel, (width - 1,), (len(right.scope.cols) - 1,))
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in right.scope.cols)
    bound = Bound(rel, Scope(left.scope.cols + hidden))
    kept = {"BoolExpr": {"boolop": "AND_EXPR", "args": [
        _null_test(link["testexpr"], negated=True), _null_test(_weir(marker)),
        _weir(width + 1)]}}
    return bound, {"BoolExpr": {"boolop": "OR_EXPR", "args": [_weir(width), kept]}}


def anti_joins(ctx: PlanContext, subquery: Subquery, bound: Bound,
               where: list[Node]) -> tuple[Bound, list[Node]]:
    """Rewrite the NOT EXISTS / NOT IN conjuncts of ``where`` into anti-joins on ``bound``."""
    out: list[Node] = []
    for conj in where:
        inner = _negated(conj)
        link = None if inner is None else _exists(inner)
        if link is not None:
            bound, conj = _not_exists(ctx, subquery, bound, link)
        else:
            link = None if inner is None else _in_subquery(inner)
            if link is not None:
                bound, conj = _not_in(ctx, subquery, bound, link)
        out.append(conj)
    return bound, out
