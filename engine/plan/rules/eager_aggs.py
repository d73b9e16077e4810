"""Rule: eager aggregation — aggregate a join's right input by the join key before the join
when each group is one left row.

Owns: ``aggregate_before_joins`` and ``unique_on`` (does a set of output columns hold a
unique key of a relation).

Form: ``Aggregate(Join(L, R, lk, rk, kind), G, aggs)`` where G holds only L's columns and
contains a unique key of L, and each aggregate reads one plain column of R (or is
``count(*)``) with a function that ignores NULLs (count, count DISTINCT, sum, avg, min, max)
becomes ``Project(Join(L, Aggregate(R, rk, aggs'), lk, keys, kind))``. Then each group is
exactly one L row, and its R rows are exactly R's rows with ``rk`` equal to that row's
``lk`` (none when a value is NULL): the same multiset the pushed aggregate folds. A LEFT
JOIN's row without partners is one NULL-extended row: every listed aggregate of a plain R
column ignores its NULL (count is 0, the others NULL, as the padded aggregate row's NULLs,
with ``coalesce(count, 0)``), and ``count(*)`` counts it (``coalesce(count(*), 1)``). An
inner join drops L rows without partners on both forms.

Why: the dataflow's cost of a change. Before, a change of the left row (the demo's story
row, whose score each vote bumps) re-paired it with every right row (all of its votes) and
the aggregate folded them out and in again: O(right rows of the key) per change. After, it
meets one aggregate row, and a right change folds into its group's row: O(1) each.

Invariants: the result of every key is unchanged (the aggregate's result types, names and
positions are the original's); a plan the form does not match is returned as it is. The
pushed aggregate's state is keyed on the join columns (partial when they trace to a base
table, ``materialize``).
"""

from __future__ import annotations

from dataclasses import replace

from engine.plan import ir
from engine.values import oids as T

#: the aggregates that ignore NULL inputs (so a NULL-extended row adds nothing to them)
_NULL_BLIND = frozenset({"count", "count_distinct", "sum", "avg", "min", "max"})


def aggregate_before_joins(reader: ir.Reader) -> ir.Reader:
    """Apply the rewrite everywhere in ``reader``'s plan (bottom up)."""
    new = _walk(reader.input)
    return reader if new is reader.input else replace(reader, input=new)


def _walk(rel: ir.Rel) -> ir.Rel:
    if isinstance(rel, ir.Scan):
        return rel
    if isinstance(rel, ir.Join):
        left, right = _walk(rel.left), _walk(rel.right)
        if left is not rel.left or right is not rel.right:
            rel = ir.Join(left, right, rel.left_keys, rel.right_keys, rel.kind)
        return rel
    if isinstance(rel, ir.UnionAll):
        inputs = tuple(_walk(r) for r in rel.inputs)
        if any(a is not b for a, b in zip(inputs, rel.inputs, strict=True)):
            rel = ir.UnionAll(inputs)
        return rel
    below = _walk(rel.input)
    if below is not rel.input:
        if isinstance(rel, ir.Project) and isinstance(below, ir.Project) and all(
                isinstance(e, ir.ColumnRef) for e in rel.exprs):
            # a selection of the rewrite's columns: one projection, not two
            picked = tuple(below.exprs[e.index] for e in rel.exprs)  # type: ignore[union-attr]
            return ir.Project(below.input, picked, rel.names)
        rel = replace(rel, input=below)
    if isinstance(rel, ir.Aggregate):
        return _eager(rel) or rel
    return rel


def _eager(agg: ir.Aggregate) -> ir.Rel | None:
    """The rewritten form of ``agg``, or None when it does not match."""
    join = agg.input
    if not isinstance(join, ir.Join) or not agg.group_by:
        return None
    nl = len(join.left.columns)
    if any(g >= nl for g in agg.group_by) or not unique_on(join.left, set(agg.group_by)):
        return None
    if len(set(join.right_keys)) != len(join.right_keys):
        return None
    pushed: list[ir.AggCall] = []
    for call in agg.aggs:
        if call.order or call.delimiter is not None:
            return None
        if call.func == "count_star" and call.arg is None:
            pushed.append(call)
            continue
        arg = call.arg
        if call.func not in _NULL_BLIND or not isinstance(arg, ir.ColumnRef) or arg.index < nl:
            return None
        pushed.append(ir.AggCall(call.func, ir.ColumnRef(arg.index - nl, arg.type_oid),
                                 call.type_oid, call.name, collation=call.collation))
    nk = len(join.right_keys)
    inner = ir.Aggregate(join.right, join.right_keys, tuple(pushed))
    joined = ir.Join(join.left, inner, join.left_keys, tuple(range(nk)), join.kind)
    cols = join.left.columns
    exprs: list[ir.Expr] = [ir.ColumnRef(g, cols[g].type_oid) for g in agg.group_by]
    for i, call in enumerate(agg.aggs):
        value: ir.Expr = ir.ColumnRef(nl + nk + i, call.type_oid)
        if join.kind == "left" and call.func in ("count", "count_distinct", "count_star"):
            empty = 1 if call.func == "count_star" else 0  # the padded row counts for count(*)
            value = ir.Coalesce((value, ir.Const(empty, T.INT8)), call.type_oid)
        exprs.append(value)
    names = tuple(c.name for c in agg.columns)
    return ir.Project(joined, tuple(exprs), names)


def unique_on(rel: ir.Rel, cols: set[int]) -> bool:
    """Do the output columns ``cols`` of ``rel`` hold a unique key of it (no two rows equal
    on them, NULLs compared as GROUP BY does)? Conservative: False when not known."""
    if isinstance(rel, ir.Scan):
        pk = rel.table.primary_key
        return bool(pk) and set(pk) <= cols
    if isinstance(rel, ir.Filter | ir.TopK):
        return unique_on(rel.input, cols)
    if isinstance(rel, ir.Project):
        below = {e.index for c in cols if isinstance(e := rel.exprs[c], ir.ColumnRef)}
        return unique_on(rel.input, below)
    if isinstance(rel, ir.Distinct):
        return cols >= set(range(len(rel.columns))) or unique_on(rel.input, cols)
    if isinstance(rel, ir.Aggregate):
        return cols >= set(range(len(rel.group_by)))
    if isinstance(rel, ir.Join):
        # one row per left row and partner: unique on (left key, right key) - and each
        # left row has at most one padded row (only when it has no partner)
        nl = len(rel.left.columns)
        left = {c for c in cols if c < nl}
        right = {c - nl for c in cols if c >= nl}
        return unique_on(rel.left, left) and (
            unique_on(rel.right, right) or unique_on(rel.right, set(rel.right_keys)))
    return False
