"""Which eviction rows of a base table can reach present state: exact pruning of holes.

Owns: ``targets(base)`` - the first stateful nodes below a base node, each with, per column of
its state key, the base column that an eviction row of that base carries into it (key
provenance through filters, projections, joins and unions), or None when the key cannot be
traced; and ``prune(targets, rows)`` - the eviction rows whose key is present at some target,
or that reach a target with an untraced key holding any key at all.

Why it is exact (DESIGN §5/§6: an update for a key missing downstream is dropped there): an
eviction row only makes keys missing (``records``); the stateless nodes between a base and
its first stateful nodes copy, filter or pair it, and every row they derive from it carries
the row's own values in the traced columns (a join's partners have the join value; its
unknown partner keeps the join columns). So when the key computed from the row is missing
at every target (and no target is full), the rows it would derive evict nothing and the
joins' partner lookups on the way are wasted work. A row with an UNKNOWN traced column, a
target whose key has no provenance (a computed column, a LEFT JOIN's padded side) and that
holds some key, or a node of another kind on the way (a span reader), always passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.dataflow.node import Node
from engine.dataflow.ops.filter import FilterNode
from engine.dataflow.ops.join import JoinNode
from engine.dataflow.ops.keyed import KeyedNode
from engine.dataflow.ops.project import ProjectNode
from engine.dataflow.ops.reader import ReaderNode
from engine.dataflow.ops.union import UnionNode
from engine.dataflow.records import Row, has_unknown

#: per output column of a node: the base column it equals in every row derived from one
#: eviction row of the base, or None
Trace = tuple[int | None, ...]
#: the first stateful nodes below a base and the base columns of their keys (None: not
#: traced); None: a node on the way is of a kind not followed (every row passes)
Targets = tuple[tuple[Node, tuple[int, ...] | None], ...] | None


def targets(base: Node) -> Targets:
    """The first stateful nodes below ``base`` with their keys traced to its columns."""
    found: dict[tuple[int, Trace | None], tuple[Node, tuple[int, ...] | None]] = {}
    stack: list[tuple[Node, int, Trace]] = [
        (child, i, tuple(range(base.width))) for child, i in base.children]
    while stack:
        node, i, trace = stack.pop()
        if isinstance(node, KeyedNode) or type(node) is ReaderNode:
            cols = node.key_in if isinstance(node, KeyedNode) else node.key
            key = tuple(trace[c] for c in cols)
            traced = None if None in key else key
            found[(node.nid, traced)] = (node, traced)  # type: ignore[assignment]
            continue
        out = _through(node, i, trace)
        if out is None:
            return None
        stack.extend((child, j, out) for child, j in node.children)
    return tuple(found.values())


def _through(node: Node, i: int, trace: Trace) -> Trace | None:
    """The trace of ``node``'s output for an eviction row entering input ``i``; None when
    ``node`` is of a kind this does not follow."""
    if isinstance(node, FilterNode | UnionNode):
        return trace
    if isinstance(node, ProjectNode):
        return tuple(trace[s] if s is not None else None for s in node.src)
    if isinstance(node, JoinNode):
        nl = node.nl
        nr = node.width - nl
        if i == 0:  # partners have the join value; a LEFT JOIN's padding is all NULL
            right: list[int | None] = [None] * nr
            if node.kind != "left":
                for lc, rc in zip(node.lk, node.rk, strict=True):
                    right[rc] = trace[lc]
            return trace + tuple(right)
        left: list[int | None] = [None] * nl
        for lc, rc in zip(node.lk, node.rk, strict=True):
            left[lc] = trace[rc]
        return tuple(left) + (trace if node.kind != "left" else (None,) * nr)
    return None


def prune(found: Targets, rows: Sequence[Row]) -> list[Row]:
    """The eviction rows of ``rows`` that may evict a present key at some target."""
    if found is None:
        return list(rows)
    out: list[Row] = []
    for node, cols in found:
        if cols is None and _holds_any(node):
            return list(rows)
    for row in rows:
        for node, cols in found:
            if cols is None:
                continue
            d = tuple([row[c] for c in cols])
            if has_unknown(d) or (node.has(d) if isinstance(node, KeyedNode)
                                  else d in node.state):  # type: ignore[attr-defined]
                out.append(row)
                break
    return out


def _holds_any(node: Node) -> bool:
    """Whether a target holds some key (an untraced eviction row may evict it)."""
    if isinstance(node, KeyedNode):
        return node.full or bool(node.present)
    return bool(node.state)  # type: ignore[attr-defined]
