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

import random
from datetime import date, timedelta
from typing import Any

from tests.integration.test_cache_shapes_differential import (
    _INT4,
    _TIMES,
    SCHEMA,
    Shape,
    _at,
    _bound,
    _ids,
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


def _grp(rng: random.Random) -> int | None:
    return None if rng.random() < 0.05 else rng.randint(0, 45)


def _day(rng: random.Random) -> date | None:
    return _bound(rng, lambda q: date(2024, 1, 1) + timedelta(days=q.randint(-5, 100)),
                  [date(1, 1, 1), date(9999, 12, 31)])


#: set operations the host finishes (``engine.plan.setops``): range parameters, LIMIT /
#: OFFSET parameters and equality parameters of one operand only, and ``= ANY`` keys under
#: UNION / INTERSECT / EXCEPT; NULL bounds, NULL and extreme values, NULL rows meeting
SETOP_PARAM_SHAPES = [
    Shape("SELECT score FROM things WHERE at > $1 UNION ALL SELECT ref FROM notes WHERE id > $2",
          lambda r: (_bound(r, _at, _TIMES), _bound(r, lambda q: q.randint(900, 1100), _INT4))),
    Shape("SELECT score FROM things WHERE grp = $1 AND score > $2 UNION SELECT ref FROM notes "
          "WHERE ref = $1 AND id > $2 ORDER BY 1 NULLS FIRST",
          lambda r: (_grp(r), _bound(r, lambda q: q.randint(-5, 1100), _INT4)), ordered=True),
    Shape("(SELECT id, score FROM things WHERE grp = $1 ORDER BY score DESC NULLS LAST, id "
          "LIMIT $2) UNION ALL (SELECT id, ref FROM notes WHERE ref = $1 ORDER BY id DESC "
          "LIMIT $3 OFFSET $4) ORDER BY 1, 2",
          lambda r: (_grp(r), r.choice([None, r.randint(0, 6)]), r.randint(0, 5),
                     r.choice([None, r.randint(0, 4)])), ordered=True),
    Shape("SELECT score FROM things WHERE grp = ANY($1) UNION SELECT ref FROM notes "
          "WHERE ref = ANY($1)", lambda r: (_ids(r, 45),)),
    Shape("SELECT score FROM things WHERE grp = ANY($1) EXCEPT ALL SELECT ref FROM notes "
          "WHERE ref = ANY($1) AND id < $2",
          lambda r: (_ids(r, 45), _bound(r, lambda q: q.randint(0, 1100), _INT4))),
    Shape("SELECT name, score FROM things WHERE grp = $1 INTERSECT ALL SELECT name, score "
          "FROM things WHERE grp = $2 AND score < $3",
          lambda r: (_grp(r), _grp(r), _bound(r, lambda q: q.randint(-5, 65), _INT4))),
    Shape("SELECT name FROM things WHERE name >= $1 AND grp = $2 UNION SELECT name FROM things "
          "WHERE score < $3 ORDER BY 1 LIMIT 7",
          lambda r: (_bound(r, lambda q: f"n{q.randint(0, 13)}", ["", "~"]), _grp(r),
                     _bound(r, lambda q: q.randint(-5, 65), _INT4)), ordered=True),
    Shape("(SELECT id, name FROM things WHERE grp = ANY($1) ORDER BY id DESC LIMIT 3) UNION ALL "
          "(SELECT id, note FROM notes WHERE ref = ANY($1) ORDER BY id LIMIT 2)",
          lambda r: (_ids(r, 45),)),
    Shape("SELECT score FROM things WHERE grp = $1 UNION ALL (SELECT ref FROM notes WHERE id > $2 "
          "INTERSECT ALL SELECT score FROM things WHERE at < $3)",
          lambda r: (_grp(r), _bound(r, lambda q: q.randint(0, 1100), _INT4),
                     _bound(r, _at, _TIMES))),
    Shape("SELECT grp FROM things WHERE grp = ANY($1) EXCEPT (SELECT ref FROM notes WHERE "
          "ref = ANY($1) UNION SELECT grp FROM things WHERE grp = ANY($1) AND score > 40 "
          "ORDER BY 1 DESC LIMIT $2)", lambda r: (_ids(r, 45), r.randint(0, 3))),
    Shape("SELECT day FROM things WHERE day BETWEEN $1 AND $2 INTERSECT SELECT day FROM things "
          "WHERE grp = $3", lambda r: (_day(r), _day(r), _grp(r))),
]


def test_set_operations_with_parameter_steps(pg: Any, dbname: str) -> None:
    """Range, LIMIT/OFFSET and one operand's own equality parameters inside set-operation
    operands, and = ANY keys under UNION / EXCEPT: the host cuts each operand from every
    row of the key (EXPLAIN says so), exact under writes, NULLs and evictions."""
    run_differential(pg, dbname, SETOP_PARAM_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, memory_budget=60_000,
                     explain="the host cuts each operand")
