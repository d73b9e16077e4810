"""Expressions over aggregates of a range (``range_aggs``: ``PlannedQuery.agg_exprs``, computed
at the host from the hidden aggregate values) against PostgreSQL: random writes, half through
weir and half directly, reads through three clients (``run_differential``), including ranges
holding no rows (count 0, NULL sums under coalesce) and grouped IN-list keys.
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _ids,
    _random_write,
    run_differential,
)

EXPRESSION_SHAPES = [
    Shape("SELECT coalesce(sum(score), 0) AS s, count(*) * 2 AS n2, max(day) - min(day) AS "
          "span, avg(score) IS NULL AS empty FROM things WHERE grp = $1 AND id > $2",
          lambda r: (r.randint(0, 45), r.randint(0, 1100))),
    Shape("SELECT grp, count(*) + sum(score) AS mix, upper(max(name)) AS top FROM things "
          "WHERE grp = ANY($1) AND score < $2 GROUP BY grp",
          lambda r: (_ids(r, 45), r.randint(0, 60))),
]


def test_expressions_over_range_aggregates(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, EXPRESSION_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
