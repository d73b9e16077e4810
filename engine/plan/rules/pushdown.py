"""Rule: predicate pushdown — move filter conjuncts below joins, as close to the scans as
their columns allow.

Invariant: a conjunct moves into a join input only if it reads that input's columns alone,
and into the right input of a LEFT join never (that would turn unmatched rows into
NULL-extended ones instead of removing them). Adjacent filters merge into one AND. The
rewritten plan returns the same rows for every key.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.plan import ir
from engine.plan.scope import column_refs, remap


def split_and(pred: ir.Expr) -> list[ir.Expr]:
    if isinstance(pred, ir.BoolOp) and pred.op == "and":
        return [c for arg in pred.args for c in split_and(arg)]
    return [pred]


def and_all(preds: list[ir.Expr]) -> ir.Expr:
    return preds[0] if len(preds) == 1 else ir.BoolOp("and", tuple(preds))


def _filtered(rel: ir.Rel, preds: list[ir.Expr]) -> ir.Rel:
    if not preds:
        return rel
    if isinstance(rel, ir.Filter):
        return _filtered(rel.input, split_and(rel.predicate) + preds)
    if isinstance(rel, ir.Join):
        return _into_join(rel, preds)
    return ir.Filter(rel, and_all(preds))


def _into_join(join: ir.Join, preds: list[ir.Expr]) -> ir.Rel:
    width = len(join.left.columns)
    left: list[ir.Expr] = []
    right: list[ir.Expr] = []
    keep: list[ir.Expr] = []
    for pred in preds:
        refs = column_refs(pred)
        if refs and max(refs) < width:
            left.append(pred)
        elif refs and min(refs) >= width and join.kind == "inner":
            right.append(remap(pred, lambda i: i - width))
        else:
            keep.append(pred)
    new = ir.Join(push(_filtered(join.left, left)), push(_filtered(join.right, right)),
                  join.left_keys, join.right_keys, join.kind)
    return ir.Filter(new, and_all(keep)) if keep else new


def push(rel: ir.Rel) -> ir.Rel:
    """``rel`` with every filter pushed down as far as it goes."""
    if isinstance(rel, ir.Filter):
        return _filtered(push(rel.input), split_and(rel.predicate))
    if isinstance(rel, ir.Scan):
        return rel
    if isinstance(rel, ir.Join):
        return ir.Join(push(rel.left), push(rel.right), rel.left_keys, rel.right_keys, rel.kind)
    if isinstance(rel, ir.UnionAll):
        return ir.UnionAll(tuple(push(r) for r in rel.inputs))
    return _with_input(rel, push(rel.input))


def _with_input(rel: Any, new_input: ir.Rel) -> ir.Rel:
    new: ir.Rel = dataclasses.replace(rel, input=new_input)
    return new


def push_filters(reader: ir.Reader) -> ir.Reader:
    return ir.Reader(push(reader.input), reader.key, reader.output, reader.order_by,
                     reader.limit, reader.offset, reader.windows)
