"""LEFT JOIN padding decided from the right side's row count, not from its rows.

``stories LEFT JOIN votes`` read by story id: the NULL-extended row must appear exactly when
the story has no votes, flipping at every 0 <-> 1 transition (across batches and within one),
while changes on the right side of a key with many rows never list that key's rows.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.dataflow.node import Cols, PullCtx
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.records import Row
from engine.plan import ir
from tests.property.catalog import STORIES, VOTES
from tests.unit.engine.test_dataflow import answer, dele, ins, make, peek, write

#: story id, title, vote id, vote weight
PLAN = ir.Reader(ir.Join(ir.Scan(STORIES), ir.Scan(VOTES), (0,), (1,), "left"), (0,),
                 (0, 2, 4, 7))


def padded(story: int) -> tuple[object, ...]:
    return (story, "a", None, None)


def test_padding_is_emitted_and_retracted_at_every_zero_one_transition() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 6)]}, {"sv": PLAN})
    assert answer(host, "sv", (1,)) == (padded(1),)
    write(host, ins(VOTES, (10, 1, 1, Decimal(2))))  # 0 -> 1: padding retracted
    assert peek(host, "sv", (1,)) == ((1, "a", 10, Decimal(2)),)
    write(host, ins(VOTES, (11, 1, 1, Decimal(3))))  # 1 -> 2: no padding
    assert sorted(peek(host, "sv", (1,)) or ()) == [(1, "a", 10, Decimal(2)),
                                                    (1, "a", 11, Decimal(3))]
    write(host, dele(VOTES, 10))  # 2 -> 1
    assert peek(host, "sv", (1,)) == ((1, "a", 11, Decimal(3)),)
    write(host, dele(VOTES, 11))  # 1 -> 0: padding back
    assert peek(host, "sv", (1,)) == (padded(1),)
    write(host, ins(VOTES, (12, 1, 1, None)), dele(VOTES, 12))  # 0 -> 1 -> 0 in one batch
    assert peek(host, "sv", (1,)) == (padded(1),)
    write(host, ins(VOTES, (13, 1, 1, None)), ins(VOTES, (14, 1, 1, None)),
          dele(VOTES, 13))  # 0 -> 2 -> 1 in one batch
    assert peek(host, "sv", (1,)) == ((1, "a", 14, None),)
    write(host, dele(VOTES, 14), ins(STORIES, (2, 1, "a", 1)))  # both sides in one batch
    assert peek(host, "sv", (1,)) == (padded(1),)
    assert answer(host, "sv", (2,)) == (padded(2),)


def test_right_side_changes_of_a_hot_key_count_instead_of_listing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    votes: list[tuple[object, ...]] = [(i, 1, 1, Decimal(1)) for i in range(100, 400)]
    host = make({STORIES.oid: [(1, 1, "a", 6)], VOTES.oid: votes}, {"sv": PLAN})
    assert len(answer(host, "sv", (1,))) == 300
    right = next(n for n in host.engine.graph.nodes.values()
                 if isinstance(n, BaseNode) and n.table == VOTES)
    listed: list[Row] = []
    pull = right.pull

    def spy(cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        rows = pull(cols, key, ctx)
        listed.extend(rows or ())
        return rows

    monkeypatch.setattr(right, "pull", spy)
    write(host, ins(VOTES, (500, 1, 1, Decimal(5))), dele(VOTES, 100))
    assert listed == []  # the padding decision did not enumerate the 300 votes
    rows = peek(host, "sv", (1,)) or ()
    assert len(rows) == 300 and (1, "a", 500, Decimal(5)) in rows
    assert (1, "a", 100, Decimal(1)) not in rows
    monkeypatch.undo()
    for i in range(101, 400):
        write(host, dele(VOTES, i))
    write(host, dele(VOTES, 500))
    assert peek(host, "sv", (1,)) == (padded(1),)
