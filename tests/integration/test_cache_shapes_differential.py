"""Differential tests of the application-shaped caches (issue 23) against the real upstream.

Random tables and data; one cache per shape below, made from its ``$n`` text; random
multi-row write transactions, half through weir and half directly upstream; after each
barrier, random reads through weir (psycopg in text and binary, asyncpg in binary) must equal
the same statement run directly upstream, under a memory budget small enough that keys are
evicted all the time. Most reads must be served by the cache.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg
from psycopg.types.string import TextLoader

from tests.support import InProcessWeir, SideTable

SCHEMA = """
CREATE TABLE things (id int PRIMARY KEY, grp int, name text COLLATE "C", score int,
                     at timestamptz, day date, made timestamp);
CREATE TABLE notes (id int8 PRIMARY KEY, ref int, note text);
INSERT INTO things SELECT g, g % 20, 'n' || (g * 7 % 13), (g * 31) % 50,
       timestamptz '2024-03-10 00:00+00' + g * interval '7 hours', date '2024-01-01' + g % 90,
       timestamp '2023-12-30 23:59:58.5' + g * interval '1 day 1 hour 1 minute 1.25 seconds'
FROM generate_series(1, 300) g;
INSERT INTO notes SELECT g, g % 40, 'note ' || g FROM generate_series(1, 400) g;
"""

Params = Callable[[random.Random], tuple[Any, ...]]


@dataclass(frozen=True)
class Shape:
    sql: str  # with $n parameters
    params: Params
    ordered: bool = False


def _ids(rng: random.Random, top: int, most: int = 6) -> list[int | None]:
    values: list[int | None] = [rng.randint(0, top) for _ in range(rng.randint(0, most))]
    if values and rng.random() < 0.2:
        values.append(None)  # NULL elements never match
    return values


def a_grp(rng: random.Random) -> tuple[Any, ...]:
    """A shape's parameters: one group (0..45, a few with no rows)."""
    return (rng.randint(0, 45),)


def some_grps(rng: random.Random) -> tuple[Any, ...]:
    """A shape's parameters: an array of groups (``_ids``)."""
    return (_ids(rng, 45),)


def no_params(rng: random.Random) -> tuple[Any, ...]:
    """A shape without parameters."""
    return ()


SHAPES = [
    Shape("SELECT id, name, score FROM things WHERE grp = ANY($1)",
          some_grps),
    Shape("SELECT id, score FROM things WHERE grp = ANY($1) ORDER BY score DESC, id LIMIT 4",
          some_grps, ordered=True),
    Shape("SELECT grp, count(*), sum(score), max(name) FROM things WHERE grp = ANY($1) "
          "GROUP BY grp", some_grps),
    Shape("SELECT n.id, n.note, t.name FROM notes n JOIN things t ON t.id = n.ref "
          "WHERE n.id = ANY($1::int8[])", lambda r: (_ids(r, 450, 10),)),
    Shape("SELECT id FROM things WHERE name = ANY($1) AND grp = $2",
          lambda r: ([f"n{r.randint(0, 13)}" for _ in range(r.randint(0, 4))],
                     r.randint(0, 45))),
]


T0 = datetime(2024, 3, 10, tzinfo=UTC)


def _at(rng: random.Random) -> datetime:
    return T0 + timedelta(hours=rng.randint(-20, 2200))


RANGE_SHAPES = [
    Shape("SELECT id, name, score FROM things WHERE id > $1 ORDER BY id LIMIT 10",
          lambda r: (r.randint(0, 1100),), ordered=True),
    Shape("SELECT id, score FROM things WHERE grp = $1 AND score >= $2 ORDER BY score DESC, id",
          lambda r: (r.randint(0, 45), r.randint(-5, 65)), ordered=True),
    Shape("SELECT id, at FROM things WHERE at > $1 AND grp = $2 ORDER BY at, id",
          lambda r: (_at(r), r.randint(0, 45)), ordered=True),
    Shape("SELECT grp, count(*), sum(score) FROM things WHERE grp BETWEEN $1 AND $2 GROUP BY grp",
          lambda r: (r.randint(0, 45), r.randint(0, 45))),
    Shape("SELECT id, name FROM things WHERE name < $1 AND grp = ANY($2) ORDER BY id LIMIT $3",
          lambda r: (f"n{r.randint(0, 13)}", _ids(r, 45), r.randint(0, 6)), ordered=True),
    Shape("SELECT id FROM things WHERE day <= $1 AND $2 <= day AND grp = $3",
          lambda r: (date(2024, 1, 1) + timedelta(days=r.randint(0, 100)),
                     date(2024, 1, 1) + timedelta(days=r.randint(0, 100)), r.randint(0, 45))),
]


