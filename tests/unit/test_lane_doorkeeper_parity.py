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
    door.strict = True
    assert door.kept(5) and door.would_keep(5) and door.kept(5)  # (the second read: kept)
    assert not door.would_keep(5) and not door.kept(5)
    assert not Pure(0).would_keep(3)


def test_while_strict_a_second_read_is_kept_too_and_the_third_passed_on() -> None:
    """Admission's strict rule (a key admitted on its third read) in the lanes: the proxy
    then takes only third reads' Binds, not every second read's."""
    door = Pure(4)
    door.strict = True
    assert [door.kept(h) for h in (3, 3, 3, 3, 5, 5)] == \
        [True, True, False, True, True, True]  # (passed on: forgotten, as admission does)
    door.strict = False
    assert [door.kept(h) for h in (5, 5, 7, 7)] == [False, True, True, False]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5), st.lists(st.tuples(st.integers(1, 12), st.booleans()), max_size=60))
def test_the_lanes_doorkeeper_answers_as_the_pure_one(
        capacity: int, reads: list[tuple[int, bool]]) -> None:
    assert fast is not None
    pure, twin = Pure(capacity), fast.Doorkeeper(capacity)
    out_pure, out_twin = [], []
    for h, strict in reads:
        pure.strict = twin.strict = strict
        out_pure.append((pure.would_keep(h), pure.kept(h)))
        out_twin.append((twin.would_keep(h), twin.kept(h)))
    assert out_twin == out_pure
    assert all(would == kept for would, kept in out_pure)  # (what it says of the next read)
