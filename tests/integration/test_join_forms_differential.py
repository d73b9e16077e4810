"""Differential tests of FULL JOIN, JOIN ... USING / NATURAL and correlated NOT IN (issue 23)
against the real upstream, with the loop of ``test_cache_shapes_differential`` (random writes
through weir and directly, reads through three clients compared with PostgreSQL's answers, a
memory budget that keeps evicting).

The writes move ``things`` between groups, set scores and note references to NULL and move
the ``levels`` bands, so FULL JOIN rows switch between matched and NULL-padded on either side,
a USING column's merged value comes from one side or the other, and a NOT IN's subquery gains
and loses NULLs and rows per correlation value.
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
from tests.integration.test_join_shapes_differential import LEVELS, _write

FULL_AND_USING = [
    Shape("SELECT t.id, l.id, l.label FROM things t FULL JOIN levels l ON l.id = t.grp "
          "WHERE t.score > 40 OR t.id IS NULL", lambda r: ()),
    Shape("SELECT t.id, n.id FROM notes n FULL JOIN things t ON t.id = n.ref WHERE t.grp = $1",
          lambda r: (r.randint(0, 45),)),
    Shape("SELECT l.label, count(t.id), count(*) FROM levels l FULL OUTER JOIN things t "
          "ON t.grp = l.id GROUP BY l.label", lambda r: ()),
    Shape("SELECT id, t.name, l.label FROM things t JOIN levels l USING (id) WHERE t.grp = $1",
          lambda r: (r.randint(0, 45),)),
    Shape("SELECT * FROM things t LEFT JOIN levels l USING (id) WHERE grp = ANY($1)",
          lambda r: (_ids(r, 45),)),
    Shape("SELECT id, t.score, l.lo, l.id FROM things t FULL JOIN levels l USING (id) "
          "WHERE id = $1", lambda r: (r.randint(0, 12),)),
    Shape("SELECT grp, label, t.id FROM (SELECT id AS grp, label FROM levels) l "
          "NATURAL LEFT JOIN things t WHERE grp = $1", lambda r: (r.randint(0, 8),)),
    Shape("SELECT id, l.hi FROM levels l RIGHT JOIN things t USING (id) WHERE t.grp = $1 "
          "ORDER BY id", lambda r: (r.randint(0, 45),), ordered=True),
    Shape("SELECT id, t.grp, n.note FROM things t JOIN notes n USING (id) WHERE t.grp = $1",
          lambda r: (r.randint(0, 45),)),  # int4 and int8: the merged id is int8
    Shape("SELECT id, n.ref FROM levels l FULL JOIN notes n USING (id) WHERE n.ref = $1 "
          "OR l.lo > 40", lambda r: (r.randint(0, 45),)),
]


def test_full_joins_and_using(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, FULL_AND_USING, LEVELS, _write,
                     {"things": 1000, "notes": 1000, "levels": 5}, memory_budget=60_000)


CORRELATED_NOT_IN = [
    Shape("SELECT id, score FROM things t WHERE grp = $1 AND score NOT IN "
          "(SELECT u.score FROM things u WHERE u.grp = t.score)", lambda r: (r.randint(0, 45),)),
    Shape("SELECT id FROM things t WHERE grp = ANY($1) AND grp NOT IN "
          "(SELECT n.ref FROM notes n WHERE n.id = t.id AND n.note LIKE 'note 1%')",
          lambda r: (_ids(r, 45),)),
    Shape("SELECT grp, count(*) FROM things t WHERE id NOT IN (SELECT n.ref FROM notes n "
          "WHERE n.id = t.grp) GROUP BY grp", lambda r: ()),
]


def test_correlated_not_in(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, CORRELATED_NOT_IN, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
