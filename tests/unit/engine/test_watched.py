"""``Runtime.watched``: an answer someone keeps a copy of outside the engine (the proxy's hit
lanes) is reported (``Runtime.on_drop``) before the reader replaces or drops it — by a
write's delta, an eviction (by the budget or of base state upstream of the reader), a fill
of the key again — so an unreported copy is always the reader's current answer.

Random writes, reads, fills and evictions under a small budget, against the simulated
upstream; after every step each copy still held is checked against the reader by identity.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api import Engine
from engine.changes import ChangeKind, RowChange
from tests.property.catalog import PLANS, TABLES, VOTES
from tests.property.simulated import Host, Upstream, catalog_host, catalog_steps

#: steps per example (drawn from the example's seed: hypothesis's own draws of small lists
#: repeat too few keys and writes to change many kept answers)
STEPS = 80


class Copies:
    """What a watcher outside keeps: a copy of each answer it was handed, by (nid, key)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.held: dict[tuple[int, Any], object] = {}
        self.reported = 0
        engine.rt.on_drop = self.dropped

    def dropped(self, nid: int, key: Any) -> None:
        assert (nid, key) not in self.engine.rt.watched  # (reported once per watch)
        self.held.pop((nid, key))
        self.reported += 1

    def keep(self, cache: str, key: Any) -> None:
        reader = self.engine.graph.caches[cache][0]
        answer = reader.answers.get(key)
        if answer is not None and None not in key:
            self.held[(reader.nid, key)] = answer
            self.engine.rt.watched.add((reader.nid, key))

    def check(self) -> None:
        readers = {r.nid: r for r, _ in self.engine.graph.caches.values()}
        for (nid, key), answer in self.held.items():
            assert readers[nid].answers.get(key) is answer, (nid, key)
        assert set(self.held) == self.engine.rt.watched


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from((None, 3000)))
def test_a_kept_answer_is_reported_before_it_changes(seed: int, budget: int | None) -> None:
    rng = random.Random(seed)
    ops = [(rng.randint(0, 9), rng.randint(0, 2**16)) for _ in range(STEPS)]
    up, engine, host = catalog_host(rng, budget)
    copies = Copies(engine)
    for step in catalog_steps(up, host, ops):
        if step.key is not None:
            copies.keep(step.cache, step.key)
        elif step.op == 6:  # an eviction of one answer, as the budget makes
            reader = engine.graph.caches[step.cache][0]
            if reader.state:
                engine.graph.evict(reader.nid, sorted(reader.state, key=repr)[0])
        elif step.op > 6:
            host.settle()
        copies.check()
    host.settle()
    copies.check()


def test_a_write_reports_only_the_keys_it_changes() -> None:
    """The reports are per key: a vote for story 5 reports the kept count of story 5, not
    that of story 6; evicting story 6's count reports it."""
    data: dict[int, dict[Any, Any]] = {oid: {} for oid in TABLES}
    data[VOTES.oid] = {(1,): (1, 5, 1, Decimal(1)), (2,): (2, 6, 1, Decimal(1))}
    up = Upstream(TABLES, data)
    engine = Engine()
    engine.add_cache("votecount", PLANS["votecount"])
    host = Host(engine, up, {"votecount": PLANS["votecount"]}, random.Random(0), lag=False)
    copies = Copies(engine)
    for story in (5, 6):
        host.read_settled("votecount", (story,))
        copies.keep("votecount", (story,))
    nid = engine.graph.caches["votecount"][0].nid
    host.write([RowChange(VOTES.oid, ChangeKind.INSERT, None, (3, 5, 1, Decimal(1)))])
    host.deliver(len(host.stream))
    assert set(copies.held) == {(nid, (6,))} and copies.reported == 1
    copies.check()
    engine.graph.evict(nid, (6,))
    assert not copies.held and copies.reported == 2
