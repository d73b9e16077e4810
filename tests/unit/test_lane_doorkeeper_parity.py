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
    assert [door.first(h) for h in (3, 3, 5, 3, 7, 3, 5)] == \
        [True, False, True, False, True, True, True]  # (full at 7: starts over with 7)
    off = Pure(0)
    assert not off.first(3) and not off.first(3)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5), st.lists(st.integers(1, 12), max_size=60))
def test_the_lanes_doorkeeper_answers_as_the_pure_one(capacity: int, reads: list[int]) -> None:
    assert fast is not None
    pure, twin = Pure(capacity), fast.Doorkeeper(capacity)
    assert [twin.first(h) for h in reads] == [pure.first(h) for h in reads]
