"""SELECT -> IR: the planner's core, one SELECT block at a time.

Owns: ``plan_select`` (a statement's parse tree -> ``PlannedQuery`` or ``Unsupported``) and
the per-block pipeline (``_Planner``): CTEs, FROM and the WHERE's subquery forms (semi-,
anti-joins, conditional and scalar subqueries), keys from the top-level WHERE (equalities,
IN lists, expressions) and range cuts, filters, grouping, windows, and the select list with
its hidden ORDER BY / key / range columns, optionally under DISTINCT. Its collaborators:
``planned`` (the result types), ``ordering`` (ORDER BY / LIMIT / OFFSET), ``unions``
(UNION [ALL] and blocks as relations), ``grouping`` (GROUP BY items and aggregates),
``readers`` (a block -> its Reader).

Planning is attempted with the most lifting first (literals and IN lists as keys), then with
IN lists as filters, then with every literal pinned, whichever first gives a plan that is
exact (e.g. an IN-list key is refused where merging per-key lookups would differ).

Invariants:
- Unsupported is data: every ``PlanError`` raised while planning becomes ``Unsupported``.
- ``PlannedQuery.reader.key[i]`` takes its value from ``key_sources[i]`` (a statement
  parameter or a literal lifted out of the text); literals not lifted are constants of the
  plan and part of the query's identity.
- Output column names and types are the ones PostgreSQL reports for the statement.
- After planning, the rules (``engine.plan.rules``) run in a fixed order; they preserve the
  result of the plan for every key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from engine.plan import ir
from engine.plan.antijoins import anti_joins
from engine.plan.blocks import check_equality_types, key_columns, select_list, with_computed
from engine.plan.exprs import ExprBuilder
from engine.plan.from_clause import PlanContext, bind_from, conjuncts
from engine.plan.grouping import Grouping, group_items, has_aggregates, having_on_groups
from engine.plan.laterals import LATERAL, per_correlation
from engine.plan.ordering import order_by, page_bounds
from engine.plan.planned import Block, Page, PlannedQuery, RetryPinned
from engine.plan.pullup import pulled_conjuncts
from engine.plan.range_aggs import range_aggregates
from engine.plan.ranges import RangeCut, host_cuts
from engine.plan.readers import block_reader, empty_row, mergeable
from engine.plan.rules import optimize
from engine.plan.rules.keys import Key, choose_keys
from engine.plan.scope import Bound, PlanError, Scope
from engine.plan.sessionzone import planning_in
from engine.plan.setops import setop_reader
from engine.plan.sublinks import conditional_subqueries, select_exists
from engine.plan.subqueries import scalar_subqueries, semi_joins, where_scalar_subqueries
from engine.plan.unions import branch, plan_union
from engine.plan.windows import (
    WindowSpec,
    check_partitions,
    extract_windows,
    plain_order_positions,
    window_calls,
)
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import Catalog
from engine.sql.text import Literal
from engine.values import oids as T

__all__ = ["Page", "PlannedQuery", "plan_select"]

Node = dict[str, Any]


class _Planner:
    def __init__(self, literals: tuple[Literal, ...], lift: bool, lift_in: bool) -> None:
        self.literals = literals
        self.lift = lift
        self.lift_in = lift_in

    # ------------------------------------------------------------------ blocks
    def block(self, ctx: PlanContext, stmt: Node, top: bool) -> Block:
        saved = dict(ctx.ctes)
        for cte in (stmt.get("withClause") or {}).get("ctes", []):
            body = cte["CommonTableExpr"]
            if body.get("aliascolnames"):
                raise PlanError("CTE with column aliases")
            ctx.ctes[body["ctename"]] = body["ctequery"]
        try:
            if stmt.get("op", "SETOP_NONE") != "SETOP_NONE":
                return plan_union(self.block, ctx, stmt, top)
            return self._select(ctx, stmt, top)
        finally:
            ctx.ctes = saved

    def _select(self, ctx: PlanContext, stmt: Node, top: bool) -> Block:
        where = conjuncts(stmt.get("whereClause"))
        outer_pulled, ctx.pulled = ctx.pulled, []
        try:
            bound, where = bind_from(ctx, stmt.get("fromClause", []), where)
            where = where + pulled_conjuncts(bound.scope, ctx.pulled)
        finally:
            ctx.pulled = outer_pulled
        bound, where = semi_joins(ctx, self.subquery, bound, where)
        bound, where = anti_joins(ctx, self.subquery, bound, where)
        bound, where = conditional_subqueries(ctx, self.subquery, bound, where)
        bound, where = where_scalar_subqueries(ctx, self.subquery, bound, where)
        targets = stmt.get("targetList", [])
        grouped = bool(stmt.get("groupClause")) or has_aggregates(
            [targets, stmt.get("havingClause"), stmt.get("sortClause")])
        if not grouped:
            bound, stmt = scalar_subqueries(ctx, self.subquery, bound, stmt)
            bound, stmt = select_exists(ctx, self.subquery, bound, stmt)
        else:
            stmt, moved = having_on_groups(stmt, bound.scope)
            where = where + moved
        computed: list[ir.Expr] = []
        keys, where = choose_keys(bound.scope, where, self.literals, self.lift,
                                  ctx.catalog, self.lift_in, computed) if top else (
            [], where)
        cuts, where = host_cuts(bound.scope, where, ctx.catalog, top, stmt)
        if computed:
            bound = with_computed(bound, computed, ctx)
        rel = bound.rel
        if where:
            wb = ExprBuilder(bound.scope, ctx.catalog)
            preds = tuple(wb.boolean(c) for c in where)
            rel = ir.Filter(rel, preds[0] if len(preds) == 1 else ir.BoolOp("and", preds))
        if any("over" in (t["ResTarget"].get("val") or {}).get("FuncCall", {})
               for t in stmt.get("targetList", [])) and (grouped or not top):
            raise PlanError("window function in a grouped query or a subquery")
        if grouped:
            return self._grouped(ctx, stmt, Bound(rel, bound.scope), keys, cuts)
        if stmt.get("havingClause") is not None:
            raise PlanError("HAVING without GROUP BY or aggregates")
        stmt, windows = extract_windows(stmt, bound.scope, ExprBuilder(
            bound.scope, ctx.catalog, clause="window arguments"))
        if windows:
            if cuts:
                raise PlanError("window function with a range parameter")
            if stmt.get("distinctClause") is not None:
                raise PlanError("window function under DISTINCT")
            windows = check_partitions(windows, bound.scope, {k.position for k in keys},
                             {k.position for k in keys if k.source.multi},
                             [plain_order_positions(w, bound.scope) for w in windows])
        builder = ExprBuilder(bound.scope, ctx.catalog, clause="SELECT")
        def key_exprs() -> list[ir.Expr]:
            refs: list[ir.Expr] = [ir.ColumnRef(k.position, k.type_oid) for k in keys]
            return refs + [ir.ColumnRef(c.column, bound.scope.cols[c.column].type_oid)
                           for c in cuts]

        try:
            return self._project(ctx, stmt, rel, builder, bound.scope, keys, key_exprs,
                                 lambda e: e, cuts=cuts, windows=windows)
        except _DistinctOverCut as exc:
            # DISTINCT is GROUP BY every output column: the host groups the cut rows
            grouped_stmt = distinct_as_grouping(stmt)
            if grouped_stmt is None:
                raise PlanError(exc.reason) from None
            return self._grouped(ctx, grouped_stmt, Bound(rel, bound.scope), keys, cuts)

    def _grouped(self, ctx: PlanContext, stmt: Node, bound: Bound, keys: list[Key],
                 cuts: list[RangeCut]) -> Block:
        global_agg = not stmt.get("groupClause")
        # (with range cuts the host aggregates, and filters by HAVING, the rows it cut)
        if global_agg and keys and stmt.get("havingClause") is not None and not cuts:
            if any(k.source.param is not None for k in keys):
                raise PlanError("parameter in an aggregate query with HAVING but no GROUP BY")
            raise RetryPinned
        bound, positions, canon = group_items(ctx, stmt, bound)
        if any(c.column not in positions for c in cuts):
            # the host aggregates the rows the cut selects (of every lookup, merged)
            return range_aggregates(ctx, stmt, bound, keys, cuts, positions, canon)
        if any(k.source.multi and k.position not in positions for k in keys):
            raise RetryPinned  # an IN-list key must be grouped on, or lookups split groups
        grouping = Grouping(bound.scope, ctx.catalog, canon)
        for pos in positions:
            grouping.add_group(pos)

        def key_exprs() -> list[ir.Expr]:  # grouped by the keys only after translation
            refs: list[ir.Expr] = [ir.ColumnRef(grouping.add_group(k.position), k.type_oid)
                                   for k in keys]
            return refs + [ir.ColumnRef(grouping.add_group(c.column), c.type_oid) for c in cuts]

        builder = grouping.builder("SELECT")
        block = self._project(ctx, stmt, None, builder, bound.scope, keys, key_exprs,
                              grouping.fix, grouping, bound.rel, cuts)
        if global_agg and keys:
            block.empty_row = empty_row(block, grouping)
        return block

    # ------------------------------------------------------------------ select list
    def _project(self, ctx: PlanContext, stmt: Node, rel: ir.Rel | None, builder: ExprBuilder,
                 scope: Scope, keys: list[Key], key_exprs: Callable[[], list[ir.Expr]],
                 fix: Any, grouping: Grouping | None = None,
                 agg_input: ir.Rel | None = None, cuts: list[RangeCut] | None = None,
                 windows: list[WindowSpec] | None = None) -> Block:
        """Select list, ORDER BY, HAVING and keys -> the block's Project (hidden ORDER BY
        and key columns after the visible ones), optionally under DISTINCT."""
        exprs, names = select_list(stmt, builder, scope, grouping is not None)
        colls = [builder.collation(e) for e in exprs]
        order, hidden = order_by(stmt, builder, exprs, names)
        calls = window_calls(windows, builder, exprs, hidden) if windows else ()
        having = None
        if stmt.get("havingClause") is not None:
            having = builder.boolean(stmt["havingClause"])
        cuts = cuts or []
        key_list = key_exprs()
        cut_list = key_list[len(keys):]
        key_list = key_list[: len(keys)]
        if grouping is not None:
            assert agg_input is not None
            rel = grouping.finish(agg_input)
            if having is not None:
                rel = ir.Filter(rel, grouping.fix(having))
        assert rel is not None
        extra, block_keys = key_columns(keys, key_list, exprs, len(exprs) + len(hidden))
        cut_extra: list[ir.Expr] = []
        block_cuts = []
        for cut, e in zip(cuts, cut_list, strict=True):
            if e not in exprs and e not in cut_extra:
                cut_extra.append(e)
            at = exprs.index(e) if e in exprs else (
                len(exprs) + len(hidden) + len(extra) + cut_extra.index(e))
            block_cuts.append(dataclasses.replace(cut, column=at))
        all_exprs = tuple(fix(e) for e in (*exprs, *hidden, *extra, *cut_extra))
        out_names = tuple(names) + tuple(f"?order{i}?" for i in range(len(hidden))) + tuple(
            f"?key{i}?" for i in range(len(extra))) + tuple(
            f"?range{i}?" for i in range(len(cut_extra)))
        project: ir.Rel = ir.Project(rel, all_exprs, out_names)
        limit, offset, page = page_bounds(stmt, order)
        if cuts and (limit is not None or offset):
            # the host cuts the range first: a top-k per key would cut before it
            limit, offset, page = None, 0, Page(limit, None, offset, None)
        if stmt.get("distinctClause") is not None:
            if hidden:
                raise PlanError("for SELECT DISTINCT, ORDER BY expressions must appear in "
                                "select list")
            if cut_extra:
                raise _DistinctOverCut("range parameter on a column SELECT DISTINCT does not "
                                       "output")
            check_equality_types([e.type_oid for e in exprs], range(len(exprs)), "DISTINCT")
            project = ir.Distinct(project)
        return Block(project, list(out_names), colls, len(exprs), block_keys, order, limit,
                      offset, page=page, cuts=block_cuts, windows=calls)

    # ------------------------------------------------------------------ subqueries
    def subquery(self, ctx: PlanContext, node: Node) -> Bound:
        """A subquery in FROM (or a CTE, view, semi-join side): never keyed. A LATERAL
        subquery's decorrelated SELECT is cut per correlation value (``laterals``)."""
        if LATERAL in node:
            return per_correlation(ctx, self.block(ctx, node["SelectStmt"], False), node[LATERAL])
        return branch(self.block, ctx, node, top=False)[0]


