"""Parity: the Cython twin of the join's delta loop (``cython_ext.join``) equals the pure
``engine.dataflow.ops.join.join_deltas`` on random deltas against real input state: present
and missing join values, NULL join values, left and inner joins, both sides in one batch."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from engine.dataflow.node import PullCtx
from engine.dataflow.ops import join
from engine.plan import ir
from tests.property.catalog import STORIES, VOTES
from tests.unit.engine.test_dataflow import answer, make

fast = cython_ext.load_pair("join")

STORY = st.tuples(st.sampled_from((1, 2, 3, None)), st.integers(1, 2), st.just("a"),
                  st.integers(0, 9))
VOTE = st.tuples(st.integers(1, 9), st.sampled_from((1, 2, 3, None)), st.integers(1, 2),
                 st.sampled_from((None, Decimal(1))))
WEIGHT = st.sampled_from((1, -1, 2))


def _join_node(kind: Literal["inner", "left"]) -> join.JoinNode:
    plan = ir.Reader(ir.Join(ir.Scan(STORIES), ir.Scan(VOTES), (0,), (1,), kind), (0,),
                     (0, 4))
    host = make({STORIES.oid: [(1, 1, "a", 6), (2, 1, "a", 1)],
                 VOTES.oid: [(1, 1, 1, Decimal(2)), (2, 1, 2, None)]}, {"j": plan})
    answer(host, "j", (1,))  # story 1 and its votes present; stories 2, 3 missing
    return next(n for n in host.engine.graph.nodes.values() if isinstance(n, join.JoinNode))


NODES = {"left": _join_node("left"), "inner": _join_node("inner")}


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.join is not built: run `make compile`"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(("left", "inner")), st.lists(st.tuples(STORY, WEIGHT), max_size=5),
       st.lists(st.tuples(VOTE, WEIGHT), max_size=5))
def test_join_deltas_parity(kind: str, dl: list[tuple[tuple[object, ...], int]],
                            dr: list[tuple[tuple[object, ...], int]]) -> None:
    assert fast is not None
    fast.configure(PullCtx)
    node = NODES[kind]
    want = join.PURE["join_deltas"](node, list(dl), list(dr))
    got = fast.join_deltas(node, list(dl), list(dr))
    assert repr(got) == repr(want)
