"""Subqueries in WHERE that become anti-joins: ``NOT EXISTS (...)`` and ``x NOT IN (SELECT ...)``.

Owns: ``anti_joins`` — turns top-level WHERE conjuncts of the forms
- ``NOT EXISTS (SELECT ... FROM ... WHERE inner = outer [AND inner-only conditions])``: a LEFT
  JOIN with the DISTINCT correlation columns of the subquery plus a constant marker; the
  conjunct becomes "the marker is NULL" (no partner). An outer NULL matches nothing, so the
  row stays, as NOT EXISTS keeps it.
- ``col NOT IN (SELECT x FROM ...)``: PostgreSQL keeps a row when the subquery is empty, or
  when ``col`` is not NULL, equals no ``x`` and no ``x`` is NULL (otherwise the NOT IN is NULL
  or false). The plan LEFT JOINs the DISTINCT ``x`` values with a marker (the match) and
  joins, on a constant, one row of the subquery's ``count(*) > 0`` and ``count(x) =
  count(*)``; the conjunct becomes ``rows IS NOT TRUE OR (col IS NOT NULL AND no match AND
  no NULL)``. Correlated by equalities (``... WHERE inner = outer AND rest``), the match is
  on ``(outer, col) = (inner, x)`` and the counts are grouped by ``inner`` and LEFT JOINed on
  ``outer`` (no group: an empty subquery for that row). A subquery with a ``column = $n``
  conjunct is ``param_antijoins.param_not_in`` (host cuts on arrays, one cache for every
  ``$n``).

Invariants: as for semi-joins, only top-level conjuncts are rewritten and the joined columns
are hidden (``*`` and name lookup never see them, positions do not move).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.plan import ir
from engine.plan.exprs import correlated
from engine.plan.from_clause import PlanContext
from engine.plan.param_antijoins import param_not_exists, param_not_in
from engine.plan.param_in import param_tested_not_in
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.subqueries import (
    Subquery,
    _check_pairs,
    _correlation,
    _decorrelate,
    _exists,
    _fields,
    _in_subquery,
    _plain_select,
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


def exists_marker(ctx: PlanContext, subquery: Subquery, bound: Bound,
                  link: Node) -> tuple[Bound, int]:
    """An EXISTS subquery correlated by equalities -> the marked LEFT JOIN of ``_marked``
    (the marker is NULL exactly when no subquery row matches)."""
    outer, select = _decorrelate(bound.scope, link)
    positions = [bound.scope.lookup(f) for f in outer]
    return _marked(ctx, bound, positions, subquery(ctx, select))


def _not_exists(ctx: PlanContext, subquery: Subquery, bound: Bound,
                link: Node) -> tuple[Bound, Node]:
    bound, marker = exists_marker(ctx, subquery, bound, link)
    return bound, _null_test(_weir(marker))


def _not_in(ctx: PlanContext, subquery: Subquery, bound: Bound,
            link: Node) -> tuple[Bound, Node]:
    if correlated(bound.scope, link):
        return _correlated_not_in(ctx, subquery, bound, link)
    pos = bound.scope.lookup(_fields(link["testexpr"]))
    sub = subquery(ctx, link["subselect"])
    if len(sub.rel.columns) != 1:
        raise PlanError("subquery has too many columns")
    bound, marker = _marked(ctx, bound, [pos], sub)
    bound, stats = _join_counts(ctx, bound, [], sub)
    return bound, _not_in_condition(link, marker, stats)


def _correlated_not_in(ctx: PlanContext, subquery: Subquery, bound: Bound,
                       link: Node) -> tuple[Bound, Node]:
    """``x NOT IN (SELECT y ... WHERE inner = outer AND rest)``: the same test as the
    uncorrelated form, per correlation value: the match is on (outer, x) = (inner, y) and the
    counts are grouped by the inner columns (an outer row none of whose group exists sees an
    empty subquery, a NULL outer value included)."""
    select = _plain_select(link, "NOT IN subquery")
    outer, inner = _correlation(bound.scope, select, "NOT IN subquery")
    if len(select.get("targetList", [])) != 1:
        raise PlanError("subquery has too many columns")
    select["targetList"] = [{"ResTarget": {"val": ref}} for ref in inner] + \
        select["targetList"]
    if correlated(bound.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated NOT IN subquery (correlated beyond equalities)")
    positions = [bound.scope.lookup(f) for f in outer]
    pos = bound.scope.lookup(_fields(link["testexpr"]))
    sub = subquery(ctx, {"SelectStmt": select})
    bound, marker = _marked(ctx, bound, [*positions, pos], sub)
    bound, stats = _join_counts(ctx, bound, positions, sub)
    return bound, _not_in_condition(link, marker, stats)


def _join_counts(ctx: PlanContext, bound: Bound, outer: list[int],
                 sub: Bound) -> tuple[Bound, int]:
    """LEFT JOIN ``bound`` (on ``outer`` = the first columns of ``sub``) with, per group of
    those columns, ``(count(*) > 0, count(x) = count(*))`` for ``x`` the last column of
    ``sub``; with no ``outer`` the one row of the whole subquery is joined on a constant.
    Returns the new bound and the position of the first of the two (hidden) columns."""
    x = sub.rel.columns[-1]
    k = len(outer)
    counts = ir.Aggregate(sub.rel, tuple(range(k)), (
        ir.AggCall("count_star", None, T.INT8, "count"),
        ir.AggCall("count", ir.ColumnRef(k, x.type_oid), T.INT8, "count")))
    n, nn = ir.ColumnRef(k, T.INT8), ir.ColumnRef(k + 1, T.INT8)
    cols = counts.columns
    stats = ir.Project(counts, (*(ir.ColumnRef(i, cols[i].type_oid) for i in range(k)),
                                ir.Compare(">", n, ir.Const(0, T.INT8)),
                                ir.Compare("=", nn, n)),
                       (*(cols[i].name for i in range(k)), "?rows?", "?no_null?"))
    rte = ctx.new_rte()
    stats_scope = Scope(tuple(ScopeCol(None, c.name, c.type_oid, None, rte, hidden=True)
                              for c in stats.columns))
    right, left = Bound(stats, stats_scope), bound
    lk, rk = tuple(outer), tuple(range(k))
    if not outer:  # the one row of the whole subquery, joined to every row
        right, left = _with_constant(right), _with_constant(bound)
        lk, rk = (len(left.scope.cols) - 1,), (len(right.scope.cols) - 1,)
    width = len(left.scope.cols)
    rel = ir.Join(left.rel, right.rel, lk, rk, "left")
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in right.scope.cols)
    return Bound(rel, Scope(left.scope.cols + hidden)), width + k


def _not_in_condition(link: Node, marker: int, stats: int) -> Node:
    """PostgreSQL keeps the row when the subquery has no rows, or when the value is not
    NULL, matches nothing and the subquery holds no NULL (else NOT IN is false or NULL).
    ``?rows?`` is NULL (no group joined) or false when the subquery is empty."""
    rows = {"BooleanTest": {"arg": _weir(stats), "booltesttype": "IS_NOT_TRUE"}}
    kept = {"BoolExpr": {"boolop": "AND_EXPR", "args": [
        _null_test(link["testexpr"], negated=True), _null_test(_weir(marker)),
        _weir(stats + 1)]}}
    return {"BoolExpr": {"boolop": "OR_EXPR", "args": [rows, kept]}}


def anti_joins(ctx: PlanContext, subquery: Subquery, bound: Bound,
               where: list[Node]) -> tuple[Bound, list[Node]]:
    """Rewrite the NOT EXISTS / NOT IN conjuncts of ``where`` into anti-joins on ``bound``."""
    out: list[Node] = []
    for conj in where:
        tested = param_tested_not_in(ctx, subquery, bound, conj)
        if tested is not None:  # ``$n NOT IN (...)``
            bound, conj = tested
            out.append(conj)
            continue
        inner = _negated(conj)
        link = None if inner is None else _exists(inner)
        if link is not None:
            found = param_not_exists(ctx, subquery, bound, link)
            bound, conj = found if found is not None else _not_exists(ctx, subquery, bound,
                                                                      link)
        else:
            link = None if inner is None else _in_subquery(inner)
            if link is not None:
                cut = param_not_in(ctx, subquery, bound, link)
                if cut is not None:
                    bound, steps = cut
                    out.extend(steps)
                    continue
                bound, conj = _not_in(ctx, subquery, bound, link)
        out.append(conj)
    return bound, out
