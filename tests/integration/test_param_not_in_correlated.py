"""``$n NOT IN`` a subquery correlated by equalities (``engine.plan.param_in``) against
PostgreSQL: random writes that change both sides (notes.ref set to NULL or another value,
things' score and group updated), half through weir and half directly; reads through three
clients (``test_cache_shapes_differential.run_differential``), with NULL ``$1``, outer rows
without partners (NULL score: S empty, the row kept) and sets holding NULLs.
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _random_write,
    _tested,
    run_differential,
)

CORRELATED_SHAPES = [
    # ($1 written first: the text client numbers parameters in the order they appear)
    Shape("SELECT t.id, t.name FROM things t WHERE $1 NOT IN (SELECT n.ref FROM notes n "
          "WHERE n.id = t.score) AND t.grp = $2", _tested),
    Shape("SELECT n.id FROM notes n WHERE $1 NOT IN (SELECT t.score FROM things t WHERE "
          "t.grp = n.ref AND t.name <> 'n3') AND n.ref = $2", _tested),
]


def test_parameter_not_in_a_correlated_subquery(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, CORRELATED_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
