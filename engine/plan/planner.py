"""SELECT -> IR: the planner's core, one SELECT block at a time.

Owns: ``plan_select`` (a statement's parse tree -> ``PlannedQuery`` or ``Unsupported``),
``Page`` and the per-block steps: key extraction from the top-level WHERE (equalities, IN
lists, expressions), semi-joins and scalar subqueries (``subqueries``), filters, grouping,
the select list (with PostgreSQL's output column names), DISTINCT, ORDER BY / LIMIT /
OFFSET (constants, or parameters cut by the host), UNION [ALL], and subqueries / CTEs /
views in FROM (planned recursively and inlined).

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.antijoins import anti_joins
from engine.plan.blocks import (
    canonical,
    key_columns,
    limit_constant,
    limit_param,
    select_list,
    unify_branches,
    union_operands,
    with_computed,
)
from engine.plan.exprs import ExprBuilder
from engine.plan.from_clause import PlanContext, bind_from, conjuncts
from engine.plan.grouping import Grouping, has_aggregates, having_on_groups
from engine.plan.laterals import LATERAL, per_correlation
from engine.plan.pullup import pulled_conjuncts
from engine.plan.ranges import RangeCut, host_cuts, placed_cuts
from engine.plan.rules import optimize
from engine.plan.rules.keys import Key, KeySource, choose_keys
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.plan.sessionzone import planning_in
from engine.plan.sublinks import conditional_subqueries, select_exists
from engine.plan.subqueries import scalar_subqueries, semi_joins, where_scalar_subqueries
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

Node = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Page:
    """LIMIT / OFFSET set by statement parameters: the reader returns the key's rows sorted
    (no top-k) and the host cuts the page: ``rows[offset : offset + limit]``, each bound
    being a constant or the value of ``$n``."""

    limit: int | None = None
    limit_param: int | None = None
    offset: int = 0
    offset_param: int | None = None


@dataclass(frozen=True, slots=True)
class PlannedQuery:
    reader: ir.Reader
    key_sources: tuple[KeySource, ...]
    key_types: tuple[int, ...]
    lifted: frozenset[int]
    relations: tuple[int, ...]
    #: The one row to return when the reader has no row for a key (an aggregate without
    #: GROUP BY whose WHERE keys it: PostgreSQL still returns one row, e.g. count 0).
    empty_row: tuple[Any, ...] | None = None
    #: LIMIT/OFFSET from parameters, applied by the host after the lookup(s).
    page: Page | None = None
    #: Range parameters, cut by the host from the lookups' rows (``engine.plan.ranges``).
    cuts: tuple[RangeCut, ...] = ()
    #: Trailing reader output columns that exist only for the cuts (dropped by the host).
    hidden: int = 0
    #: The session TimeZone the plan computes in (``engine.plan.sessionzone``; None: the
    #: plan reads none): part of the cache's identity.
    timezone: str | None = None

    @property
    def columns(self) -> tuple[ir.Column, ...]:
        """The statement's result columns (the reader's, without the hidden ones)."""
        cols = self.reader.columns
        return cols[: len(cols) - self.hidden]

    @property
    def param_types(self) -> dict[int, int]:
        """``$n`` -> the type PostgreSQL infers for it when the client leaves it unspecified:
        the key column's type, its array type for ``= ANY($n)``, int8 for LIMIT/OFFSET."""
        out: dict[int, int] = {}
        for src, type_oid in zip(self.key_sources, self.key_types, strict=True):
            for alt in src.alternatives or (src,):
                if alt.param is not None:
                    out.setdefault(alt.param, T.ARRAY_OF[type_oid] if alt.array else type_oid)
        for cut in self.cuts:
            out.setdefault(cut.param, cut.type_oid)
        page = self.page
        for number in (page.limit_param, page.offset_param) if page is not None else ():
            if number is not None:
                out.setdefault(number, T.INT8)
        return out


class _RetryPinned(Exception):
    """What was lifted into keys made the block inexact; plan again with less lifting."""


