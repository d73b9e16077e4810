"""``x NOT IN (SELECT y ... WHERE c = $n ...)`` (issue 23), against the real upstream.

The loop of ``test_cache_shapes_differential`` (random writes through weir and directly, reads
through psycopg text and binary and asyncpg compared with the same statement run directly,
most served by the cache, evictions under a small budget) over NOT IN subqueries with a
parameter: uncorrelated and correlated, a tested column that is a primary key (never NULL)
or may be NULL, subquery values that may be NULL (then NOT IN keeps no row unless the
subquery is empty for that ``$n``), NULL parameters (the subquery is empty: every row kept).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from tests.integration.test_cache_shapes_differential import Shape, run_differential

SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, grp int, val int);
CREATE TABLE marks (id int8 PRIMARY KEY, owner int, item int, grp int);
INSERT INTO items SELECT g, g % 20, CASE WHEN g % 11 = 0 THEN NULL ELSE g % 37 END
FROM generate_series(1, 300) g;
INSERT INTO marks SELECT g, g % 15, CASE WHEN g % 29 = 0 THEN NULL ELSE (g * 7) % 40 END,
       g % 25
FROM generate_series(1, 600) g;
"""


def _owner(rng: random.Random) -> int | None:
    return None if rng.random() < 0.15 else rng.randint(0, 16)


def _maybe(rng: random.Random, top: int, null: float = 0.1) -> int | None:
    return None if rng.random() < null else rng.randint(0, top)


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.2:
        next_id["items"] += 1
        conn.execute("INSERT INTO items VALUES (%s, %s, %s)",
                     (next_id["items"], rng.randint(0, 24), _maybe(rng, 40, 0.2)))
    elif op < 0.35:
        conn.execute("UPDATE items SET val = %s, grp = CASE WHEN %s THEN %s ELSE grp END "
                     "WHERE id = %s", (_maybe(rng, 40, 0.2), rng.random() < 0.3,
                                       rng.randint(0, 24), rng.randint(1, next_id["items"])))
    elif op < 0.45:
        conn.execute("DELETE FROM items WHERE id = %s", (rng.randint(1, next_id["items"]),))
    elif op < 0.7:
        next_id["marks"] += 1
        conn.execute("INSERT INTO marks VALUES (%s, %s, %s, %s)",
                     (next_id["marks"], _maybe(rng, 16, 0.05), _maybe(rng, 40, 0.08),
                      _maybe(rng, 24, 0.05)))
    elif op < 0.9:
        conn.execute("UPDATE marks SET item = %s, owner = CASE WHEN %s THEN %s ELSE owner END "
                     "WHERE id = %s", (_maybe(rng, 40, 0.15), rng.random() < 0.3,
                                       rng.randint(0, 16), rng.randint(1, next_id["marks"])))
    else:
        conn.execute("DELETE FROM marks WHERE id = %s", (rng.randint(1, next_id["marks"]),))


SHAPES = [
    # uncorrelated, the tested column a primary key: M and N only
    Shape("SELECT id, val FROM items WHERE grp = $1 AND id NOT IN "
          "(SELECT m.item FROM marks m WHERE m.owner = $2)",
          lambda r: (r.randint(0, 25), _owner(r))),
    # uncorrelated, the tested column may be NULL: R joined on the NULL flag
    Shape("SELECT id FROM items i WHERE grp = $1 AND val NOT IN "
          "(SELECT m.item FROM marks m WHERE m.owner = $2 AND m.id % 3 <> 0)",
          lambda r: (r.randint(0, 25), _owner(r))),
    # correlated, nullable tested column, a parameter page
    Shape("SELECT i.id, i.val FROM items i WHERE i.grp = $1 AND i.val NOT IN "
          "(SELECT m.item FROM marks m WHERE m.grp = i.grp AND m.owner = $2) "
          "ORDER BY i.id LIMIT 8", lambda r: (r.randint(0, 25), _owner(r)), ordered=True),
    # correlated, primary key tested, the parameter on the left, an IN-list key
    Shape("SELECT i.id FROM items i WHERE i.grp = ANY($1) AND i.id NOT IN "
          "(SELECT m.item + 0 FROM marks m WHERE m.grp = i.grp AND $2 = m.owner)",
          lambda r: ([r.randint(0, 25) for _ in range(r.randint(0, 3))], _owner(r))),
]


def test_parameters_inside_not_in(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SHAPES, SCHEMA, _write, {"items": 300, "marks": 600})
