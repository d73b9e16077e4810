"""GROUP BY and aggregates: the ``Aggregate`` node of a grouped SELECT and the expressions
(select list, HAVING, ORDER BY) evaluated over its output.

Owns: ``Grouping`` — collects group columns and aggregate calls while the select list,
HAVING and ORDER BY are translated, then builds the ``Aggregate`` and rewrites the
translated expressions to its output positions (``finish``); ``group_items`` (the GROUP BY
items -> group input positions, grouped expressions projected as hidden columns).

Invariants: group columns are input positions (column references only, as written, by
output position or by output alias); a column that is not grouped may still be used when the
primary key of its table is grouped (PostgreSQL's functional dependency rule), in which case
it is added to the group columns (which does not change the groups). Result types and names
of aggregates are PostgreSQL's (count -> int8, sum(int4) -> int8, avg(int) -> numeric...).
``agg(x) FILTER (WHERE c)`` is ``agg(CASE WHEN c THEN x END)``: every supported aggregate
ignores NULL inputs, so the two are equal (``count(*)`` filters a constant 1).
"""

from __future__ import annotations

import contextlib
from typing import Any

from engine.dataflow.pgjson import JSON_ELEMENT_TYPES
from engine.plan import ir, pgtypes
from engine.plan.blocks import canonical, check_equality_types
from engine.plan.exprs import ORDERED_AGGREGATES, ExprBuilder, Node, is_aggregate_call
from engine.plan.from_clause import PlanContext, conjuncts
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol, remap
from engine.sql.catalog import Catalog
from engine.values import oids as T

AGG_BASE = 1 << 30


