"""Parity: the lanes' doorkeeper (``cython_ext.lanes.Doorkeeper``, the one the pass lanes use
for the misses they forward) answers as its pure twin ``proxy.lane_misses.Doorkeeper``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from cython_ext import python_twins
from proxy import lane_misses

fast = cython_ext.load_pair("lanes")
Pure = python_twins(lane_misses)["Doorkeeper"]


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.lanes is not built: run `make compile`"


def test_a_first_read_is_remembered_until_the_set_starts_over() -> None:
    door = Pure(2)
    assert [door.kept(h) for h in (3, 3, 5, 3, 7, 3, 5)] == \
        [True, False, True, False, True, True, True]  # (full at 7: starts over with 7)
    off = Pure(0)
    assert not off.kept(3) and not off.kept(3)


def test_would_keep_says_what_kept_will_and_remembers_nothing() -> None:
    door = Pure(4)
    assert door.would_keep(3) and door.would_keep(3)  # (nothing remembered)
    assert door.kept(3) and not door.would_keep(3) and not door.kept(3)
    door.keep = 2
    assert door.kept(5) and door.would_keep(5) and door.kept(5)  # (the second read: kept)
    assert not door.would_keep(5) and not door.kept(5)
    assert not Pure(0).would_keep(3)


def test_the_first_keep_reads_are_kept_and_later_ones_passed_on() -> None:
    """Admission's ``keep`` (a key admitted on the read after its first ``keep``) in the
    lanes: the proxy then takes only the Binds of the reads admission admits, not every
    second read's. A key passed on stays passed on (its fill is under way)."""
    door = Pure(4)
    door.keep = 3
    assert [door.kept(h) for h in (3, 3, 3, 3, 3, 5, 5)] == \
        [True, True, True, False, False, True, True]
    door.keep = 1  # (what was kept stays counted: 5 was kept twice, passed on now)
    assert [door.kept(h) for h in (5, 7, 7)] == [False, True, False]
    door.keep = 0  # (nothing kept)
    assert not door.kept(9) and not door.would_keep(9)


def test_seen_before_says_whether_a_read_was_kept_and_counts_it() -> None:
    door = Pure(4)
    assert not door.seen_before(3)  # (kept now)
    assert door.seen_before(3) and not door.kept(3)
    assert not Pure(0).seen_before(3)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5), st.lists(st.tuples(st.integers(1, 12), st.integers(0, 4),
                                             st.booleans()), max_size=60))
def test_the_lanes_doorkeeper_answers_as_the_pure_one(
        capacity: int, reads: list[tuple[int, int, bool]]) -> None:
    assert fast is not None
    pure, twin = Pure(capacity), fast.Doorkeeper(capacity)
    out_pure, out_twin = [], []
    for h, keep, loop in reads:
        pure.keep = twin.keep = keep
        would = pure.would_keep(h), twin.would_keep(h)
        if loop:  # (a miss read on the event loop: ``Lanes.seen_read``)
            out_pure.append((would[0], pure.seen_before(h)))
            out_twin.append((would[1], twin.seen_before(h)))
        else:
            out_pure.append((would[0], pure.kept(h)))
            out_twin.append((would[1], twin.kept(h)))
    assert out_twin == out_pure
