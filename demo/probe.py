"""Freshness probes: how long a write made directly upstream takes to show through weir.

Owns: the probe loop. Each probe reads a story page through weir (a cached read), casts a
vote for that story directly on PostgreSQL (so weir learns of it only by replication, not by
read-your-writes), and measures the time until a read through weir counts the vote. Also
used by ``make bench`` for pgpool-II, whose cache learns of writes only when they pass
through it.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from demo.dataset import READS, VOTE

STORY_PAGE = READS[0].sql
#: Voter ids far above the generated users, never reused in a process (several runs share a
#: cluster in ``make bench``): each probe vote is a new row.
PROBE_VOTERS = itertools.count(10_000_000)


@dataclass(slots=True)
class Probes:
    """Observed lags in seconds; ``missed``: probes whose vote never showed within the limit."""

    lags: list[float] = field(default_factory=list)
    missed: int = 0


def _votes(conn: psycopg.Connection[Any], story: int) -> int:
    row = conn.execute(STORY_PAGE, (story,)).fetchone()
    return int(row[3]) if row else 0


def probe_loop(read_dsn: str, write_dsn: str, stories: list[int], stop: threading.Event,
               interval: float = 1.0, limit: float = 5.0) -> Probes:
    """Probe until ``stop`` is set, one probe every ``interval`` seconds, cycling ``stories``."""
    probes = Probes()
    n = 0
    with (psycopg.connect(read_dsn, autocommit=True, prepare_threshold=0) as reader,
          psycopg.connect(write_dsn, autocommit=True) as writer):
        while not stop.is_set():
            story = stories[n % len(stories)]
            before = _votes(reader, story)
            writer.execute(VOTE, (story, next(PROBE_VOTERS)))
            n += 1
            t0 = time.perf_counter()
            while _votes(reader, story) <= before:
                if stop.is_set():  # the run ended mid-probe: neither fresh nor missed
                    return probes
                if time.perf_counter() - t0 > limit:
                    probes.missed += 1
                    break
                time.sleep(0.002)  # polling rate of the measurement, not synchronization
            else:
                probes.lags.append(time.perf_counter() - t0)
            stop.wait(interval)
    return probes


class ProbeThread:
    """``probe_loop`` on a background thread for the length of a run."""

    def __init__(self, read_dsn: str, write_dsn: str, stories: list[int],
                 interval: float = 1.0) -> None:
        self.stop = threading.Event()
        self.result = Probes()
        self.error: str | None = None

        def body() -> None:
            try:
                self.result = probe_loop(read_dsn, write_dsn, stories, self.stop, interval)
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"

        self._thread = threading.Thread(target=body, daemon=True, name="freshness-probe")

    def __enter__(self) -> ProbeThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)