class Grouping:
    """Group columns and aggregates of one SELECT over ``scope`` (the FROM+WHERE output)."""

    def __init__(self, scope: Scope, catalog: Catalog,
                 grouped_exprs: dict[str, int] | None = None) -> None:
        self.scope = scope
        self.grouped_exprs = grouped_exprs or {}
        self.catalog = catalog
        self.groups: list[int] = []
        self.aggs: list[ir.AggCall] = []
        self.agg_colls: dict[int, str | None] = {}

    def add_group(self, pos: int) -> int:
        if pos not in self.groups:
            self.groups.append(pos)
        return self.groups.index(pos)

    def builder(self, clause: str) -> ExprBuilder:
        b = ExprBuilder(self.scope, self.catalog, on_agg=self._agg,
                        on_column=self._column, clause=clause,
                        on_node=self._grouped_expr if self.grouped_exprs else None)
        b.colls = self.agg_colls  # shared: group and aggregate outputs' collations
        return b

    def _grouped_expr(self, node: Node) -> ir.Expr | None:
        """A select-list expression written exactly as a GROUP BY expression: its column."""
        from engine.plan.blocks import canonical
        pos = self.grouped_exprs.get(canonical(node))
        if pos is None:
            return None
        col = self.scope.cols[pos]
        self.agg_colls[self.groups.index(pos)] = col.collation
        return ir.ColumnRef(self.groups.index(pos), col.type_oid)

    def _column(self, pos: int) -> ir.Expr:
        col = self.scope.cols[pos]
        if pos not in self.groups:
            if not self._dependent(pos):
                raise PlanError(f"column {col.name} must appear in the GROUP BY clause or be "
                                "used in an aggregate function")
            self.groups.append(pos)
        return ir.ColumnRef(self.groups.index(pos), col.type_oid)

    def _dependent(self, pos: int) -> bool:
        """Is ``pos`` functionally dependent on the group columns (its table's PK grouped)?"""
        rte = self.scope.cols[pos].rte
        pk = [i for i, c in enumerate(self.scope.cols) if c.rte == rte and c.table_pk]
        return bool(pk) and all(i in self.groups for i in pk)

    def _agg(self, body: Node) -> ir.Expr:
        name = next(p["String"]["sval"] for p in reversed(body["funcname"]) if "String" in p)
        name = name.lower()
        inner = ExprBuilder(self.scope, self.catalog, clause="aggregate arguments")
        where = None
        if body.get("agg_filter") is not None:
            where = inner.boolean(body["agg_filter"])
        if body.get("agg_star"):
            if name != "count":
                raise PlanError(f"{name}(*)")
            if where is None:
                return self._register(ir.AggCall("count_star", None, T.INT8, "count"), None)
            star: ir.Expr = ir.Case(((where, ir.Const(1, T.INT4)),), None, T.INT4)
            return self._register(ir.AggCall("count", star, T.INT8, "count"), None)
        args = body.get("args", [])
        if name in ORDERED_AGGREGATES:
            return self._ordered(name, body, inner, where)
        if body.get("agg_order"):
            raise PlanError(f"ORDER BY inside {name}()")
        if len(args) != 1:
            raise PlanError(f"aggregate {name}() with {len(args)} arguments")
        arg = inner.build(args[0])
        if arg.type_oid == T.UNKNOWN:
            arg = inner.coerce(arg, T.TEXT)
        if where is not None:  # FILTER (WHERE c): the aggregate of CASE WHEN c THEN x END
            arg = ir.Case(((where, arg),), None, arg.type_oid)
        distinct = bool(body.get("agg_distinct"))
        if name == "count":
            if distinct:
                inner.check_equality((arg,))
            func: ir.AggFunc = "count_distinct" if distinct else "count"
            return self._register(ir.AggCall(func, arg, T.INT8, "count"), None)
        if distinct:
            raise PlanError(f"{name}(DISTINCT ...)")
        result = {"sum": pgtypes.sum_type, "avg": pgtypes.avg_type,
                  "min": pgtypes.minmax_type, "max": pgtypes.minmax_type}[name](arg.type_oid)
        if result is None:
            raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)}")
        if name in ("sum", "avg") and arg.type_oid in (T.FLOAT4, T.FLOAT8):
            raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)} (an incrementally "
                            "maintained float sum drifts from any order PostgreSQL adds in)")
        coll = locale = None
        if name in ("min", "max"):
            locale = inner.order_locale((arg,), f"{name}()")
            coll = inner.collation(arg)
        return self._register(ir.AggCall(name, arg, result, name, collation=locale), coll)  # type: ignore[arg-type,unused-ignore]

    def _ordered(self, name: str, body: Node, inner: ExprBuilder,
                 where: ir.Expr | None) -> ir.Expr:
        """string_agg(text, 'delimiter' ORDER BY ...), array_agg(x ORDER BY ...) and
        json_agg / jsonb_agg(x ORDER BY ...) of scalars whose JSON form is exact. Without
        ORDER BY their result is in the order rows happen to arrive: refused."""
        if body.get("agg_distinct"):
            raise PlanError(f"{name}(DISTINCT ...)")
        if not body.get("agg_order"):
            raise PlanError(f"{name}() without ORDER BY (its order would be the scan order)")
        args = body["args"]
        arg = inner.build(args[0])
        if arg.type_oid == T.UNKNOWN:
            arg = inner.coerce(arg, T.TEXT)
        delimiter = None
        coll = None
        if name == "string_agg":
            if arg.type_oid not in (T.TEXT, T.VARCHAR):
                raise PlanError(f"string_agg() of {pgtypes.type_name(arg.type_oid)}")
            sep = inner.build(args[1])
            if not isinstance(sep, ir.Const) or not isinstance(sep.value, str):
                raise PlanError("string_agg() with a delimiter that is not a string constant")
            delimiter, result, coll = sep.value, T.TEXT, inner.collation(arg)
        elif name in ("json_agg", "jsonb_agg"):
            if where is not None:
                raise PlanError(f"{name}() with FILTER")  # CASE would add null elements
            if arg.type_oid not in JSON_ELEMENT_TYPES:
                raise PlanError(f"{name}() of {pgtypes.type_name(arg.type_oid)}")
            result = T.JSON if name == "json_agg" else T.JSONB
        else:
            if where is not None:
                raise PlanError("array_agg() with FILTER")  # CASE would add NULL elements
            result = T.ARRAY_OF.get(arg.type_oid, 0)
            if arg.type_oid not in pgtypes.SUPPORTED_TYPES or not result:
                raise PlanError(f"array_agg() of {pgtypes.type_name(arg.type_oid)}")
        if where is not None:
            arg = ir.Case(((where, arg),), None, arg.type_oid)
        order = []
        for item in body["agg_order"]:
            sort = item["SortBy"]
            if sort.get("useOp"):
                raise PlanError(f"ORDER BY ... USING inside {name}()")
            expr = inner.build(sort["node"])
            if expr.type_oid not in pgtypes.ORDERABLE_TYPES:
                raise PlanError(f"ORDER BY a value of type {pgtypes.type_name(expr.type_oid)}")
            locale = inner.order_locale((expr,), f"ORDER BY inside {name}()")
            nulls = sort.get("sortby_nulls", "SORTBY_NULLS_DEFAULT")
            order.append(ir.AggSort(expr, sort.get("sortby_dir") == "SORTBY_DESC",
                                    None if nulls == "SORTBY_NULLS_DEFAULT"
                                    else nulls == "SORTBY_NULLS_FIRST", locale))
        call = ir.AggCall(name, arg, result, name, tuple(order), delimiter)  # type: ignore[arg-type]
        return self._register(call, coll)

    def _register(self, call: ir.AggCall, coll: str | None) -> ir.Expr:
        if call not in self.aggs:
            self.aggs.append(call)
        index = AGG_BASE + self.aggs.index(call)
        self.agg_colls[index] = coll
        return ir.ColumnRef(index, call.type_oid)

    def finish(self, rel: ir.Rel) -> ir.Aggregate:
        return ir.Aggregate(rel, tuple(self.groups), tuple(self.aggs))

    def fix(self, expr: Any) -> Any:
        """Rewrite aggregate placeholders to their final output positions."""
        width = len(self.groups)
        return remap(expr, lambda i: i - AGG_BASE + width if i >= AGG_BASE else i)