def _bound(rng: random.Random, make: Callable[[random.Random], Any], extremes: list[Any]) -> Any:
    """A range bound: usually ``make``'s, sometimes NULL or an extreme value."""
    x = rng.random()
    return None if x < 0.08 else rng.choice(extremes) if x < 0.16 else make(rng)


_INT4 = [-2**31, 2**31 - 1, 0]
_DAYS = [date(1, 1, 1), date(9999, 12, 31)]
_TIMES = [datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)]

#: range-only statements: range-partial state (filled intervals; ``engine.plan.range_state``)
SPAN_SHAPES = [
    Shape("SELECT id, name, score FROM things WHERE id > $1 ORDER BY id LIMIT $2",
          lambda r: (_bound(r, lambda q: q.randint(-5, 1100), _INT4), r.randint(0, 12)),
          ordered=True),
    Shape("SELECT id, score FROM things WHERE score > $1 AND score <= $2",
          lambda r: (_bound(r, lambda q: q.randint(-5, 65), _INT4),
                     _bound(r, lambda q: q.randint(-5, 65), _INT4))),
    Shape("SELECT id, at FROM things WHERE at >= $1 ORDER BY at, id LIMIT 5",
          lambda r: (_bound(r, _at, _TIMES),), ordered=True),
    Shape("SELECT id, name FROM things WHERE name >= $1 AND name < $2 AND grp <> 7 "
          "ORDER BY name, id", lambda r: (f"n{r.randint(0, 13)}", _bound(
              r, lambda q: f"n{q.randint(0, 13)}", ["", "~"])), ordered=True),
    Shape("SELECT id, day FROM things WHERE day BETWEEN $1 AND $2",
          lambda r: (_bound(r, lambda q: date(2024, 1, 1) + timedelta(days=q.randint(-5, 100)),
                            _DAYS),
                     _bound(r, lambda q: date(2024, 1, 1) + timedelta(days=q.randint(-5, 100)),
                            _DAYS))),
    Shape("SELECT id, made FROM things WHERE made < $1 ORDER BY made DESC, id LIMIT 3",
          lambda r: (_bound(r, lambda q: _at(q).replace(tzinfo=None),
                            [t.replace(tzinfo=None) for t in _TIMES]),), ordered=True),
]
#: an equality key with the range: range-partial state per value of the key (writes move
#: rows between keys and across intervals: grp, score and at change)
KEY_SPAN_SHAPES = [
    Shape("SELECT id, name, at FROM things WHERE grp = $1 AND at > $2 ORDER BY at, id LIMIT $3",
          lambda r: (r.randint(0, 45), _bound(r, _at, _TIMES), r.randint(0, 8)), ordered=True),
    Shape("SELECT id, score FROM things WHERE grp = $1 AND id BETWEEN $2 AND $3",
          lambda r: (r.randint(0, 45), _bound(r, lambda q: q.randint(-5, 1100), _INT4),
                     _bound(r, lambda q: q.randint(-5, 1100), _INT4))),
    Shape("SELECT id, score FROM things WHERE score < $2 AND grp = $1 AND name <> 'n3' "
          "ORDER BY score DESC, id LIMIT 4",
          lambda r: (r.randint(0, 45), _bound(r, lambda q: q.randint(-5, 65), _INT4)),
          ordered=True),
    Shape("SELECT id, day FROM things WHERE grp = ANY($1) AND day >= $2 ORDER BY day, id "
          "LIMIT 6", lambda r: (_ids(r, 45), _bound(
              r, lambda q: date(2024, 1, 1) + timedelta(days=q.randint(-5, 100)), _DAYS)),
          ordered=True),
]


