"""Property: range-partial caches (filled intervals, ``engine.plan.range_state``) answer every
statement as a direct evaluation of it over the data as of the engine's applied position.

The simulated upstream and host of ``tests.property.simulated`` (fills answered late and out
of order, lagging snapshots, markers before or after responses, a small memory budget), with
range statements planned from SQL: open and closed bounds, NULL bounds, keyset pages with a
filter below them, descending order, text ranges. Every answer is cut and paged by
``merge_lookups`` with every parameter list that maps to its key and compared.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api import Engine
from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange
from engine.dataflow.state.intervals import span_of
from engine.plan import ir
from engine.plan.queries import CachedQuery, Classified, QueryPlanner, merge_lookups
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T
from tests.property.simulated import Host, Upstream

Row = tuple[Any, ...]
CATALOG = Catalog((Relation(17001, "public", "t", (
    Column("id", T.INT4, not_null=True), Column("v", T.INT4), Column("grp", T.INT4),
    Column("name", T.TEXT, collation="C"), Column("w", T.INT4, not_null=True)), ("id",)),))


@dataclass(frozen=True)
class Case:
    sql: str
    params: Callable[[random.Random], tuple[Any, ...]]
    #: the statement over the table's rows (id, v, grp, name) with these parameters
    answer: Callable[[list[Row], Sequence[Any]], list[Row]]


def _v(r: random.Random) -> int | None:
    return None if r.random() < 0.08 else r.randint(-2, 22)


def _sorted(rows: list[Row], key: Callable[[Row], Any]) -> list[Row]:
    return sorted(rows, key=key)


CASES = [
    Case("SELECT id, v FROM t WHERE v > $1 AND v <= $2",
         lambda r: (_v(r), _v(r)),
         lambda rows, p: sorted((x[0], x[1]) for x in rows if None not in p
                                and x[1] is not None and p[0] < x[1] <= p[1])),
    Case("SELECT id, name FROM t WHERE v >= $1 AND grp <> 3 ORDER BY v, id LIMIT $2",
         lambda r: (_v(r), r.randint(0, 6)),
         lambda rows, p: [(x[0], x[3]) for x in _sorted(
             [x for x in rows if p[0] is not None and x[1] is not None and x[1] >= p[0]
              and x[2] is not None and x[2] != 3], lambda x: (x[1], x[0]))][:p[1]]),
    Case("SELECT id FROM t WHERE name < $1 ORDER BY name, id LIMIT 3 OFFSET 1",
         lambda r: (None if r.random() < 0.05 else f"n{r.randint(0, 15)}",),
         lambda rows, p: [(x[0],) for x in _sorted(
             [x for x in rows if p[0] is not None and x[3] is not None and x[3] < p[0]],
             lambda x: (x[3], x[0]))][1:4]),
    Case("SELECT id, v FROM t WHERE v BETWEEN $1 AND $2 ORDER BY v DESC, id",
         lambda r: (_v(r), _v(r)),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if None not in p and x[1] is not None and p[0] <= x[1] <= p[1]],
             lambda x: (-x[1], x[0]))]),
    Case("SELECT id, v FROM t WHERE v < $1 AND grp <> 2 ORDER BY v DESC, id LIMIT $2",
         lambda r: (_v(r), r.randint(0, 5)),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if p[0] is not None and x[1] is not None and x[1] < p[0]
              and x[2] != 2], lambda x: (-x[1], x[0]))][:p[1]]),
    Case("SELECT id, v FROM t WHERE v > $1 ORDER BY v, id LIMIT 2",
         lambda r: (_v(r),),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if p[0] is not None and x[1] is not None and x[1] > p[0]],
             lambda x: (x[1], x[0]))][:2]),
    # per-key range-partial state: an equality key with the range (updates move rows
    # between keys and across intervals)
    Case("SELECT id, v FROM t WHERE grp = $1 AND v > $2 ORDER BY v, id LIMIT 2",
         lambda r: (r.randint(0, 5), _v(r)),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if p[1] is not None and x[2] == p[0] and x[1] is not None
              and x[1] > p[1]], lambda x: (x[1], x[0]))][:2]),
    Case("SELECT id, name FROM t WHERE grp = $1 AND v BETWEEN $2 AND $3",
         lambda r: (r.randint(0, 5), _v(r), _v(r)),
         lambda rows, p: sorted((x[0], x[3]) for x in rows if None not in p
                                and x[2] == p[0] and x[1] is not None
                                and p[1] <= x[1] <= p[2])),
    Case("SELECT id, v FROM t WHERE v < $2 AND grp = $1 AND name <> 'n3' "
         "ORDER BY v DESC, id LIMIT $3",
         lambda r: (r.randint(0, 5), _v(r), r.randint(0, 4)),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if p[1] is not None and x[2] == p[0] and x[1] is not None
              and x[1] < p[1] and x[3] is not None and x[3] != "n3"],
             lambda x: (-x[1], x[0]))][:p[2]]),
    # top-k state for a LIMIT parameter (no range cut: an unbounded span on the leading
    # NOT NULL ORDER BY column, the first OFFSET + LIMIT rows; ties on w)
    Case("SELECT id, w FROM t WHERE grp = $1 ORDER BY w DESC, id LIMIT $2 OFFSET $3",
         lambda r: (r.randint(0, 5), r.choice([None, 0, 1, 2, 4, 9]), r.choice([None, 0, 1, 3])),
         lambda rows, p: [(x[0], x[4]) for x in _sorted(
             [x for x in rows if x[2] == p[0]], lambda x: (-x[4], x[0]))][
             p[2] or 0:None if p[1] is None else (p[2] or 0) + p[1]]),
    Case("SELECT id, name FROM t WHERE grp <> 2 ORDER BY w, id LIMIT $1",
         lambda r: (r.randint(0, 7),),
         lambda rows, p: [(x[0], x[3]) for x in _sorted(
             [x for x in rows if x[2] != 2], lambda x: (x[4], x[0]))][:p[0]]),
    # ... on the nullable v, its NULLs rejected by the WHERE (IS NOT NULL; a strict
    # comparison under an explicit NULLS FIRST that no row can use)
    Case("SELECT id, v FROM t WHERE grp = $1 AND v IS NOT NULL ORDER BY v DESC, id "
         "LIMIT $2 OFFSET $3",
         lambda r: (r.randint(0, 5), r.choice([None, 0, 1, 2, 4, 9]), r.choice([None, 0, 2])),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if x[2] == p[0] and x[1] is not None],
             lambda x: (-x[1], x[0]))][
             p[2] or 0:None if p[1] is None else (p[2] or 0) + p[1]]),
    # ... on the nullable v, its NULLs shown (the point past every value): last ascending
    # (a page past the valued rows reaches them), first descending (every page starts there)
    Case("SELECT id, v FROM t WHERE grp = $1 ORDER BY v, id LIMIT $2 OFFSET $3",
         lambda r: (r.randint(0, 5), r.choice([None, 0, 1, 2, 4, 9]), r.choice([None, 0, 2])),
         lambda rows, p: [(x[0], x[1]) for x in _sorted(
             [x for x in rows if x[2] == p[0]], lambda x: (x[1] is None, x[1] or 0, x[0]))][
             p[2] or 0:None if p[1] is None else (p[2] or 0) + p[1]]),
    Case("SELECT id, name FROM t WHERE grp <> 1 ORDER BY v DESC, id LIMIT $1",
         lambda r: (r.choice([None, 0, 1, 2, 3, 5, 8]),),
         lambda rows, p: [(x[0], x[3]) for x in _sorted(
             [x for x in rows if x[2] != 1],
             lambda x: (x[1] is not None, -(x[1] or 0), x[0]))][:p[0]]),
    Case("SELECT id, name FROM t WHERE v > 4 ORDER BY v NULLS FIRST, id LIMIT $1",
         lambda r: (r.randint(0, 7),),
         lambda rows, p: [(x[0], x[3]) for x in _sorted(
             [x for x in rows if x[1] is not None and x[1] > 4],
             lambda x: (x[1], x[0]))][:p[0]]),
]


def _row(i: int, r: random.Random) -> Row:
    return (i, _v(r), r.randint(0, 5), None if r.random() < 0.1 else f"n{r.randint(0, 15)}",
            r.randint(0, 6))


class SpanHost(Host):
    """Checks statement answers: ``merge_lookups`` of the reader's rows for every parameter
    list read under that key, against the case's direct answer."""

    classified: dict[str, tuple[Classified, Case]]
    params: dict[tuple[str, Row], list[tuple[Any, ...]]]

    def check(self, cache: str, key: Row, rows: Sequence[Row]) -> None:
        query, case = self.classified[cache]
        assert isinstance(query.query, CachedQuery)
        table = list(next(iter(self.applied.values())).values())
        for params in self.params[(cache, key)]:
            got = merge_lookups(query.query.plan, [rows], params)
            want = case.answer(table, params)
            if "ORDER BY" not in case.sql:
                got, want = sorted(got), sorted(want)
            assert got == want, (case.sql, params, got, want)
        self.checked += 1