@dataclass
class _Block:
    """A planned SELECT block before it becomes a Reader or a subquery."""

    rel: ir.Rel
    names: list[str]
    colls: list[str | None]
    visible: int
    keys: list[tuple[int, KeySource, int]]  # output position, source, type
    order: tuple[ir.SortKey, ...]
    limit: int | None
    offset: int = 0
    empty_row: tuple[Any, ...] | None = None
    page: Page | None = None
    cuts: list[RangeCut] = dataclasses.field(default_factory=list)  # column: block position
    windows: tuple[ir.Window, ...] = ()


class _Planner:
    def __init__(self, literals: tuple[Literal, ...], lift: bool, lift_in: bool) -> None:
        self.literals = literals
        self.lift = lift
        self.lift_in = lift_in

    # ------------------------------------------------------------------ blocks
    def block(self, ctx: PlanContext, stmt: Node, top: bool) -> _Block:
        saved = dict(ctx.ctes)
        for cte in (stmt.get("withClause") or {}).get("ctes", []):
            body = cte["CommonTableExpr"]
            if body.get("aliascolnames"):
                raise PlanError("CTE with column aliases")
            ctx.ctes[body["ctename"]] = body["ctequery"]
        try:
            if stmt.get("op", "SETOP_NONE") != "SETOP_NONE":
                return self.union(ctx, stmt, top)
            return self._select(ctx, stmt, top)
        finally:
            ctx.ctes = saved

    def _select(self, ctx: PlanContext, stmt: Node, top: bool) -> _Block:
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
            check_partitions(windows, bound.scope, {k.position for k in keys},
                             {k.position for k in keys if k.source.multi},
                             [plain_order_positions(w, bound.scope) for w in windows])
        builder = ExprBuilder(bound.scope, ctx.catalog, clause="SELECT")
        def key_exprs() -> list[ir.Expr]:
            refs: list[ir.Expr] = [ir.ColumnRef(k.position, k.type_oid) for k in keys]
            return refs + [ir.ColumnRef(c.column, bound.scope.cols[c.column].type_oid)
                           for c in cuts]

        return self._project(ctx, stmt, rel, builder, bound.scope, keys, key_exprs,
                             lambda e: e, cuts=cuts, windows=windows)

    def _grouped(self, ctx: PlanContext, stmt: Node, bound: Bound, keys: list[Key],
                 cuts: list[RangeCut]) -> _Block:
        global_agg = not stmt.get("groupClause")
        if global_agg and keys and stmt.get("havingClause") is not None:
            if any(k.source.param is not None for k in keys):
                raise PlanError("parameter in an aggregate query with HAVING but no GROUP BY")
            raise _RetryPinned
        bound, positions, canon = self._group_items(ctx, stmt, bound)
        if any(k.source.multi and k.position not in positions for k in keys):
            raise _RetryPinned  # an IN-list key must be grouped on, or lookups split groups
        if any(c.column not in positions for c in cuts):
            raise PlanError("range parameter on a column the query does not group by")
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
            block.empty_row = _empty_row(block, grouping)
        return block

    def _group_items(self, ctx: PlanContext, stmt: Node, bound: Bound) -> tuple[
            Bound, list[int], dict[str, int]]:
        """GROUP BY items -> (input, with a projection of the grouped expressions if any;
        group input positions; canonical text of each grouped expression -> its position)."""
        targets = stmt.get("targetList", [])
        positions: list[int] = []
        exprs: list[ir.Expr] = []
        canon: dict[str, int] = {}
        width = len(bound.scope.cols)
        builder = ExprBuilder(bound.scope, ctx.catalog, clause="GROUP BY")
        extra: list[ScopeCol] = []
        for item in stmt.get("groupClause", []):
            node = self._group_target(targets, item)
            if "ColumnRef" in node:
                positions.append(self._group_column(bound.scope, targets, node))
                continue
            expr = builder.build(node)
            pos = width + len(exprs)
            exprs.append(expr)
            canon[canonical(node)] = pos
            positions.append(pos)
            extra.append(ScopeCol(None, f"?group{len(exprs)}?", expr.type_oid,
                                  builder.collation(expr), ctx.new_rte(), hidden=True))
        _check_equality_types([c.type_oid for c in bound.scope.cols + tuple(extra)],
                              positions, "GROUP BY")
        if not exprs:
            return bound, positions, canon
        cols = bound.rel.columns
        rel = ir.Project(bound.rel, tuple(ir.ColumnRef(i, c.type_oid) for i, c in
                                          enumerate(cols)) + tuple(exprs),
                         tuple(c.name for c in cols) + tuple(c.name for c in extra))
        return Bound(rel, Scope(bound.scope.cols + tuple(extra))), positions, canon

    @staticmethod
    def _group_target(targets: list[Node], item: Node) -> Node:
        if "A_Const" in item and "ival" in item["A_Const"]:
            n = int(item["A_Const"]["ival"].get("ival", 0))
            if not 1 <= n <= len(targets):
                raise PlanError(f"GROUP BY position {n} is not in select list")
            return dict(targets[n - 1]["ResTarget"]["val"])
        return item

    def _group_column(self, scope: Scope, targets: list[Node], item: Node) -> int:
        fields = tuple(f["String"]["sval"] for f in item["ColumnRef"]["fields"] if "String" in f)
        try:
            return scope.lookup(fields)
        except PlanError:
            if len(fields) != 1:
                raise
            for t in targets:
                res = t["ResTarget"]
                if res.get("name") == fields[0] and "ColumnRef" in res["val"]:
                    return self._group_column(scope, [], res["val"])
            raise

    # ------------------------------------------------------------------ select list
    def _project(self, ctx: PlanContext, stmt: Node, rel: ir.Rel | None, builder: ExprBuilder,
                 scope: Scope, keys: list[Key], key_exprs: Callable[[], list[ir.Expr]],
                 fix: Any, grouping: Grouping | None = None,
                 agg_input: ir.Rel | None = None, cuts: list[RangeCut] | None = None,
                 windows: list[WindowSpec] | None = None) -> _Block:
        """Select list, ORDER BY, HAVING and keys -> the block's Project (hidden ORDER BY
        and key columns after the visible ones), optionally under DISTINCT."""
        exprs, names = select_list(stmt, builder, scope, grouping is not None)
        colls = [builder.collation(e) for e in exprs]
        order, hidden = self._order(stmt, builder, exprs, names)
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
        limit, offset, page = self._limit(stmt, order)
        if cuts and (limit is not None or offset):
            # the host cuts the range first: a top-k per key would cut before it
            limit, offset, page = None, 0, Page(limit, None, offset, None)
        if stmt.get("distinctClause") is not None:
            if hidden:
                raise PlanError("for SELECT DISTINCT, ORDER BY expressions must appear in "
                                "select list")
            if cut_extra:
                raise PlanError("range parameter on a column SELECT DISTINCT does not output")
            _check_equality_types([e.type_oid for e in exprs], range(len(exprs)), "DISTINCT")
            project = ir.Distinct(project)
        return _Block(project, list(out_names), colls, len(exprs), block_keys, order, limit,
                      offset, page=page, cuts=block_cuts, windows=calls)

    def _order(self, stmt: Node, builder: ExprBuilder, exprs: list[ir.Expr],
               names: list[str]) -> tuple[tuple[ir.SortKey, ...], list[ir.Expr]]:
        keys: list[ir.SortKey] = []
        hidden: list[ir.Expr] = []
        for item in stmt.get("sortClause", []):
            sort = item["SortBy"]
            if sort.get("useOp"):
                raise PlanError("ORDER BY ... USING")
            pos = self._sort_target(sort["node"], builder, exprs, names, hidden)
            expr = exprs[pos] if pos < len(exprs) else hidden[pos - len(exprs)]
            if expr.type_oid not in pgtypes.ORDERABLE_TYPES:
                raise PlanError(f"ORDER BY a value of type {pgtypes.type_name(expr.type_oid)}")
            builder.check_ordering((expr,), "ORDER BY")
            nulls = sort.get("sortby_nulls", "SORTBY_NULLS_DEFAULT")
            keys.append(ir.SortKey(pos, sort.get("sortby_dir") == "SORTBY_DESC",
                                   None if nulls == "SORTBY_NULLS_DEFAULT"
                                   else nulls == "SORTBY_NULLS_FIRST"))
        return tuple(keys), hidden

    @staticmethod
    def _sort_target(node: Node, builder: ExprBuilder, exprs: list[ir.Expr], names: list[str],
                     hidden: list[ir.Expr]) -> int:
        if "A_Const" in node and "ival" in node["A_Const"]:
            n = int(node["A_Const"]["ival"].get("ival", 0))
            if not 1 <= n <= len(exprs):
                raise PlanError(f"ORDER BY position {n} is not in select list")
            return n - 1
        fields = node.get("ColumnRef", {}).get("fields", [])
        if len(fields) == 1 and "String" in fields[0]:
            hits = [i for i, n in enumerate(names) if n == fields[0]["String"]["sval"]]
            if len(hits) > 1:
                raise PlanError(f"ORDER BY {names[hits[0]]} is ambiguous")
            if hits:
                return hits[0]
        expr = builder.build(node)
        if expr in exprs:
            return exprs.index(expr)
        hidden.append(expr)
        return len(exprs) + len(hidden) - 1

    @staticmethod
    def _limit(stmt: Node, order: tuple[ir.SortKey, ...]) -> tuple[
            int | None, int, Page | None]:
        """(LIMIT, OFFSET) as constants, or a Page when a parameter sets either; both need
        ORDER BY, a constant OFFSET needs a LIMIT."""
        lparam = limit_param(stmt.get("limitCount"))
        oparam = limit_param(stmt.get("limitOffset"))
        limit = None if lparam else limit_constant(stmt.get("limitCount"), "LIMIT")
        offset = 0 if oparam else limit_constant(stmt.get("limitOffset"), "OFFSET") or 0
        if (lparam or oparam) and not order:
            raise PlanError("LIMIT/OFFSET parameter without ORDER BY")
        if lparam or oparam:
            return None, 0, Page(limit, lparam, offset, oparam)
        if limit is None and offset:
            raise PlanError("OFFSET without LIMIT")
        if limit is not None and not order:
            raise PlanError(f"{'OFFSET' if offset else 'LIMIT'} without ORDER BY")
        return limit, offset, None

    # ------------------------------------------------------------------ UNION ALL
    def union(self, ctx: PlanContext, stmt: Node, top: bool) -> _Block:
        """UNION ALL: branches (keyed on the same parameters, when at the top) unified to
        common column types; ORDER BY / LIMIT over the union's output columns."""
        if stmt.get("op") != "SETOP_UNION":
            raise PlanError(f"{stmt.get('op', '').removeprefix('SETOP_')} (only UNION)")
        children = [stmt["larg"], stmt["rarg"]]
        if stmt.get("all"):
            children = [b for child in children for b in union_operands(child)]
        planned = [self._branch(ctx, {"SelectStmt": b}, top) for b in children]
        keys = planned[0][1]
        for _, other in planned[1:]:
            if other != keys:
                if any(src.param is None for src, _ in keys + other):
                    raise _RetryPinned  # literal keys differ per branch: pin them
                raise PlanError("UNION ALL branches keyed on different parameters")
        branches = unify_branches(ctx, [b for b, _ in planned])
        first = branches[0]
        rel: ir.Rel = ir.UnionAll(tuple(b.rel for b in branches))
        if not stmt.get("all"):
            cols = rel.columns
            _check_equality_types([c.type_oid for c in cols], range(len(cols)), "UNION")
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
        order, hidden = self._order(stmt, builder, exprs, names[:visible])
        if hidden:
            raise PlanError("ORDER BY on a UNION must name an output column")
        block_keys = [(visible + j, src, rel.columns[visible + j].type_oid)
                      for j, (src, _) in enumerate(keys)]
        limit, offset, page = self._limit(stmt, order)
        return _Block(rel, names, colls, visible, block_keys, order, limit, offset, page=page)

    def _branch(self, ctx: PlanContext, node: Node, top: bool) -> tuple[
            Bound, list[tuple[KeySource, int]]]:
        """A block as a relation of its visible columns then its key columns (hidden)."""
        stmt = node.get("SelectStmt")
        if stmt is None:
            raise PlanError("subquery that is not a SELECT")
        block = self.block(ctx, stmt, top)
        if block.cuts:
            raise PlanError("range parameter in a UNION branch")
        if block.windows:
            raise PlanError("window function in a UNION branch")
        if block.page is not None:
            raise PlanError("LIMIT/OFFSET parameter in a subquery or UNION branch")
        if block.empty_row is not None:
            if any(src.param is None for _, src, _ in block.keys):
                raise _RetryPinned
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

    # ------------------------------------------------------------------ subqueries
    def subquery(self, ctx: PlanContext, node: Node) -> Bound:
        """A subquery in FROM (or a CTE, view, semi-join side): never keyed. A LATERAL
        subquery's decorrelated SELECT is cut per correlation value (``laterals``)."""
        if LATERAL in node:
            return per_correlation(ctx, self.block(ctx, node["SelectStmt"], False), node[LATERAL])
        return self._branch(ctx, node, top=False)[0]


