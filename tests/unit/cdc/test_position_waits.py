"""``Barriers.at``: a call made once the stream's position reaches an LSN (fills wait for
their position this way, ``proxy.fillrun``), without I/O while it is reached in time, and
when the fallback barrier is sent (a stand-in for it here; the barrier itself, which needs the
upstream, is covered by ``tests/integration/test_fill_position.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from cdc import barrier
from cdc.barrier import NO_PROBE, Barriers
from cdc.connection import ConnectParams
from tests.support import eventually_async

PATIENT = 60.0  # (no fallback barrier within a unit test)


def _barriers(position: list[int]) -> Barriers:
    return Barriers(ConnectParams("127.0.0.1", 1, "nobody", "nothing"), lambda: position[0])


def test_a_reached_position_calls_at_once_and_a_later_one_when_reached() -> None:
    async def body() -> None:
        position = [100]
        barriers = _barriers(position)
        calls: list[str] = []
        barriers.at(100, lambda: calls.append("now"), PATIENT)
        assert calls == ["now"]
        barriers.at(300, lambda: calls.append("300"), PATIENT)
        barriers.at(200, lambda: calls.append("200"), PATIENT)
        assert calls == ["now"] and barriers.probe_floor == 200
        position[0] = 250  # (the stream calls ``reached`` when it passes the floor)
        barriers.reached(250)
        assert calls == ["now", "200"] and barriers.probe_floor == 300
        position[0] = 400
        barriers.reached(400)
        assert calls == ["now", "200", "300"] and barriers.probe_floor == NO_PROBE
        barriers.reached(500)  # (each call is made once)
        assert calls == ["now", "200", "300"]
        assert barriers.waits_fell_back == 0

    asyncio.run(body())


def test_waits_are_dropped_when_continuity_is_lost() -> None:
    async def body() -> None:
        position = [0]
        barriers = _barriers(position)
        calls: list[int] = []
        barriers.at(10, lambda: calls.append(10), PATIENT)
        barriers.lose_all("a new slot")
        position[0] = 20
        barriers.reached(20)
        assert calls == []
        barriers.at(30, lambda: calls.append(30), PATIENT)  # (waits after the loss do count)
        barriers.reached(30)
        assert calls == [30]

    asyncio.run(body())


def test_a_wait_behind_a_fallback_on_its_way_looks_again_after_its_own_patience(
        monkeypatch: Any) -> None:
    """One fallback barrier at a time: a wait that finds one on its way (sent before it
    began, so it may not carry it) looks again after its own patience — a fill whose position
    lies past the flushed WAL waits 2 ms at a time, not the usual 20 ms (made 60 s here, so a
    wait that fell back on it would not get its barrier within the test's 5 s)."""
    monkeypatch.setattr(barrier, "PROBE_PATIENCE", PATIENT)

    async def body() -> None:
        barriers = _barriers([0])
        on_its_way = asyncio.Event()
        sent: list[int] = []

        async def nudge() -> None:  # (the barrier: on its way until released)
            sent.append(len(sent))
            await on_its_way.wait()

        looks: list[object] = []
        overdue = barriers._overdue

        def look(*args: Any) -> None:
            looks.append(args[0])
            overdue(*args)

        monkeypatch.setattr(barriers, "_nudge", nudge)
        monkeypatch.setattr(barriers, "_overdue", look)
        barriers.at(10, lambda: None, 0.001)
        await eventually_async(lambda: _true(barriers.waits_fell_back == 1), 5.0)
        barriers.at(20, lambda: None, 0.001)  # (began after that barrier was sent)
        await eventually_async(lambda: _true(len(looks) >= 2), 5.0)  # (it found it on its way)
        on_its_way.set()
        await eventually_async(lambda: _true(barriers.waits_fell_back == 2), 5.0)
        assert len(sent) == 2
        await barriers.close()

    asyncio.run(body())


async def _true(value: bool) -> bool:
    return value