class _DistinctOverCut(PlanError):
    """SELECT DISTINCT whose range parameter is on a column it does not output."""


def distinct_as_grouping(stmt: Node) -> Node | None:
    """``SELECT DISTINCT items ...`` as ``SELECT items ... GROUP BY items`` (the same rows:
    one per distinct value of the items, NULLs together); None for ``*`` items."""
    items = [t["ResTarget"]["val"] for t in stmt.get("targetList", [])]
    if any("A_Star" in f for v in items for f in v.get("ColumnRef", {}).get("fields", [])):
        return None
    out = {k: v for k, v in stmt.items() if k != "distinctClause"}
    out["groupClause"] = items
    return out


def plan_select(stmt: Node, catalog: Catalog, search_path: tuple[str, ...],
                literals: tuple[Literal, ...], rules: bool = True,
                timezone: str | None = None) -> PlannedQuery | Unsupported:
    """Plan one statement (already screened by ``check_statement``); ``rules=False`` skips
    the rewrite rules (tests compare both); ``timezone``: the session's TimeZone, which
    forms that depend on it are computed in (None: they are refused)."""
    select = stmt.get("SelectStmt")
    if select is None:
        return Unsupported("not a SELECT")
    for lift, lift_in in ((True, True), (True, False), (False, False)):
        planner = _Planner(literals, lift, lift_in)
        ctx = PlanContext(catalog, search_path, planner.subquery)
        try:
            with planning_in(timezone) as zone:
                block = planner.block(ctx, select, top=True)
        except RetryPinned:
            continue
        except PlanError as exc:
            return Unsupported(exc.reason)
        if not mergeable(block):
            continue
        try:
            reader, keys, cuts, hidden = block_reader(block) if block.setop is None else (
                setop_reader(block))
        except PlanError as exc:  # a host step its reader cannot place
            return Unsupported(exc.reason)
        if rules:
            reader = optimize(reader)
        sources = tuple(src for _, src, _ in keys)
        lifted = frozenset(s.literal for src in sources for s in (src, *src.alternatives)
                           if s.literal is not None)
        types = tuple(t for _, _, t in keys)
        # a timestamptz key literal is read in the session TimeZone (it may have no offset)
        zone.used |= timezone is not None and any(
            t == T.TIMESTAMPTZ and s.literal is not None
            for src, t in zip(sources, types, strict=True) for s in (src, *src.alternatives))
        return PlannedQuery(reader, sources, types, lifted, tuple(sorted(ctx.relations)),
                            block.empty_row, block.page, cuts, hidden,
                            timezone if zone.used else None, block.aggregates,
                            block.grouped, block.agg_having, block.agg_hidden,
                            block.agg_order, block.agg_limit, block.agg_offset,
                            block.agg_exprs, block.agg_page, block.setop)
    return Unsupported("unplannable")  # pragma: no cover - the pinned pass never retries
