"""The news site: schema, generated data, and the queries the site runs.

Owns: the tables (users, stories, votes, comments), generating their rows inside PostgreSQL
(generate_series, deterministic), the four read queries the site caches (story page with its
vote count, front page top-k of a section, user profile with story count, comment thread) and
its two writes (a vote, which also bumps the story's score; a comment). Sizes are a parameter so
the test can run a small site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

SECTIONS = 10


@dataclass(frozen=True, slots=True)
class Size:
    """How big the site is."""

    users: int = 5_000
    stories: int = 20_000
    votes: int = 100_000
    comments: int = 40_000


SMALL = Size(users=300, stories=1_000, votes=4_000, comments=2_000)

SCHEMA = """
DROP TABLE IF EXISTS comments, votes, stories, users;
CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL, karma int NOT NULL);
CREATE TABLE stories (id int PRIMARY KEY, author_id int NOT NULL, section int NOT NULL,
                      title text NOT NULL, score int NOT NULL);
CREATE TABLE votes (story_id int NOT NULL, user_id int NOT NULL,
                    PRIMARY KEY (story_id, user_id));
CREATE TABLE comments (id bigserial PRIMARY KEY, story_id int NOT NULL, author_id int NOT NULL,
                       body text NOT NULL);
CREATE INDEX ON stories (author_id);
CREATE INDEX ON stories (section, score DESC, id);
CREATE INDEX ON comments (story_id, id);
"""


@dataclass(frozen=True, slots=True)
class Query:
    """One of the site's reads: its cache name, SQL (with ``%s``) and what keys it takes."""

    name: str
    sql: str
    key: str  # "story", "section" or "user"

    def cache_sql(self) -> str:
        """The ``CREATE CACHE`` statement for this read."""
        return f"CREATE CACHE {self.name} FROM {self.sql.replace('%s', '$1')}"


READS = (
    Query("story_page",
          "SELECT s.id, s.title, s.score, count(v.user_id) AS votes FROM stories s "
          "LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = %s GROUP BY s.id, s.title, s.score",
          "story"),
    Query("front_page",
          "SELECT id, title, score FROM stories WHERE section = %s ORDER BY score DESC, id "
          "LIMIT 10",
          "section"),
    Query("user_profile",
          "SELECT u.id, u.name, u.karma, count(s.id) AS stories FROM users u "
          "LEFT JOIN stories s ON s.author_id = u.id WHERE u.id = %s "
          "GROUP BY u.id, u.name, u.karma",
          "user"),
    Query("comment_thread",
          "SELECT c.id, c.body, u.name FROM comments c JOIN users u ON u.id = c.author_id "
          "WHERE c.story_id = %s ORDER BY c.id LIMIT 50",
          "story"),
)

VOTE = ("WITH v AS (INSERT INTO votes VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING story_id) "
        "UPDATE stories SET score = score + 1 WHERE id IN (SELECT story_id FROM v)")
COMMENT = "INSERT INTO comments (story_id, author_id, body) VALUES (%s, %s, %s)"


def load(conn: psycopg.Connection[Any], size: Size) -> None:
    """Create the tables and fill them (deterministic: the same size gives the same rows),
    then vacuum, analyze and checkpoint them (``conn`` in autocommit, as a superuser)."""
    conn.execute(SCHEMA)
    conn.execute("SELECT setseed(0.42)")
    conn.execute(
        "INSERT INTO users SELECT g, 'user' || g, (g * 7919) %% 1000 "
        "FROM generate_series(1, %s) g", (size.users,))
    conn.execute(
        "INSERT INTO stories SELECT g, 1 + (g * 31) %% %s, g %% %s, 'Story number ' || g, 0 "
        "FROM generate_series(1, %s) g", (size.users, SECTIONS, size.stories))
    # votes skewed towards low story ids (the same Zipf-like skew as the reads)
    conn.execute(
        "INSERT INTO votes SELECT DISTINCT 1 + floor(%s * power(random(), 3))::int, "
        "1 + floor(%s * random())::int FROM generate_series(1, %s) "
        "ON CONFLICT DO NOTHING", (size.stories, size.users, size.votes))
    conn.execute("UPDATE stories s SET score = v.n FROM (SELECT story_id, count(*) AS n "
                 "FROM votes GROUP BY story_id) v WHERE v.story_id = s.id")
    conn.execute(
        "INSERT INTO comments (story_id, author_id, body) SELECT "
        "1 + floor(%s * power(random(), 3))::int, 1 + (g * 17) %% %s, 'comment ' || g "
        "FROM generate_series(1, %s) g", (size.stories, size.users, size.comments))
    # neither run pays for the load's aftermath (the score update's dead rows, hint bits,
    # autovacuum, the checkpoint of the loaded pages): the direct run came first and did
    conn.execute("VACUUM (ANALYZE)")
    conn.execute("CHECKPOINT")


def create_caches(conn: psycopg.Connection[Any]) -> list[str]:
    """Make each of the site's reads a cache (through weir); return their names."""
    for query in READS:
        conn.execute(query.cache_sql())
    return [q.name for q in READS]
