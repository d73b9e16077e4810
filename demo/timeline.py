"""What weir did second by second during a run: hits, misses, fills and lane answers.

Owns: polling ``SHOW WEIR STATUS`` once a second on a background thread for the length of a
run, and turning the cumulative counters into per-second figures (``Second``). This is where
a cold run shows where it loses: how fast the hit rate climbs, how many misses are not
filled (admission), and how many hits the hit lanes answer outside the event loop. The
poll is one cheap admin statement a second, small beside the workload's hundreds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

#: the cumulative ``SHOW WEIR STATUS`` counters a ``Second`` is the difference of
COUNTERS = ("hits", "misses", "fills", "fills_not_admitted", "lane_answers")


@dataclass(frozen=True, slots=True)
class Second:
    """One interval between two polls: when it ended (seconds into the run) and what
    happened in it."""

    at: float
    hits: int
    misses: int
    fills: int
    fills_not_admitted: int
    lane_answers: int

    @property
    def hit_rate(self) -> float:
        return self.hits / max(1, self.hits + self.misses)


def per_second(polls: Sequence[tuple[float, dict[str, str]]]) -> list[Second]:
    """Per-interval differences of ``COUNTERS`` between consecutive polls (a counter weir
    does not report, e.g. ``lane_answers`` without lanes, counts as 0)."""
    def count(status: dict[str, str], name: str) -> int:
        return int(status.get(name) or 0)

    return [Second(at, *(count(now, c) - count(before, c) for c in COUNTERS))
            for (_, before), (at, now) in itertools.pairwise(polls)]


class StatusTimeline:
    """Polls ``SHOW WEIR STATUS`` on ``dsn`` every ``interval`` seconds while in its ``with``
    block; ``seconds()`` gives the per-interval figures, ``error`` a failed poll."""

    def __init__(self, dsn: str, interval: float = 1.0) -> None:
        self.polls: list[tuple[float, dict[str, str]]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._dsn = dsn
        self._interval = interval
        self._thread = threading.Thread(target=self._body, daemon=True, name="weir-status")

    def _body(self) -> None:
        try:
            with psycopg.connect(self._dsn, autocommit=True) as conn:
                began = time.perf_counter()
                while True:
                    rows = conn.execute("SHOW WEIR STATUS").fetchall()
                    self.polls.append((time.perf_counter() - began,
                                       {str(k): str(v) for k, v in rows}))
                    if self._stop.wait(self._interval):  # the poll's pace, not a sync
                        return
        except Exception as exc:  # the timeline is extra: report it, never fail the run
            self.error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> StatusTimeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def seconds(self) -> list[Second]:
        return per_second(self.polls)