def has_aggregates(nodes: list[Any]) -> bool:
    """Whether any aggregate call occurs (outside subqueries)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "SubLink" in node or "SelectStmt" in node:
                continue
            call = node.get("FuncCall")
            # sum(x) OVER (...) is a window function (its arguments may hold aggregates)
            if call is not None and call.get("over") is None and is_aggregate_call(call):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def having_on_groups(stmt: Node, scope: Scope) -> tuple[Node, list[Node]]:
    """HAVING conjuncts that read only plain GROUP BY columns (no aggregate, subquery or
    other column) hold for a whole group or for none of it: they move to WHERE, where
    ``story_id = $1`` becomes a lookup key. Returns the statement with the remaining HAVING
    and the moved conjuncts. Only with GROUP BY (without it HAVING filters the one row)."""
    if not stmt.get("groupClause") or stmt.get("havingClause") is None:
        return stmt, []
    grouped: set[int] = set()
    for item in stmt["groupClause"]:
        fields = item.get("ColumnRef", {}).get("fields", [])
        if fields and all("String" in f for f in fields):
            with contextlib.suppress(PlanError):
                grouped.add(scope.lookup(tuple(f["String"]["sval"] for f in fields)))
    moved: list[Node] = []
    kept: list[Node] = []
    for conj in conjuncts(stmt["havingClause"]):
        (moved if _reads_only(conj, scope, grouped) else kept).append(conj)
    if not moved:
        return stmt, []
    stmt = dict(stmt)
    stmt["havingClause"] = (None if not kept else kept[0] if len(kept) == 1 else
                            {"BoolExpr": {"boolop": "AND_EXPR", "args": kept}})
    return stmt, moved


def _reads_only(conj: Node, scope: Scope, grouped: set[int]) -> bool:
    if has_aggregates([conj]):
        return False
    refs: list[Node] = []
    stack: list[Any] = [conj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(k in node for k in ("SubLink", "WeirColumn", "FuncCall")):
                return False
            if "ColumnRef" in node:
                refs.append(node["ColumnRef"])
                continue
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    try:
        return bool(refs) and all(
            all("String" in f for f in r["fields"]) and
            scope.lookup(tuple(f["String"]["sval"] for f in r["fields"])) in grouped
            for r in refs)
    except PlanError:
        return False


def group_items(ctx: PlanContext, stmt: Node, bound: Bound) -> tuple[
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
        node = _group_target(targets, item)
        if "ColumnRef" in node:
            positions.append(_group_column(bound.scope, targets, node))
            continue
        expr = builder.build(node)
        pos = width + len(exprs)
        exprs.append(expr)
        canon[canonical(node)] = pos
        positions.append(pos)
        extra.append(ScopeCol(None, f"?group{len(exprs)}?", expr.type_oid,
                              builder.collation(expr), ctx.new_rte(), hidden=True))
    check_equality_types([c.type_oid for c in bound.scope.cols + tuple(extra)],
                         positions, "GROUP BY")
    if not exprs:
        return bound, positions, canon
    cols = bound.rel.columns
    rel = ir.Project(bound.rel, tuple(ir.ColumnRef(i, c.type_oid) for i, c in
                                      enumerate(cols)) + tuple(exprs),
                     tuple(c.name for c in cols) + tuple(c.name for c in extra))
    return Bound(rel, Scope(bound.scope.cols + tuple(extra))), positions, canon


def _group_target(targets: list[Node], item: Node) -> Node:
    if "A_Const" in item and "ival" in item["A_Const"]:
        n = int(item["A_Const"]["ival"].get("ival", 0))
        if not 1 <= n <= len(targets):
            raise PlanError(f"GROUP BY position {n} is not in select list")
        return dict(targets[n - 1]["ResTarget"]["val"])
    return item


def _group_column(scope: Scope, targets: list[Node], item: Node) -> int:
    fields = tuple(f["String"]["sval"] for f in item["ColumnRef"]["fields"] if "String" in f)
    try:
        return scope.lookup(fields)
    except PlanError:
        if len(fields) != 1:
            raise
        for t in targets:
            res = t["ResTarget"]
            if res.get("name") == fields[0] and "ColumnRef" in res["val"]:
                return _group_column(scope, [], res["val"])
        raise
