"""Rule: outer-join reduction — a LEFT JOIN whose NULL-extended rows a filter above it always
rejects is an inner join.

Owns: ``reduce_outer_joins`` and the strictness analysis it rests on: ``rejects_nulls(pred)``,
the input columns of which one being NULL makes ``pred`` not TRUE.

Invariant: a LEFT JOIN becomes inner only under a filter that rejects NULL in some column of
its right input; such a filter removes every NULL-extended row, so the results are equal.
The analysis is conservative: an expression not listed as strict (COALESCE, CASE, NULLIF,
IS NULL, concat, ARRAY[...], OR branches that differ, the bounds of BETWEEN and the items of
IN...) is assumed to accept NULLs. Run it before
predicate pushdown, which can then push the filter into the (now inner) right side.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.plan import ir

_STRICT = (ir.Compare, ir.Arith, ir.Negate, ir.Cast, ir.Like, ir.Regex)
#: functions with a non-NULL value for some NULL argument (``ARRAY[NULL]`` is an array; the
#: host replaces a ``param_flag``)
_LAX_FUNCS = frozenset({"concat", "array_construct", "param_flag"})


def _value_strict(expr: Any) -> set[int]:
    """Columns whose NULL makes ``expr`` NULL."""
    if isinstance(expr, ir.ColumnRef):
        return {expr.index}
    if isinstance(expr, ir.Func) and expr.name not in _LAX_FUNCS:
        return set().union(*(_value_strict(a) for a in expr.args))
    if isinstance(expr, (ir.Between, ir.InList)):  # (only the tested value: ``5 IN (x, 5)``
        return _value_strict(expr.arg)             # and ``5 NOT BETWEEN x AND 3`` are TRUE)
    if isinstance(expr, _STRICT):
        out: set[int] = set()
        for f in dataclasses.fields(expr):
            value = getattr(expr, f.name)
            if isinstance(value, tuple):
                for v in value:
                    out |= _value_strict(v)
            elif dataclasses.is_dataclass(value):
                out |= _value_strict(value)
        return out
    return set()


def rejects_nulls(pred: Any) -> set[int]:
    """Columns whose NULL makes the predicate not TRUE (so a filter drops the row)."""
    if isinstance(pred, ir.BoolOp):
        parts = [rejects_nulls(a) for a in pred.args]
        return set().union(*parts) if pred.op == "and" else set.intersection(*parts)
    if isinstance(pred, ir.IsNull):
        return _value_strict(pred.arg) if pred.negated else set()
    if isinstance(pred, ir.Not):
        inner = pred.arg
        if isinstance(inner, ir.IsNull) and not inner.negated:
            return _value_strict(inner.arg)
        return _value_strict(inner)
    return _value_strict(pred)


def _reduce(rel: ir.Rel) -> ir.Rel:
    if isinstance(rel, ir.Filter):
        child = _reduce(rel.input)
        if isinstance(child, ir.Join) and child.kind == "left":
            width = len(child.left.columns)
            if any(i >= width for i in rejects_nulls(rel.predicate)):
                child = dataclasses.replace(child, kind="inner")
        return ir.Filter(child, rel.predicate)
    if isinstance(rel, ir.Scan):
        return rel
    if isinstance(rel, ir.Join):
        return dataclasses.replace(rel, left=_reduce(rel.left), right=_reduce(rel.right))
    if isinstance(rel, ir.UnionAll):
        return ir.UnionAll(tuple(_reduce(r) for r in rel.inputs))
    new: ir.Rel = dataclasses.replace(rel, input=_reduce(rel.input))
    return new


def reduce_outer_joins(reader: ir.Reader) -> ir.Reader:
    return dataclasses.replace(reader, input=_reduce(reader.input))
