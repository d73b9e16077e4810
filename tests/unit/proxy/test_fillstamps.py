"""``proxy.fillstamps.FillStamps`` without a server: what a miss leaves behind is bounded and
kept per key, a read of several keys leaves nothing, and an install for a cache that is no
longer the one the read missed in (dropped, or created again for another query) remembers
nothing. (The install's encoding, against a real upstream: ``tests/integration/
test_fill_stamps.py``.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy import fillstamps
from proxy.fillstamps import FillStamps, Missed
from proxy.hitpath import Hit, HitMemos
from proxy.router import Route


@dataclass(frozen=True)
class Entry:
    name: str


def _miss(entry: Entry, keys: list[tuple[Any, ...]], memo: dict[bytes, Hit],
          rest: bytes = b"r") -> Missed:
    return Missed(memo, rest, b"", None, Route("cache", "", cache=entry, keys=keys))


def test_a_dropped_cache_remembers_nothing() -> None:
    current: set[str] = set()
    stamped: list[bytes] = []

    def stamp(memo: dict[bytes, Hit], rest: bytes, hit: Hit) -> bool:
        stamped.append(rest)
        return True

    stamps = FillStamps(HitMemos(), lambda e: e.name in current, stamp)
    memo: dict[bytes, Hit] = {}
    stamps.missed(_miss(Entry("c"), [(1,)], memo))
    stamps.ready("c", (1,), ((1,),))  # (not current: returns before the plan is used)
    assert memo == {} and stamped == [] and stamps.hits.from_fills == 0
    stamps.ready("c", (1,), ((1,),))  # (and forgot the key: nothing left to do)
    assert not stamps._missed


def test_what_a_miss_leaves_is_bounded() -> None:
    stamps = FillStamps(HitMemos(), lambda e: False)
    memo: dict[bytes, Hit] = {}
    stamps.missed(_miss(Entry("c"), [(1,), (2,)], memo))  # an IN list: nothing
    assert not stamps._missed
    for i in range(fillstamps.MAX_KEYS + 10):
        stamps.missed(_miss(Entry("c"), [(i,)], memo))
    assert len(stamps._missed) == fillstamps.MAX_KEYS
    assert ("c", (0,)) not in stamps._missed  # the oldest went first
    for i in range(2 * fillstamps.MAX_PER_KEY):  # one key, many Bind tails (and repeats)
        stamps.missed(_miss(Entry("c"), [(-1,)], memo, rest=bytes([i % 5])))
    assert len(stamps._missed[("c", (-1,))]) == fillstamps.MAX_PER_KEY
    stamps.clear()
    assert not stamps._missed
