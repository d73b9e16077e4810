"""The engine's CPU per demo vote and per story-page fill, with and without eager aggregation.

Owns: one in-process measurement of what the demo's caches cost the engine (issue 24), free
of the network, PostgreSQL and the machine's load (CPU time of this process). The demo's
schema and read queries (``demo.dataset``) are planned by weir's planner twice - with every
rule, and without ``aggregate_before_joins`` (the plan before eager aggregation) - over an
in-memory copy of the demo's data (the same sizes and skew: votes crowd the low story ids).
Each engine is warmed as a demo run warms it (story pages and profiles of Zipf keys, every
section's front page), then applies the demo's votes (a vote row inserted and its story's
score bumped, in one transaction; stories drawn with the workload's Zipf law) and fills
story pages of stories it does not hold.

Usage: ``python -m bench.demo_engine [--votes 20000] [--rounds 2]``. Prints microseconds of
CPU per vote transaction and per story-page fill for each plan, alternating. The in-memory
tables are frozen out of the garbage collector (``gc.freeze``): collections walk only what
the engines allocate, as in weir's process.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable, Sequence

from bench.engine import Data, Indexes, fetch
from demo.dataset import READS, SECTIONS, Size
from demo.workload import Zipf
from engine.api import Engine, ReadReady
from engine.changes import ChangeKind, RowChange, Snapshot, Transaction
from engine.dataflow.fills import RunFill
from engine.plan import rules
from engine.plan.queries import CachedQuery, QueryPlanner
from engine.plan.rules.eager_aggs import aggregate_before_joins
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T

CATALOG = Catalog((
    Relation(1, "public", "users", (Column("id", T.INT4, not_null=True),
                                    Column("name", T.TEXT, collation="C"),
                                    Column("karma", T.INT4)), ("id",)),
    Relation(2, "public", "stories", (
        Column("id", T.INT4, not_null=True), Column("author_id", T.INT4),
        Column("section", T.INT4), Column("title", T.TEXT, collation="C"),
        Column("score", T.INT4)), ("id",)),
    Relation(3, "public", "votes", (Column("story_id", T.INT4, not_null=True),
                                    Column("user_id", T.INT4, not_null=True)),
             ("story_id", "user_id")),
    Relation(4, "public", "comments", (
        Column("id", T.INT8, not_null=True), Column("story_id", T.INT4),
        Column("author_id", T.INT4), Column("body", T.TEXT, collation="C")), ("id",)),
))
KEYS = {"story": "story", "section": "section", "user": "user"}


def dataset(size: Size, rng: random.Random) -> Data:
    """The demo's data (``demo.dataset.load``'s shape and skew), in memory."""
    votes = sorted({(1 + int(size.stories * rng.random() ** 3), rng.randint(1, size.users))
                    for _ in range(size.votes)})
    score: dict[int, int] = {}
    for story, _ in votes:
        score[story] = score.get(story, 0) + 1
    return {
        1: [(u, f"user{u}", (u * 7919) % 1000) for u in range(1, size.users + 1)],
        2: [(s, 1 + (s * 31) % size.users, s % SECTIONS, f"Story number {s}", score.get(s, 0))
            for s in range(1, size.stories + 1)],
        3: votes,
        4: [(c, 1 + int(size.stories * rng.random() ** 3), 1 + (c * 17) % size.users,
             f"comment {c}") for c in range(1, size.comments + 1)],
    }


def plans(eager: bool) -> dict[str, CachedQuery]:
    """The demo's caches as the planner makes them (without eager aggregation if asked)."""
    saved = rules.RULES
    if not eager:
        rules.RULES = tuple(r for r in saved if r is not aggregate_before_joins)
    try:
        out = {}
        for q in READS:
            query = QueryPlanner(CATALOG).classify(q.sql.replace("%s", "$1")).query
            assert isinstance(query, CachedQuery), query
            out[q.name] = query
        return out
    finally:
        rules.RULES = saved


