"""Rule: column pruning — every operator carries only the columns something above it reads.

Owns: ``prune_columns``. Unused select-list items and base columns disappear (a projection
is placed directly above a scan when the scan has columns nobody reads), so join and
aggregate state hold narrower rows.

Invariants: the reader's key, output and ORDER BY columns are always kept; group columns of
an aggregate, every column under DISTINCT and under a top-k (its tie order uses the whole
row) are kept; each union input keeps the same columns. Pruning renumbers positions and
rewrites every reference, never changes results.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.plan import ir
from engine.plan.scope import column_refs, remap

Mapping = dict[int, int]


def _compact(needed: set[int]) -> Mapping:
    return {old: new for new, old in enumerate(sorted(needed))}


def _restrict(rel: ir.Rel, mapping: Mapping, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    """Narrow ``rel`` (whose old positions map through ``mapping``) to exactly ``needed``."""
    if len(mapping) == len(needed) and all(mapping[i] == r for r, i in
                                           enumerate(sorted(needed))):
        return rel, mapping
    cols = rel.columns
    order = sorted(needed)
    exprs = tuple(ir.ColumnRef(mapping[i], cols[mapping[i]].type_oid) for i in order)
    return ir.Project(rel, exprs, tuple(cols[mapping[i]].name for i in order)), _compact(needed)


def prune(rel: ir.Rel, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    """``rel`` keeping at least ``needed``; the mapping gives each kept old position's new one."""
    handler: Any = _HANDLERS[type(rel)]
    result: tuple[ir.Rel, Mapping] = handler(rel, needed)
    return result


def _scan(rel: ir.Scan, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    if len(needed) == len(rel.columns):
        return rel, {i: i for i in needed}
    return _restrict(rel, {i: i for i in range(len(rel.columns))}, needed)


def _filter(rel: ir.Filter, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    child, mapping = prune(rel.input, needed | column_refs(rel.predicate))
    return ir.Filter(child, remap(rel.predicate, mapping.__getitem__)), mapping


def _project(rel: ir.Project, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    kept = sorted(needed)
    exprs = [rel.exprs[i] for i in kept]
    child_needed: set[int] = set()
    for e in exprs:
        child_needed |= column_refs(e)
    if not child_needed and rel.input.columns:
        child_needed = {0}
    child, mapping = prune(rel.input, child_needed)
    new = ir.Project(child, tuple(remap(e, mapping.__getitem__) for e in exprs),
                     tuple(rel.names[i] for i in kept))
    if _is_identity(new):
        return child, _compact(needed)
    return new, _compact(needed)


def _is_identity(rel: ir.Project) -> bool:
    return len(rel.exprs) == len(rel.input.columns) and all(
        isinstance(e, ir.ColumnRef) and e.index == i and rel.names[i] == rel.input.columns[i].name
        for i, e in enumerate(rel.exprs))


def _join(rel: ir.Join, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    width = len(rel.left.columns)
    # a side nothing reads (a cross join's) keeps one column: its rows stay rows
    left, lm = prune(rel.left, {i for i in needed if i < width} | set(rel.left_keys) or {0})
    right, rm = prune(rel.right, {i - width for i in needed if i >= width}
                      | set(rel.right_keys) or {0})
    new = ir.Join(left, right, tuple(lm[k] for k in rel.left_keys),
                  tuple(rm[k] for k in rel.right_keys), rel.kind)
    nl = len(left.columns)
    mapping = {i: lm[i] for i in lm} | {width + j: nl + rm[j] for j in rm}
    return new, mapping


def _union(rel: ir.UnionAll, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    inputs = [_restrict(*prune(r, needed), needed)[0] for r in rel.inputs]
    return ir.UnionAll(tuple(inputs)), _compact(needed)


def _aggregate(rel: ir.Aggregate, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    child_needed = set(rel.group_by)
    for call in rel.aggs:
        for expr in call.exprs:
            child_needed |= column_refs(expr)
    if not child_needed and rel.input.columns:
        child_needed = {0}
    child, m = prune(rel.input, child_needed)
    aggs = tuple(ir.AggCall(a.func, None if a.arg is None else remap(a.arg, m.__getitem__),
                            a.type_oid, a.name,
                            tuple(replace(s, expr=remap(s.expr, m.__getitem__))
                                  for s in a.order),
                            a.delimiter, a.collation) for a in rel.aggs)
    new = ir.Aggregate(child, tuple(m[g] for g in rel.group_by), aggs)
    return new, {i: i for i in range(len(rel.columns))}


def _keep_all(rel: ir.Distinct | ir.TopK, needed: set[int]) -> tuple[ir.Rel, Mapping]:
    width = len(rel.input.columns)
    child, m = prune(rel.input, set(range(width)))
    import dataclasses
    new: ir.Rel = dataclasses.replace(rel, input=child)
    return new, m


_HANDLERS = {ir.Scan: _scan, ir.Filter: _filter, ir.Project: _project, ir.Join: _join,
             ir.UnionAll: _union, ir.Aggregate: _aggregate, ir.Distinct: _keep_all,
             ir.TopK: _keep_all}


def prune_columns(reader: ir.Reader) -> ir.Reader:
    needed = set(reader.key) | set(reader.output) | {k.column for k in reader.order_by}
    for w in reader.windows:
        needed |= {w.column, *(k.column for k in w.order), *w.partition} | (
            set() if w.arg is None else {w.arg})
    child, m = prune(reader.input, needed)

    def sort(keys: tuple[ir.SortKey, ...]) -> tuple[ir.SortKey, ...]:
        return tuple(ir.SortKey(m[k.column], k.descending, k.nulls_first, k.collation)
                     for k in keys)

    windows = tuple(replace(w, column=m[w.column], order=sort(w.order),
                            arg=None if w.arg is None else m[w.arg],
                            partition=tuple(m[p] for p in w.partition))
                    for w in reader.windows)
    return ir.Reader(child, tuple(m[k] for k in reader.key), tuple(m[o] for o in reader.output),
                     sort(reader.order_by), reader.limit, reader.offset, windows)
