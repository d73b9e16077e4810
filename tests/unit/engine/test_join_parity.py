"""Parity: the Cython twin of the join's delta loop (``cython_ext.join``) equals the pure
``engine.dataflow.ops.join.join_deltas`` on random deltas against real input state: present
and missing join values, NULL join values, left and inner joins, cross joins (no join
columns), both sides in one batch;
inputs that are base stores with and without a primary key and an aggregate (the twin reads
their present keys directly)."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Literal

from hypothesis import example, given, settings
from hypothesis import strategies as st

import cython_ext
from engine.api import Engine
from engine.dataflow.node import PullCtx
from engine.dataflow.ops import join
from engine.dataflow.ops.aggregate import STALE, AggregateNode
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.records import consolidate
from engine.plan import ir
from tests.property.catalog import STORIES, STORY_VC, TABLES, VOTES
from tests.property.simulated import Host, Upstream
from tests.unit.engine.test_dataflow import answer, make

fast = cython_ext.load_pair("join")

STORY = st.tuples(st.sampled_from((1, 2, 3, None)), st.integers(1, 2), st.just("a"),
                  st.integers(0, 9))
VOTE = st.tuples(st.integers(1, 9), st.sampled_from((1, 2, 3, None)), st.integers(1, 2),
                 st.sampled_from((None, Decimal(1))))
WEIGHT = st.sampled_from((1, -1, 2))


def _join_node(kind: Literal["inner", "left"], cross: bool = False) -> join.JoinNode:
    keys: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()) if cross else ((0,), (1,))
    plan = ir.Reader(ir.Join(ir.Scan(STORIES), ir.Scan(VOTES), *keys, kind), (0,), (0, 4))
    host = make({STORIES.oid: [(1, 1, "a", 6), (2, 1, "a", 1)],
                 VOTES.oid: [(1, 1, 1, Decimal(2)), (2, 1, 2, None)]}, {"j": plan})
    answer(host, "j", (1,))  # story 1 and its votes present; stories 2, 3 missing
    return next(n for n in host.engine.graph.nodes.values() if isinstance(n, join.JoinNode))


def _find_join(host: Host) -> join.JoinNode:
    return next(n for n in host.engine.graph.nodes.values() if isinstance(n, join.JoinNode))


def _aggregate_join_node() -> join.JoinNode:
    """``stories LEFT JOIN (votes GROUP BY story_id)``: story 1 present with two votes,
    story 2 present without votes, story 3 missing."""
    host = make({STORIES.oid: [(1, 1, "a", 6), (2, 1, "a", 1), (3, 1, "a", 1)],
                 VOTES.oid: [(1, 1, 1, Decimal(2)), (2, 1, 2, None)]},
                {"j": ir.Reader(STORY_VC, (0,), (0, 5))})
    answer(host, "j", (1,))
    answer(host, "j", (2,))
    return _find_join(host)


#: A table without a primary key: identical rows are stored with a multiplicity.
TAGS = ir.TableRef(1009, "public", "tags", (ir.Column("story_id", STORIES.columns[0].type_oid),
                                            ir.Column("tag", STORIES.columns[2].type_oid)), ())


def _no_pk_join_node() -> join.JoinNode:
    tags = {(1,): (1, "x"), (2,): (1, "x"), (3,): (1, "y"), (4,): (2, "z")}
    stories = {(1,): (1, 1, "a", 6), (2,): (2, 1, "a", 1)}
    up = Upstream({**TABLES, TAGS.oid: TAGS}, {STORIES.oid: stories, TAGS.oid: tags})
    plans = {"t": ir.Reader(ir.Join(ir.Scan(TAGS), ir.Scan(STORIES), (0,), (0,), "left"),
                            (0,), (1, 3))}
    engine = Engine()
    engine.add_cache("t", plans["t"])
    host = Host(engine, up, dict(plans), random.Random(0), lag=False)
    answer(host, "t", (1,))
    return _find_join(host)


NODES = {"left": _join_node("left"), "inner": _join_node("inner"),
         # CROSS JOIN (no join columns): every row has the join value (); the votes side
         # is present whole, the stories side (looked up by no column) is missing
         "cross_left": _join_node("left", cross=True),
         "cross_inner": _join_node("inner", cross=True),
         "aggregate": _aggregate_join_node(), "no_pk": _no_pk_join_node()}


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.join is not built: run `make compile`"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(("left", "inner", "cross_left", "cross_inner")),
       st.lists(st.tuples(STORY, WEIGHT), max_size=5),
       st.lists(st.tuples(VOTE, WEIGHT), max_size=5))
def test_join_deltas_parity(kind: str, dl: list[tuple[tuple[object, ...], int]],
                            dr: list[tuple[tuple[object, ...], int]]) -> None:
    assert fast is not None
    fast.configure(PullCtx, BaseNode, AggregateNode, consolidate, STALE)
    node = NODES[kind]
    dl, dr = consolidate(dl), consolidate(dr)  # as every edge of the graph carries
    want = join.join_deltas_python(node, list(dl), list(dr))
    got = fast.join_deltas(node, list(dl), list(dr))
    assert repr(got) == repr(want)


VC_ROW = st.tuples(st.sampled_from((1, 2, 3, None)), st.integers(0, 3), st.integers(0, 3),
                   st.just(Decimal(2)), st.just(None), st.just(1), st.just(None), st.just(1))
TAG = st.tuples(st.sampled_from((1, 2, 3, None)), st.sampled_from(("x", "y")))


@settings(max_examples=150, deadline=None)
@example(True, [], [((2, 1, 0, Decimal(2), None, 1, None, 1), 1),
                    ((2, 2, 0, Decimal(2), None, 1, None, 1), -1)], [])  # padding in and out
@given(st.booleans(), st.lists(st.tuples(STORY, WEIGHT), max_size=5),
       st.lists(st.tuples(VC_ROW, WEIGHT), max_size=5),
       st.lists(st.tuples(TAG, WEIGHT), max_size=5))
def test_join_deltas_parity_aggregate_and_no_primary_key(
        aggregate: bool, dl: list[tuple[tuple[object, ...], int]],
        dr: list[tuple[tuple[object, ...], int]],
        tags: list[tuple[tuple[object, ...], int]]) -> None:
    assert fast is not None
    fast.configure(PullCtx, BaseNode, AggregateNode, consolidate, STALE)
    if aggregate:
        node, left, right = NODES["aggregate"], dl, dr
    else:  # tags LEFT JOIN stories: the left input (no primary key) is looked up by stories
        node, left, right = NODES["no_pk"], tags, dl
    left, right = consolidate(left), consolidate(right)
    want = join.join_deltas_python(node, list(left), list(right))
    got = fast.join_deltas(node, list(left), list(right))
    assert repr(got) == repr(want)
