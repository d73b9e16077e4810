"""UNION / INTERSECT / EXCEPT [ALL] and blocks used as relations (set-operation
branches, subqueries in FROM).

Owns: ``plan_union`` (branches keyed on the same parameters when at the top, unified to
PostgreSQL's common column types; UNION as DISTINCT over UNION ALL; INTERSECT / EXCEPT as a
set-operation state over the UNION ALL of the two operands marked with their side; ORDER BY
/ LIMIT over the output columns) and ``branch`` (a planned block as a relation of its
visible columns then its key columns, hidden).

Invariants: a branch carries no host step (range cut, window, parameter page, empty-row
aggregate): those exist only at the top of a statement; literal keys that differ between
branches make the statement plan again with literals pinned (``RetryPinned``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.plan import ir
from engine.plan.blocks import check_equality_types, unify_branches, union_operands
from engine.plan.exprs import ExprBuilder
from engine.plan.from_clause import PlanContext
from engine.plan.ordering import order_by, page_bounds
from engine.plan.planned import Block, RetryPinned
from engine.plan.rules.keys import KeySource
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.values import oids as T

Node = dict[str, Any]
#: Plans one SELECT block (``ctx``, the SelectStmt body, whether it is the statement's top).
PlanBlock = Callable[[PlanContext, Node, bool], Block]


_SETOPS: dict[tuple[str, bool], ir.SetOpKind] = {
    ("SETOP_INTERSECT", False): "intersect", ("SETOP_INTERSECT", True): "intersect_all",
    ("SETOP_EXCEPT", False): "except", ("SETOP_EXCEPT", True): "except_all"}


def plan_union(plan_block: PlanBlock, ctx: PlanContext, stmt: Node, top: bool) -> Block:
    """UNION ALL: branches (keyed on the same parameters, when at the top) unified to
    common column types; ORDER BY / LIMIT over the union's output columns. INTERSECT /
    EXCEPT [ALL]: the two operands so unified, each marked with its side, under one
    set-operation state (``ir.Distinct.setop``)."""
    op = str(stmt.get("op"))
    kind = _SETOPS.get((op, bool(stmt.get("all"))))
    if op != "SETOP_UNION" and kind is None:
        raise PlanError(f"{op.removeprefix('SETOP_')} (only UNION, INTERSECT, EXCEPT)")
    children = [stmt["larg"], stmt["rarg"]]
    if op == "SETOP_UNION" and stmt.get("all"):
        children = [b for child in children for b in union_operands(child)]
    planned = [branch(plan_block, ctx, {"SelectStmt": b}, top) for b in children]
    keys = planned[0][1]
    for _, other in planned[1:]:
        if other != keys:
            if any(src.param is None for src, _ in keys + other):
                raise RetryPinned  # literal keys differ per branch: pin them
            what = "UNION ALL branches" if kind is None else (
                f"{op.removeprefix('SETOP_')} operands")
            raise PlanError(f"{what} keyed on different parameters")
    branches = unify_branches(ctx, [b for b, _ in planned])
    first = branches[0]
    rel: ir.Rel = ir.UnionAll(tuple(b.rel for b in branches))
    if kind is not None:
        cols = first.rel.columns
        check_equality_types([c.type_oid for c in cols], range(len(cols)),
                             op.removeprefix("SETOP_"))
        rel = ir.Distinct(ir.UnionAll(tuple(_marked(b.rel, side)
                                            for side, b in enumerate(branches))), kind)
    elif not stmt.get("all"):
        cols = rel.columns
        check_equality_types([c.type_oid for c in cols], range(len(cols)), "UNION")
        rel = ir.Distinct(rel)  # UNION = DISTINCT over UNION ALL (NULLs equal, as in SQL)
    visible = len(first.scope.cols) - len(keys)
    names = [c.name for c in first.scope.cols]
    colls = [c.collation for c in first.scope.cols]
    scope = Scope(tuple(ScopeCol(None, c.name, c.type_oid, c.collation, 0)
                        for c in first.scope.cols[:visible]))
    builder = ExprBuilder(scope, ctx.catalog, clause="ORDER BY")
    exprs: list[ir.Expr] = [ir.ColumnRef(i, c.type_oid)
                            for i, c in enumerate(rel.columns[:visible])]
    for i, c in enumerate(colls[:visible]):
        builder.colls[i] = c
    order, hidden = order_by(stmt, builder, exprs, names[:visible])
    if hidden:
        raise PlanError("ORDER BY on a UNION must name an output column")
    block_keys = [(visible + j, src, rel.columns[visible + j].type_oid)
                  for j, (src, _) in enumerate(keys)]
    limit, offset, page = page_bounds(stmt, order)
    return Block(rel, names, colls, visible, block_keys, order, limit, offset, page=page)


def _marked(rel: ir.Rel, side: int) -> ir.Rel:
    """``rel`` with its side of a set operation (0 left, 1 right) as a last column."""
    cols = rel.columns
    return ir.Project(rel, (*(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols)),
                            ir.Const(side, T.INT4)), (*(c.name for c in cols), "?side?"))


def branch(plan_block: PlanBlock, ctx: PlanContext, node: Node, top: bool) -> tuple[
        Bound, list[tuple[KeySource, int]]]:
    """A block as a relation of its visible columns then its key columns (hidden)."""
    stmt = node.get("SelectStmt")
    if stmt is None:
        raise PlanError("subquery that is not a SELECT")
    block = plan_block(ctx, stmt, top)
    if block.cuts:
        raise PlanError("range parameter in a UNION branch")
    if block.windows:
        raise PlanError("window function in a UNION branch")
    if block.page is not None:
        raise PlanError("LIMIT/OFFSET parameter in a subquery or UNION branch")
    if block.empty_row is not None:
        if any(src.param is None for _, src, _ in block.keys):
            raise RetryPinned
        raise PlanError("keyed aggregate without GROUP BY inside UNION ALL")
    rel = block.rel
    group = tuple(pos for pos, _, _ in block.keys)
    if block.limit is not None:
        rel = ir.TopK(rel, group, block.order, block.limit, block.offset)
    keep = list(range(block.visible)) + list(group)
    cols = rel.columns
    if keep != list(range(len(cols))):
        rel = ir.Project(rel, tuple(ir.ColumnRef(i, cols[i].type_oid) for i in keep),
                         tuple(block.names[i] for i in keep))
    rte = ctx.new_rte()
    scope = Scope(tuple(ScopeCol(None, block.names[i], cols[i].type_oid,
                                 block.colls[i] if i < block.visible else None, rte,
                                 hidden=i >= block.visible) for i in keep))
    return Bound(rel, scope), [(src, t) for _, src, t in block.keys]