def drive(seed: int, ops: list[tuple[int, int]], budget: int | None) -> SpanHost:
    rng = random.Random(seed)
    planner = QueryPlanner(CATALOG)
    classified: dict[str, tuple[Classified, Case]] = {}
    plans: dict[str, ir.Reader] = {}
    for i, case in enumerate(CASES):
        c = planner.classify(case.sql)
        assert isinstance(c.query, CachedQuery) and c.query.plan.reader.span is not None
        classified[f"c{i}"] = (c, case)
        plans[f"c{i}"] = c.query.plan.reader
    table = ir.tables(plans["c0"])[0]
    up = Upstream({table.oid: table},
                  {table.oid: {(i,): _row(i, rng) for i in range(rng.randint(0, 30))}})
    engine = Engine(memory_budget=budget, probe_every=5)
    for name, plan in plans.items():
        engine.add_cache(name, plan)
    host = SpanHost(engine, up, plans, rng)
    host.classified = classified
    host.params = {}

    def key(cache: str, r: random.Random) -> Row:
        query, case = classified[cache]
        params = case.params(r)
        keys = query.keys(params)
        assert keys is not None and len(keys) == 1 and span_of(keys[0]) is not None
        host.params.setdefault((cache, keys[0]), []).append(params)
        return keys[0]

    def changes(r: random.Random) -> list[RowChange]:
        rows = dict(up.data[table.oid])  # (a shadow: the upstream applies the commit)
        out = []
        for _ in range(r.randint(1, 3)):
            op = r.random()
            if op < 0.4 or not rows:
                i = max((k[0] for k in rows), default=-1) + 1
                rows[(i,)] = new = _row(i, r)
                out.append(RowChange(table.oid, ChangeKind.INSERT, None, new))
                continue
            pk = r.choice(sorted(rows))
            old = rows.pop(pk)
            if op < 0.6:
                out.append(RowChange(table.oid, ChangeKind.DELETE,
                                     (old[0],) + (UNCHANGED_TOAST,) * 4, None))
                continue
            new = (old[0], _v(r) if r.random() < 0.7 else old[1], r.randint(0, 5), old[3],
                   r.randint(0, 6) if r.random() < 0.5 else old[4])
            rows[pk] = new
            out.append(RowChange(table.oid, ChangeKind.UPDATE, None, new))
        return out

    host.play(ops, changes, key, final_reads=6)
    assert not host.waiting
    return host


OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=120)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_range_partial_unbounded(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, budget=None)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_range_partial_tiny_budget(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, budget=600)


def test_keyset_pages_fill_only_their_stretch() -> None:
    """A keyset page over a large table fills a few rows, not the tail (and not the table)."""
    planner = QueryPlanner(CATALOG)
    c = planner.classify("SELECT id, v FROM t WHERE v > $1 ORDER BY v, id LIMIT 2")
    assert isinstance(c.query, CachedQuery)
    plan = c.query.plan.reader
    table = ir.tables(plan)[0]
    rows = {(i,): (i, i, 0, "x", 0) for i in range(1000)}
    up = Upstream({table.oid: table}, {table.oid: rows})
    engine = Engine()
    engine.add_cache("page", plan)
    host = SpanHost(engine, up, {"page": plan}, random.Random(1))
    host.classified = {"page": (c, CASES[5])}
    host.params = {}
    for bound in (10, 500, 998):
        k = c.keys((bound,))
        assert k is not None
        host.params[("page", k[0])] = [(bound,)]
        host.read_settled("page", k[0])
    base = engine.graph.bases[table.oid]
    assert len(base.store.rows) == 5  # the pages: (10, 12], (500, 502], (998, +inf): 999
    c = planner.classify("SELECT id, v FROM t WHERE v < $1 AND grp <> 2 "
                         "ORDER BY v DESC, id LIMIT $2")
    assert isinstance(c.query, CachedQuery)
    down = c.query.plan.reader
    engine.add_cache("down", down)
    host.plans["down"], host.classified["down"] = down, (c, CASES[4])
    for bound in (300, 3):
        k = c.keys((bound, 4))
        assert k is not None and k[0][-1].from_top
        host.params[("down", k[0])] = [(bound, 4)]
        host.read_settled("down", k[0])
    assert len(base.store.rows) == 5 + 4 + 3  # [296, 300) and [0, 3)


