"""Aggregates over a range cut: an aggregate without GROUP BY, or grouped on columns whose
equal values print the same (equality keys or others; a SELECT DISTINCT the planner turned
into GROUP BY of its items), whose WHERE has range parameters (``SELECT count(*) FROM
stories WHERE author_id = $1 AND created_at > $2``).

Owns: ``range_aggregates`` (such a SELECT -> a block that reads, per equality key, the
aggregates' arguments and the cut column: the reader keeps rows, range-partial when
``engine.plan.range_state`` allows), ``aggregate_groups`` / ``aggregate_rows`` (the host's
result rows from the rows the cut selected) and ``aggregates_text`` (EXPLAIN's part).

Why at the host: the range is a parameter, so no aggregate maintained in the dataflow can
answer every range; the cut rows are exactly the rows PostgreSQL aggregates. The result
types and accumulators are the GROUP BY path's (``Grouping``: count -> int8, sum(int4) ->
int8, avg(int) -> numeric ...; ``engine.dataflow.ops.accumulators``), so values are equal;
float sum/avg stay refused there (row order). Without GROUP BY, over no rows: count 0, the
others NULL; grouped: one row per group value that has rows in the range (across the
merged lookups).

Supported: a select list of aggregate calls (count(*), count(x), count(DISTINCT x), sum, avg,
min, max, FILTER allowed) and grouped key columns, or expressions over them (every call is then
a hidden value and ``computed_columns`` makes the result columns, without ORDER BY); HAVING over
them (aggregates HAVING alone reads are hidden result values, dropped after the filter), ORDER
BY over the result columns or aggregates (hidden likewise) with LIMIT/OFFSET, constants or
parameters (``PlannedQuery.agg_page``, cut after the aggregation); no DISTINCT (the
planner's GROUP BY form only). Everything else keeps its precise reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from engine.dataflow.expr import compile_expr, compile_predicate, walk
from engine.dataflow.ops.accumulators import accumulator
from engine.dataflow.ordering import order_key
from engine.plan import ir, pgtypes
from engine.plan.blocks import key_columns, select_list
from engine.plan.explain import render_expr, render_sort
from engine.plan.exprs import ORDERED_AGGREGATES
from engine.plan.grouping import AGG_BASE, Grouping
from engine.plan.ordering import order_by, page_bounds
from engine.plan.scope import Bound, PlanError, column_refs, remap
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.from_clause import PlanContext
    from engine.plan.planned import Block, PlannedQuery
    from engine.plan.ranges import RangeCut
    from engine.plan.rules.keys import Key

_REFUSED = (("distinctClause", "DISTINCT"),)


def range_aggregates(ctx: PlanContext, stmt: dict[str, Any], bound: Bound, keys: list[Key],
                     cuts: list[RangeCut], positions: list[int],
                     canon: dict[str, int] | None = None) -> Block:
    """The block of an aggregate over range cuts, without GROUP BY or grouped on equality
    keys only (``positions``): its visible columns are the aggregates' arguments (reader
    output 0..n-1), then hidden key and cut columns; ``Block.aggregates`` are the select
    list's calls over those columns (a group column's value is ``min`` of its group, where
    every value is the same), ``Block.grouped`` the reader columns of the groups."""
    from engine.plan.planned import Block

    for clause, label in _REFUSED:
        if stmt.get(clause) is not None:
            raise PlanError(f"range parameter under an aggregate with {label}")
    grouping = Grouping(bound.scope, ctx.catalog, canon)
    for pos in positions:
        grouping.add_group(pos)
    exprs, names = select_list(stmt, grouping.builder("SELECT"), bound.scope, True)
    _check_groups(grouping)
    computed: list[tuple[str, ir.Expr]] = []
    if any(not isinstance(e, ir.ColumnRef) for e in exprs):
        # expressions over the aggregates: every call is a hidden value, the result columns
        # are computed from them at the host
        if stmt.get("sortClause"):
            raise PlanError("range parameter under an aggregate: ORDER BY with expressions "
                            "over the aggregates in the select list")
        computed = list(zip(names, exprs, strict=True))
        exprs = [ir.ColumnRef(r, 0) for r in dict.fromkeys(
            r for e in exprs for r in sorted(column_refs(e)))]
        names = [f"?value{i}?" for i in range(len(exprs))]
    having = None if stmt.get("havingClause") is None else \
        grouping.builder("HAVING").boolean(stmt["havingClause"])
    if having is not None and any(isinstance(e, ir.Param) for e in walk(having)):
        raise PlanError("range parameter under an aggregate with a $n in HAVING")
    order, sorted_on = order_by(stmt, grouping.builder("ORDER BY"), list(exprs), names)
    limit, offset, page = page_bounds(stmt, order)  # a parameter page cuts the result rows
    if any(not isinstance(e, ir.ColumnRef) for e in sorted_on):
        raise PlanError("range parameter under an aggregate ordered by an expression")
    # each result column's grouping reference, then those only ORDER BY or HAVING read
    refs = [e.index for e in (*exprs, *sorted_on) if isinstance(e, ir.ColumnRef)]
    names.extend(f"?order{i}?" for i in range(len(sorted_on)))
    for ref in sorted(column_refs(having)) if having is not None else ():
        if ref not in refs:  # read by HAVING only: a hidden result column
            refs.append(ref)
            names.append(f"?having{len(refs) - len(exprs)}?")
    calls = [_call(grouping, ref) for ref in refs]
    if having is not None:
        having = remap(having, refs.index)
    results = tuple((name, remap(e, refs.index)) for name, e in computed)
    args: list[ir.Expr] = [ir.ColumnRef(pos, bound.scope.cols[pos].type_oid)
                           for pos in grouping.groups]
    out: list[ir.AggCall] = []
    for call, name in zip(calls, names, strict=True):
        if call.func in ORDERED_AGGREGATES:
            raise PlanError(f"range parameter under {call.func}()")
        column = None
        if call.arg is not None:
            if call.arg not in args:
                args.append(call.arg)
            column = ir.ColumnRef(args.index(call.arg), call.arg.type_oid)
        out.append(ir.AggCall(call.func, column, call.type_oid, name,
                              collation=call.collation))
    scope = bound.scope
    key_list: list[ir.Expr] = [ir.ColumnRef(k.position, k.type_oid) for k in keys]
    extra, block_keys = key_columns(keys, key_list, args, len(args))
    cut_extra: list[ir.Expr] = []
    block_cuts = []
    for cut in cuts:
        e = ir.ColumnRef(cut.column, scope.cols[cut.column].type_oid)
        if e not in args and e not in cut_extra:
            cut_extra.append(e)
        at = args.index(e) if e in args else len(args) + len(extra) + cut_extra.index(e)
        block_cuts.append(dataclasses.replace(cut, column=at))
    all_exprs = (*args, *extra, *cut_extra)
    out_names = tuple(scope.cols[a.index].name if isinstance(a, ir.ColumnRef) else
                      f"?arg{i}?" for i, a in enumerate(args)) + tuple(
        f"?key{i}?" for i in range(len(extra))) + tuple(
        f"?range{i}?" for i in range(len(cut_extra)))
    project = ir.Project(bound.rel, tuple(all_exprs), out_names)
    return Block(project, list(out_names), [None] * len(args), len(args), block_keys, (),
                 None, cuts=block_cuts, aggregates=tuple(out),
                 grouped=tuple(range(len(grouping.groups))), agg_having=having,
                 agg_hidden=0 if computed else len(refs) - len(exprs), agg_order=order,
                 agg_limit=limit, agg_offset=offset, agg_exprs=results, agg_page=page)


def _call(grouping: Grouping, ref: int) -> ir.AggCall:
    """The host aggregate of one grouping reference: an aggregate call, or a group column
    (the same value in every row of a group: its ``min``)."""
    if ref >= AGG_BASE:
        return grouping.aggs[ref - AGG_BASE]
    pos = grouping.groups[ref]
    oid = grouping.scope.cols[pos].type_oid
    return ir.AggCall("min", ir.ColumnRef(pos, oid), oid, "min")


#: Group column types whose equal values print the same (a group's value is any of them).
_GROUP_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.TEXT, T.VARCHAR, T.DATE, T.TIMESTAMP,
                          T.TIMESTAMPTZ, T.BOOL})


def _check_groups(grouping: Grouping) -> None:
    """GROUP BY under a range only on columns of exact-printing types (the host groups the
    rows the cut selects, by value: a group's value is any of its rows')."""
    for pos in grouping.groups:
        col = grouping.scope.cols[pos]
        if col.type_oid not in _GROUP_TYPES:
            raise PlanError(f"range parameter under GROUP BY {col.name} of type "
                            f"{pgtypes.type_name(col.type_oid)}")
    grouping.builder("GROUP BY").check_equality(tuple(
        ir.ColumnRef(pos, grouping.scope.cols[pos].type_oid) for pos in grouping.groups))


def aggregates_text(plan: PlannedQuery, cols: tuple[ir.Column, ...]) -> str:
    """EXPLAIN's rendering of the host aggregates (with their result types)."""
    parts = []
    for c in plan.aggregates:
        arg = "*" if not isinstance(c.arg, ir.ColumnRef) else cols[c.arg.index].name
        func = "count" if c.func in ("count_star", "count_distinct") else c.func
        arg = f"DISTINCT {arg}" if c.func == "count_distinct" else arg
        group = isinstance(c.arg, ir.ColumnRef) and c.func == "min" \
            and c.arg.index in plan.grouped
        shown = arg if group else f"{func}({arg})"
        parts.append(f"{shown} {pgtypes.type_name(c.type_oid)} AS {c.name}")
    by = ", ".join(cols[i].name for i in plan.grouped)
    out = tuple(ir.Column(c.name, c.type_oid) for c in plan.aggregates)
    having = "" if plan.agg_having is None else " HAVING " + render_expr(plan.agg_having, out)
    if plan.agg_order:
        having += " ORDER BY " + render_sort(plan.agg_order, out)
    if plan.agg_limit is not None:
        having += f" LIMIT {plan.agg_limit}"
    if plan.agg_offset:
        having += f" OFFSET {plan.agg_offset}"
    if plan.agg_page is not None:
        page = plan.agg_page
        limit = f"${page.limit_param}" if page.limit_param else page.limit
        offset = f"${page.offset_param}" if page.offset_param else page.offset
        having += f" LIMIT {'ALL' if limit is None else limit} OFFSET {offset}"
    if plan.agg_exprs:
        having += " RESULT " + ", ".join(f"{render_expr(e, out)} AS {name}"
                                          for name, e in plan.agg_exprs)
    return (f"GROUP BY {by} " if by else "") + "AGGREGATE " + ", ".join(parts) + having


