"""Windows partitioned on columns that are not lookup keys (``ir.Window.partition``) against
PostgreSQL: random writes, half through weir and half directly, reads through three clients
(``test_cache_shapes_differential.run_differential``).

The first set splits each key's rows (or the whole table) by plain columns with NULLs and
repeats (row_number, rank, lag, running and whole-partition aggregates, a sliding frame, the
top-N-per-group idiom under an IN-list key); the second partitions on numeric and float
columns whose equal values print differently (1 = 1.0 = 1.00, NaN = NaN, -0 = 0), which must
each fall in one partition as PostgreSQL's ``=`` says.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import psycopg

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    a_grp,
    no_params,
    run_differential,
    some_grps,
)

SPLIT_SHAPES = [
    Shape("SELECT id, name, row_number() OVER (PARTITION BY name ORDER BY score DESC NULLS "
          "LAST, id) AS rn, rank() OVER (PARTITION BY day ORDER BY score) AS r FROM things "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id, grp, name, row_number() OVER (PARTITION BY grp, name ORDER BY id DESC) "
          "AS rn FROM things WHERE grp = ANY($1) ORDER BY grp, name, rn", some_grps,
          ordered=True),
    Shape("SELECT id, grp, sum(score) OVER (PARTITION BY grp ORDER BY id) AS run, count(*) "
          "OVER (PARTITION BY score) AS n, lag(id) OVER (PARTITION BY name ORDER BY id) AS "
          "prev FROM things", no_params),
    Shape("SELECT id, ref, dense_rank() OVER (PARTITION BY ref ORDER BY note DESC) AS d, "
          "avg(id) OVER (PARTITION BY ref) AS a, min(note) OVER (PARTITION BY ref ORDER BY id "
          "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS m FROM notes ORDER BY d, id LIMIT 20",
          no_params, ordered=True),
]


def test_windows_partitioned_within_a_key(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SPLIT_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


EQUAL_SCHEMA = """
CREATE TABLE m (id int PRIMARY KEY, k int, v numeric, f float8);
INSERT INTO m SELECT g, g % 30, (ARRAY[1, 1.0, 1.00, 'NaN', NULL, 2.5])[1 + g % 6]::numeric,
       (ARRAY[0.0, -0.0, 'NaN', NULL, 1.5])[1 + g % 5]::float8
FROM generate_series(1, 600) g;
"""
_VALUES = [Decimal("1"), Decimal("1.0"), Decimal("1.00"), Decimal("NaN"), None, Decimal("2.5")]
_FLOATS = [0.0, -0.0, float("nan"), None, 1.5]


def _write_m(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.4:
        next_id["m"] += 1
        conn.execute("INSERT INTO m VALUES (%s, %s, %s, %s)",
                     (next_id["m"], rng.randint(0, 33), rng.choice(_VALUES),
                      rng.choice(_FLOATS)))
    elif op < 0.8:
        conn.execute("UPDATE m SET v = %s, f = %s, k = CASE WHEN %s THEN %s ELSE k END "
                     "WHERE id = %s", (rng.choice(_VALUES), rng.choice(_FLOATS),
                                       rng.random() < 0.2, rng.randint(0, 33),
                                       rng.randint(1, next_id["m"])))
    else:
        conn.execute("DELETE FROM m WHERE id = %s", (rng.randint(1, next_id["m"]),))


def a_k(rng: random.Random) -> tuple[Any, ...]:
    return (rng.randint(0, 35),)


EQUAL_SHAPES = [
    Shape("SELECT id, v, f, count(*) OVER (PARTITION BY v) AS nv, row_number() OVER "
          "(PARTITION BY f ORDER BY id) AS rf, sum(v) OVER (PARTITION BY f ORDER BY id) AS sv "
          "FROM m WHERE k = $1", a_k),
    Shape("SELECT id, max(id) OVER (PARTITION BY v, f) AS top, lead(v) OVER (PARTITION BY v "
          "ORDER BY id) AS nxt FROM m WHERE k = $1 ORDER BY id", a_k, ordered=True),
]


def test_partitions_group_values_equal_under_eq(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, EQUAL_SHAPES, EQUAL_SCHEMA, _write_m, {"m": 600})
