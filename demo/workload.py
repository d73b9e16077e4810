"""A timed mixed read/write load on client threads, with Zipf-distributed keys.

Owns: choosing operations and keys (a fixed mix; story and user keys follow a Zipf law, so a
few keys are hot and many are cold, as on a real site), running them on ``clients`` threads
each with its own connection for ``duration`` seconds, and recording every operation's start
time and latency. The same seed gives the same sequence of operations on every target, so
direct PostgreSQL and weir are driven identically.
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from demo.dataset import COMMENT, READS, SECTIONS, VOTE, Size


@dataclass(frozen=True, slots=True)
class Mix:
    """Operation weights: one per site read (in ``READS`` order), then vote, then comment."""

    reads: tuple[float, ...] = (40.0, 20.0, 15.0, 15.0)
    vote: float = 7.0
    comment: float = 3.0
    zipf_s: float = 1.1

    @property
    def names(self) -> tuple[str, ...]:
        return (*(q.name for q in READS), "vote", "comment")

    @property
    def weights(self) -> tuple[float, ...]:
        return (*self.reads, self.vote, self.comment)


READ_ONLY = Mix(reads=(40.0, 20.0, 15.0, 15.0), vote=0.0, comment=0.0)


@dataclass(frozen=True, slots=True)
class Sample:
    """One operation: when it started (seconds into the run), what it was, how long it took."""

    start: float
    op: str
    latency: float
    key: int = 0  # the key the operation read or wrote (its first parameter)
    client: int = 0  # the client (thread) that ran it


@dataclass(slots=True)
class Outcome:
    """What a run produced."""

    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0


class Zipf:
    """Keys 1..n with P(k) proportional to 1/k**s (key 1 hottest), shuffled by a fixed
    permutation so hot keys are spread over the id space."""

    def __init__(self, n: int, s: float, rng: random.Random) -> None:
        self._cum = list(itertools.accumulate(1.0 / (k ** s) for k in range(1, n + 1)))
        self._ids = list(range(1, n + 1))
        random.Random(n).shuffle(self._ids)
        self._rng = rng

    def __call__(self) -> int:
        i = bisect.bisect_left(self._cum, self._rng.random() * self._cum[-1])
        return self._ids[min(i, len(self._ids) - 1)]


def _operations(size: Size, mix: Mix, seed: int) -> Callable[[], tuple[str, str, tuple[Any, ...]]]:
    """A generator of (op name, SQL, parameters), deterministic for a seed."""
    rng = random.Random(seed)
    story = Zipf(size.stories, mix.zipf_s, rng)
    user = Zipf(size.users, mix.zipf_s, rng)
    sql = {q.name: q.sql for q in READS}
    keyers: dict[str, Callable[[], tuple[Any, ...]]] = {
        "story": lambda: (story(),),
        "section": lambda: (rng.randrange(SECTIONS),),
        "user": lambda: (user(),),
    }
    kinds = {q.name: keyers[q.key] for q in READS}
    names, weights = mix.names, mix.weights
    counter = itertools.count()

    def next_op() -> tuple[str, str, tuple[Any, ...]]:
        op = rng.choices(names, weights)[0]
        if op == "vote":
            return op, VOTE, (story(), rng.randint(1, size.users))
        if op == "comment":
            return op, COMMENT, (story(), user(), f"demo comment {seed}-{next(counter)}")
        return op, sql[op], kinds[op]()

    return next_op


def run(dsn: str, size: Size, duration: float, clients: int, mix: Mix, stop: threading.Event,
        seed: int = 1, on_tick: Callable[[float, int], None] | None = None) -> Outcome:
    """Run the mix against ``dsn`` until ``duration`` passes or ``stop`` is set.
    ``on_tick(elapsed, operations so far)`` is called about twice a second (progress)."""
    outcome = Outcome()
    lock = threading.Lock()
    counts = [0] * clients
    began = time.perf_counter()
    deadline = began + duration

    def client(i: int) -> None:
        next_op = _operations(size, mix, seed * 1000 + i)
        local: list[Sample] = []
        try:
            with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as conn:
                while not stop.is_set():
                    op, sql, params = next_op()
                    t0 = time.perf_counter()
                    if t0 >= deadline:
                        break
                    cur = conn.execute(sql, params)
                    if cur.description is not None:
                        cur.fetchall()
                    local.append(Sample(t0 - began, op, time.perf_counter() - t0, params[0], i))
                    counts[i] += 1
        except Exception as exc:  # a broken client ends its part of the run, reported
            if not stop.is_set():
                with lock:
                    outcome.errors.append(f"client {i}: {type(exc).__name__}: {exc}")
        with lock:
            outcome.samples.extend(local)

    threads = [threading.Thread(target=client, args=(i,), daemon=True, name=f"client-{i}")
               for i in range(clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if on_tick is not None:
            on_tick(time.perf_counter() - began, sum(counts))
        stop.wait(0.5)  # progress pacing only; the threads end at the deadline or on stop
        if stop.is_set():
            break
    for t in threads:
        t.join(10)
    outcome.elapsed = min(time.perf_counter(), deadline) - began
    if on_tick is not None and not stop.is_set():
        on_tick(duration, sum(counts))
    outcome.samples.sort(key=lambda s: s.start)
    return outcome
