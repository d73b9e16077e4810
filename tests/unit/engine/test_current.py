"""``Engine.current``: the proxy's check that an answer it encoded earlier is still the
reader's answer — True exactly when :meth:`Engine.lookup` would hand out that same object,
counting a hit and recording the read's recency as a hit of ``lookup`` does."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api import Engine
from tests.property.simulated import catalog_host, catalog_steps

OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=80)


def _check(engine: Engine, seen: dict[tuple[str, Any], list[object]]) -> None:
    """Every answer handed out before for a key is checked: the one ``lookup`` returns now
    (if any) is current, every older one is not."""
    for (cache, key), answers in list(seen.items()):
        now = engine.lookup(cache, key)
        for answer in answers:
            hits = engine.stats.hits
            current = engine.current(cache, key, answer)
            assert engine.stats.hits == hits + current
            if current:
                reader = engine._readers[cache]
                assert next(reversed(engine.rt.lru)) == (reader.nid, key)  # most recent read
            if answer != ():  # (a key with a NULL reads as the shared empty answer, uncached)
                assert current == (now is answer), (cache, key)
            else:
                assert not current or now is answer
        if now is not None and all(now is not a for a in answers):
            answers.append(now)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), OPS, st.sampled_from((None, 3000)))
def test_current_is_lookup_identity(seed: int, ops: list[tuple[int, int]],
                                    budget: int | None) -> None:
    rng = random.Random(seed)
    up, engine, host = catalog_host(rng, budget)
    seen: dict[tuple[str, Any], list[object]] = {}
    for step in catalog_steps(up, host, ops):
        if step.key is not None and engine.lookup(step.cache, step.key) is not None:
            seen.setdefault((step.cache, step.key), [])
        elif step.op > 5:
            host.settle()
        _check(engine, seen)
    host.settle()
    _check(engine, seen)


def test_unknown_cache_raises() -> None:
    engine = Engine()
    try:
        engine.current("nope", (1,), ())
    except KeyError:
        return
    raise AssertionError("a dropped cache must not validate an answer")