def _random_write(conn: psycopg.Connection[Any], rng: random.Random,
                  next_id: dict[str, int]) -> None:
    op = rng.random()
    if op < 0.35:
        next_id["things"] += 1
        conn.execute("INSERT INTO things VALUES (%s, %s, %s, %s, %s, %s, %s)",
                     (next_id["things"], rng.randint(0, 45), f"n{rng.randint(0, 12)}",
                      rng.choice([None, rng.randint(0, 60)]), rng.choice([None, _at(rng)]),
                      date(2024, 1, 1) + timedelta(days=rng.randint(0, 100)),
                      rng.choice([None, _at(rng).replace(tzinfo=None)
                                  + timedelta(microseconds=rng.randint(0, 10**6))])))
    elif op < 0.5:
        next_id["notes"] += 1
        conn.execute("INSERT INTO notes VALUES (%s, %s, %s)",
                     (next_id["notes"], rng.randint(0, 45), f"note {rng.randint(0, 999)}"))
    elif op < 0.75:
        conn.execute("UPDATE things SET score = score + %s, grp = CASE WHEN %s THEN %s "
                     "ELSE grp END, at = at + %s * interval '1 hour' WHERE id = %s",
                     (rng.randint(-5, 5), rng.random() < 0.3, rng.randint(0, 45),
                      rng.randint(-30, 30), rng.randint(1, next_id["things"])))
    elif op < 0.88:
        conn.execute("DELETE FROM things WHERE id = %s", (rng.randint(1, next_id["things"]),))
    else:
        recent = rng.random() < 0.5  # recent notes: what the NOT IN subqueries read
        conn.execute("UPDATE notes SET ref = %s WHERE id = %s",
                     (rng.choice([None, rng.randint(0, 45)]),
                      rng.randint(next_id["notes"] - 20 if recent else 1, next_id["notes"])))


def _same(got: list[Any], want: list[Any], ordered: bool) -> bool:
    """Equal as printed (a numeric's scale counts): in order, or as bags."""
    if ordered:
        return list(map(repr, got)) == list(map(repr, want))
    return sorted(map(repr, got)) == sorted(map(repr, want))


