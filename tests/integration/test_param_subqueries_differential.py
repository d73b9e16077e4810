"""``$n`` parameters inside NOT EXISTS subqueries, ``ARRAY[...]`` and slices (issue 23),
against the real upstream.

The loop of ``test_cache_shapes_differential`` (random writes through weir and directly, reads
through psycopg text and binary and asyncpg compared with the same statement run directly,
most served by the cache, evictions under a small budget) over statements whose NOT EXISTS
compares a subquery column with a parameter: the host keeps the rows none of whose partners
equals the parameter. NULL parameters (matching nothing: every row kept), NULL partner
values and outer rows without partners are all drawn.
"""

from __future__ import annotations

import random
from typing import Any

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    run_differential,
)


def _note(rng: random.Random) -> str | None:
    return None if rng.random() < 0.15 else f"note {rng.randint(0, 1200)}"


def _maybe(rng: random.Random, top: int) -> int | None:
    return None if rng.random() < 0.15 else rng.randint(0, top)


SHAPES = [
    Shape("SELECT id, name FROM things t WHERE grp = $1 AND NOT EXISTS "
          "(SELECT 1 FROM notes n WHERE n.ref = t.grp AND n.note = $2)",
          lambda r: (r.randint(0, 45), _note(r))),
    Shape("SELECT id, score FROM things t WHERE NOT EXISTS (SELECT 1 FROM notes n "
          "WHERE n.ref = t.id AND n.id = $1::int8) ORDER BY id LIMIT 6",
          lambda r: (_maybe(r, 1100),), ordered=True),
    Shape("SELECT t.id FROM things t WHERE t.grp = $1 AND NOT EXISTS (SELECT 1 FROM notes n "
          "WHERE n.ref = t.grp AND $2 = n.id AND n.note LIKE 'note 1%')",
          lambda r: (r.randint(0, 45), _maybe(r, 1100))),
    Shape("SELECT id, name, score FROM things t WHERE grp = ANY($1) AND NOT EXISTS "
          "(SELECT 1 FROM notes n WHERE n.ref = t.grp AND n.id = $2) "
          "ORDER BY score DESC NULLS LAST, id LIMIT 5",
          lambda r: ([r.randint(0, 45) for _ in range(r.randint(0, 4))], _maybe(r, 1100)),
          ordered=True),
]


FLAG_SHAPES = [
    Shape("SELECT t.id, EXISTS (SELECT 1 FROM notes n WHERE n.ref = t.id AND n.note = $1) AS "
          "noted FROM things t WHERE t.grp = $2", lambda r: (_note(r), r.randint(0, 45))),
    Shape("SELECT t.*, EXISTS (SELECT 1 FROM notes n WHERE n.ref = t.grp AND n.id = $1) "
          "FROM things t WHERE t.grp = ANY($2) ORDER BY t.id LIMIT 7",
          lambda r: (_maybe(r, 1100), [r.randint(0, 45) for _ in range(r.randint(0, 3))]),
          ordered=True),
]


def test_parameters_inside_select_list_exists(pg: Any, dbname: str) -> None:
    """``EXISTS (... column = $n ...) AS flag``: true or false, never NULL (a NULL parameter,
    NULL partner values, outer rows without partners)."""
    run_differential(pg, dbname, FLAG_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def test_parameters_inside_not_exists(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


ARRAY_SHAPES = [
    Shape("SELECT id, ARRAY[grp, score, NULL] AS a, ARRAY[name, 'x'] AS b, "
          "(ARRAY[id, grp, score])[2:] AS tail, (ARRAY[name, name])[:1] FROM things "
          "WHERE grp = $1", lambda r: (r.randint(0, 45),)),
    Shape("SELECT id FROM things WHERE grp = $1 AND (7 = ANY((ARRAY[score, NULL, id])[1:2])) "
          "IS NOT FALSE", lambda r: (r.randint(0, 45),)),
]


def test_array_constructors_and_slices(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, ARRAY_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


TOPK_SHAPES = [
    Shape("SELECT id, name FROM things WHERE grp = ANY($1) ORDER BY score DESC NULLS LAST, id "
          "LIMIT 4", lambda r: ([r.randint(0, 45) for _ in range(r.randint(0, 5))],),
          ordered=True),
    Shape("SELECT id FROM things WHERE grp = ANY($1) ORDER BY score::numeric / 7 DESC, id "
          "LIMIT 3", lambda r: ([r.randint(0, 45) for _ in range(r.randint(0, 5))],),
          ordered=True),
    Shape("SELECT id, grp FROM things WHERE grp = ANY($1) ORDER BY made, id",
          lambda r: ([r.randint(0, 45) for _ in range(r.randint(0, 3))],), ordered=True),
]


def test_any_top_k_on_unselected_columns(pg: Any, dbname: str) -> None:
    """``= ANY($1)`` with ORDER BY (and LIMIT) on columns the client does not select: one
    lookup per element, merged and sorted by the host on hidden columns."""
    run_differential(pg, dbname, TOPK_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


LATERAL_SHAPES = [
    Shape("SELECT t.id, x.n, x.total, x.low FROM things t, LATERAL (SELECT count(*) AS n, "
          "sum(n.id) AS total, min(n.id) AS low FROM notes n WHERE n.ref = t.grp) x "
          "WHERE t.grp = $1", lambda r: (r.randint(0, 45),)),
    Shape("SELECT t.id, x.* FROM things t CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE "
          "n.note LIKE 'note 1%') AS ones, count(n.ref) AS refs FROM notes n "
          "WHERE n.ref = t.score) x WHERE t.grp = ANY($1)",
          lambda r: ([r.randint(0, 45) for _ in range(r.randint(0, 3))],)),
]


def test_lateral_aggregates(pg: Any, dbname: str) -> None:
    """A LATERAL aggregate has one row for every outer row: counts 0 and the other
    aggregates NULL when the outer value has no partner (or is NULL)."""
    run_differential(pg, dbname, LATERAL_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
