"""Eviction under a memory budget: recency through the keys an answer was replayed from,
admission at the budget (``Engine.worth_filling``) and its frequency sketch.

Every test drives the real ``Engine`` against the simulated upstream (``test_dataflow.make``:
each answer is checked against the reference evaluator).
"""

from __future__ import annotations

import random

import pytest

from engine.dataflow.frequency import TOP, Frequency
from tests.property.catalog import STORIES
from tests.unit.engine.test_dataflow import answer, make

ROWS = {STORIES.oid: [(i, i % 3, "t", i) for i in range(400)]}


def _one_key_bytes() -> int:
    host = make(ROWS)
    answer(host, "titles", (0,))
    return host.engine.memory_total()


def test_a_hot_answer_is_never_evicted_while_it_is_read_between_fills() -> None:
    # before: a hit refreshed only the reader's key; the base key it was built from aged
    # from its install and was evicted first, taking the hot answer with it (FIFO)
    host = make(ROWS, budget=10 * _one_key_bytes())
    engine = host.engine
    answer(host, "titles", (1,))
    reader = engine._readers["titles"]
    for i in range(2, 200):
        answer(host, "titles", (i,))
        rows = reader.answers.get((1,))
        assert rows is not None, f"the hot key was evicted after {i - 2} fills"
        assert engine.current("titles", (1,), rows)  # (the hit path's read of it)
    assert engine.stats.evictions > 150


def test_a_lookup_hit_also_keeps_what_the_answer_came_from() -> None:
    host = make(ROWS, budget=10 * _one_key_bytes())
    engine = host.engine
    answer(host, "titles", (1,))
    for i in range(2, 100):
        answer(host, "titles", (i,))
        assert engine.lookup("titles", (1,)) is not None


def test_the_lineage_is_counted_in_the_budget_and_dropped_with_the_key() -> None:
    host = make(ROWS)
    engine = host.engine
    answer(host, "titles", (5,))
    reader = engine._readers["titles"]
    assert engine.rt.deps[(reader.nid, (5,))]  # the base key it was replayed from
    with_deps = reader.bytes
    engine.graph.evict(reader.nid, (5,))
    assert (reader.nid, (5,)) not in engine.rt.deps
    assert reader.bytes == 0 < with_deps
    for nid, node in engine.graph.nodes.items():  # evicting the base key empties the rest
        if node is not reader:
            for item in [i for i in engine.rt.lru if i[0] == nid]:
                engine.graph.evict(*item)
    assert engine.memory_total() == 0


def test_at_the_budget_a_key_read_less_than_the_victim_is_not_filled() -> None:
    one = _one_key_bytes()
    host = make(ROWS, budget=20 * one)
    engine = host.engine
    for i in range(1, 60):  # fill to the budget; every answer read five times
        answer(host, "titles", (i,))
        for _ in range(5):
            engine.lookup("titles", (i,))
    assert engine.memory_total() > 0.9 * 20 * one
    assert engine.lookup("titles", (300,)) is None  # read once: not worth an eviction
    assert not engine.worth_filling("titles", (300,))
    assert engine.stats.not_worth == 1
    for _ in range(10):  # read often: worth it
        engine.lookup("titles", (300,))
    assert engine.worth_filling("titles", (300,))
    assert engine.worth_filling("titles", (301,), also=TOP)  # (reads the lanes counted)


def test_below_the_budget_and_without_one_every_key_is_worth_filling() -> None:
    host = make(ROWS, budget=100 * _one_key_bytes())
    answer(host, "titles", (1,))
    assert host.engine.worth_filling("titles", (2,))
    unbounded = make(ROWS)
    assert unbounded.engine.rt.freq is None
    assert unbounded.engine.worth_filling("titles", (2,))


def test_admission_at_the_budget_cuts_fills_and_evictions_under_zipf_churn() -> None:
    one = _one_key_bytes()
    rng = random.Random(5)
    weights = [1 / (k ** 1.1) for k in range(1, 401)]
    reads = [(k,) for k in rng.choices(range(400), weights=weights, k=6000)]
    outcome = {}
    for worth in (False, True):
        host = make(ROWS, budget=40 * one)
        engine, seen = host.engine, set()
        misses = 0
        for k in reads:
            if engine.lookup("titles", k) is not None:
                continue
            misses += 1
            if k in seen and (not worth or engine.worth_filling("titles", k)):
                answer(host, "titles", k)  # (the second read: as ``--admission second``)
            seen.add(k)
        outcome[worth] = (misses, engine.stats.fills, engine.stats.evictions)
    (m0, f0, e0), (m1, f1, e1) = outcome[False], outcome[True]
    assert m1 < m0 and 3 * f1 < f0 and 3 * e1 < e0, outcome


def test_frequency_never_undercounts_and_ages() -> None:
    freq = Frequency(width=1 << 8, period=10_000)
    counts: dict[int, int] = {}
    rng = random.Random(1)
    for _ in range(2000):
        h = hash((1, (rng.randrange(300),)))
        freq.add(h)
        counts[h] = counts.get(h, 0) + 1
    assert all(freq.estimate(h) >= min(c, TOP) for h, c in counts.items())
    hot = hash((1, ("hot",)))
    for _ in range(40):
        freq.add(hot)
    assert freq.estimate(hot) == TOP  # (saturates)
    freq.age()
    assert freq.estimate(hot) == TOP // 2
    assert freq.estimate(hash((2, ("never",)))) <= max(counts.values()) // 2


def test_frequency_halves_every_period() -> None:
    freq = Frequency(width=1 << 4, period=8)
    for _ in range(7):
        freq.add(123)
    assert freq.estimate(123) == 7
    freq.add(123)  # the eighth: every counter halved
    assert freq.estimate(123) == 4
    with pytest.raises(ValueError):
        Frequency(width=1000)
