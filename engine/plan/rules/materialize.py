"""Rule: materialization placement — which operators of a plan hold state, keyed how, and
whether that state can be partial.

Owns: ``Placement`` and ``place`` (a Reader plan -> the stateful operators in plan order).
Stateful: the reader (on its key), both inputs of every join (on the join columns), every
aggregate (on its group columns), every top-k (on its group columns) and every DISTINCT,
INTERSECT and EXCEPT (on the whole row). Filters, projections and unions are stateless.

Invariant (DESIGN section 6): a state may be partial only if each of its key columns traces
back to a column of one base table through column references alone - not through a computed
expression, and not from the NULL-extended side of a LEFT JOIN. Otherwise it is full (its
fill predicate is TRUE). This pass only annotates; it never changes the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.plan import ir


@dataclass(frozen=True, slots=True)
class Placement:
    """State held by ``node`` (the operator, or the join input it indexes), keyed on
    ``key`` (positions in that node's output); ``partial`` unless a key column is computed."""

    node: ir.Rel
    role: str
    key: tuple[int, ...]
    partial: bool


def traces(rel: ir.Rel, col: int) -> bool:
    """Does output column ``col`` of ``rel`` come unchanged from a base table column?"""
    if isinstance(rel, ir.Scan):
        return True
    if isinstance(rel, ir.Filter | ir.Distinct | ir.TopK):
        return traces(rel.input, col)
    if isinstance(rel, ir.Project):
        expr = rel.exprs[col]
        return isinstance(expr, ir.ColumnRef) and traces(rel.input, expr.index)
    if isinstance(rel, ir.Join):
        width = len(rel.left.columns)
        if col < width:
            return traces(rel.left, col)
        return rel.kind == "inner" and traces(rel.right, col - width)
    if isinstance(rel, ir.UnionAll):
        return all(traces(r, col) for r in rel.inputs)
    if col < len(rel.group_by):
        return traces(rel.input, rel.group_by[col])
    return False


def _partial(rel: ir.Rel, key: tuple[int, ...]) -> bool:
    return all(traces(rel, k) for k in key)


def _visit(rel: ir.Rel, out: list[Placement]) -> None:
    if isinstance(rel, ir.Join):
        out.append(Placement(rel.left, "join left input", rel.left_keys,
                             _partial(rel.left, rel.left_keys)))
        out.append(Placement(rel.right, "join right input", rel.right_keys,
                             _partial(rel.right, rel.right_keys)))
    elif isinstance(rel, ir.Aggregate):
        out.append(Placement(rel, "aggregate", tuple(range(len(rel.group_by))),
                             _partial(rel, tuple(range(len(rel.group_by))))))
    elif isinstance(rel, ir.TopK):
        out.append(Placement(rel, "top-k", rel.group_by, _partial(rel.input, rel.group_by)))
    elif isinstance(rel, ir.Distinct):
        key = tuple(range(len(rel.columns)))
        role = "distinct" if rel.setop is None else rel.setop.replace("_", " ")
        out.append(Placement(rel, role, key, _partial(rel, key)))
    for child in ir.children(rel):
        _visit(child, out)


def place(reader: ir.Reader) -> tuple[Placement, ...]:
    """Every state the plan needs, the reader's first."""
    out = [Placement(reader.input, "reader", reader.key, _partial(reader.input, reader.key))]
    _visit(reader.input, out)
    return tuple(out)
