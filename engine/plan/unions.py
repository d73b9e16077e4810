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

import dataclasses
from collections.abc import Callable
from typing import Any

from engine.plan import ir
from engine.plan.blocks import check_equality_types, unify_branches, union_operands
from engine.plan.exprs import ExprBuilder
from engine.plan.from_clause import PlanContext
from engine.plan.ordering import order_by, page_bounds
from engine.plan.planned import Block, Page, RetryPinned
from engine.plan.rules.keys import KeySource
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.setops import (
    Combine,
    Kind,
    Raw,
    host_setop,
    needs_host,
    raw_nested,
    raw_tree,
    tree_needs_host,
)
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
    if top and any(c.get("op", "SETOP_NONE") != "SETOP_NONE" and not c.get("withClause")
                   for c in children):  # nested set operations: the host may finish them
        leaves: list[Node] = []
        tree = raw_tree(stmt, leaves)
        blocks = [plan_block(ctx, b, top) for b in leaves]
        if tree_needs_host(blocks, tree):
            return _host_block(ctx, stmt, blocks, tree)
    blocks = [plan_block(ctx, b, top) for b in children]
    setop: Kind = "union_all" if kind is None and stmt.get("all") else (
        "union" if kind is None else kind)
    if top and needs_host(blocks, setop):
        return _host_block(ctx, stmt, blocks, (setop, list(range(len(blocks))), stmt))
    planned = [as_branch(ctx, b) for b in blocks]
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
    order = _union_order(ctx, stmt, rel, names[:visible], colls[:visible])
    block_keys = [(visible + j, src, rel.columns[visible + j].type_oid)
                  for j, (src, _) in enumerate(keys)]
    limit, offset, page = page_bounds(stmt, order)
    return Block(rel, names, colls, visible, block_keys, order, limit, offset, page=page)


def _union_order(ctx: PlanContext, stmt: Node, rel: ir.Rel, names: list[str],
                 colls: list[str | None]) -> tuple[ir.SortKey, ...]:
    """ORDER BY over a set operation's output columns (the first ``len(names)``)."""
    scope = Scope(tuple(ScopeCol(None, n, c.type_oid, coll, 0)
                        for n, c, coll in zip(names, rel.columns, colls, strict=False)))
    builder = ExprBuilder(scope, ctx.catalog, clause="ORDER BY")
    exprs: list[ir.Expr] = [ir.ColumnRef(i, c.type_oid)
                            for i, c in enumerate(rel.columns[: len(names)])]
    for i, c in enumerate(colls):
        builder.colls[i] = c
    order, hidden = order_by(stmt, builder, exprs, names)
    if hidden:
        raise PlanError("ORDER BY on a UNION must name an output column")
    return order


def _host_block(ctx: PlanContext, stmt: Node, blocks: list[Block], tree: Raw) -> Block:
    """A top-level set operation the host finishes (``engine.plan.setops``): the reader
    keeps the UNION ALL of its operands (``tree``'s leaves, marked with their side, with
    the columns of their steps), keyed on the keys they share."""
    rels, shared, names, step = host_setop(blocks)
    nested = raw_nested(tree)
    if nested and len({tuple(c.type_oid for c in r.columns[: step.visible])
                       for r in rels}) > 1:  # PostgreSQL resolves types per set operation
        raise PlanError("set operations nested in another over columns of different types")
    visible = step.visible
    colls = list(blocks[0].colls[:visible])
    scoped = [Bound(r, Scope(tuple(
        ScopeCol(None, n, c.type_oid, colls[i] if i < visible else None, 0,
                 hidden=i >= visible)
        for i, (n, c) in enumerate(zip(names, r.columns, strict=True))))) for r in rels]
    branches = unify_branches(ctx, scoped)
    rel: ir.Rel = ir.UnionAll(tuple(b.rel for b in branches))
    cols = rel.columns
    for kind in {tree[0], *(n[0] for n in nested)} - {"union_all"}:
        check_equality_types([c.type_oid for c in cols[:visible]], range(visible),
                             kind.split("_")[0].upper())

    def combine(node: Raw) -> Combine:
        ops = tuple(op if isinstance(op, int) else combine(op) for op in node[1])
        if node is tree:
            return Combine(node[0], ops)
        first = node[1][0]
        while not isinstance(first, int):
            first = first[1][0]
        order = _union_order(ctx, node[2], rel, blocks[first].names[:visible], colls)
        limit, offset, page = page_bounds(node[2], order)
        if page is None and limit is not None:
            page = Page(limit, None, offset, None)
        return Combine(node[0], ops, order if page is not None else (), page)

    order = _union_order(ctx, stmt, rel, names[:visible], colls)
    limit, offset, page = page_bounds(stmt, order)
    block_keys = [(visible + j, src, cols[visible + j].type_oid)
                  for j, (src, _) in enumerate(shared)]
    step = dataclasses.replace(step, root=combine(tree), limit=limit, offset=offset)
    return Block(rel, names, colls + [None] * (len(names) - visible), visible, block_keys,
                 order, None, 0, page=page, setop=step)


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
    return as_branch(ctx, plan_block(ctx, stmt, top))


def as_branch(ctx: PlanContext, block: Block) -> tuple[Bound, list[tuple[KeySource, int]]]:
    """A planned block as a relation of its visible columns then its key columns."""
    if block.setop is not None:
        raise PlanError("set operation with parameter steps inside another set operation")
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
