"""Differential tests of CROSS joins and non-equality join conditions, IN / EXISTS under OR, and
json (not jsonb) operators (issue 23) against the real upstream, with the loop of
``test_cache_shapes_differential`` (random writes through weir and directly, reads through three
clients compared with PostgreSQL's own answers, a memory budget that keeps evicting).

A small ``levels`` table (a band per row) is what applications cross-join or band-join with;
its writes move the bands and sometimes empty the filtered side of a LEFT JOIN, so the
NULL-padded rows come and go.
"""

from __future__ import annotations

import json
import random
from typing import Any

import psycopg

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _json_doc,
    _random_write,
    _sql_text,
    a_grp,
    no_params,
    run_differential,
    some_grps,
)
from tests.support import SideTable

LEVELS = SCHEMA + """
CREATE TABLE levels (id int PRIMARY KEY, lo int, hi int, label text);
INSERT INTO levels SELECT g, g * 10, g * 10 + 15, 'level ' || g FROM generate_series(0, 5) g;
"""


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.6:
        _random_write(conn, rng, next_id)
    elif op < 0.72:
        next_id["levels"] += 1
        lo = rng.choice([None, rng.randint(0, 60)])
        conn.execute("INSERT INTO levels VALUES (%s, %s, %s, %s)",
                     (next_id["levels"], lo, None if lo is None else lo + rng.randint(0, 20),
                      f"level {rng.randint(0, 99)}"))
    elif op < 0.88:
        conn.execute("UPDATE levels SET lo = %s, hi = %s WHERE id = %s",
                     (rng.randint(0, 60), rng.randint(0, 70), rng.randint(0, next_id["levels"])))
    else:
        conn.execute("DELETE FROM levels WHERE id = %s", (rng.randint(0, next_id["levels"]),))


JOIN_SHAPES = [
    Shape("SELECT t.id, l.label FROM things t CROSS JOIN levels l WHERE t.grp = $1",
          a_grp),
    Shape("SELECT t.id, l.id FROM things t JOIN levels l ON t.score BETWEEN l.lo AND l.hi "
          "WHERE t.grp = $1", a_grp),
    Shape("SELECT t.id, n.id FROM things t JOIN notes n ON n.ref = t.grp AND n.id % 50 > t.score "
          "WHERE t.grp = $1", a_grp),
    Shape("SELECT t.id, l.id FROM things t LEFT JOIN levels l ON l.lo > 45 WHERE t.grp = $1",
          a_grp),
    Shape("SELECT t.id, l.label FROM things t LEFT JOIN levels l ON t.score > 20 AND l.hi < 30 "
          "WHERE t.grp = ANY($1)", some_grps),
    Shape("SELECT l.label, count(t.id), max(t.score) FROM levels l, things t "
          "WHERE t.score >= l.lo AND t.score < l.hi GROUP BY l.label", no_params),
    Shape("SELECT l.id, t.id FROM levels l RIGHT JOIN things t ON t.name < 'n5' "
          "WHERE t.grp = $1", a_grp),
]


def test_cross_and_non_equality_joins(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, JOIN_SHAPES, LEVELS, _write,
                     {"things": 1000, "notes": 1000, "levels": 5})


OR_SHAPES = [
    Shape("SELECT id, score FROM things t WHERE grp = $1 AND (score > 40 OR EXISTS "
          "(SELECT 1 FROM notes n WHERE n.ref = t.id AND n.note LIKE 'note 1%'))",
          a_grp),
    Shape("SELECT id FROM things t WHERE grp = $1 AND (score IS NULL OR NOT EXISTS "
          "(SELECT 1 FROM notes n WHERE n.ref = t.score))", a_grp),
    Shape("SELECT id, score FROM things WHERE grp = ANY($1) AND (name = 'n3' OR score IN "
          "(SELECT ref FROM notes WHERE id > 1000))", some_grps),
    Shape("SELECT grp, count(*) FROM things t WHERE (score < 10 AND grp IN (SELECT ref FROM "
          "notes WHERE note LIKE 'note 2%')) OR EXISTS (SELECT 1 FROM notes n WHERE "
          "n.ref = t.grp AND n.id > 1000) GROUP BY grp", no_params),
]


