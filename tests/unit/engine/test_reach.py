"""Eviction rows of a base table for keys no state below holds stop at the base (``reach``).

Scenarios drive the real ``Engine`` against the simulated upstream (the host checks every
answer against the reference evaluator); the spies count the joins' eviction work.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.dataflow.node import Node
from engine.dataflow.ops.join import JoinNode
from engine.dataflow.reach import prune, targets
from engine.dataflow.records import UNKNOWN, Row
from engine.plan import ir
from engine.values import oids as T
from tests.property.catalog import STORIES, VOTES, col
from tests.unit.engine.test_dataflow import answer, dele, ins, make, upd, write

S, V = ir.Scan(STORIES), ir.Scan(VOTES)
#: the demo's story page: stories LEFT JOIN votes, counted per story
PAGE = ir.Reader(ir.Aggregate(ir.Join(S, V, (0,), (1,), "left"), (0,), (
    ir.AggCall("count", col(4), T.INT8, "n"),)), (0,), (0, 1))
#: keyed on the votes' side of a LEFT JOIN: padded rows have NULL there (no provenance)
PADDED = ir.Reader(ir.Join(S, V, (0,), (1,), "left"), (6,), (0, 4))


def _spy(node: Node, calls: list[int]) -> None:
    inner = node.evict_rows

    def counted(rows: list[list[Row]]) -> list[Row]:
        calls.append(sum(len(r) for r in rows))
        return inner(rows)

    node.evict_rows = counted  # type: ignore[method-assign]


def _join(host: object) -> JoinNode:
    nodes = host.engine.graph.nodes.values()  # type: ignore[attr-defined]
    return next(n for n in nodes if isinstance(n, JoinNode))


def test_targets_trace_the_key_through_the_join_to_each_base() -> None:
    host = make({}, {"page": PAGE})
    graph = host.engine.graph
    (agg, traced), = targets(graph.bases[VOTES.oid]) or ()
    assert traced == (1,)  # the story page's key is the vote's story_id
    assert targets(graph.bases[STORIES.oid]) == ((agg, (0,)),)
    padded = make({}, {"padded": PADDED}).engine.graph
    reader = padded.caches["padded"][0]
    assert targets(padded.bases[STORIES.oid]) == ((reader, None),)
    assert targets(padded.bases[VOTES.oid]) == ((reader, None),)


def test_a_write_to_a_hole_does_no_eviction_work_and_a_held_key_still_evicts() -> None:
    stories: list[tuple[object, ...]] = [(i, 1, "t", 0) for i in range(1, 6)]
    host = make({STORIES.oid: stories, VOTES.oid: [(1, 2, 7, Decimal(1))]}, {"page": PAGE})
    assert answer(host, "page", (2,)) == ((2, 1),)
    calls: list[int] = []
    _spy(_join(host), calls)
    write(host, ins(VOTES, (2, 4, 7, Decimal(1))), upd(STORIES, (3, 1, "u", 1)))
    assert calls == []  # stories 3 and 4: nobody read them
    write(host, ins(VOTES, (3, 2, 8, Decimal(1))), dele(VOTES, 1))
    assert answer(host, "page", (2,)) == ((2, 1),)
    assert answer(host, "page", (4,)) == ((4, 1),)
    write(host, ins(VOTES, (4, 4, 9, Decimal(1))))
    assert answer(host, "page", (4,)) == ((4, 2),)


def test_prune_keeps_present_and_unknown_keys_only() -> None:
    host = make({STORIES.oid: [(2, 1, "t", 0)]}, {"page": PAGE})
    answer(host, "page", (2,))
    found = targets(host.engine.graph.bases[VOTES.oid])
    rows = [(9, 2, 1, Decimal(1)), (9, 3, 1, Decimal(1)), (9, UNKNOWN, 1, Decimal(1))]
    assert prune(found, rows) == [rows[0], rows[2]]
    assert prune(None, rows) == rows


def test_an_untraced_target_passes_every_row_once_it_holds_a_key() -> None:
    host = make({STORIES.oid: [(2, 1, "t", 0)]}, {"padded": PADDED})
    found = targets(host.engine.graph.bases[VOTES.oid])
    rows = [(9, 2, 1, Decimal(1)), (9, 3, 1, Decimal(1))]
    assert prune(found, rows) == []
    answer(host, "padded", (5,))
    assert prune(found, rows) == rows


@pytest.mark.parametrize("plan", [PAGE, PADDED])
def test_writes_to_unread_keys_leave_answers_exact(plan: ir.Reader) -> None:
    stories: list[tuple[object, ...]] = [(i, i % 2, "t", 0) for i in range(1, 8)]
    host = make({STORIES.oid: stories}, {"c": plan})
    for k in (1, 2):
        answer(host, "c", (k,))
    for n in range(1, 15):
        write(host, ins(VOTES, (n, n % 7 + 1, n, Decimal(n))))
        if n % 3 == 0:
            write(host, upd(STORIES, (n % 7 + 1, 0, "x", n)))
        for k in (1, 2, n % 7 + 1):
            answer(host, "c", (k,))
