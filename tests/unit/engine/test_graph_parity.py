"""Parity: the Cython twin of the graph's batch loop (``cython_ext.graph``: ``emit``, ``run``)
drives the engine exactly as the pure ``engine.dataflow.graph`` functions do: the same random
workload (writes, reads, fills, evictions under a small budget) run once with each leaves
every node with the same state and gives the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from cython_ext import python_twins
from engine.dataflow import graph, records
from engine.dataflow.ops.aggregate import AggregateNode
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.ops.reader import ReaderNode
from engine.dataflow.pgmath import EvalError
from tests.property.test_engine_property import OPS, drive

fast = cython_ext.load_pair("graph")


@contextmanager
def _loop(impl: dict[str, Any]) -> Iterator[None]:
    saved = graph.emit, graph.run
    graph.emit, graph.run = impl["emit"], impl["run"]
    try:
        yield
    finally:
        graph.emit, graph.run = saved


def _state(seed: int, ops: list[tuple[int, int]], budget: int | None) -> Any:
    host = drive(seed, ops, budget=budget, lag=True)
    nodes: list[tuple[int, object]] = []
    for node in host.engine.graph.nodes.values():
        if isinstance(node, ReaderNode):
            nodes.append((node.nid, repr(sorted(node.state.items(), key=repr))))
        elif isinstance(node, AggregateNode):
            nodes.append((node.nid, sorted(repr((g, st[0], _values(st[1]), st[2], st[3]))
                                           for g, st in node.groups.items())))
        elif isinstance(node, BaseNode):
            nodes.append((node.nid, repr(sorted(node.store.rows.items(), key=repr))))
        nodes.append((node.nid, node.bytes))
    return nodes, sorted(host.answers.items(), key=repr), host.checked


def _values(accs: list[Any]) -> list[object]:
    out: list[object] = []
    for acc in accs:
        try:
            out.append(acc.value())
        except EvalError as exc:
            out.append(exc.sqlstate)
    return out


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.graph is not built: run `make compile`"


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), OPS, st.sampled_from((None, 1500)))
def test_batch_loop_parity(seed: int, ops: list[tuple[int, int]], budget: int | None) -> None:
    assert fast is not None
    fast.configure(records.consolidate, records.dedupe)
    with _loop(python_twins(graph)):
        want = _state(seed, ops, budget)
    with _loop(fast.__dict__):
        got = _state(seed, ops, budget)
    assert got == want
