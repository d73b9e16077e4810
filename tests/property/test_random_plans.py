"""Property: random schemas and random plans - every answer equals the reference evaluation.

Same harness as ``test_engine_property`` (late, out-of-order fills; snapshots lagging behind
applied transactions; optional tiny memory budget), but the plans are generated: any
composition of filter, project, inner/left join, union all, aggregate, distinct and top-k,
read through readers keyed on random columns (with ORDER BY + LIMIT sometimes). Several random
caches share one engine, so node sharing and cross-cache evictions are exercised too.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api import Engine
from engine.dataflow.node import PullCtx
from engine.dataflow.ops.join import JoinNode
from engine.dataflow.ops.reader import ReaderNode
from engine.dataflow.records import UNKNOWN
from tests.property.random_plans import (
    PlanGen,
    random_changes,
    random_data,
    random_key,
    random_tables,
)
from tests.property.simulated import Host, Upstream

OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=80)


def drive(seed: int, ops: list[tuple[int, int]], budget: int | None) -> Host:
    rng = random.Random(seed)
    tables = random_tables(rng)
    gen = PlanGen(tables, rng)
    plans = {f"c{i}": gen.reader(3) for i in range(rng.randint(1, 4))}
    plans["twin"] = plans["c0"]
    up = Upstream(tables, random_data(tables, rng))
    engine = Engine(memory_budget=budget)
    for name, plan in plans.items():
        engine.add_cache(name, plan)
    host = Host(engine, up, plans, rng, lag=True)
    host.play(ops, lambda r: random_changes(tables, up.data, r),
              lambda cache, r: random_key(plans[cache], r), final_reads=3)
    return host


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_random_plans_unbounded(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, None)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_random_plans_tiny_budget(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, 2500)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_count_equals_the_length_of_pull(seed: int, ops: list[tuple[int, int]]) -> None:
    """Every join input counts a join value's rows as many as its pull lists (or misses
    alike), whatever the node: base, projection, union, keyed state, filter, join; and a
    reader's byte count returns to zero when its keys are evicted."""
    host = drive(seed, ops, None)
    for node in list(host.engine.graph.nodes.values()):
        if not isinstance(node, JoinNode):
            continue
        for side, cols in ((0, node.lk), (1, node.rk)):
            source = node.inputs[side]
            known = source.pull((), (), PullCtx(partial=True)) or []
            for key in {tuple(r[c] for c in cols) for r in known} | {(None,) * len(cols)}:
                if any(v is UNKNOWN for v in key):
                    continue
                rows = source.pull(cols, key, PullCtx(probe=True))
                n = source.count(cols, key, PullCtx(probe=True))
                assert n == (None if rows is None else len(rows)), (source, cols, key)
    for node in host.engine.graph.nodes.values():  # a reader's bytes are exactly its keys'
        if isinstance(node, ReaderNode):
            node.clear()
            assert node.bytes == 0
