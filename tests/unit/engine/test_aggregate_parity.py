"""Parity: the Cython twin of the aggregate's per-row loop (``cython_ext.aggregate.fold``)
equals the pure ``engine.dataflow.ops.aggregate.fold`` on random deltas, including groups that
empty, keys that are not present, and argument expressions that raise."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from engine.dataflow import pgmath, records
from engine.dataflow.node import Node, Runtime
from engine.dataflow.ops import aggregate
from engine.plan import ir
from engine.values import oids as T

fast = cython_ext.load_pair("aggregate")

AGGS = (
    ir.AggCall("count_star", None, T.INT8, "n"),
    ir.AggCall("sum", ir.ColumnRef(2, T.NUMERIC), T.NUMERIC, "s"),
    ir.AggCall("count", ir.ColumnRef(2, T.NUMERIC), T.INT8, "c"),
    ir.AggCall("max", ir.ColumnRef(1, T.INT4), T.INT4, "hi"),
    # 10 / col1 raises division by zero for col1 = 0: the group's key is evicted
    ir.AggCall("sum", ir.Arith("/", ir.Const(10, T.INT4), ir.ColumnRef(1, T.INT4), T.INT4),
               T.INT8, "q"),
)
ROWS = st.tuples(st.integers(0, 3), st.integers(0, 2),
                 st.sampled_from((None, Decimal("1.5"), Decimal("2"), Decimal("0.25"))))


def _node(group: tuple[int, ...], key_pos: tuple[int, ...],
          present: set[tuple[object, ...]]) -> aggregate.AggregateNode:
    node = aggregate.AggregateNode(1, Node(0, (), 3), group, AGGS, key_pos, Runtime())
    node.present |= present
    return node


def _state(node: aggregate.AggregateNode) -> Any:
    return (sorted(node.by_d.items(), key=repr),
            sorted(repr((g, st[0], [a.value() for a in st[1]], st[2], st[3]))
                   for g, st in node.groups.items()), node.bytes)


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.aggregate is not built: run `make compile`"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(ROWS, st.sampled_from((1, 1, -1, 2))), max_size=8),
                max_size=4),
       st.sampled_from((((0,), (0,)), ((0, 1), (0,)), ((0, 1), (0, 1)), ((), ()))),
       st.sets(st.integers(0, 3)))
def test_fold_parity(batches: list[list[tuple[tuple[object, ...], int]]],
                     grouping: tuple[tuple[int, ...], tuple[int, ...]],
                     present: set[int]) -> None:
    assert fast is not None
    fast.configure(pgmath.EvalError, records.same_print, aggregate.STALE)
    group, key_pos = grouping
    keys: set[tuple[object, ...]] = {(k,) for k in present} if key_pos else {()}
    nodes = [_node(group, key_pos, keys) for _ in range(2)]
    for delta in batches:
        results = []
        for node, fold in zip(nodes, (aggregate.fold_python, fast.fold), strict=True):
            out, errors = fold(node, list(delta))
            assert out == records.consolidate(out)  # consolidated by construction
            for d in errors:
                node.evict_key(d)
            results.append((out, sorted(errors), _state(node)))
        assert repr(results[0]) == repr(results[1])
