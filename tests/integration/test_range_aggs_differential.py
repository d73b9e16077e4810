"""Differential test of aggregates (and HAVING over them) over a range cut (issue 23,
``engine.plan.range_aggs``)
against the real upstream: the shared loop of ``test_cache_shapes_differential`` (random
writes that move rows into and out of the range and between keys, NULL and extreme bounds,
keys without rows, evictions; three clients), over aggregates without GROUP BY whose WHERE
has range parameters. EXPLAIN must say the reader keeps range-partial state.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from tests.integration.test_cache_shapes_differential import (
    _DAYS,
    _INT4,
    _TIMES,
    SCHEMA,
    Shape,
    _at,
    _bound,
    _ids,
    _random_write,
    run_differential,
)


def _day(rng: random.Random) -> date:
    return date(2024, 1, 1) + timedelta(days=rng.randint(-5, 100))


RANGE_AGG_SHAPES = [
    Shape("SELECT count(*), count(score), sum(score), min(name), max(at), avg(score) "
          "FROM things WHERE grp = $1 AND at > $2",
          lambda r: (r.randint(0, 45), _bound(r, _at, _TIMES))),
    Shape("SELECT sum(score) AS s, max(day), min(id) FROM things WHERE grp = $1 "
          "AND id BETWEEN $2 AND $3",
          lambda r: (r.randint(0, 45), _bound(r, lambda q: q.randint(-5, 1100), _INT4),
                     _bound(r, lambda q: q.randint(-5, 1100), _INT4))),
    Shape("SELECT count(*) FILTER (WHERE score > 20), min(made), count(DISTINCT name), "
          "avg(id) FROM things WHERE score <= $1 AND score > $2",
          lambda r: (_bound(r, lambda q: q.randint(-5, 65), _INT4),
                     _bound(r, lambda q: q.randint(-5, 65), _INT4))),
    Shape("SELECT count(*), sum(id) FROM things WHERE grp = $1 AND name <> 'n3' AND day < $2",
          lambda r: (r.randint(0, 45), _bound(r, _day, _DAYS))),
    # grouped on the equality key: one row per key value with rows in the range (no row
    # for an empty range), = ANY lists with NULLs and duplicates
    Shape("SELECT grp, count(*) AS n, avg(score), max(name) FROM things WHERE grp = ANY($1) "
          "AND at <= $2 GROUP BY grp", lambda r: (_ids(r, 45), _bound(r, _at, _TIMES))),
    Shape("SELECT sum(score), grp FROM things WHERE grp = $1 AND id >= $2 GROUP BY grp",
          lambda r: (r.randint(0, 45), _bound(r, lambda q: q.randint(-5, 1100), _INT4))),
    # HAVING over the range's aggregates (without GROUP BY: the one row or none; an
    # aggregate only HAVING reads is computed, then dropped)
    Shape("SELECT count(*) AS n, max(name) FROM things WHERE grp = $1 AND at > $2 "
          "HAVING count(*) > 3 AND sum(score) < 200",
          lambda r: (r.randint(0, 45), _bound(r, _at, _TIMES))),
    Shape("SELECT grp, avg(score) FROM things WHERE grp = ANY($1) AND day < $2 GROUP BY grp "
          "HAVING min(name) >= 'n3' OR count(score) = 0",
          lambda r: (_ids(r, 45), _bound(r, _day, _DAYS))),
    # ORDER BY (an aggregate only it reads, the group column to break ties) and LIMIT/OFFSET
    Shape("SELECT grp, count(*) AS n FROM things WHERE grp = ANY($1) AND id > $2 GROUP BY grp "
          "ORDER BY sum(score) DESC NULLS LAST, grp LIMIT 3 OFFSET 1",
          lambda r: (_ids(r, 45, 9), _bound(r, lambda q: q.randint(-5, 1100), _INT4)),
          ordered=True),
    Shape("SELECT max(name) AS top, grp FROM things WHERE grp = ANY($1) AND score < $2 "
          "GROUP BY grp HAVING count(*) > 1 ORDER BY top, 2 DESC LIMIT 2",
          lambda r: (_ids(r, 45, 9), _bound(r, lambda q: q.randint(-5, 65), _INT4)),
          ordered=True),
]


def test_aggregates_over_a_range(pg: Any, dbname: str) -> None:
    """count, sum, min, max, avg (PostgreSQL's types: sum(int4) -> int8, avg -> numeric at
    its scale) over the cut rows, per key: count 0 and NULLs over empty ranges; grouped on
    the equality key: a row per key value with rows in the range."""
    run_differential(pg, dbname, RANGE_AGG_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, explain="state: range-partial on")


HOST_GROUP_SHAPES = [
    Shape("SELECT DISTINCT name FROM things WHERE score < $1",
          lambda r: (_bound(r, lambda q: q.randint(-5, 65), _INT4),)),
    Shape("SELECT DISTINCT grp, day FROM things WHERE grp = $1 AND at > $2 ORDER BY day DESC, 1 "
          "LIMIT 4", lambda r: (r.randint(0, 45), _bound(r, _at, _TIMES)), ordered=True),
    Shape("SELECT name, count(*), sum(score) FROM things WHERE grp = $1 AND day >= $2 "
          "GROUP BY name", lambda r: (r.randint(0, 45), _bound(r, _day, _DAYS))),
    Shape("SELECT score % 3 AS m, count(*) AS n, max(day) FROM things WHERE id > $1 "
          "GROUP BY 1 HAVING count(*) > 2",
          lambda r: (_bound(r, lambda q: q.randint(-5, 1100), _INT4),)),
    Shape("SELECT DISTINCT lower(name), score IS NULL FROM things WHERE grp = ANY($1) "
          "AND id < $2", lambda r: (_ids(r, 45, 9), _bound(r, lambda q: q.randint(-5, 1100),
                                                             _INT4))),
    Shape("SELECT grp, count(*) AS n FROM things WHERE id < $1 GROUP BY grp "
          "ORDER BY n DESC, grp LIMIT $2 OFFSET $3",
          lambda r: (_bound(r, lambda q: q.randint(-5, 1100), _INT4),
                     r.choice([None, 0, 1, 3, 50]), r.choice([None, 0, 2, 40])), ordered=True),
]


def test_distinct_and_other_groups_over_a_range(pg: Any, dbname: str) -> None:
    """SELECT DISTINCT with a range on a column it does not output, and GROUP BY columns
    other than the equality keys under a range: the host groups the rows the cut selects
    (and cuts a LIMIT / OFFSET parameter page of the sorted groups)."""
    run_differential(pg, dbname, HOST_GROUP_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, explain="state: range-partial on")