def _mergeable(block: _Block) -> bool:
    """An IN-list key is served by one lookup per value, merged by the host: fine unless the
    page has a constant OFFSET (cut per key by the top-k) or is DISTINCT without the key
    column in the output. (A parameter Page is cut by the host after merging, so it is fine;
    sort columns the client does not see are hidden output columns, see ``_reader``.)"""
    multi = [pos for pos, src, _ in block.keys if src.multi]
    if not multi:
        return True
    if isinstance(block.rel, ir.Distinct) and any(pos >= block.visible for pos in multi):
        return False  # rows of two lookups could be duplicates of each other
    return block.offset == 0


def _empty_row(block: _Block, grouping: Grouping) -> tuple[Any, ...]:
    """The row PostgreSQL returns for an aggregate without GROUP BY over no rows: the select
    list over COUNTs of 0 and other aggregates NULL."""
    from engine.dataflow.expr import compile_expr
    project = block.rel
    assert isinstance(project, ir.Project)
    row = (None,) * len(grouping.groups) + tuple(
        0 if a.func in ("count", "count_star", "count_distinct") else None
        for a in grouping.aggs)
    try:
        return tuple(compile_expr(e)(row) for e in project.exprs[: block.visible])
    except Exception as exc:  # PostgreSQL would raise on this row too: not cacheable
        raise PlanError(f"select list raises on an empty aggregate ({exc})") from exc