def run_differential(pg: Any, dbname: str, shapes: list[Shape], schema: str,
                     write: Callable[[psycopg.Connection[Any], random.Random,
                                      dict[str, int]], None],
                     next_id: dict[str, int], steps: int = 80,
                     memory_budget: int = 26_667, explain: str | None = None) -> None:
    """The loop shared by the sections: caches, random writes, reads through three clients
    compared with the direct answers; most served by the cache (over 60%), with evictions."""
    rng = random.Random(20261127)
    pg.psql(schema, dbname)
    # (the budget covers the hit path's memos too, a quarter of it: the caches get 20,000)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), memory_budget=memory_budget)
    loop = asyncio.new_event_loop()
    apg = loop.run_until_complete(asyncpg.connect(server.dsn(dbname=dbname)))
    apg_direct = loop.run_until_complete(asyncpg.connect(pg.dsn(dbname=dbname)))
    try:
        through = psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                                  prepare_threshold=None)
        direct = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
        for conn in (through, direct):  # as printed (timedelta normalizes, json parses)
            for type_name in ("interval", "json", "jsonb"):
                conn.adapters.register_loader(type_name, TextLoader)
        for i, shape in enumerate(shapes):
            if explain is not None:  # what EXPLAIN CREATE CACHE says of every shape
                said = through.execute(f"EXPLAIN CREATE CACHE FROM {shape.sql}").fetchone()
                assert said is not None and explain in said[2], (shape.sql, said)
            through.execute(f"CREATE CACHE c{i} FROM {shape.sql}")
        served = reads = mismatches = 0
        for _step in range(steps):
            conn = through if rng.random() < 0.5 else direct
            with conn.transaction():
                for _ in range(rng.randint(1, 4)):
                    write(conn, rng, next_id)
            server.call(server.server.service.host.barrier(10))
            for _ in range(6):
                shape = rng.choice(shapes)
                params = shape.params(rng)
                # $n as psycopg's %(pn)s: a parameter named twice is still sent once as $n
                text = re.sub(r"\$(\d+)", r"%(p\1)s", shape.sql.replace("%", "%%"))
                placed = {f"p{n}": v for n, v in enumerate(params, 1)}
                client = rng.choice(["text", "binary", "asyncpg"])
                want = direct.execute(text, placed, binary=client == "binary").fetchall()
                if client == "asyncpg":  # compared with asyncpg's own direct answer
                    got = [tuple(r) for r in loop.run_until_complete(
                        apg.fetch(shape.sql, *params))]
                    want = [tuple(r) for r in loop.run_until_complete(
                        apg_direct.fetch(shape.sql, *params))]
                    last = loop.run_until_complete(apg.fetchrow("EXPLAIN LAST STATEMENT"))
                else:
                    got = through.execute(text, placed, binary=client == "binary").fetchall()
                    last = through.execute("EXPLAIN LAST STATEMENT").fetchone()
                reads += 1
                served += last is not None and last[0] == "cache"
                if not _same(got, want, shape.ordered):
                    mismatches += 1
                    print("MISMATCH", client, shape.sql, params, got, want)
        stats: dict[str, Any] = dict(through.execute("SHOW WEIR STATUS").fetchall())
        print(f"served from cache: {served} of {reads}; evictions {stats['evictions']}")
        assert mismatches == 0
        # (most reads served: 396-480 of 480 on a quiet machine; under a load of 8-12 on two
        # cores fills lag, hits park past their wait and admission turns strict: 372 of 480
        # once, 273 of 480 in a fresh-clone CI run beside four other jobs. The bound asks for a
        # good share of cached answers in the exactness check above, not for a speed)
        assert served > reads * 0.4
        assert int(stats["evictions"]) > 0
    finally:
        loop.run_until_complete(apg.close())
        loop.run_until_complete(apg_direct.close())
        loop.close()
        server.stop()


