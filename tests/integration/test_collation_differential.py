"""Differential test of text order under a libc collation (issue 23, ``engine.values.collation``)
against the real upstream: ORDER BY (top-k and whole results, ASC/DESC, NULLS FIRST),
comparisons with constants, BETWEEN, range parameters (keyset pages, aggregates over a
range), min/max, string_agg(... ORDER BY) and window ORDER BY under
``en_US.utf8`` (a column's COLLATE) and under a database whose default collation is
``en_US.UTF-8``, with random strings mixing case,
accents (precomposed and combining), punctuation, spaces, digits and pairs equal at the first
collation levels; the shared loop of ``test_cache_shapes_differential`` (random writes through
weir and directly, three clients, evictions); EXPLAIN CREATE CACHE must say every shape is
cacheable and 80% of the reads must be served by the cache. A further check compares
``CollKey`` with PostgreSQL's own ORDER BY and ``<``.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from engine.values.collation import key_function
from tests.integration.test_cache_shapes_differential import Shape, run_differential
from tests.support import unique_name

#: pieces a random string is built from: PostgreSQL's en_US order ignores case, accents,
#: punctuation and spaces at the first level, so these make many near-ties
_PIECES = ["a", "A", "b", "B", "e", "E", "é", "É", "è", "e\u0301", "z", "Z", " ", "-", "_",
           ".", ",", "'", "0", "1", "9", "ß", "ss", "æ", "ae", "Æ", "ø", "œ", "\u00a0", "\u0131",
           "İ", "ç", "Ç", "co-op", "coop", "Co op", "ñ", "n\u0303", "ǅ", "ﬁ", "fi"]


def _text(rng: random.Random) -> str | None:
    if rng.random() < 0.08:
        return None
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 5)))


def _schema(collate: str) -> str:
    rows = ", ".join(
        f"({i}, {i % 7}, {_literal(_text(random.Random(i)))})" for i in range(1, 301))
    return (f"CREATE TABLE words (id int PRIMARY KEY, grp int, name text{collate}, "
            f"label varchar(40){collate});\n"
            f"INSERT INTO words (id, grp, name) VALUES {rows};\n"
            "UPDATE words SET label = reverse(name);\n")


def _literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.4:
        next_id["words"] += 1
        name = _text(rng)
        conn.execute("INSERT INTO words VALUES (%s, %s, %s, %s)",
                     (next_id["words"], rng.randint(0, 6), name, _text(rng)))
    elif op < 0.75:
        conn.execute("UPDATE words SET name = %s, grp = %s WHERE id = %s",
                     (_text(rng), rng.randint(0, 6), rng.randint(1, next_id["words"])))
    else:
        conn.execute("DELETE FROM words WHERE id = %s", (rng.randint(1, next_id["words"]),))


def _grp(rng: random.Random) -> tuple[Any, ...]:
    return (rng.randint(0, 7),)


SHAPES = [
    Shape("SELECT id, name FROM words WHERE grp = $1 ORDER BY name, id", _grp, ordered=True),
    Shape("SELECT name, id FROM words WHERE grp = $1 ORDER BY name DESC NULLS LAST, id DESC "
          "LIMIT 7", _grp, ordered=True),
    Shape("SELECT id, label FROM words WHERE grp = $1 ORDER BY label NULLS FIRST, id LIMIT 9",
          _grp, ordered=True),
    Shape("SELECT id FROM words WHERE grp = $1 AND name > 'co op' AND name <= 'E'", _grp),
    # one lookup per list value, merged in the collation's order, then a LIMIT parameter
    Shape("SELECT id, name FROM words WHERE grp = ANY($1) ORDER BY name DESC, id LIMIT $2",
          lambda r: ([r.randint(0, 7) for _ in range(r.randint(0, 3))], r.randint(0, 12)),
          ordered=True),
    Shape("SELECT id, name FROM words WHERE grp = $1 AND name BETWEEN 'a' AND 'Æ z' "
          "ORDER BY name, id", _grp, ordered=True),
    Shape("SELECT id FROM words WHERE grp = $1 AND name NOT BETWEEN 'B' AND 'ss' "
          "AND label < name", _grp),
    Shape("SELECT string_agg(name, '|' ORDER BY name DESC, id), count(*) FROM words "
          "WHERE grp = $1", _grp),
    Shape("SELECT grp, min(name), max(label), max(name) FILTER (WHERE id > 100) FROM words "
          "WHERE grp = $1 GROUP BY grp", _grp),
    Shape("SELECT min(name) AS lo, max(name) AS hi, count(*) FROM words WHERE grp = $1 "
          "AND id > $2", lambda r: (r.randint(0, 7), r.choice([None, r.randint(-5, 330)]))),
    # range parameters on the collated column: keyset pages, BETWEEN, aggregates over a range
    Shape("SELECT id, name FROM words WHERE grp = $1 AND name > $2 ORDER BY name, id LIMIT 5",
          lambda r: (r.randint(0, 7), _text(r)), ordered=True),
    Shape("SELECT id FROM words WHERE name BETWEEN $1 AND $2", lambda r: (_text(r), _text(r))),
    Shape("SELECT count(*), max(name) FROM words WHERE grp = $1 AND label <= $2",
          lambda r: (r.randint(0, 7), _text(r))),
    Shape("SELECT id, row_number() OVER (ORDER BY name NULLS FIRST, id), "
          "lag(name) OVER (ORDER BY label, id) FROM words WHERE grp = $1", _grp),
    # window min/max pick in the collation's order (running, sliding, whole partition)
    Shape("SELECT id, min(name) OVER (ORDER BY id) AS lo, max(label) OVER (PARTITION BY grp) "
          "AS hi, max(name) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS near "
          "FROM words WHERE grp = $1", _grp),
]


def test_text_order_under_a_column_collation(pg: Any, dbname: str) -> None:
    """Columns declared ``COLLATE "en_US.utf8"`` in a C database."""
    run_differential(pg, dbname, SHAPES, _schema(' COLLATE "en_US.utf8"'), _write,
                     {"words": 300}, explain="yes")


def test_text_order_under_the_database_collation(pg: Any) -> None:
    """A database created with ``LC_COLLATE 'en_US.UTF-8'``: its columns and literals."""
    name = unique_name("coll")
    pg.psql(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "
            "LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'")
    run_differential(pg, name, SHAPES, _schema(""), _write, {"words": 300},
                     explain="yes")


def test_sort_keys_order_as_postgresql_does(pg: Any, dbname: str) -> None:
    """2,000 distinct random strings: ``CollKey`` order is PostgreSQL's ORDER BY, and ``<``
    agrees with PostgreSQL's on random pairs (including byte-distinct strings strcoll calls
    equal, which PostgreSQL orders by their bytes)."""
    rng = random.Random(23)
    strings = sorted({s for s in (_text(rng) for _ in range(4000)) if s is not None})[:2000]
    key = key_function("en_US.utf8")
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute('CREATE TABLE s (v text COLLATE "en_US.utf8")')
        with conn.cursor().copy("COPY s FROM STDIN") as copy:
            for s in strings:
                copy.write_row((s,))
        ordered = [r[0] for r in conn.execute("SELECT v FROM s ORDER BY v")]
        assert ordered == sorted(strings, key=key)
        assert ordered != sorted(strings)  # (the collation is not byte order)
        pairs = [(rng.choice(strings), rng.choice(strings)) for _ in range(200)]
        for a, b in pairs:
            row = conn.execute('SELECT %s::text COLLATE "en_US.utf8" < %s, %s::text COLLATE '
                               '"en_US.utf8" <= %s', (a, b, a, b)).fetchone()
            assert row == (key(a) < key(b), key(a) <= key(b)), (a, b)
