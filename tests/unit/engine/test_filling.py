"""``Engine.filling``: whether a fill of a key is pending for a cache — True exactly while a
read of it waits for a ``ReadReady`` or ``ReadFailed`` (the proxy leaves what a fill's
install needs, ``proxy.fillstamps``, only for such misses: ``portal_reads.note_miss``)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.catalog import PLANS, key_for, random_changes
from tests.property.simulated import catalog_host

OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=80)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), OPS, st.sampled_from((None, 3000)))
def test_filling_is_a_read_waiting_for_its_fill(seed: int, ops: list[tuple[int, int]],
                                                budget: int | None) -> None:
    rng = random.Random(seed)
    up, engine, host = catalog_host(rng, budget)
    names = sorted(PLANS)
    asked: set[tuple[str, tuple[object, ...]]] = set()
    for op, arg in ops:
        r = random.Random(arg)
        cache = names[arg % len(names)]
        if op <= 2:
            host.write(random_changes(up.data, r))
        elif op <= 5:
            key = key_for(cache, r)
            asked.add((cache, key))
            host.read(cache, key)
        elif op == 6 and host.to_run:
            host.run_fill(arg)
        elif op == 7 and host.responses:
            host.respond(arg)
        else:
            host.deliver(1 + arg % 3)
        for c, k in asked:
            assert engine.filling(c, k) == ((c, k) in host.waiting), (c, k)
    host.settle()
    assert not any(engine.filling(c, k) for c, k in asked)
