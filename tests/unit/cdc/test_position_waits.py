"""``Barriers.at``: a call made once the stream's position reaches an LSN (fills wait for
their position this way, ``proxy.fillrun``), without I/O while it is reached in time (the
fallback barrier, which needs the upstream, is covered by
``tests/integration/test_fill_position.py``)."""

from __future__ import annotations

import asyncio

from cdc.barrier import NO_PROBE, Barriers
from cdc.connection import ConnectParams

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