def aggregate_groups(rows: Iterable[tuple[Any, ...]], calls: tuple[ir.AggCall, ...],
                     grouped: tuple[int, ...], having: ir.Expr | None = None,
                     hidden: int = 0, order: tuple[ir.SortKey, ...] = (),
                     limit: int | None = None, offset: int = 0) -> list[tuple[Any, ...]]:
    """The result rows: without ``grouped`` the one row of ``calls`` over ``rows`` (count
    0 and NULLs over none); else one row per distinct value of the ``grouped`` columns;
    then those ``having`` (over the calls' values) holds for, sorted by ``order`` and cut to
    ``offset``/``limit``, without the ``hidden`` last values (calls only ORDER BY or HAVING
    read)."""
    if not grouped:
        out = [aggregate_rows(rows, calls)]
    else:
        groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in rows:
            groups.setdefault(tuple(row[c] for c in grouped), []).append(row)
        out = [aggregate_rows(part, calls) for part in groups.values()]
    if having is not None:
        out = [r for r in out if compile_predicate(having)(r)]
    if order:
        out.sort(key=order_key(order))
    if limit is not None or offset:
        out = out[offset:] if limit is None else out[offset: offset + limit]
    return [r[: len(r) - hidden] for r in out] if hidden else out


def computed_columns(rows: Iterable[tuple[Any, ...]],
                     exprs: tuple[tuple[str, ir.Expr], ...]) -> list[tuple[Any, ...]]:
    """The result columns ``exprs`` computes over each aggregate result row."""
    fns = [compile_expr(e) for _, e in exprs]
    return [tuple(f(row) for f in fns) for row in rows]


def aggregate_rows(rows: Iterable[tuple[Any, ...]],
                   calls: tuple[ir.AggCall, ...]) -> tuple[Any, ...]:
    """The one row of ``calls`` (arguments: ``ColumnRef`` into each row) over ``rows``."""
    accs = [accumulator(c.func, c.type_oid, None if c.arg is None else c.arg.type_oid,
                        collation=c.collation) for c in calls]
    cols = [c.arg.index if isinstance(c.arg, ir.ColumnRef) else None for c in calls]
    pairs = list(zip(accs, cols, strict=True))
    for row in rows:
        for acc, col in pairs:
            acc.add(None if col is None else row[col], 1)
    return tuple(acc.value() for acc in accs)