def test_keyset_pages_per_key_fill_only_their_key_and_stretch() -> None:
    """A per-key keyset page fills the key's page rows only (not the key's tail, not other
    keys); a write moving a row into the page's key and interval is in the next answer."""
    planner = QueryPlanner(CATALOG)
    case = CASES[6]
    c = planner.classify(case.sql)
    assert isinstance(c.query, CachedQuery)
    plan = c.query.plan.reader
    table = ir.tables(plan)[0]
    rows = {(i,): (i, i, i % 10, "x", 0) for i in range(1000)}
    up = Upstream({table.oid: table}, {table.oid: rows})
    engine = Engine()
    engine.add_cache("page", plan)
    host = SpanHost(engine, up, {"page": plan}, random.Random(1))
    host.classified = {"page": (c, case)}
    host.params = {}

    def read(params: tuple[int, int]) -> None:
        k = c.keys(params)
        assert k is not None
        host.params[("page", k[0])] = [params]
        host.read_settled("page", k[0])

    for params in ((3, 100), (3, 500), (7, 0)):
        read(params)
    base = engine.graph.bases[table.oid]
    assert sorted(r[0] for r in base.store.rows) == [7, 17, 103, 113, 503, 513]
    host.write([RowChange(table.oid, ChangeKind.UPDATE, None, (11, 104, 3, "x", 0))])
    host.settle()
    read((3, 100))
    answer = engine.lookup("page", c.keys((3, 100))[0])  # type: ignore[index]
    assert answer is not None and [r[0] for r in answer] == [103, 11]


def test_many_seeds_long_runs() -> None:
    """Long deterministic runs (hypothesis favours short ones): answers read again after
    the writes that change them, pages refilled after evictions."""
    rng = random.Random(20261127)
    for seed in range(40):
        ops = [(rng.randint(0, 9), rng.randint(0, 2**16)) for _ in range(150)]
        drive(seed, ops, budget=None if seed % 2 else 600)


def test_limit_param_top_rows_fill_only_the_largest_page() -> None:
    """A LIMIT parameter page without a range (top-k state) fills the key's top rows for
    the largest page asked only: a smaller page is a hit, a larger one fills on from where
    they end; a write above them is in the next answer, and one below them is not stored."""
    planner = QueryPlanner(CATALOG)
    case = next(x for x in CASES if x.sql.startswith("SELECT id, w FROM t WHERE grp = $1"))
    c = planner.classify(case.sql)
    assert isinstance(c.query, CachedQuery) and c.query.plan.reader.span is not None
    plan = c.query.plan.reader
    table = ir.tables(plan)[0]
    rows = {(i,): (i, i, i % 10, "x", i) for i in range(1000)}
    up = Upstream({table.oid: table}, {table.oid: rows})
    engine = Engine()
    engine.add_cache("top", plan)
    host = SpanHost(engine, up, {"top": plan}, random.Random(1))
    host.classified = {"top": (c, case)}
    host.params = {}

    def read(params: tuple[Any, ...]) -> list[int]:
        k = c.keys(params)
        assert k is not None
        host.params.setdefault(("top", k[0]), []).append(params)
        host.read_settled("top", k[0])
        answer = engine.lookup("top", k[0])
        assert answer is not None
        return [r[0] for r in merge_lookups(c.query.plan, [answer], params)]  # type: ignore

    base = engine.graph.bases[table.oid]
    assert read((3, 2, 0)) == [993, 983]
    assert sorted(r[0] for r in base.store.rows) == [983, 993]
    assert read((3, 2, 1)) == [983, 973]
    assert sorted(r[0] for r in base.store.rows) == [973, 983, 993]
    assert read((3, 1, 0)) == [993]  # a smaller page: a hit, nothing fetched
    assert len(base.store.rows) == 3
    assert read((4, 1, 0)) == [994]  # another key: its own top row only
    assert len(base.store.rows) == 4
    host.write([RowChange(table.oid, ChangeKind.INSERT, None, (2000, 0, 3, "x", 2000)),
                RowChange(table.oid, ChangeKind.INSERT, None, (2001, 0, 3, "x", -1))])
    host.settle()
    assert read((3, 3, 0)) == [2000, 993, 983]
    assert 2001 not in {r[0] for r in base.store.rows}