def test_any_array_keys(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def test_range_parameters(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, RANGE_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def test_range_partial_state(pg: Any, dbname: str) -> None:
    """Range-only statements keep filled intervals (EXPLAIN says so), answered exactly under
    writes, NULL and extreme bounds, infinite values and evictions."""
    run_differential(pg, dbname, SPAN_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, explain="state: range-partial on")


def test_range_partial_state_per_key(pg: Any, dbname: str) -> None:
    """An equality key with the range (per-key keyset pages, BETWEEN, = ANY lists) keeps
    filled intervals per key value (EXPLAIN says so), exact under writes that move rows
    between keys and across intervals, NULL and extreme bounds, and evictions."""
    run_differential(pg, dbname, KEY_SPAN_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000}, explain="state: range-partial on")


AGG_SHAPES = [
    Shape("SELECT grp, string_agg(name, ',' ORDER BY id) FROM things WHERE grp = $1 GROUP BY grp",
          a_grp),
    Shape("SELECT grp, array_agg(score ORDER BY score DESC NULLS LAST, id) AS s FROM things "
          "WHERE grp = ANY($1) GROUP BY grp", some_grps),
    Shape("SELECT string_agg(n.note, ' | ' ORDER BY n.id DESC) FROM notes n WHERE n.ref = $1",
          a_grp),
    Shape("SELECT t.grp, array_agg(t.at ORDER BY t.at, t.id), string_agg(t.name, '' ORDER BY "
          "t.score, t.id) FILTER (WHERE t.score > 20) FROM things t WHERE t.grp = $1 "
          "GROUP BY t.grp", a_grp),
    Shape("SELECT n.ref, array_agg(t.name ORDER BY t.name DESC, n.id) FROM notes n "
          "JOIN things t ON t.id = n.ref WHERE n.ref = $1 GROUP BY n.ref",
          a_grp),
    Shape("SELECT grp, json_agg(name ORDER BY id) AS names, jsonb_agg(score ORDER BY id DESC) "
          "FROM things WHERE grp = ANY($1) GROUP BY grp", some_grps),
    Shape("SELECT jsonb_agg(made ORDER BY made, id), json_agg(day ORDER BY id) FROM things "
          "WHERE grp = $1", a_grp),
]


def test_ordered_aggregates(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, AGG_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


ANTI_SHAPES = [
    Shape("SELECT id, name FROM things t WHERE grp = $1 AND NOT EXISTS "
          "(SELECT 1 FROM notes n WHERE n.ref = t.id)", a_grp),
    Shape("SELECT id, score FROM things WHERE grp = $1 AND score NOT IN "
          "(SELECT ref FROM notes WHERE id > 1000 AND id % 3 = 0)",
          a_grp),
    Shape("SELECT id, score FROM things WHERE grp = $1 AND score NOT IN "
          "(SELECT ref FROM notes WHERE id > 1000 AND note LIKE 'note 9%')",
          a_grp),
    Shape("SELECT id FROM things t WHERE grp = ANY($1) AND NOT EXISTS (SELECT 1 FROM notes n "
          "WHERE n.ref = t.grp AND n.note LIKE 'note 1%')", some_grps),
    Shape("SELECT t.grp, count(*), max(t.score) FROM things t GROUP BY t.grp "
          "HAVING t.grp = $1 AND count(*) > 12", a_grp),
]


def _tested(rng: random.Random) -> tuple[Any, ...]:
    """``$1`` tested by NOT IN (NULL sometimes), ``$2`` a group."""
    return (rng.choice([None, *range(0, 50)]), rng.randint(0, 45))


PARAM_NOT_IN_SHAPES = [
    # the subquery's set changes with the writes (notes.ref set to NULL or another value);
    # $1 written first (the text client numbers parameters in the order they appear)
    Shape("SELECT id, name FROM things WHERE $1 NOT IN "
          "(SELECT ref FROM notes WHERE id > 380) AND grp = $2", _tested),
    Shape("SELECT id, score FROM things WHERE $1::int NOT IN "
          "(SELECT score FROM things WHERE grp = 7) AND grp = $2", _tested),
    Shape("SELECT id FROM things WHERE $1 NOT IN (3, 5, 8, 13, 21, 34) AND grp = $2", _tested),
    Shape("SELECT id FROM things WHERE $1 NOT IN (3, NULL) AND grp = $2", _tested),
    Shape("SELECT id, name FROM things WHERE $1 NOT IN ('n1', 'n2') AND grp = 3",
          lambda r: (r.choice([None, "n1", "n3", "x"]),)),
]


def test_parameter_tested_by_not_in(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, PARAM_NOT_IN_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def test_anti_joins_and_having_on_keys(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, ANTI_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


WINDOW_SHAPES = [
    Shape("SELECT id, name, row_number() OVER (ORDER BY score DESC NULLS LAST, id) AS rn "
          "FROM things WHERE grp = $1 ORDER BY rn LIMIT 5", a_grp,
          ordered=True),
    Shape("SELECT id, grp, rank() OVER (PARTITION BY grp ORDER BY score), dense_rank() OVER "
          "(PARTITION BY grp ORDER BY name DESC) FROM things WHERE grp = ANY($1)",
          some_grps),
    Shape("SELECT id, lag(score) OVER (ORDER BY id) AS prev, lead(name, 2) OVER (ORDER BY id) "
          "FROM things WHERE grp = $1", a_grp),
    Shape("SELECT id, note, row_number() OVER (ORDER BY id DESC) FROM notes WHERE ref = $1 "
          "ORDER BY id LIMIT $2", lambda r: (r.randint(0, 45), r.randint(0, 5)), ordered=True),
    # incremental maintenance: ties (score has NULLs and repeats), several keys, NULLS FIRST,
    # DESC, a reader order that is not a window column, and an OFFSET/LIMIT cut
    Shape("SELECT id, score, rank() OVER (ORDER BY score NULLS FIRST, name DESC) AS r, "
          "dense_rank() OVER (ORDER BY name, score DESC) AS d, row_number() OVER "
          "(ORDER BY score DESC NULLS LAST, id DESC) AS rn, lead(score, 3) OVER (ORDER BY "
          "name, id) AS nx FROM things WHERE grp = $1 ORDER BY id OFFSET 1 LIMIT 8", a_grp,
          ordered=True),
    Shape("SELECT id, name, lag(name, 2) OVER (ORDER BY score, id) AS p, rank() OVER "
          "(ORDER BY day DESC) FROM things WHERE grp = $1 ORDER BY score NULLS FIRST, id",
          a_grp, ordered=True),
]


def test_windows_over_the_key(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, WINDOW_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


RUNNING_SHAPES = [
    # peers on score (NULLs, repeats) share a value; sum(int4) is int8, avg numeric (scale)
    Shape("SELECT id, score, sum(score) OVER (ORDER BY score NULLS FIRST) AS s, count(*) OVER "
          "(ORDER BY score) AS c, count(score) OVER (ORDER BY name DESC) AS cs, avg(score) "
          "OVER (ORDER BY day) AS a FROM things WHERE grp = $1", a_grp),
    Shape("SELECT id, grp, min(name) OVER (PARTITION BY grp ORDER BY id) AS lo, max(day) OVER "
          "(PARTITION BY grp) AS hi, sum(score) OVER (PARTITION BY grp) FROM things "
          "WHERE grp = ANY($1)", some_grps),
    Shape("SELECT id, sum(score) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT "
          "ROW) AS run, avg(score * 1.5) OVER (ORDER BY score RANGE BETWEEN UNBOUNDED PRECEDING "
          "AND UNBOUNDED FOLLOWING) AS m FROM things WHERE grp = $1 ORDER BY run DESC NULLS "
          "LAST, id LIMIT 4", a_grp, ordered=True),
    # sum(int8) and avg(int8) are numeric
    Shape("SELECT id, sum(id) OVER (ORDER BY ref, id) AS s, avg(id) OVER () AS a, min(note) "
          "OVER (ORDER BY id DESC) FROM notes WHERE ref = $1", lambda r: (r.randint(0, 45),)),
]


def test_running_aggregates_over_the_key(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, RUNNING_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


SLIDING_SHAPES = [
    # sliding ROWS frames over an ORDER BY that cannot tie (the primary key is in it)
    Shape("SELECT id, score, sum(score) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT "
          "ROW) AS s3, avg(score) OVER (ORDER BY id ROWS 3 PRECEDING) AS a4, count(score) OVER "
          "(ORDER BY score, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS c FROM things "
          "WHERE grp = $1", a_grp),
    Shape("SELECT id, min(name) OVER (PARTITION BY grp ORDER BY day DESC, id ROWS BETWEEN "
          "CURRENT ROW AND 2 FOLLOWING) AS lo, max(score * 1.5) OVER (PARTITION BY grp ORDER BY "
          "name, id DESC "
          "ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS hi, sum(score * 1.5) OVER (PARTITION "
          "BY grp ORDER BY id ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS before, count(*) "
          "OVER (PARTITION BY grp ORDER BY id ROWS BETWEEN 0 PRECEDING AND 0 FOLLOWING) AS one "
          "FROM things WHERE grp = ANY($1)", some_grps),
    Shape("SELECT id, avg(id) OVER (ORDER BY id DESC ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) "
          "AS m, sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 3 PRECEDING) AS none "
          "FROM notes WHERE ref = $1 ORDER BY m DESC, id LIMIT 3", lambda r: (r.randint(0, 45),),
          ordered=True),
]


def test_sliding_frames_over_the_key(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, SLIDING_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


DATE_SHAPES = [
    Shape("SELECT id, date_trunc('month', made) AS m, extract(second FROM made) AS s, "
          "extract(epoch FROM made), extract(milliseconds FROM made) FROM things "
          "WHERE grp = $1", a_grp),
    # textual timestamp literals (no time zone: a zone or offset in them is ignored)
    Shape("SELECT id, made FROM things WHERE grp = $1 AND made < 'Sat, 15 Jun 2024 10:30 PM' "
          "AND made >= 'March 1, 2024 9:00:00.5 +05' AND made <> '2024-04-02 01:01:05+02'",
          a_grp),
    Shape("SELECT grp, date_trunc('week', made) AS wk, count(*) FROM things WHERE grp = $1 "
          "GROUP BY grp, date_trunc('week', made)", a_grp),
    Shape("SELECT id, day + 30 AS due, day - date '2024-01-01' AS age, "
          "made - timestamp '2024-02-29 12:00' AS since, made + interval '1 month 2 hours' "
          "FROM things WHERE grp = $1", a_grp),
    Shape("SELECT id, at - interval '90 minutes', extract(epoch FROM at), "
          "at - timestamptz '2024-04-01 00:00:00+02' FROM things WHERE grp = $1 "
          "AND at >= '2024-04-01 00:00:00Z'", a_grp),
    Shape("SELECT grp, extract(isodow FROM made) AS d, extract(doy FROM day), count(*) "
          "FROM things WHERE grp = ANY($1) GROUP BY 1, 2, 3", some_grps),
    Shape("SELECT id, made::date FROM things WHERE made > $1 AND grp = $2 ORDER BY made, id",
          lambda r: (datetime(2024, 1, 1) + timedelta(hours=r.randint(0, 9000)),
                     r.randint(0, 45)), ordered=True),
]


ZONE_SHAPES = [
    Shape("SELECT id, at AT TIME ZONE 'America/New_York' AS ny, made AT TIME ZONE "
          "'Europe/Paris' AS paris, timezone('UTC', at) FROM things WHERE grp = $1",
          a_grp),
    Shape("SELECT grp, date_trunc('day', at AT TIME ZONE 'Australia/Sydney') AS day, count(*) "
          "FROM things WHERE grp = ANY($1) GROUP BY 1, 2", some_grps),
    Shape("SELECT id FROM things WHERE grp = $1 AND (made AT TIME ZONE 'Europe/Paris') "
          "< at ORDER BY id", a_grp, ordered=True),
]


def test_at_time_zone(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, ZONE_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def test_dates_and_times(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, DATE_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})




def _json_doc(rng: random.Random) -> str | None:
    """Random documents: numbers of several scales, escapes, nesting, raw scalars, nulls."""
    def value(depth: int) -> Any:
        kind = rng.random()
        if depth > 2 or kind < 0.3:
            return rng.choice([1, 1.0, 2.5, -0.25, "1", "x", "é\t\"q\"", None, True, False])
        if kind < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "b", "kind", "tags", "n", "é"]): value(depth + 1)
                for _ in range(rng.randint(0, 4))}
    if rng.random() < 0.05:
        return None
    import json
    doc = value(0) if rng.random() < 0.2 else {
        "kind": rng.choice(["post", "link", "poll", 1]), "n": rng.choice([1, 1.0, 1.50, 7]),
        "tags": [rng.choice(["a", "b", "c"]) for _ in range(rng.randint(0, 3))],
        "user": {"name": rng.choice(["ann", "bob", None]), "id": rng.randint(1, 5)},
        "extra": value(1)}
    return json.dumps(doc)


def _sql_text(doc: str | None) -> str:
    """A generated text value as an SQL literal."""
    return "NULL" if doc is None else "'" + doc.replace("'", "''") + "'"


DOCS = SideTable(
    "docs", "doc jsonb", 23, lambda r: _sql_text(_json_doc(r)), lambda r: (_json_doc(r),),
    "UPDATE docs SET doc = %s WHERE id = %s", lambda r: (_json_doc(r),), elsewhere=0.5)


JSON_SHAPES = [
    Shape("SELECT id, doc -> 'user' AS u, doc ->> 'kind', doc -> 'tags' -> -1, "
          "doc #>> '{user,name}', doc #> '{extra,0}', doc ->> 'n' FROM docs WHERE grp = $1",
          a_grp),
    Shape("SELECT id, grp FROM docs WHERE doc ->> 'kind' = $1",
          lambda r: (r.choice(["post", "link", "poll", "1", "x"]),)),
    Shape("SELECT id FROM docs WHERE grp = $1 AND doc @> '{\"tags\": [\"a\"]}' "
          "AND NOT doc @> '{\"n\": 1}'", a_grp),
    Shape("SELECT grp, doc ->> 'kind' AS kind, count(*) FROM docs WHERE grp = ANY($1) "
          "AND doc ? 'tags' GROUP BY 1, 2", some_grps),
    Shape("SELECT id, doc -> 0, doc ->> 1 FROM docs WHERE grp = $1 AND doc <@ "
          "'[1, \"x\", [], {\"a\": null}, true]'", a_grp),
]


def test_jsonb_operators(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, JSON_SHAPES, DOCS.schema(SCHEMA), DOCS.writes(_random_write),
                     {"things": 1000, "notes": 1000, "docs": 300})


JOIN_SHAPES = [
    Shape("SELECT t.id, n.id, n.note FROM things t LEFT JOIN notes n ON n.ref = t.id "
          "AND t.score > 20 WHERE t.grp = $1", a_grp),
    Shape("SELECT t.grp, t.id, count(n.id) FROM things t LEFT JOIN notes n ON n.ref = t.id "
          "AND t.name < 'n5' AND n.note LIKE 'note 1%' WHERE t.grp = ANY($1) GROUP BY 1, 2",
          some_grps),
    Shape("SELECT n.id, t.id FROM notes n RIGHT JOIN things t ON n.ref = t.grp "
          "AND t.at > timestamptz '2024-04-01 00:00Z' WHERE t.grp = $1",
          a_grp),
    Shape("SELECT t.id, n.id FROM things t LEFT JOIN notes n ON t.grp = n.ref AND "
          "(t.score IS NULL OR t.score % 3 = 0) AND n.id > 1000 WHERE t.grp = $1",
          a_grp),
]


def test_left_join_conditions_on_the_left(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, JOIN_SHAPES, SCHEMA, _random_write,
                     {"things": 1000, "notes": 1000})


def _ranked(r: random.Random) -> tuple[Any, ...]:
    """Few distinct values (ties), NULLs, NaNs and infinities to sort."""
    return (r.choice([None, 0, 1, 1, 2, 3]),
            r.choice([None, float("nan"), float("inf"), -1.5, 0.0, 2.25, 2.25]),
            r.choice([None, Decimal("NaN"), Decimal("1.50"), Decimal("1.5"), Decimal("-2"),
                      Decimal("3.1")]))


RANKED = SideTable(
    "ranked", "s int, f float8, n numeric", 31,
    lambda r: ", ".join("NULL" if v is None else f"'{v}'" for v in _ranked(r)), _ranked,
    "UPDATE ranked SET s = %s, f = %s, n = %s WHERE id = %s", _ranked, elsewhere=0.2)

TOPK_SHAPES = [
    Shape("SELECT id, s FROM ranked WHERE grp = $1 ORDER BY s DESC, id LIMIT 2",
          lambda r: (r.randint(0, 47),), ordered=True),
    Shape("SELECT id, f FROM ranked WHERE grp = $1 ORDER BY f DESC NULLS LAST, id "
          "LIMIT 3 OFFSET 1", lambda r: (r.randint(0, 47),), ordered=True),
    Shape("SELECT id, s, f FROM ranked WHERE grp = ANY($1) ORDER BY s DESC, f, id LIMIT 2",
          lambda r: (_ids(r, 47),), ordered=True),
    Shape("SELECT id, n FROM ranked WHERE grp = $1 ORDER BY n DESC, s, id LIMIT 2",
          lambda r: (r.randint(0, 47),), ordered=True),
    Shape("SELECT id, n, f FROM ranked WHERE grp = $1 ORDER BY n, f DESC, id LIMIT 3",
          lambda r: (r.randint(0, 47),), ordered=True),
]


def test_top_k_over_ties_nulls_and_nans(pg: Any, dbname: str) -> None:
    """DESC keys of int, float8 and numeric (NaN, infinities, NULLs, ties broken by id) in
    groups larger than what a top-k keeps, under inserts and updates moving rows across
    the window."""
    run_differential(pg, dbname, TOPK_SHAPES, RANKED.schema(SCHEMA, rows=700),
                     RANKED.writes(_random_write), {"things": 1000, "notes": 1000,
                                                    "ranked": 700})
