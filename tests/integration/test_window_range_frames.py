"""RANGE and GROUPS frames with offsets, and EXCLUDE (``ir.RangeFrame``), against PostgreSQL.

Two parts: random frames (RANGE offsets over an integer key ASC/DESC with NULLs first or last,
GROUPS offsets over one or two keys, ROWS frames with EXCLUDE, CURRENT ROW and UNBOUNDED ends,
empty frames, EXCLUDE CURRENT ROW / GROUP / TIES / NO OTHERS) of count, sum, avg, min and max
over random rows with ties and NULLs, planned and evaluated by the reference evaluator
(``engine.plan.evaluate``), must equal PostgreSQL's answers; and a differential run through weir
with random writes (``run_differential``) over caches with such frames.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg

from engine.plan.evaluate import evaluate_reader
from engine.plan.queries import QueryPlanner, merge_lookups
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import CATALOG_QUERY, Catalog
from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    a_grp,
    no_params,
    run_differential,
)

_TABLE = """
CREATE TABLE r (id int PRIMARY KEY, g int, k int, j int, v numeric, w int);
"""


def _check_frames(conn: psycopg.Connection[Any], table_name: str, rng: random.Random,
                  frame_sql: Callable[[random.Random], str], tries: int, zone: str) -> int:
    """Plan ``tries`` queries of two random frames (``frame_sql``) over the one table
    ``table_name``, evaluate each by the reference evaluator over its rows and compare with
    PostgreSQL's answer; the number compared (frames the grammar rejects are skipped)."""
    catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
    table = {catalog.relations[0].oid: [tuple(r) for r in conn.execute(
        f"SELECT * FROM {table_name}").fetchall()]}
    planner = QueryPlanner(catalog)
    checked = 0
    for _ in range(tries):
        sql = f"SELECT id, {frame_sql(rng)} AS x, {frame_sql(rng)} AS y FROM {table_name}"
        answer = planner.classify(sql, ("public",), zone)
        if isinstance(answer.query, Unsupported):
            # (a frame PostgreSQL's grammar rejects, as "CURRENT ROW AND 1 PRECEDING")
            assert answer.query.reason.startswith("syntax error: frame "), (
                sql, answer.query.reason)
            continue
        want = conn.execute(sql).fetchall()
        keys = answer.keys([])
        assert keys is not None
        got = merge_lookups(answer.query.plan, [evaluate_reader(
            answer.query.plan.reader, table, k) for k in keys], [])
        assert Counter(map(repr, got)) == Counter(map(repr, want)), sql
        checked += 1
    return checked


def _bound(rng: random.Random, start: bool) -> str:
    kind = rng.choice(["unbounded", "current", "preceding", "following"])
    if kind == "unbounded":
        return "UNBOUNDED PRECEDING" if start else "UNBOUNDED FOLLOWING"
    if kind == "current":
        return "CURRENT ROW"
    return f"{rng.randint(0, 4)} {kind.upper()}"


def _frame_sql(rng: random.Random) -> str:
    mode = rng.choice(["RANGE", "RANGE", "GROUPS", "ROWS"])
    direction = rng.choice(["", " DESC"]) + rng.choice(["", " NULLS FIRST", " NULLS LAST"])
    order = f"k{direction}" if mode == "RANGE" or rng.random() < 0.5 else f"k{direction}, j"
    if mode == "ROWS":  # (with EXCLUDE; over an order that cannot tie, as ROWS frames are)
        order = f"k{direction}, id"
    exclude = rng.choice(["", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES",
                          " EXCLUDE NO OTHERS"])
    func = rng.choice(["count(*)", "count(w)", "sum(w)", "avg(v)", "min(v)", "max(w)",
                       "sum(v)"])
    part = rng.choice(["", "PARTITION BY g "])
    return (f"{func} OVER ({part}ORDER BY {order} {mode} BETWEEN {_bound(rng, True)} AND "
            f"{_bound(rng, False)}{exclude})")


def test_random_frames_match_postgres(pg: Any, dbname: str) -> None:
    rng = random.Random(20261128)
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute(_TABLE)
        rows = [(i, rng.randint(1, 3), rng.choice([None, *range(-3, 9)]),
                 rng.choice([None, 1, 2]), rng.choice([None, 1, 2.5, -0.25]),
                 rng.choice([None, *range(-5, 6)])) for i in range(1, 41)]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO r VALUES (%s, %s, %s, %s, %s, %s)", rows)
        checked = _check_frames(conn, "r", rng, _frame_sql, 150, "UTC")
        print(f"\nrange frames checked: {checked}")
        assert checked > 80


