"""Differential test of eager aggregation (``engine.plan.rules.eager_aggs``, issue 24)
against the real upstream, with the loop of ``test_cache_shapes_differential`` (random write
transactions through weir and directly, reads through three clients compared with
PostgreSQL's own answers, a memory budget that keeps evicting).

The shapes are the demo's story page and its relatives: an aggregate of the votes per story
over a LEFT or inner join, which the planner turns into an aggregate of the votes by story
before the join (checked on every shape's plan). The writes are what changes their
answers: votes inserted (for missing stories and with NULL story, user or value too),
deleted and moved from one story to another, the demo's vote (a vote and its story's score
bump in one statement), stories inserted, renamed and deleted - so stories gain their first
vote, lose their last, and NULL-extended rows come and go.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from engine.plan.queries import CachedQuery, QueryPlanner
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T
from tests.integration.test_cache_shapes_differential import Shape, run_differential

SCHEMA = """
CREATE TABLE stories (id int PRIMARY KEY, author int, title text COLLATE "C", score int);
CREATE TABLE votes (id int8 PRIMARY KEY, story_id int, user_id int, value int2);
INSERT INTO stories SELECT g, g % 7, 'story ' || g, 0 FROM generate_series(1, 60) g;
INSERT INTO votes SELECT g, CASE WHEN g % 17 = 0 THEN NULL ELSE (g * 7) % 50 END,
       CASE WHEN g % 11 = 0 THEN NULL ELSE g % 13 END,
       CASE WHEN g % 5 = 0 THEN NULL ELSE (g % 3) - 1 END
FROM generate_series(1, 400) g;
UPDATE stories s SET score = (SELECT count(*) FROM votes v WHERE v.story_id = s.id);
"""


def _story(rng: random.Random) -> int:
    return rng.randint(0, 70)  # a few do not exist


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.25:
        next_id["votes"] += 1
        conn.execute("INSERT INTO votes VALUES (%s, %s, %s, %s)",
                     (next_id["votes"], rng.choice([None, _story(rng), _story(rng)]),
                      rng.choice([None, rng.randint(0, 15)]),
                      rng.choice([None, rng.randint(-1, 1)])))
    elif op < 0.4:  # the demo's vote
        next_id["votes"] += 1
        conn.execute("WITH v AS (INSERT INTO votes VALUES (%s, %s, %s, 1) RETURNING story_id) "
                     "UPDATE stories SET score = score + 1 WHERE id IN (SELECT story_id FROM v)",
                     (next_id["votes"], _story(rng), rng.randint(0, 15)))
    elif op < 0.55:
        conn.execute("DELETE FROM votes WHERE id = %s", (rng.randint(1, next_id["votes"]),))
    elif op < 0.7:  # a vote moves to another story (or to none)
        conn.execute("UPDATE votes SET story_id = %s WHERE id = %s",
                     (rng.choice([None, _story(rng)]), rng.randint(1, next_id["votes"])))
    elif op < 0.8:
        conn.execute("UPDATE stories SET score = score + %s, title = %s WHERE id = %s",
                     (rng.randint(-2, 2), f"story {rng.randint(0, 99)}", _story(rng)))
    elif op < 0.9:
        conn.execute("DELETE FROM stories WHERE id = %s", (_story(rng),))
    else:
        conn.execute("INSERT INTO stories VALUES (%s, %s, %s, 0) ON CONFLICT DO NOTHING",
                     (_story(rng), rng.randint(0, 6), f"story {rng.randint(0, 99)}"))


def a_story(rng: random.Random) -> tuple[Any, ...]:
    return (_story(rng),)


def some_stories(rng: random.Random) -> tuple[Any, ...]:
    return ([_story(rng) for _ in range(rng.randint(0, 5))],)


SHAPES = [
    Shape("SELECT s.id, s.title, s.score, count(v.user_id) AS votes FROM stories s "
          "LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = $1 "
          "GROUP BY s.id, s.title, s.score", a_story),
    Shape("SELECT s.id, count(*), count(v.value), sum(v.value), avg(v.value), min(v.user_id), "
          "max(v.user_id), count(DISTINCT v.user_id) FROM stories s "
          "LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = ANY($1) GROUP BY s.id",
          some_stories),
    Shape("SELECT s.id, s.title, count(*), sum(v.value) FROM stories s "
          "JOIN votes v ON v.story_id = s.id WHERE s.id = $1 GROUP BY s.id", a_story),
    Shape("SELECT s.id, count(v.id) FROM stories s LEFT JOIN votes v ON v.story_id = s.id "
          "WHERE s.author = $1 GROUP BY s.id", lambda r: (r.randint(0, 7),)),
    Shape("SELECT s.id, count(v.id) FROM stories s LEFT JOIN votes v ON v.story_id = s.id "
          "WHERE s.author = $1 GROUP BY s.id HAVING count(v.id) > 8",
          lambda r: (r.randint(0, 7),)),
]


#: ``SCHEMA`` as weir's catalog reads it
CATALOG = Catalog((
    Relation(16501, "public", "stories", (
        Column("id", T.INT4, not_null=True), Column("author", T.INT4),
        Column("title", T.TEXT, collation="C"), Column("score", T.INT4)), ("id",)),
    Relation(16502, "public", "votes", (
        Column("id", T.INT8, not_null=True), Column("story_id", T.INT4),
        Column("user_id", T.INT4), Column("value", T.INT2)), ("id",)),
))


def test_every_shape_folds_the_votes_before_the_join() -> None:
    planner = QueryPlanner(CATALOG)
    for shape in SHAPES:
        query = planner.classify(shape.sql).query
        assert isinstance(query, CachedQuery), (shape.sql, query)
        assert "Aggregate GROUP BY (story_id)" in query.explain, query.explain


def test_aggregates_folded_before_the_join(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SHAPES, SCHEMA, _write, {"votes": 400}, steps=100)
