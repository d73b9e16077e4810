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

A LATERAL subquery whose select list is aggregate calls only (``LATERAL (SELECT count(*) AS
n, max(at) AS last FROM ... WHERE inner = outer.col)``, no GROUP BY, HAVING, ORDER BY, LIMIT
or DISTINCT) has exactly one row per outer row: it is grouped by the inner columns and LEFT
JOINed whatever the join kind; an outer row without partners gets the empty group's values
(the LEFT JOIN's NULL, and 0 for counts).

Invariants: anything else that reads the outer side (the select list, ORDER BY, conditions
other than those equalities, aggregates in other forms) raises ``PlanError``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any

from engine.plan import ir
from engine.plan.exprs import correlated, is_aggregate_call
from engine.plan.from_clause import PlanContext, _join_keys
from engine.plan.grouping import has_aggregates
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.subqueries import _correlation, _plain_select

if TYPE_CHECKING:
    from engine.plan.planned import Block

Node = dict[str, Any]
LATERAL = "WeirLateral"  # marks a decorrelated LATERAL SELECT for the subquery planner


def lateral_join(ctx: PlanContext, outer: Bound, item: Node, kind: str) -> Bound:
    """``outer`` joined (``kind`` inner or left) with the LATERAL ``RangeSubselect`` item:
    the outer columns, then the subquery's, then its hidden correlation columns."""
    if kind not in ("inner", "left"):
        raise PlanError(f"LATERAL subquery in a {kind.upper()} JOIN")
    select = _plain_select({"subselect": item["subquery"]}, "LATERAL subquery", top_n=True)
    counts = _aggregates(select)
    outer_cols, inner = _correlation(outer.scope, select, "LATERAL subquery")
    shown = len(select.get("targetList", []))
    select["targetList"] = [*select.get("targetList", []),
                            *({"ResTarget": {"val": ref}} for ref in inner)]
    if counts is not None:
        select["groupClause"] = copy.deepcopy(inner)
        kind = "left"  # one row for every outer row, partners or not
    if correlated(outer.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("LATERAL subquery correlated other than by equalities in its WHERE")
    sub = ctx.subquery(ctx, {"SelectStmt": select} if counts is not None else
                       {"SelectStmt": select, LATERAL: len(inner)})
    alias = item.get("alias") or {}
    qualifier = alias.get("aliasname", "unnamed_subquery")
    names = [c["String"]["sval"] for c in alias.get("colnames", [])]
    if len(names) > shown:
        raise PlanError(f"{qualifier} has {shown} columns available but {len(names)} columns "
                        "specified")
    rte = ctx.new_rte()
    cols = tuple(dataclasses.replace(c, qualifier=qualifier, rte=rte, table_pk=False,
                                     name=names[i] if i < len(names) else c.name,
                                     hidden=c.hidden or i >= shown)
                 for i, c in enumerate(sub.scope.cols))
    sub = Bound(sub.rel, Scope(cols))
    width = len(outer.scope.cols)
    positions = [outer.scope.lookup(f) for f in outer_cols]
    lk, rk = _join_keys([(p, width + shown + i) for i, p in enumerate(positions)], outer, sub,
                       ctx.catalog)
    rel: ir.Rel = ir.Join(outer.rel, sub.rel, lk, rk, "left" if kind == "left" else "inner")
    if counts:  # an empty group counts 0 (the other aggregates are NULL, as padded)
        joined = rel.columns
        rel = ir.Project(rel, tuple(
            ir.Coalesce((ir.ColumnRef(i, c.type_oid), ir.Const(0, c.type_oid)), c.type_oid)
            if i - width in counts else ir.ColumnRef(i, c.type_oid)
            for i, c in enumerate(joined)), tuple(c.name for c in joined))
    return Bound(rel, Scope(outer.scope.cols + sub.scope.cols))


def _aggregates(select: Node) -> frozenset[int] | None:
    """For a select list of aggregate calls only: the positions of the counts (None when the
    subquery has no aggregate; PlanError for other forms with one)."""
    targets = select.get("targetList", [])
    if not has_aggregates([targets, select.get("sortClause"), select.get("havingClause")]):
        return None
    if any(select.get(c) for c in ("sortClause", "limitCount", "limitOffset",
                                   "distinctClause", "havingClause", "groupClause")):
        raise PlanError("LATERAL subquery with an aggregate and ORDER BY, LIMIT, OFFSET, "
                        "DISTINCT, GROUP BY or HAVING")
    counts = set()
    for i, target in enumerate(targets):
        call = target.get("ResTarget", {}).get("val", {}).get("FuncCall")
        if call is None or not is_aggregate_call(call):
            raise PlanError("LATERAL subquery with an aggregate whose select list is not "
                            "aggregate calls only (one row even for no partner)")
        name = [n.get("String", {}).get("sval") for n in call.get("funcname", [])][-1:]
        if name == ["count"]:
            counts.add(i)
    return frozenset(counts)


def per_correlation(ctx: PlanContext, block: Block, group: int) -> Bound:
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