def test_nullable_top_rows_keep_the_page_and_the_null_point() -> None:
    """Top-k state over a nullable column (NULL the point past every value): an ascending
    page keeps its top rows only and crosses into the key's NULL rows when it runs past the
    values (all of them: ties); a descending page starts with the NULL rows; writes that set
    or clear a NULL move a row into or out of the page."""
    planner = QueryPlanner(CATALOG)
    up_case = next(x for x in CASES if x.sql.startswith("SELECT id, v FROM t WHERE grp = $1 "
                                                        "ORDER BY v, id"))
    down_case = next(x for x in CASES if x.sql.startswith("SELECT id, name FROM t WHERE "
                                                          "grp <> 1 ORDER BY v DESC"))
    up = planner.classify(up_case.sql)
    down = planner.classify(down_case.sql)
    assert isinstance(up.query, CachedQuery) and isinstance(down.query, CachedQuery)
    assert up.query.plan.reader.span_nulls and down.query.plan.reader.span_nulls
    table = ir.tables(up.query.plan.reader)[0]
    rows = {(i,): (i, None if i % 100 == 0 else i, i % 10, "x", 0) for i in range(1000)}
    engine = Engine()
    plans = {"up": up.query.plan.reader, "down": down.query.plan.reader}
    for name, plan in plans.items():
        engine.add_cache(name, plan)
    host = SpanHost(engine, Upstream({table.oid: table}, {table.oid: rows}), plans,
                    random.Random(1))
    host.classified = {"up": (up, up_case), "down": (down, down_case)}
    host.params = {}
    base = engine.graph.bases[table.oid]

    def read(cache: str, params: tuple[Any, ...]) -> list[int]:
        c = host.classified[cache][0]
        k = c.keys(params)
        assert k is not None
        host.params.setdefault((cache, k[0]), []).append(params)
        host.read_settled(cache, k[0])
        answer = engine.lookup(cache, k[0])
        assert answer is not None
        return [r[0] for r in merge_lookups(c.query.plan, [answer], params)]  # type: ignore

    assert read("up", (3, 2, 0)) == [3, 13]
    assert sorted(r[0] for r in base.store.rows) == [3, 13]  # the page, not the key
    assert read("up", (0, 3, 89)) == [990, 0, 100]  # past the values: the NULL rows
    assert len(base.store.rows) == 2 + 100  # (key 0: its 90 values and its 10 NULLs)
    assert read("down", (3,)) == [0, 100, 200]  # NULLs first: only they are fetched
    assert len(base.store.rows) == 2 + 100
    host.write([RowChange(table.oid, ChangeKind.UPDATE, None, (13, None, 3, "x", 0)),
                RowChange(table.oid, ChangeKind.UPDATE, None, (100, 7, 0, "x", 0))])
    host.settle()
    assert read("up", (3, 2, 0)) == [3, 23]  # 13 left the values for the NULL point
    assert read("down", (12,)) == [0, 13, 200, 300, 400, 500, 600, 700, 800, 900, 999, 998]