def _reader(block: _Block) -> tuple[ir.Reader, list[tuple[int, KeySource, int]],
                                     tuple[RangeCut, ...], int]:
    """The block's Reader, its keys, and its range cuts with their columns as reader output
    positions (cut columns not selected are hidden output columns after the visible ones)."""
    rel = block.rel
    group = tuple(pos for pos, _, _ in block.keys)
    if block.limit is not None and not block.windows:  # windows see the rows before LIMIT
        rel = ir.TopK(rel, group, block.order, block.limit, block.offset)
    output = list(range(block.visible))
    merged = any(src.multi for _, src, _ in block.keys)
    for column in [c.column for c in block.cuts] + (
            [k.column for k in block.order] if merged else []):
        if column not in output:  # the host cuts or sorts the lookups' rows on it
            output.append(column)
    cuts = placed_cuts(block.rel, block.cuts, output, block.order)
    reader = ir.Reader(rel, group, tuple(output), block.order, block.limit,
                       block.offset if block.windows else 0, block.windows)
    return reader, block.keys, cuts, len(output) - block.visible


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
        except _RetryPinned:
            continue
        except PlanError as exc:
            return Unsupported(exc.reason)
        if not _mergeable(block):
            continue
        try:
            reader, keys, cuts, hidden = _reader(block)
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
                            timezone if zone.used else None)
    return Unsupported("unplannable")  # pragma: no cover - the pinned pass never retries


def _check_equality_types(types: Sequence[int], positions: Iterable[int], what: str) -> None:
    for pos in positions:
        why = pgtypes.NOT_EQUAL_BY_VALUE.get(types[pos])
        if why is not None:
            raise PlanError(f"{what} on a {pgtypes.type_name(types[pos])} value ({why})")
