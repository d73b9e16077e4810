"""Differential tests of INTERSECT / EXCEPT [ALL] (issue 23) against the real upstream, with
the loop of ``test_cache_shapes_differential`` (random writes through weir and directly,
reads through three clients compared with PostgreSQL's answers, a memory budget that keeps
evicting).

The writes insert, move and delete ``things`` and set ``notes.ref`` to NULL or other values,
so a row's count on each side of a set operation goes up and down (INTERSECT ALL / EXCEPT
ALL output ``min(l, r)`` / ``max(l - r, 0)`` copies), and NULLs meet NULLs (a set operation
treats them as equal, unlike ``=``).
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    a_grp,
    no_params,
    run_differential,
)

SET_OPERATIONS = [
    Shape("SELECT score FROM things INTERSECT SELECT ref FROM notes", no_params),
    Shape("SELECT score FROM things WHERE id > 250 INTERSECT ALL SELECT ref FROM notes", no_params),
    Shape("SELECT grp, score FROM things EXCEPT SELECT ref, ref FROM notes WHERE id % 7 = 0",
          no_params),
    Shape("SELECT grp FROM things WHERE score > 20 EXCEPT ALL SELECT ref FROM notes "
          "ORDER BY 1 NULLS FIRST LIMIT 8", no_params, ordered=True),
    Shape("SELECT name FROM things WHERE grp = $1 EXCEPT ALL SELECT name FROM things "
          "WHERE grp = $1 AND score > 25", a_grp),
    Shape("SELECT name, score FROM things WHERE grp = $1 INTERSECT ALL SELECT name, score "
          "FROM things WHERE grp = $1 AND (score IS NULL OR score < 30)", a_grp),
    Shape("SELECT score FROM things WHERE grp = $1 INTERSECT SELECT ref FROM notes "
          "WHERE ref = $1 ORDER BY 1", a_grp, ordered=True),
    Shape("SELECT grp FROM things UNION ALL SELECT ref FROM notes WHERE id < 50 INTERSECT "
          "SELECT score FROM things EXCEPT SELECT ref FROM notes WHERE note LIKE 'note 1%'",
          no_params),
    Shape("(SELECT score FROM things ORDER BY id DESC LIMIT 20) INTERSECT ALL "
          "SELECT ref FROM notes", no_params),
]


def test_intersect_and_except(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SET_OPERATIONS, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, memory_budget=60_000)
