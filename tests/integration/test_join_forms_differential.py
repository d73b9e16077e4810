"""Differential tests of FULL JOIN, JOIN ... USING / NATURAL, correlated NOT IN, LATERAL, VALUES
in FROM, ``$n`` inside FROM subqueries and array subscripts (issue 23)
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
    _random_write,
    a_grp,
    no_params,
    run_differential,
    some_grps,
)
from tests.integration.test_join_shapes_differential import ITEMS, LEVELS, _write

FULL_AND_USING = [
    Shape("SELECT t.id, l.id, l.label FROM things t FULL JOIN levels l ON l.id = t.grp "
          "WHERE t.score > 40 OR t.id IS NULL", no_params),
    Shape("SELECT t.id, n.id FROM notes n FULL JOIN things t ON t.id = n.ref WHERE t.grp = $1",
          a_grp),
    Shape("SELECT l.label, count(t.id), count(*) FROM levels l FULL OUTER JOIN things t "
          "ON t.grp = l.id GROUP BY l.label", no_params),
    Shape("SELECT id, t.name, l.label FROM things t JOIN levels l USING (id) WHERE t.grp = $1",
          a_grp),
    Shape("SELECT * FROM things t LEFT JOIN levels l USING (id) WHERE grp = ANY($1)",
          some_grps),
    Shape("SELECT id, t.score, l.lo, l.id FROM things t FULL JOIN levels l USING (id) "
          "WHERE id = $1", lambda r: (r.randint(0, 12),)),
    Shape("SELECT grp, label, t.id FROM (SELECT id AS grp, label FROM levels) l "
          "NATURAL LEFT JOIN things t WHERE grp = $1", lambda r: (r.randint(0, 8),)),
    Shape("SELECT id, l.hi FROM levels l RIGHT JOIN things t USING (id) WHERE t.grp = $1 "
          "ORDER BY id", a_grp, ordered=True),
    Shape("SELECT id, t.grp, n.note FROM things t JOIN notes n USING (id) WHERE t.grp = $1",
          a_grp),  # int4 and int8: the merged id is int8
    Shape("SELECT id, n.ref FROM levels l FULL JOIN notes n USING (id) WHERE n.ref = 7 "
          "OR l.lo > 40", no_params),
]


def test_full_joins_and_using(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, FULL_AND_USING, LEVELS, _write,
                     {"things": 1000, "notes": 1000, "levels": 5}, memory_budget=60_000)


CORRELATED_NOT_IN = [
    Shape("SELECT id, score FROM things t WHERE grp = $1 AND score NOT IN "
          "(SELECT u.score FROM things u WHERE u.grp = t.score)", a_grp),
    Shape("SELECT id FROM things t WHERE grp = ANY($1) AND grp NOT IN "
          "(SELECT n.ref FROM notes n WHERE n.id = t.id AND n.note LIKE 'note 1%')",
          some_grps),
    Shape("SELECT grp, count(*) FROM things t WHERE id NOT IN (SELECT n.ref FROM notes n "
          "WHERE n.id = t.grp) GROUP BY grp", no_params),
]


def test_correlated_not_in(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, CORRELATED_NOT_IN, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


LATERAL_SHAPES = [
    Shape("SELECT t.id, x.id, x.note FROM things t CROSS JOIN LATERAL (SELECT n.id, n.note "
          "FROM notes n WHERE n.ref = t.grp ORDER BY n.id DESC LIMIT 2) x WHERE t.grp = $1",
          a_grp),
    Shape("SELECT t.id, last.id FROM things t LEFT JOIN LATERAL (SELECT n.id FROM notes n "
          "WHERE n.ref = t.score AND n.note LIKE 'note 1%' ORDER BY n.id LIMIT 1 OFFSET 1) last "
          "ON true WHERE t.grp = ANY($1)", some_grps),
    Shape("SELECT l.id, top.id, top.score FROM levels l, LATERAL (SELECT t.id, t.score FROM "
          "things t WHERE t.grp = l.id ORDER BY t.score DESC NULLS LAST, t.id LIMIT 3) top",
          no_params),
    Shape("SELECT t.id, x.ref FROM things t JOIN LATERAL (SELECT DISTINCT n.ref FROM notes n "
          "WHERE n.id = t.id) x ON x.ref > 3 WHERE t.grp = $1", a_grp),
]


def test_lateral_top_n(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, LATERAL_SHAPES, LEVELS, _write,
                     {"things": 1000, "notes": 1000, "levels": 5}, memory_budget=60_000)


VALUES_SHAPES = [
    Shape("SELECT t.id, v.label FROM things t JOIN (VALUES (1, 'one'), (2, 'two'), (2, 'deux')) "
          "AS v(grp, label) ON v.grp = t.grp", no_params),
    Shape("SELECT v.band, count(t.id), sum(t.score) FROM (VALUES ('low', 0, 20), ('mid', 15, 40),"
          " ('none', NULL, 5)) AS v(band, lo, hi), things t WHERE t.score BETWEEN v.lo AND v.hi "
          "AND t.grp = $1 GROUP BY v.band", a_grp),
    Shape("SELECT t.id, w.weight * t.score FROM things t CROSS JOIN (VALUES (0.5), (2)) w(weight) "
          "WHERE t.grp = ANY($1)", some_grps),
]


def test_values_in_from(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, VALUES_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


SUBQUERY_PARAMS = [
    Shape("SELECT x.id, x.name FROM (SELECT id, name, score FROM things WHERE grp = $1) x "
          "WHERE x.score > 10", a_grp),
    Shape("SELECT count(*), max(x.score) FROM (SELECT id, score FROM things WHERE grp = $1) x",
          lambda r: (r.randint(0, 50),)),
    Shape("SELECT x.grp, count(*) FROM (SELECT grp, score FROM things WHERE score IS NOT NULL "
          "AND grp = $1::int4) AS x GROUP BY x.grp", a_grp),
    Shape("SELECT a.id, n.note FROM (SELECT id, grp FROM things WHERE grp = $1) a JOIN notes n "
          "ON n.ref = a.id ORDER BY a.id, n.id LIMIT 5", a_grp,
          ordered=True),
    Shape("SELECT * FROM notes n, (SELECT t.id AS tid, t.name FROM things t WHERE t.grp = $1 "
          "AND t.score < 30) s WHERE n.ref = s.tid", a_grp),
    Shape("SELECT x.name, x.score FROM (SELECT DISTINCT name, score FROM things WHERE grp = $1) "
          "x", a_grp),
]


def test_parameters_inside_from_subqueries(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SUBQUERY_PARAMS, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


SUBSCRIPTS = [
    Shape("SELECT id, tags[1], tags[2] AS second, nums[grp % 3], tags[0], tags[1][1] FROM items "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id FROM items WHERE tags[1] = $1", lambda r: (r.choice(["a", "b", "d e"]),)),
    Shape("SELECT nums[1] AS first, count(*) FROM items GROUP BY 1", no_params),
]


def test_array_subscripts(pg: Any, dbname: str) -> None:
    schema = ITEMS.schema(SCHEMA) + "INSERT INTO items VALUES (301, 7, '{{a,b},{c,NULL}}', " \
        "'{{1,2},{3,4}}'), (302, 7, '{}', '{}');\n"
    run_differential(pg, dbname, SUBSCRIPTS, schema, ITEMS.writes(_random_write),
                     {"things": 1000, "notes": 1000, "items": 302})


def _maybe_null(rng: Any, value: Any) -> Any:
    return None if rng.random() < 0.1 else value  # a NULL $n: column = NULL matches nothing


def _group_and_ref(rng: Any) -> tuple[Any, ...]:
    grp = rng.randint(0, 45)  # notes start with ref = id % 40, things with grp = id % 20
    return grp, _maybe_null(rng, rng.choice([grp, grp + 20, rng.randint(0, 45)]))


SEMI_JOIN_PARAMS = [
    Shape("SELECT t.* FROM things t WHERE t.id = $1 AND EXISTS (SELECT 1 FROM notes n "
          "WHERE n.id = t.id AND n.ref = $2)",
          lambda r: (r.randint(0, 320), _maybe_null(r, r.randint(0, 45)))),
    Shape("SELECT t.id, t.name FROM things t WHERE t.grp = $1 AND EXISTS (SELECT 1 FROM notes "
          "n WHERE n.id = t.id AND n.ref = $2) ORDER BY t.id LIMIT 3", _group_and_ref,
          ordered=True),
    Shape("SELECT t.grp, count(*), sum(t.score) FROM things t WHERE EXISTS (SELECT 1 FROM "
          "notes n WHERE n.ref = t.grp AND n.id = $1) GROUP BY t.grp",
          lambda r: (_maybe_null(r, r.randint(0, 450)),)),
    Shape("SELECT id, name, score FROM things WHERE score IN (SELECT ref FROM notes "
          "WHERE note = $1)", lambda r: (_maybe_null(r, f"note {r.randint(0, 450)}"),)),
    Shape("SELECT count(*), max(t.name) FROM things t WHERE t.id IN (SELECT n.id FROM notes n "
          "WHERE n.ref = $1::int4 AND n.note LIKE 'note 1%')",
          lambda r: (_maybe_null(r, r.randint(0, 45)),)),
    Shape("SELECT t.id FROM things t WHERE t.grp = $1 AND t.id IN (SELECT n.id FROM notes n "
          "WHERE n.ref = $2)", _group_and_ref),
    Shape("SELECT t.id, t.name FROM things t WHERE t.grp IN (SELECT DISTINCT n.ref FROM notes n "
          "WHERE n.id = $1)", lambda r: (_maybe_null(r, r.randint(0, 450)),)),
]


def test_parameters_inside_in_and_exists_subqueries(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SEMI_JOIN_PARAMS, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
