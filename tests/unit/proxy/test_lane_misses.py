"""``lane_misses.forwardable``: the held statements whose reads a pass lane may forward after
a miss are exactly those ``proxy.missfast`` forwards (sans-I/O: a session's parts as plain
objects)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from pgwire import frontend as fe
from proxy import lane_misses
from proxy.session import PreparedStatement

QUERY = "SELECT v FROM kv WHERE k = $1"


def _session(**ctx: Any) -> tuple[Any, Any]:
    held = {name: SimpleNamespace(upstream=upstream, parse=fe.Parse(name, QUERY, ()))
            for name, upstream in (("", True), ("s1", True), ("s2", False), ("s3", True),
                                   ("s4", True))}
    statements = {name: PreparedStatement(name, QUERY, ()) for name in ("", "s1", "s2", "s4")}
    statements["s4"] = PreparedStatement("s4", "SELECT 2", ())  # another text upstream
    state = SimpleNamespace(held=held, statements=statements, caught_up=True)
    context = SimpleNamespace(defaults_applied=True, tainted=None, hiding=set())
    for key, value in ctx.items():
        setattr(context, key, value)
    session = SimpleNamespace(ctx=context, state=state,
                              extended=SimpleNamespace(wait_settle=False))
    service = SimpleNamespace(host=object(), settings=SimpleNamespace(misses="upstream",
                                                                    lane_misses="on"))
    return session, service


LANE_STATEMENTS = [(name.encode(), i, 0.0) for i, name in enumerate(("", "s1", "s2", "s3", "s4"))]


def test_only_named_statements_the_upstream_holds_as_parsed() -> None:
    """Not the unnamed statement (PostgreSQL drops it at any simple Query), not one weir
    did not prepare upstream, not one the upstream holds under another text."""
    session, service = _session()
    assert lane_misses.forwardable(session, service, LANE_STATEMENTS) == [(b"\x00s1\x00", 1)]


@pytest.mark.parametrize("gate", [{"tainted": "a SET ROLE"}, {"defaults_applied": False},
                                  {"hiding": {"s1"}}])
def test_none_while_a_gate_of_a_miss_is_closed(gate: dict[str, Any]) -> None:
    session, service = _session(**gate)
    assert lane_misses.forwardable(session, service, LANE_STATEMENTS) == []


def test_none_unless_lane_misses_is_on() -> None:
    """``--lane-misses off``: every miss goes through the event loop."""
    session, service = _session()
    service.settings.lane_misses = "off"
    assert lane_misses.forwardable(session, service, LANE_STATEMENTS) == []


@pytest.mark.parametrize(("lag", "queued", "barrier", "up"), [
    (0.2, 0, 0.003, True), (0.45, 64, 0.010, True),
    (0.6, 0, 0.003, False), (0.2, 65, 0.003, False), (0.2, 0, 0.011, False)])
def test_lanes_forward_misses_only_while_the_event_loop_keeps_up(
        lag: float, queued: int, barrier: float, up: bool) -> None:
    """Past half a second of stream lag (what barriers and fills wait for), 64 fills queued
    or 10 ms per session barrier lately, lanes forward no misses
    (``lane_misses.keeping_up``); without a cache side, none."""
    now = time.monotonic()
    coverage = SimpleNamespace(barriers=0, barrier_seconds=0.0, covered=now - lag)
    host = SimpleNamespace(fresh_as_of=now - 5.0, coverage=coverage,  # (an old heartbeat)
                           fills=SimpleNamespace(queue=SimpleNamespace(waiting=[0] * queued)))
    pace = lane_misses.Pace()
    assert lane_misses.keeping_up(SimpleNamespace(host=host), pace) is (lag <= 0.5
                                                                       and queued <= 64)
    coverage.barriers, coverage.barrier_seconds = 8, 8 * barrier  # (8 landed lately)
    assert lane_misses.keeping_up(SimpleNamespace(host=host), pace) is up
    coverage.barriers += 7  # (too few since to judge: the verdict stands)
    assert lane_misses.keeping_up(SimpleNamespace(host=host), pace) is up
    coverage.barriers += 1  # (8 more at no cost: fast again)
    assert pace.sample(coverage.barriers, coverage.barrier_seconds) is False
    assert lane_misses.keeping_up(SimpleNamespace(host=None), pace) is False


def test_the_lag_is_since_the_latest_barrier_marker_or_heartbeat_passed() -> None:
    """``lane_misses.lag``: the heartbeat alone (every 0.5 s) says up to half a second more
    than the stream lags; session barriers and fill markers land far more often."""
    now = time.monotonic()
    host = SimpleNamespace(fresh_as_of=now - 0.4, coverage=SimpleNamespace(covered=now - 0.01))
    assert lane_misses.lag(host) < 0.3
    host.coverage.covered = now - 3.0  # (none lately: the heartbeat's)
    assert 0.4 <= lane_misses.lag(host) < 1.0
    host.fresh_as_of = float("-inf")  # (none ever passed)
    assert lane_misses.lag(host) > 2.9