class Demo:
    """One engine with the demo's caches over ``data``; reads answered from memory."""

    def __init__(self, eager: bool, data: Data) -> None:
        self.engine = Engine()
        self.data = data
        self.indexes: Indexes = {}
        self.snap = Snapshot(10, 10)
        for name, query in plans(eager).items():
            self.engine.add_cache(name, query.plan.reader)

    def read(self, cache: str, key: tuple[object, ...]) -> float:
        """Read ``key`` through its fills; the engine's CPU seconds (fetches not counted)."""
        start = time.process_time()
        effects = list(self.engine.read(cache, key).effects)
        spent = time.process_time() - start
        while effects:
            e = effects.pop()
            if isinstance(e, RunFill):
                rows = [fetch(self.data, q, self.indexes) for q in e.requests]
                start = time.process_time()
                effects.extend(self.engine.fill_response(e.fill_id, self.snap, rows))
                effects.extend(self.engine.position_reached(e.fill_id))
                spent += time.process_time() - start
            else:
                assert isinstance(e, ReadReady)
        return spent

    def caught_up(self, data: Data) -> None:
        """Fills from now on read ``data`` in a snapshot that sees every vote applied."""
        self.data, self.indexes, self.snap = data, {}, Snapshot(10**9, 10**9)

    def votes(self, txns: Sequence[Transaction]) -> float:
        apply = self.engine.apply
        start = time.process_time()
        for txn in txns:
            apply(txn)
        return time.process_time() - start


def vote_transactions(data: Data, size: Size, n: int,
                      rng: random.Random) -> tuple[list[Transaction], Data]:
    """``n`` demo votes (a new vote row and its story's score bumped, one transaction each)
    and the data after them."""
    story = Zipf(size.stories, 1.1, rng)
    stories = {r[0]: r for r in data[2]}
    seen = set(data[3])
    out = []
    for xid in range(1000, 1000 + n):
        s = story()
        vote = (s, rng.randint(1, size.users))
        if vote in seen:
            continue
        seen.add(vote)
        old = stories[s]
        new = stories[s] = (*old[:4], old[4] + 1)
        out.append(Transaction(xid, xid, (RowChange(3, ChangeKind.INSERT, None, vote),
                                          RowChange(2, ChangeKind.UPDATE, None, new))))
    after = {**data, 2: sorted(stories.values()), 3: sorted(seen)}
    return out, after


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.demo_engine", description=__doc__)
    p.add_argument("--votes", type=int, default=20_000)
    p.add_argument("--warm", type=int, default=3_000, help="story pages and profiles warmed")
    p.add_argument("--fills", type=int, default=1_000, help="story pages filled, timed")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    size = Size()
    data = dataset(size, random.Random(42))
    txns, after = vote_transactions(data, size, args.votes, random.Random(7))
    gc.collect()
    gc.freeze()  # this benchmark's own data is not the engine's: no collection walks it
    for rnd in range(args.rounds):
        for eager in (False, True) if rnd % 2 == 0 else (True, False):
            demo = Demo(eager, data)
            rng = random.Random(1)
            story, user = Zipf(size.stories, 1.1, rng), Zipf(size.users, 1.1, rng)
            keys: list[tuple[str, Callable[[], int]]] = [("story_page", story),
                                                           ("user_profile", user)]
            for cache, draw in keys:
                for _ in range(args.warm):
                    demo.read(cache, (draw(),))
            for section in range(SECTIONS):
                demo.read("front_page", (section,))
            held = {k[0] for k in demo.engine.graph.caches["story_page"][0].state}
            cold = [s for s in range(1, size.stories + 1) if s not in held][:args.fills]
            spent = demo.votes(txns)
            demo.caught_up(after)
            fills = sum(demo.read("story_page", (s,)) for s in cold)
            label = "eager " if eager else "before"
            print(f"{label}  {spent / len(txns) * 1e6:8.1f} us/vote ({len(txns)} votes, "
                  f"{len(held)} story pages held)  {fills / len(cold) * 1e6:8.1f} us per "
                  f"story-page fill ({len(cold)})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
