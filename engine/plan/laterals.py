"""LATERAL subqueries correlated by equalities: the top-n-per-row idiom, as a join with a
top-k per correlation value.

Owns: ``lateral_join`` (``outer [LEFT] JOIN LATERAL (SELECT ... WHERE inner = outer.col
[AND rest] [ORDER BY ... LIMIT n]) x``, or the comma form) and ``per_correlation`` (the
planned subquery block -> its rows with a top-k grouped by the correlation columns).

For every outer row PostgreSQL evaluates the subquery with ``outer.col`` fixed; when the
outer columns appear only in equalities ``inner = outer.col`` of its top-level WHERE, that
is the subquery without them, restricted to ``inner = outer.col``: the same rows for every
outer row with the same value. So the plan moves the inner columns into the select list
(hidden), keeps per value of them what ORDER BY / LIMIT / OFFSET keep (a ``TopK`` grouped
by them; DISTINCT over them too), and equi-joins the outer side to it (inner, or LEFT for
``LEFT JOIN LATERAL ... ON true``: a NULL outer value matches nothing, as ``inner = NULL``
selects nothing). Rows tied on the ORDER BY are kept by the whole row's order, one of the
orders PostgreSQL may choose (as a top-level LIMIT).

Invariants: anything else that reads the outer side (the select list, ORDER BY, conditions
other than those equalities, aggregates over the correlated rows, whose empty group
PostgreSQL still returns) raises ``PlanError``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from engine.plan import ir
from engine.plan.exprs import correlated
from engine.plan.from_clause import PlanContext, _join_keys
from engine.plan.grouping import has_aggregates
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.subqueries import _correlation, _plain_select

if TYPE_CHECKING:
    from engine.plan.planner import _Block

Node = dict[str, Any]
LATERAL = "WeirLateral"  # marks a decorrelated LATERAL SELECT for the subquery planner


def lateral_join(ctx: PlanContext, outer: Bound, item: Node, kind: str) -> Bound:
    """``outer`` joined (``kind`` inner or left) with the LATERAL ``RangeSubselect`` item:
    the outer columns, then the subquery's, then its hidden correlation columns."""
    if kind not in ("inner", "left"):
        raise PlanError(f"LATERAL subquery in a {kind.upper()} JOIN")
    select = _plain_select({"subselect": item["subquery"]}, "LATERAL subquery", top_n=True)
    if has_aggregates([select.get("targetList"), select.get("sortClause")]):
        raise PlanError("LATERAL subquery with an aggregate (one row even for no partner)")
    outer_cols, inner = _correlation(outer.scope, select, "LATERAL subquery")
    shown = len(select.get("targetList", []))
    select["targetList"] = [*select.get("targetList", []),
                            *({"ResTarget": {"val": ref}} for ref in inner)]
    if correlated(outer.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("LATERAL subquery correlated other than by equalities in its WHERE")
    sub = ctx.subquery(ctx, {"SelectStmt": select, LATERAL: len(inner)})
    alias = item.get("alias") or {}
    qualifier = alias.get("aliasname", "unnamed_subquery")
    names = [c["String"]["sval"] for c in alias.get("colnames", [])]
    if len(names) > shown:
        raise PlanError(f"{qualifier} has {shown} columns available but {len(names)} columns "
                        "specified")
    rte = ctx.new_rte()
    cols = tuple(dataclasses.replace(c, qualifier=qualifier, rte=rte, table_pk=False,
                                     name=names[i] if i < len(names) else c.name)
                 for i, c in enumerate(sub.scope.cols))
    sub = Bound(sub.rel, Scope(cols))
    width = len(outer.scope.cols)
    positions = [outer.scope.lookup(f) for f in outer_cols]
    lk, rk = _join_keys([(p, width + shown + i) for i, p in enumerate(positions)], outer, sub,
                       ctx.catalog)
    rel = ir.Join(outer.rel, sub.rel, lk, rk, "left" if kind == "left" else "inner")
    return Bound(rel, Scope(outer.scope.cols + sub.scope.cols))


def per_correlation(ctx: PlanContext, block: _Block, group: int) -> Bound:
    """The planned decorrelated block (its last ``group`` visible columns the inner
    correlation columns) -> its rows, cut per correlation value by its LIMIT / OFFSET."""
    if block.cuts or block.windows or block.page is not None or block.empty_row is not None \
            or block.keys:
        raise PlanError("LATERAL subquery with parameters, windows or an aggregate")
    rel = block.rel
    visible = block.visible
    corr = tuple(range(visible - group, visible))
    if block.limit is not None:
        rel = ir.TopK(rel, corr, block.order, block.limit, block.offset)
    cols = rel.columns
    if len(cols) != visible:
        rel = ir.Project(rel, tuple(ir.ColumnRef(i, cols[i].type_oid) for i in range(visible)),
                         tuple(block.names[:visible]))
    rte = ctx.new_rte()
    scope = Scope(tuple(ScopeCol(None, block.names[i], cols[i].type_oid, block.colls[i], rte,
                                 hidden=i >= visible - group) for i in range(visible)))
    return Bound(rel, scope)

