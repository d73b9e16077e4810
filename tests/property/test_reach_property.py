"""Property: dropping eviction rows for keys no state holds (``reach.prune``) changes nothing.

The same random workload as ``test_engine_property`` (same seed: same data, changes, reads,
fill order) runs twice, with the pruning and with every eviction row passed on as before; every
reader must end with the same present keys and rows, the hosts must have checked the same
answers against the reference, and the pruning must have dropped rows (so the comparison
is not vacuous).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dataflow import graph as graph_module
from engine.dataflow import reach
from engine.dataflow.records import Row
from tests.property.simulated import Host
from tests.property.test_engine_property import OPS, drive


def _readers(host: Host) -> dict[str, dict[Row, object]]:
    caches = host.engine.graph.caches
    return {name: dict(reader.state) for name, (reader, _) in caches.items()}


def _twice(seed: int, ops: list[tuple[int, int]], budget: int | None) -> int:
    """Run with and without the pruning; the eviction rows the pruning dropped."""
    dropped = [0]

    def counted(found: reach.Targets, rows: Sequence[Row]) -> list[Row]:
        kept = reach.prune(found, rows)
        dropped[0] += len(rows) - len(kept)
        return kept

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph_module, "prune", counted)
        pruned = drive(seed, ops, budget=budget, lag=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph_module, "prune", lambda found, rows: list(rows))
        plain = drive(seed, ops, budget=budget, lag=True)
    assert _readers(pruned) == _readers(plain)
    assert pruned.answers == plain.answers and pruned.checked == plain.checked
    assert pruned.engine.memory_total() == plain.engine.memory_total()
    return dropped[0]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_pruning_leaves_every_reader_as_it_was(seed: int, ops: list[tuple[int, int]]) -> None:
    _twice(seed, ops, budget=None)


def test_pruning_drops_rows_and_leaves_long_runs_unchanged() -> None:
    dropped = 0
    for seed in range(6):
        rng = random.Random(seed)
        ops = [(rng.randint(0, 9), rng.randint(0, 2**16)) for _ in range(250)]
        dropped += _twice(seed, ops, budget=4000 if seed % 2 else None)
    assert dropped > 0
