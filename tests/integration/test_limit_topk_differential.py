"""Differential tests of top-k state for LIMIT parameters and of range-partial state
under joins (issue 23, ``engine.plan.range_state``) against the real upstream: the shared
loop of ``test_cache_shapes_differential`` (random writes that move rows into and out of a
key's top rows, across intervals and between keys, rename and delete the joined rows,
evictions; three clients). Top-k: statements whose page is set by a parameter and whose
ORDER BY starts with a NOT NULL column (or a nullable one whose NULLs the WHERE rejects) keep
the first OFFSET + LIMIT rows of the largest page asked per key, and a larger page fills on;
over a nullable column whose NULLs a page may show in PostgreSQL's default order (last
ascending, first descending) the NULL rows are the point past every value of the same
state; under an explicit ASC NULLS FIRST / DESC NULLS LAST every row of the key is kept.
Joins: a range (and a top-k) on a column of one joined table keeps filled intervals of that
table's column. EXPLAIN must say so.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.integration.test_cache_shapes_differential import Shape, _ids, run_differential
from tests.support import InProcessWeir, eventually

SCHEMA = """
CREATE TABLE posts (id int PRIMARY KEY, author int NOT NULL, votes int NOT NULL,
                    title text COLLATE "C" NOT NULL, day date NOT NULL,
                    made timestamptz NOT NULL, note text, rank int);
INSERT INTO posts SELECT g, g % 25, (g * 37) % 60, 't' || (g * 7 % 50),
       date '2024-01-01' + g % 40, timestamptz '2024-03-10 00:00+00' + g * interval '5 hours',
       CASE WHEN g % 4 = 0 THEN NULL ELSE 'note ' || g END,
       CASE WHEN g % 3 = 0 THEN NULL ELSE (g * 13) % 30 END