def test_subqueries_under_or(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, OR_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


THETA_SHAPES = [
    Shape("SELECT t.id, n.id FROM things t LEFT JOIN notes n ON n.ref = t.grp "
          "AND n.id % 50 > t.score WHERE t.grp = $1", a_grp),
    Shape("SELECT l.id, t.id FROM levels l RIGHT JOIN things t ON t.score BETWEEN l.lo AND "
          "l.hi WHERE t.grp = $1", a_grp),
    Shape("SELECT t.grp, count(n.id) FROM things t LEFT JOIN notes n ON n.ref = t.grp "
          "AND n.id > t.id + 900 WHERE t.grp = ANY($1) GROUP BY t.grp",
          some_grps),
    Shape("SELECT id, name FROM things WHERE grp IN (VALUES (1), (2), (3)) AND score NOT IN "
          "(VALUES (5), (10))", no_params),
    Shape("SELECT t.id, EXISTS (SELECT 1 FROM notes n WHERE n.ref = t.id AND n.id > 1000) "
          "AS noted FROM things t WHERE t.grp = $1", a_grp),
]


def test_left_joins_comparing_both_sides_in_values_and_select_exists(pg: Any, dbname: str) -> None:
    # a theta LEFT JOIN holds its matched pairs twice (the union's branch and the distinct
    # matched keys, whose state is whole): three times the others' budget, still evicting
    run_differential(pg, dbname, THETA_SHAPES, LEVELS, _write,
                     {"things": 1000, "notes": 1000, "levels": 5}, memory_budget=80_000)


def _raw_doc(rng: random.Random) -> str | None:
    """A json document as written: random spacing, duplicate keys, escapes, raw scalars."""
    doc = _json_doc(rng)
    if doc is None:
        return None
    value = json.loads(doc)
    spacing = rng.choice([(",", ":"), (", ", ": "), (" ,\n\t", " : ")])
    text = json.dumps(value, separators=spacing, ensure_ascii=rng.random() < 0.5)
    if text.startswith("{") and rng.random() < 0.3:
        text = '{"kind": "shadowed" , ' + text[1:] if len(text) > 2 else text
    return rng.choice(["", " ", "\n "]) + text + rng.choice(["", "  "])


FEEDS = SideTable(
    "feeds", "doc json", 29, lambda r: _sql_text(_raw_doc(r)), lambda r: (_raw_doc(r),),
    "UPDATE feeds SET doc = %s WHERE id = %s", lambda r: (_raw_doc(r),), elsewhere=0.4)


RAW_JSON_SHAPES = [
    Shape("SELECT id, doc -> 'user' AS u, doc ->> 'kind', doc -> 'tags' -> -1, "
          "doc #>> '{user,name}', doc #> '{extra,0}', doc ->> 'n', doc #> '{}' FROM feeds "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id, grp FROM feeds WHERE doc ->> 'kind' = $1",
          lambda r: (r.choice(["post", "link", "poll", "1", "x", "shadowed"]),)),
    Shape("SELECT grp, doc ->> 'kind' AS kind, count(*) FROM feeds WHERE grp = ANY($1) "
          "GROUP BY 1, 2", some_grps),
    Shape("SELECT id, doc -> 0, doc ->> 1, doc #>> '{}' FROM feeds WHERE grp = $1",
          a_grp),
]


def test_json_operators(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, RAW_JSON_SHAPES, FEEDS.schema(SCHEMA),
                     FEEDS.writes(_random_write),
                     {"things": 1000, "notes": 1000, "feeds": 300})


def _tags(rng: random.Random) -> list[Any] | None:
    if rng.random() < 0.1:
        return None
    return [rng.choice(["a", "b", "c", "d e", None]) for _ in range(rng.randint(0, 4))]


def _array_literals(rng: random.Random) -> str:
    tags = _tags(rng)
    text = "NULL" if tags is None else "ARRAY[" + ", ".join(
        "NULL" if t is None else f"'{t}'" for t in tags) + "]::text[]"
    nums = ", ".join(str(rng.randint(0, 9)) for _ in range(rng.randint(0, 3)))
    return f"{text}, '{{{nums}}}'"


ITEMS = SideTable(
    "items", "tags text[], nums int[]", 31, _array_literals,
    lambda r: (_tags(r), [r.randint(0, 9) for _ in range(r.randint(0, 3))]),
    "UPDATE items SET tags = %s, nums = %s WHERE id = %s",
    lambda r: (_tags(r), r.choice([None, [r.randint(0, 9), None]])), elsewhere=0.4)


ARRAY_SHAPES = [
    Shape("SELECT id, tags, nums, cardinality(tags), array_length(nums, 1) FROM items "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id FROM items WHERE grp = $1 AND tags @> '{a}' AND NOT tags && '{\"d e\"}'",
          a_grp),
    Shape("SELECT id, 'b' = ANY(tags), 3 = ANY(nums) FROM items WHERE grp = ANY($1)",
          some_grps),
    Shape("SELECT grp, count(*) FROM items WHERE nums <@ '{1,2,3,4,5}' AND 'c' = ANY(tags) "
          "GROUP BY grp", no_params),
]


def test_array_operators(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, ARRAY_SHAPES, ITEMS.schema(SCHEMA),
                     ITEMS.writes(_random_write),
                     {"things": 1000, "notes": 1000, "items": 300})


ZONE_SHAPES = [
    Shape("SELECT id, date_trunc('day', at, 'Europe/Paris'), date_trunc('hour', at, "
          "'America/St_Johns') FROM things WHERE grp = $1", a_grp),
    Shape("SELECT grp, date_trunc('week', at, 'Australia/Sydney') AS wk, count(*) FROM things "
          "WHERE grp = ANY($1) GROUP BY 1, 2", some_grps),
]


def test_date_trunc_in_a_zone(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, ZONE_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})