FRAME_SHAPES = [
    Shape("SELECT id, score, sum(score) OVER (ORDER BY score RANGE BETWEEN 5 PRECEDING AND "
          "2 FOLLOWING) AS near, count(*) OVER (ORDER BY score DESC NULLS LAST RANGE 3 "
          "PRECEDING EXCLUDE CURRENT ROW) AS above FROM things WHERE grp = $1", a_grp),
    Shape("SELECT id, max(name) OVER (ORDER BY day GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING "
          "EXCLUDE GROUP) AS around, avg(score) OVER (ORDER BY score, day GROUPS 2 PRECEDING "
          "EXCLUDE TIES) AS recent FROM things WHERE grp = $1 ORDER BY id", a_grp, ordered=True),
    Shape("SELECT id, ref, sum(id) OVER (PARTITION BY ref ORDER BY id RANGE BETWEEN 50 "
          "PRECEDING AND CURRENT ROW) AS last50 FROM notes ORDER BY id LIMIT 30", no_params,
          ordered=True),
    Shape("SELECT id, sum(score) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING "
          "EXCLUDE CURRENT ROW) AS others FROM things WHERE grp = $1", a_grp),
]


def test_range_frames_through_weir(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, FRAME_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


_TIMED = """
CREATE TABLE rt (id int PRIMARY KEY, g int, d date, t timestamp, tz timestamptz, w int);
"""
#: (the keys' steps exactly, and just under: a day, 7h30m0.25s for t, 50 minutes for tz)
_INTERVALS = ["0 seconds", "1 day", "23 hours 59 minutes", "2 days 12 hours", "90 minutes",
              "50 minutes", "49 minutes 59 seconds", "1 microsecond", "3 days",
              "7 hours 30 minutes 250 milliseconds", "7 hours 30 minutes 249 milliseconds",
              "15 hours 500 ms", "15 hours 499999 us"]


def _timed_bound(rng: random.Random, start: bool, key: str) -> str:
    kind = rng.choice(["unbounded", "current", "preceding", "following", "following"])
    if kind == "unbounded":
        return "UNBOUNDED PRECEDING" if start else "UNBOUNDED FOLLOWING"
    if kind == "current":
        return "CURRENT ROW"
    spans = [s for s in _INTERVALS if key != "tz" or "day" not in s]
    return f"interval '{rng.choice(spans)}' {kind.upper()}"


def _timed_frame_sql(rng: random.Random) -> str:
    key = rng.choice(["d", "t", "tz"])
    direction = rng.choice(["", " DESC"]) + rng.choice(["", " NULLS FIRST", " NULLS LAST"])
    exclude = rng.choice(["", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES"])
    func = rng.choice(["count(*)", "count(w)", "sum(w)", "min(w)", "max(id)"])
    part = rng.choice(["", "PARTITION BY g "])
    return (f"{func} OVER ({part}ORDER BY {key}{direction} RANGE BETWEEN "
            f"{_timed_bound(rng, True, key)} AND {_timed_bound(rng, False, key)}{exclude})")


def test_random_date_and_timestamp_frames_match_postgres(pg: Any, dbname: str) -> None:
    """RANGE offsets by intervals over date, timestamp and timestamptz keys (ties, NULLs,
    fractional seconds, a DST change in the session TimeZone; psycopg cannot load infinity,
    ``tests/unit/engine`` measures it)."""
    rng = random.Random(20261129)
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute(_TIMED)
        conn.execute("SET TimeZone = 'Europe/Paris'")
        conn.execute(
            "INSERT INTO rt SELECT g, g % 3, CASE WHEN g % 11 = 0 THEN NULL "
            "ELSE date '2024-03-28' + (g * 7 % 9) END, "
            "CASE WHEN g % 13 = 0 THEN NULL ELSE timestamp '2024-03-29 23:00' + "
            "(g * 5 % 17) * interval '7 hours 30 minutes 0.25 seconds' END, "
            "CASE WHEN g % 9 = 0 THEN NULL ELSE timestamptz "
            "'2024-03-30 20:00+01' + (g * 3 % 11) * interval '50 minutes' END, "
            "CASE WHEN g % 5 = 0 THEN NULL ELSE g % 7 - 2 END FROM generate_series(1, 40) g")
        checked = _check_frames(conn, "rt", rng, _timed_frame_sql, 200, "Europe/Paris")
        print(f"\ndate/timestamp range frames checked: {checked}")
        assert checked > 120


TIMED_FRAME_SHAPES = [
    Shape("SELECT id, count(*) OVER (ORDER BY day RANGE BETWEEN interval '3 days' PRECEDING "
          "AND CURRENT ROW) AS recent FROM things WHERE grp = $1", a_grp),
    Shape("SELECT id, sum(score) OVER (ORDER BY made DESC RANGE BETWEEN '1 day 2 hours' "
          "PRECEDING AND '12 hours' FOLLOWING EXCLUDE TIES) AS near FROM things "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id, max(score) OVER (ORDER BY at NULLS FIRST RANGE BETWEEN interval "
          "'20 hours' PRECEDING AND interval '90 minutes' FOLLOWING) AS around FROM things "
          "WHERE grp = $1 ORDER BY id", a_grp, ordered=True),
]


def test_date_and_timestamp_range_frames_through_weir(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, TIMED_FRAME_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