FROM generate_series(1, 400) g;
CREATE TABLE people (id int PRIMARY KEY, name text);
INSERT INTO people SELECT g, 'p' || g FROM generate_series(0, 27) g;
"""


def _limit(rng: random.Random) -> int | None:
    return rng.choice([None, 0, 1, 2, 3, 5, 10, 10, 10, 40, 2**63 - 1])


TOPK_SHAPES = [
    # the per-author top (ties on votes broken by id), pages of several sizes
    Shape("SELECT id, title, votes FROM posts WHERE author = $1 ORDER BY votes DESC, id "
          "LIMIT $2", lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
    # an = ANY list: one top per element, merged, sorted and paged by the host
    Shape("SELECT id, day FROM posts WHERE author = ANY($1) ORDER BY day, id "
          "LIMIT $2 OFFSET $3",
          lambda r: (_ids(r, 30, 4), _limit(r), r.choice([None, 0, 1, 4])), ordered=True),
    # no key: the table's newest rows under a filter the writes flip
    Shape("SELECT id, made FROM posts WHERE note IS NOT NULL ORDER BY made DESC, id LIMIT $1",
          lambda r: (_limit(r),), ordered=True),
    # page numbers: a constant LIMIT, the OFFSET a parameter
    Shape("SELECT id, votes FROM posts WHERE author = $1 ORDER BY made DESC, id LIMIT 5 "
          "OFFSET $2", lambda r: (r.randint(0, 30), r.choice([None, 0, 5, 10, 40])),
          ordered=True),
    # byte-order text, ascending
    Shape("SELECT title, id FROM posts WHERE author = $1 ORDER BY title, id LIMIT $2 "
          "OFFSET $3", lambda r: (r.randint(0, 30), _limit(r), r.choice([0, 2])),
          ordered=True),
    # over an inner join: the top of one side's column, the other side looked up
    Shape("SELECT p.id, a.name FROM posts p JOIN people a ON a.id = p.author "
          "WHERE p.author = ANY($1) ORDER BY p.votes DESC, p.id LIMIT $2",
          lambda r: (_ids(r, 30, 3), _limit(r)), ordered=True),
    # a nullable column whose NULLs the WHERE rejects: IS NOT NULL per key, descending
    Shape("SELECT id, rank FROM posts WHERE author = $1 AND rank IS NOT NULL "
          "ORDER BY rank DESC, id LIMIT $2", lambda r: (r.randint(0, 30), _limit(r)),
          ordered=True),
    # ... a strict comparison, no key, explicit NULLS FIRST (no NULL row can show)
    Shape("SELECT id, rank FROM posts WHERE rank > 6 ORDER BY rank NULLS FIRST, id "
          "LIMIT $1 OFFSET $2", lambda r: (_limit(r), r.choice([None, 0, 3, 30])),
          ordered=True),
]

NULLABLE_SHAPES = [
    # NULLs last ascending: a page past the key's valued rows crosses into its NULL rows
    Shape("SELECT id, rank FROM posts WHERE author = $1 ORDER BY rank, id LIMIT $2",
          lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
    # NULLs first descending: every page starts with them
    Shape("SELECT id, rank FROM posts WHERE author = ANY($1) ORDER BY rank DESC, id "
          "LIMIT $2 OFFSET $3", lambda r: (_ids(r, 30, 3), _limit(r), r.choice([0, 2, 9])),
          ordered=True),
    # no key, the default spelled out (DESC NULLS FIRST), a filter on another column
    Shape("SELECT id, rank, votes FROM posts WHERE votes > 20 ORDER BY rank DESC NULLS FIRST, "
          "id LIMIT $1 OFFSET $2", lambda r: (_limit(r), r.choice([None, 0, 3, 60, 150])),
          ordered=True),
    # ... and ascending, shared base pieces with the shape above (same column, no key)
    Shape("SELECT id, rank FROM posts ORDER BY rank, votes, id LIMIT $1",
          lambda r: (r.choice([None, 1, 5, 40, 250, 300, 400]),), ordered=True),
    # over an inner join: the nullable column on the driving side, the other looked up
    Shape("SELECT p.id, a.name, p.rank FROM posts p JOIN people a ON a.id = p.author "
          "WHERE p.author = $1 ORDER BY p.rank DESC, p.id LIMIT $2",
          lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
]

NULLS_EXPLICIT_SHAPES = [
    # explicit NULLS FIRST ascending, NULLS LAST descending
    Shape("SELECT id, rank FROM posts WHERE author = $1 ORDER BY rank NULLS FIRST, id "
          "LIMIT $2", lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
    Shape("SELECT id FROM posts WHERE author = $1 ORDER BY rank DESC NULLS LAST, id LIMIT $2",
          lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
]


def _bound(rng: random.Random, top: int) -> int | None:
    return None if rng.random() < 0.05 else rng.randint(-5, top)


JOIN_SHAPES = [
    # keyset pagination over a join
    Shape("SELECT p.id, a.name FROM posts p JOIN people a ON a.id = p.author WHERE p.id > $1 "
          "ORDER BY p.id LIMIT 20", lambda r: (_bound(r, 1100),), ordered=True),
    # per key, with a LIMIT parameter
    Shape("SELECT p.id, p.votes, a.name FROM posts p JOIN people a ON a.id = p.author "
          "WHERE p.author = $1 AND p.made >= $2 ORDER BY p.made, p.id LIMIT $3",
          lambda r: (r.randint(0, 30), None if r.random() < 0.05 else datetime(
              2024, 3, 10, tzinfo=UTC) + timedelta(hours=r.randint(-10, 2600)), _limit(r)),
          ordered=True),
    # a LEFT JOIN (unmatched posts padded), BETWEEN
    Shape("SELECT p.id, a.name FROM posts p LEFT JOIN people a ON a.id = p.author "
          "WHERE p.id BETWEEN $1 AND $2", lambda r: (_bound(r, 1100), _bound(r, 1100))),
    # the range on the right side of an inner join, descending page
    Shape("SELECT a.name, p.title FROM people a JOIN posts p ON p.author = a.id "
          "WHERE p.id < $1 ORDER BY p.id DESC LIMIT $2",
          lambda r: (_bound(r, 1100), _limit(r)), ordered=True),
    # a self-join: the range on one scan of the table, the other scan looked up
    Shape("SELECT a.id, b.id FROM posts a JOIN posts b ON b.author = a.author "
          "WHERE a.id > $1 AND b.note IS NULL ORDER BY a.id, b.id LIMIT $2",
          lambda r: (_bound(r, 1100), _limit(r)), ordered=True),
]


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.35:
        next_id["posts"] += 1
        conn.execute("INSERT INTO posts VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                     (next_id["posts"], rng.randint(0, 30), rng.randint(0, 70),
                      f"t{rng.randint(0, 60)}", date(2024, 1, 1) + timedelta(rng.randint(0, 45)),
                      datetime(2024, 3, 10, tzinfo=UTC) + timedelta(hours=rng.randint(0, 2500)),
                      rng.choice([None, "new"]), rng.choice([None, rng.randint(0, 35)])))
    elif op < 0.75:
        conn.execute("UPDATE posts SET votes = votes + %s, author = CASE WHEN %s THEN %s "
                     "ELSE author END, made = made + %s * interval '1 hour', "
                     "note = CASE WHEN %s THEN NULL ELSE coalesce(note, 'back') END, "
                     "rank = CASE WHEN %s THEN NULL WHEN %s THEN coalesce(rank, %s) + %s "
                     "ELSE rank END WHERE id = %s",
                     (rng.randint(-8, 8), rng.random() < 0.3, rng.randint(0, 30),
                      rng.randint(-300, 300), rng.random() < 0.3, rng.random() < 0.25,
                      rng.random() < 0.5, rng.randint(0, 30), rng.randint(-4, 4),
                      rng.randint(1, next_id["posts"])))
    elif op < 0.85:
        conn.execute("DELETE FROM posts WHERE id = %s", (rng.randint(1, next_id["posts"]),))
    elif op < 0.95:
        conn.execute("UPDATE people SET name = %s WHERE id = %s",
                     (f"q{rng.randint(0, 99)}", rng.randint(0, 30)))
    else:  # people come and go (posts of a missing author join nothing)
        person = rng.randint(0, 30)
        conn.execute("DELETE FROM people WHERE id = %s", (person,))
        if rng.random() < 0.7:
            conn.execute("INSERT INTO people VALUES (%s, %s)", (person, f"r{person}"))


def test_limit_parameter_top_rows(pg: Any, dbname: str) -> None:
    """LIMIT / OFFSET parameters (NULL: no limit, 0, small and large pages) over a NOT NULL
    leading ORDER BY column, per key, per = ANY element and without a key: exact under
    writes, with top-k state (EXPLAIN's ``state: top rows on``)."""
    run_differential(pg, dbname, TOPK_SHAPES, SCHEMA, _write, {"posts": 1000},
                     explain="state: top rows on")


def test_limit_parameter_nullable_order(pg: Any, dbname: str) -> None:
    """LIMIT / OFFSET parameters over a nullable leading ORDER BY column whose NULLs a page
    may show, in PostgreSQL's default order (last ascending, first descending; writes set
    and clear NULLs, pages cross into the NULL rows): exact under writes, with top-k state
    whose NULL rows are the point past every value."""
    run_differential(pg, dbname, NULLABLE_SHAPES, SCHEMA, _write, {"posts": 1000},
                     explain="(its NULLs as the top value)")


def test_limit_parameter_nulls_explicit_order(pg: Any, dbname: str) -> None:
    """... under an explicit ASC NULLS FIRST / DESC NULLS LAST: every row of the key kept,
    exact under writes."""
    run_differential(pg, dbname, NULLS_EXPLICIT_SHAPES, SCHEMA, _write, {"posts": 1000},
                     explain="state: every row of the key, the host cuts the page: "
                     "posts.rank may be NULL and the ORDER BY puts NULLs")


def test_ranges_under_joins(pg: Any, dbname: str) -> None:
    """Range parameters on a column of one joined table (either side of an inner join, the
    left of a LEFT JOIN; keyset pages, per key, BETWEEN, descending): exact under writes to
    both tables, with range-partial state on that column (EXPLAIN's ``state:``)."""
    run_differential(pg, dbname, JOIN_SHAPES, SCHEMA, _write, {"posts": 1000},
                     explain="state: range-partial on")


def _write_joined_side(conn: psycopg.Connection[Any], rng: random.Random,
                       next_id: dict[str, int]) -> None:
    """Mostly writes to the join's other side (people renamed, deleted, back), some to
    posts: each drops only the reader pieces holding that person's posts."""
    if rng.random() < 0.3:
        _write(conn, rng, next_id)
        return
    person = rng.randint(0, 30)
    if rng.random() < 0.7:
        conn.execute("UPDATE people SET name = %s WHERE id = %s",
                     (f"q{rng.randint(0, 99)}", person))
    else:
        conn.execute("DELETE FROM people WHERE id = %s", (person,))
        if rng.random() < 0.6:
            conn.execute("INSERT INTO people VALUES (%s, %s)", (person, f"r{person}"))


def test_ranges_under_joins_other_side_writes(pg: Any, dbname: str) -> None:
    """The joined range and top-k shapes under writes mostly to the join's other side
    (which no longer empty the reader: only the pieces holding the written rows' partners
    are dropped): exact."""
    run_differential(pg, dbname, JOIN_SHAPES + TOPK_SHAPES[5:6] + NULLABLE_SHAPES[4:],
                     SCHEMA, _write_joined_side, {"posts": 1000})


def _name(rng: random.Random) -> str:
    return rng.choice([f"p{rng.randint(0, 27)}", f"k{rng.randint(0, 3)}", "nobody"])


KEY_ELSEWHERE_SHAPES = [
    # keyset pages of the posts of the people found by name (several people per name)
    Shape("SELECT p.id, p.title FROM posts p JOIN people a ON a.id = p.author "
          "WHERE a.name = $1 AND p.id > $2 ORDER BY p.id LIMIT 20",
          lambda r: (_name(r), _bound(r, 1100)), ordered=True),
    # top rows of a LIMIT parameter, the key's table on the left
    Shape("SELECT p.id, p.votes FROM people a JOIN posts p ON p.author = a.id "
          "WHERE a.name = $1 ORDER BY p.votes DESC, p.id LIMIT $2",
          lambda r: (_name(r), _limit(r)), ordered=True),
    # an = ANY list of names, a descending page over a timestamptz range
    Shape("SELECT p.id, a.id FROM posts p JOIN people a ON a.id = p.author "
          "WHERE a.name = ANY($1) AND p.made >= $2 ORDER BY p.made DESC, p.id LIMIT $3",
          lambda r: ([_name(r) for _ in range(r.randint(0, 3))],
                     None if r.random() < 0.05 else datetime(2024, 3, 10, tzinfo=UTC)
                     + timedelta(hours=r.randint(-10, 2600)), _limit(r)), ordered=True),
    # a nullable column's top rows (NULLs last ascending), a filter on the posts
    Shape("SELECT p.id, p.rank FROM posts p JOIN people a ON a.id = p.author "
          "WHERE a.name = $1 AND p.note IS NOT NULL ORDER BY p.rank, p.id LIMIT $2",
          lambda r: (_name(r), _limit(r)), ordered=True),
    # a range on the right side of a LEFT JOIN (its padded rows never pass the cut), keyed
    # on the left table
    Shape("SELECT a.name, p.id FROM people a LEFT JOIN posts p ON p.author = a.id "
          "WHERE a.name = $1 AND p.id < $2 ORDER BY p.id DESC LIMIT $3",
          lambda r: (_name(r), _bound(r, 1100), _limit(r)), ordered=True),
    # BETWEEN on dates, no ORDER BY
    Shape("SELECT p.id, a.name FROM posts p JOIN people a ON a.id = p.author "
          "WHERE a.name = $1 AND p.day BETWEEN $2 AND $3",
          lambda r: (_name(r), date(2024, 1, 1) + timedelta(r.randint(-3, 50)),
                     date(2024, 1, 1) + timedelta(r.randint(-3, 50)))),
]


LEFT_RIGHT_SHAPES = [
    # a range on the right side of a LEFT JOIN without a key: keyset pages
    Shape("SELECT a.id, p.id, p.votes FROM people a LEFT JOIN posts p ON p.author = a.id "
          "WHERE p.id > $1 ORDER BY p.id LIMIT 20", lambda r: (_bound(r, 1100),),
          ordered=True),
    # ... per key of its own table, BETWEEN over timestamps
    Shape("SELECT a.name, p.id FROM people a LEFT JOIN posts p ON p.author = a.id "
          "WHERE p.author = $1 AND p.made BETWEEN $2 AND $3",
          lambda r: (r.randint(0, 30), datetime(2024, 3, 10, tzinfo=UTC) + timedelta(
              hours=r.randint(-10, 2600)), datetime(2024, 3, 10, tzinfo=UTC) + timedelta(
              hours=r.randint(-10, 2600)))),
]


def _write_both_sides(conn: psycopg.Connection[Any], rng: random.Random,
                      next_id: dict[str, int]) -> None:
    """Writes to both sides, people renamed among a few shared names (a name's people come
    and go, so its posts do)."""
    if rng.random() < 0.55:
        _write(conn, rng, next_id)
        return
    person = rng.randint(0, 30)
    if rng.random() < 0.75:
        conn.execute("UPDATE people SET name = %s WHERE id = %s", (_name(rng), person))
    else:
        conn.execute("DELETE FROM people WHERE id = %s", (person,))
        if rng.random() < 0.6:
            conn.execute("INSERT INTO people VALUES (%s, %s)", (person, _name(rng)))


def test_ranges_keyed_on_the_other_table(pg: Any, dbname: str) -> None:
    """Range and top-k state whose equality key is on the other table of the join (posts
    of the people of a name; issue 23, join23): exact under writes to both tables (people
    renamed into and out of a name, deleted and back; posts moved between people, across
    intervals), with range-partial state kept per join value (EXPLAIN's ``state:``)."""
    run_differential(pg, dbname, KEY_ELSEWHERE_SHAPES, SCHEMA, _write_both_sides,
                     {"posts": 1000}, explain="(another table of the join: pieces per join")


def test_ranges_on_the_right_of_a_left_join(pg: Any, dbname: str) -> None:
    """A range on the right side of a LEFT JOIN (join23): the cut rejects the
    NULL-extended rows, so the join is inner for the statement and the range keeps
    range-partial state; exact under writes to both tables (people without posts, posts
    of missing people)."""
    run_differential(pg, dbname, LEFT_RIGHT_SHAPES, SCHEMA, _write_both_sides,
                     {"posts": 1000}, explain="state: range-partial on posts.")


SHIFTED_SHAPES = [
    # ORDER BY a column plus a constant, descending: the column's top rows
    Shape("SELECT id, title FROM posts WHERE author = $1 ORDER BY votes + 1 DESC, id "
          "LIMIT $2", lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
    # ... minus a constant, ascending, OFFSET a parameter too, no key
    Shape("SELECT id, votes FROM posts WHERE note IS NOT NULL ORDER BY id - 3 LIMIT $1 "
          "OFFSET $2", lambda r: (_limit(r), r.choice([None, 0, 3, 30])), ordered=True),
    # a nullable column plus a constant (NULL + 2 is NULL: first descending), over a join
    Shape("SELECT p.id, a.name FROM posts p JOIN people a ON a.id = p.author "
          "WHERE p.author = $1 ORDER BY 2 + p.rank DESC, p.id LIMIT $2",
          lambda r: (r.randint(0, 30), _limit(r)), ordered=True),
]


def test_limit_parameter_over_a_shifted_column(pg: Any, dbname: str) -> None:
    """LIMIT parameters over ``x + c`` descending / ``x - c`` ascending (join23): the top
    rows of ``x``, exact under writes."""
    run_differential(pg, dbname, SHIFTED_SHAPES, SCHEMA, _write, {"posts": 1000},
                     explain="(the ORDER BY shifts it by a constant)")


def test_shifted_order_overflow_is_postgres_error(pg: Any, dbname: str) -> None:
    """``ORDER BY votes + 1 DESC LIMIT $2``: PostgreSQL evaluates the expression on every
    row of the key and fails on an overflow; the rows that can overflow are the first of
    the order, so the cached top rows hold them and weir fails too (22003), also when the
    row arrives after the page was cached. A page that is cached answers as before."""
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    sql = "SELECT id, votes FROM posts WHERE author = %s ORDER BY votes + 1 DESC, id LIMIT %s"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.execute("CREATE CACHE shifted FROM SELECT id, votes FROM posts WHERE "
                         "author = $1 ORDER BY votes + 1 DESC, id LIMIT $2")
            want = direct.execute(sql, (3, 2)).fetchall()

            def cached() -> bool:
                got = conn.execute(sql, (3, 2)).fetchall()
                last = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
                return got == want and last is not None and last[0] == "cache"

            eventually(cached)
            direct.execute("UPDATE posts SET votes = 2147483647 WHERE id = 28")  # author 3
            server.call(server.server.service.host.barrier(10))
            for page in (1, 2, 5):
                for who in (conn, direct):
                    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
                        who.execute(sql, (3, page))
            assert conn.execute(sql, (4, 2)).fetchall() == direct.execute(sql, (4, 2)).fetchall()
    finally:
        server.stop()
