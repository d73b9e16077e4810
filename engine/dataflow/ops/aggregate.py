"""Grouped aggregation (COUNT(*), COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX).

State: per group ``g`` one list (``GroupState``): its input row count, one accumulator per
aggregate, its output row (``STALE`` until computed; ``fold`` recomputes it for the groups a
batch touches) and its byte size - partial by the state key ``d`` (a subset of the group
columns; see ``keyed``). Output: group columns, then one column per aggregate.

Invariants: a group whose row count drops to zero disappears (its row is retracted, nothing
replaces it) unless there are no group columns - then there is always exactly one row;
a delta emits ``-old, +new`` once per touched group per batch whose row changed - in value
or only in print (a numeric SUM whose result scale changed); a group whose aggregate raises
(e.g. an integer SUM overflowing its type) has its key evicted, so a read refetches it and
reports the error.

The per-row loop is ``fold`` (with a Cython twin); its output is consolidated by
construction (``Node.consolidated``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import cython_ext
from engine.dataflow.expr import compile_expr
from engine.dataflow.node import Cols, Node, Runtime
from engine.dataflow.ops.accumulators import Acc, accumulator
from engine.dataflow.ops.keyed import KeyedNode
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import Delta, Row, key_of, row_size, same_print
from engine.plan import ir

#: ``[row count, [accumulators], output row (``STALE`` until computed), bytes]``
GroupState = list[Any]


class _Stale:
    __slots__ = ()

    def __repr__(self) -> str:
        return "STALE"


#: A group's output row is not computed (``output_rows`` computes it on demand).
STALE: Any = _Stale()


class AggregateNode(KeyedNode):
    consolidated = True  # one -old/+new per group, and only when the row prints differently
    def __init__(self, nid: int, source: Node, group_by: Cols, aggs: Sequence[ir.AggCall],
                 key_pos: Cols, runtime: Runtime) -> None:
        super().__init__(nid, source, len(group_by) + len(aggs), group_by, key_pos, key_pos,
                         runtime)
        self.aggs = tuple(aggs)
        self.args = [_entry(a) if a.order else compile_expr(a.arg) if a.arg is not None
                     else None for a in aggs]
        #: per aggregate: the input column of a plain column argument, else -1 (use ``args``)
        self.arg_cols = tuple(a.arg.index if isinstance(a.arg, ir.ColumnRef) and not a.order
                              else -1 for a in aggs)
        self.orders = [agg_order(a) for a in aggs]
        self.groups: dict[Row, GroupState] = {}

    def _new(self) -> GroupState:
        accs: list[Acc] = [accumulator(a.func, a.type_oid,
                                       a.arg.type_oid if a.arg is not None else None,
                                       order, a.delimiter, a.collation)
                           for a, order in zip(self.aggs, self.orders, strict=True)]
        return [0, accs, STALE, 0]

    def _add(self, st: GroupState, row: Row, w: int) -> None:
        st[0] += w
        for acc, arg in zip(st[1], self.args, strict=True):
            acc.add(arg(row) if arg is not None else None, w)

    def result_row(self, g: Row, st: GroupState | None) -> Row | None:
        if st is None or (st[0] == 0 and self.group):
            return None
        return g + tuple([acc.value() for acc in st[1]])

    def output_rows(self, g: Row) -> list[Row]:
        st = self.groups.get(g)
        if st is None:
            return []
        out = st[2]
        if out is STALE:
            try:
                out = st[2] = self.result_row(g, st)
            except EvalError:
                return []
        return [out] if out is not None else []

    def drop_group(self, g: Row) -> None:
        st = self.groups.pop(g, None)
        if st is not None:
            self.bytes -= st[3]

    def adopt(self, g: Row, state: object) -> None:
        st: GroupState = state  # type: ignore[assignment]
        st[2] = STALE
        st[3] = row_size(g) + 64 + 48 * len(self.aggs)
        self.groups[g] = st
        self.bytes += st[3]

    def build(self, rows: Iterable[Row]) -> dict[Row, object]:
        states: dict[Row, object] = {}
        for row in rows:
            g = key_of(row, self.group)
            st = states.get(g)
            if st is None:
                st = states[g] = self._new()
            self._add(st, row, 1)  # type: ignore[arg-type]
        if not self.group and not states:
            states[()] = self._new()
        return states

    def new_group(self, g: Row) -> GroupState:
        st = self._new()
        self.adopt(g, st)
        self.note_group(g)
        return st

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        out, errors = fold(self, deltas[0])
        evict: list[Row] = []
        for d in errors:
            evict.extend(self.evict_key(d))
        return out, evict


def agg_order(call: ir.AggCall) -> tuple[ir.SortKey, ...]:
    """An ordered aggregate's ORDER BY as positions in its (value, keys...) entries."""
    return tuple(ir.SortKey(i + 1, s.descending, s.nulls_first, s.collation)
                 for i, s in enumerate(call.order))


def _entry(call: ir.AggCall) -> Any:
    """The (value, sort key values...) entry an ordered aggregate adds per input row."""
    assert call.arg is not None
    fns = [compile_expr(e) for e in call.exprs]
    return lambda row: tuple([fn(row) for fn in fns])


def fold(node: AggregateNode, delta: Delta) -> tuple[Delta, set[Row]]:
    """The aggregate's per-row loop (with a Cython twin): add ``delta`` to the groups of
    present keys; return the output delta (``-old, +new`` once per changed group; an emptied
    group is dropped) and the state keys of groups that raised (to be evicted)."""
    touched: dict[Row, Row | None] = {}
    errors: set[Row] = set()
    groups, present, args = node.groups, node.present, node.args
    full, d_is_g, gcols, kpos = node.full, node.d_is_g, node.group, node.key_pos
    for row, w in delta:
        g = key_of(row, gcols)
        d = g if d_is_g else key_of(g, kpos)
        if not (full or d in present) or d in errors:
            continue
        st = groups.get(g)
        try:
            if g not in touched:
                touched[g] = st[2] if st is not None and st[2] is not STALE else (
                    node.result_row(g, st))
            if st is None:
                st = node.new_group(g)
            st[0] += w
            for acc, arg in zip(st[1], args, strict=True):
                acc.add(arg(row) if arg is not None else None, w)
        except EvalError:
            errors.add(d)
    out: Delta = []
    for g, old in touched.items():
        d = g if d_is_g else key_of(g, kpos)
        if d in errors:
            continue
        st = groups[g]
        try:
            new = st[2] = node.result_row(g, st)
        except EvalError:
            errors.add(d)
            continue
        if st[0] == 0 and gcols:
            node.drop_group(g)
            node.forget_group(g)
        # equal values may print differently (a numeric SUM's result scale)
        if old != new or (old is not None and new is not None and not same_print(old, new)):
            if old is not None:
                out.append((old, -1))
            if new is not None:
                out.append((new, 1))
    return out, errors


#: The pure-Python kernel (the parity tests compare the Cython twin with it).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
fold_python = fold

_fast = cython_ext.load("aggregate")
if _fast is not None:
    _fast.configure(EvalError, same_print, STALE)
    fold = _fast.fold
