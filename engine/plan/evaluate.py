"""A from-scratch reference evaluator of the plan IR over complete base data.

Owns: ``evaluate`` (a relation's rows as a list, a bag) and ``evaluate_reader`` (what a cache
returns for one key). It recomputes everything on every call and shares with the dataflow
only the scalar semantics (``engine.dataflow.expr``) and the final steps of SUM/AVG
(``engine.dataflow.pgmath``): it is the oracle for the dataflow's property tests and for the
planner's corpus tests.

Invariant: ``tables`` maps a relation oid to all of that table's rows (tuples in column order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.dataflow import pgmath
from engine.dataflow.expr import compare, compile_expr, compile_predicate
from engine.dataflow.ops.accumulators import ordered_value
from engine.dataflow.ordering import order_key, row_key
from engine.dataflow.state.intervals import span_of
from engine.dataflow.windows import apply_windows
from engine.plan import ir
from engine.values.collation import key_function

Row = tuple[Any, ...]
Tables = Mapping[int, Iterable[Row]]


def evaluate(rel: ir.Rel, tables: Tables, params: Sequence[Any] = ()) -> list[Row]:
    """All rows of ``rel`` (in no particular order)."""
    return _EVAL[type(rel)](rel, tables, params)


def evaluate_reader(reader: ir.Reader, tables: Tables, key: Sequence[Any],
                    params: Sequence[Any] = ()) -> list[Row]:
    """The rows a cache returns for ``key`` (ordered when the reader has ORDER BY); with
    range-partial state (``reader.span``) the key ends with a ``Span``: the rows whose span
    column lies in it (with ``first``: the first rows of them, as the reader keeps)."""
    span = span_of(tuple(key)) if reader.span is not None else None
    if span is not None:
        key = tuple(key)[:-1]
    pairs = list(zip(reader.key, key, strict=True))
    rows = [r for r in evaluate(reader.input, tables, params)
            if all(v is not None and pgmath_eq(r[c], v) for c, v in pairs)]
    if span is not None:
        rows = [r for r in rows if span.holds(r[span.column])]
    rows = apply_windows(rows, reader.windows)
    if reader.order_by:
        rows.sort(key=order_key(reader.order_by))
    if span is not None and span.first is not None:
        rows = rows[:span.first]
    if reader.offset or reader.limit is not None:
        end = None if reader.limit is None else reader.offset + reader.limit
        rows = rows[reader.offset:end]
    return [tuple(r[i] for i in reader.output) for r in rows]


def pgmath_eq(a: Any, b: Any) -> bool:
    """SQL equality of two non-NULL values of one type."""
    return compare("=", a, b) is True


def _scan(rel: ir.Scan, tables: Tables, params: Sequence[Any]) -> list[Row]:
    return [tuple(r) for r in tables.get(rel.table.oid, ())]


def _filter(rel: ir.Filter, tables: Tables, params: Sequence[Any]) -> list[Row]:
    keep = compile_predicate(rel.predicate, params)
    return [r for r in evaluate(rel.input, tables, params) if keep(r)]


def _project(rel: ir.Project, tables: Tables, params: Sequence[Any]) -> list[Row]:
    fns = [compile_expr(e, params) for e in rel.exprs]
    return [tuple(f(r) for f in fns) for r in evaluate(rel.input, tables, params)]


def _join(rel: ir.Join, tables: Tables, params: Sequence[Any]) -> list[Row]:
    left = evaluate(rel.left, tables, params)
    right = evaluate(rel.right, tables, params)
    pad = (None,) * len(rel.right.columns)
    out: list[Row] = []
    for lrow in left:
        lkey = [lrow[i] for i in rel.left_keys]
        matched = False
        for rrow in right:
            if all(pgmath_eq(a, rrow[j]) for a, j in zip(lkey, rel.right_keys, strict=True)):
                out.append(lrow + rrow)
                matched = True
        if not matched and rel.kind == "left":
            out.append(lrow + pad)
    return out


def _union(rel: ir.UnionAll, tables: Tables, params: Sequence[Any]) -> list[Row]:
    return [r for child in rel.inputs for r in evaluate(child, tables, params)]


def _groups(rows: Iterable[Row], cols: Sequence[int]) -> dict[Row, list[Row]]:
    groups: dict[Row, list[Row]] = {}
    for r in rows:
        groups.setdefault(tuple(r[i] for i in cols), []).append(r)
    return groups


def aggregate_value(call: ir.AggCall, rows: Sequence[Row], params: Sequence[Any] = ()) -> Any:
    """One aggregate over all of a group's input rows, computed directly."""
    if call.func == "count_star":
        return len(rows)
    assert call.arg is not None
    if call.order:
        fns = [compile_expr(e, params) for e in call.exprs]
        keys = tuple(ir.SortKey(i + 1, s.descending, s.nulls_first, s.collation)
                     for i, s in enumerate(call.order))
        return ordered_value([tuple(f(r) for f in fns) for r in rows], keys, call.func,
                             call.delimiter, call.arg.type_oid)
    fn = compile_expr(call.arg, params)
    values = [v for v in (fn(r) for r in rows) if v is not None]
    if call.func == "count":
        return len(values)
    if call.func == "count_distinct":
        return len({row_key((v,)) for v in values})
    if call.func in ("min", "max"):
        if not values:
            return None
        pick: Callable[..., Any] = min if call.func == "min" else max
        if call.collation is not None:
            return pick(values, key=key_function(call.collation))
        return pick(values, key=lambda v: row_key((v,)))
    total: Any = 0
    for v in values:
        total = pgmath.add_values(total, v)
    if call.func == "sum":
        return pgmath.finish_sum(total, len(values), call.type_oid)
    return pgmath.finish_avg(total, len(values), call.type_oid)


def _aggregate(rel: ir.Aggregate, tables: Tables, params: Sequence[Any]) -> list[Row]:
    groups = _groups(evaluate(rel.input, tables, params), rel.group_by)
    if not rel.group_by and not groups:
        groups[()] = []
    return [g + tuple(aggregate_value(a, rows, params) for a in rel.aggs)
            for g, rows in groups.items()]


def _distinct(rel: ir.Distinct, tables: Tables, params: Sequence[Any]) -> list[Row]:
    rows = evaluate(rel.input, tables, params)
    if rel.setop is None:
        return list(dict.fromkeys(rows))
    counts: dict[Row, list[int]] = {}
    for row in rows:
        counts.setdefault(row[:-1], [0, 0])[row[-1]] += 1
    return [g for g, (left, right) in counts.items()
            for _ in range(ir.setop_copies(rel.setop, left, right))]


def _topk(rel: ir.TopK, tables: Tables, params: Sequence[Any]) -> list[Row]:
    key = order_key(rel.order_by)
    out: list[Row] = []
    for rows in _groups(evaluate(rel.input, tables, params), rel.group_by).values():
        rows.sort(key=key)
        out.extend(rows[rel.offset:rel.offset + rel.limit])
    return out


_EVAL: dict[type, Callable[[Any, Tables, Sequence[Any]], list[Row]]] = {
    ir.Scan: _scan, ir.Filter: _filter, ir.Project: _project, ir.Join: _join,
    ir.UnionAll: _union, ir.Aggregate: _aggregate, ir.Distinct: _distinct, ir.TopK: _topk,
}
