"""Float sum/avg over windows (``engine.dataflow.window_floats``) against PostgreSQL.

Three parts: the recompute (``windows.apply_windows``, what the reader's partitions agree with)
on random float4/float8 partitions - cancellation, -0, NaN, infinities, values whose sum or
sum of squares overflows - must print exactly as PostgreSQL prints the same windows, and
raise where PostgreSQL raises (22003); a differential run through weir with random writes
(both clients' formats; also over a table whose primary key (k, j) is the lookup key k and the
window's ORDER BY j); and a read whose window PostgreSQL errors on goes upstream and gets
PostgreSQL's error.
"""

from __future__ import annotations

import math
import random
from typing import Any

import psycopg
import pytest

from engine.dataflow.pgmath import EvalError, to_float4
from engine.dataflow.windows import apply_windows
from engine.plan import ir
from engine.values import oids as T
from engine.values.scalars import format_float4, format_float8
from tests.integration.test_cache_shapes_differential import Shape, a_grp, run_differential
from tests.support import InProcessWeir

#: (SQL frame clause, ir frame fields (rows, frame))
FRAMES: list[tuple[str, bool, tuple[int, int] | None]] = [
    ("", True, None),  # the default RANGE frame over a unique order: ROWS
    ("ROWS UNBOUNDED PRECEDING", True, None),
    ("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", True, (-2, 0)),
    ("ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING", True, (-1, 2)),
    ("ROWS BETWEEN CURRENT ROW AND 3 FOLLOWING", True, (0, 3)),
    ("ROWS BETWEEN 2 FOLLOWING AND 4 FOLLOWING", True, (2, 4)),
]


def _float(r: random.Random, big: bool) -> float | None:
    roll = r.random()
    if roll < 0.1:
        return None
    if roll < 0.14:
        return r.choice((math.inf, -math.inf, math.nan, -0.0, 0.0))
    if big and roll < 0.3:  # sums past DBL_MAX, squares past it (avg's Sxx)
        return r.choice((1.7e308, -1.7e308, 1e308, 3e160, -3e160, 1e200))
    return r.choice((0.1, 0.2, 0.3, 1e16, -1e16, 1.0, 3.0, 7.25)) * r.choice((1, -1)) \
        if r.random() < 0.4 else r.uniform(-1e6, 1e6) * 10.0 ** r.randint(-8, 8)


def _fmt(v: Any, oid: int) -> str | None:
    if v is None:
        return None
    return format_float4(v) if oid == T.FLOAT4 else format_float8(v)


def test_recompute_prints_as_postgres(pg: Any, dbname: str) -> None:
    r = random.Random(23)
    pg.psql("CREATE TABLE f (id int PRIMARY KEY, g int, x float8, y float4)", dbname)
    rows = []
    for i in range(400):
        g = i % 40
        x = _float(r, g % 3 == 0)
        y = _float(r, g % 3 == 0)
        if y is not None and not math.isinf(y) and abs(y) > 3e38:
            y = 3.4e38 * (1 if y > 0 else -1)
        rows.append((i, g, x, None if y is None else to_float4(y)))  # as float4 stores it
    checked = errors = 0
    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO f VALUES (%s, %s, %s, %s::float4)", rows)
        for clause, rows_flag, frame in FRAMES:
            for func in ("sum", "avg"):
                for col, arg_oid in ((2, T.FLOAT8), (3, T.FLOAT4)):
                    oid = arg_oid if func == "sum" else T.FLOAT8
                    name = "x" if col == 2 else "y"
                    desc = r.random() < 0.5
                    sql = (f"SELECT id, ({func}({name}) OVER (ORDER BY id"
                           f"{' DESC' if desc else ''} {clause}))::text FROM f WHERE g = %s")
                    w = ir.Window(func, 4, (ir.SortKey(0, desc, None),), col,
                                  1, oid, arg_oid, rows_flag, frame)
                    for g in range(40):
                        part = [(*row, None) for row in rows if row[1] == g]
                        try:
                            want: dict[int, str | None] = dict(
                                conn.execute(sql, (g,)).fetchall())
                        except psycopg.errors.NumericValueOutOfRange:
                            with pytest.raises(EvalError) as exc:
                                apply_windows(part, (w,))
                            assert exc.value.sqlstate == "22003"
                            errors += 1
                            continue
                        got = {row[0]: _fmt(row[4], oid) for row in apply_windows(part, (w,))}
                        assert got == want, (sql, g)
                        checked += 1
    assert checked > 500 and errors > 5, (checked, errors)


FLOAT_SCHEMA = """
CREATE TABLE readings (id int PRIMARY KEY, grp int, x float8, y float4);
INSERT INTO readings SELECT g, g % 20, (g * 7919 % 1000) / 7.0 - 50, (g * 104729 % 1000) / 3.0
FROM generate_series(1, 300) g;
CREATE TABLE pairs (k int, j int, v float8, n int, PRIMARY KEY (k, j));
INSERT INTO pairs SELECT g % 15, g, g / 7.0, g % 11 FROM generate_series(1, 300) g;
"""


def _write(conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]) -> None:
    def value() -> float | None:
        return rng.choice((None, 0.1, -0.0, 1e16, -1e16, rng.uniform(-1e3, 1e3),
                           rng.uniform(-1, 1) * 10.0 ** rng.randint(-10, 10)))
    if rng.random() < 0.3:  # pairs: the lookup key k is part of the primary key (k, j)
        k, roll = rng.randint(0, 20), rng.random()
        j = rng.randint(0, 26) * 15 + k + (rng.random() < 0.3)  # (mostly a row that exists)
        if roll < 0.4:
            conn.execute("INSERT INTO pairs VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (k, j, value(), rng.choice((None, rng.randint(-9, 9)))))
        elif roll < 0.6:
            conn.execute("UPDATE pairs SET v = %s, n = %s WHERE k = %s AND j = %s",
                         (value(), rng.randint(-9, 9), k, j))
        elif roll < 0.8:  # a row moves in the window order
            conn.execute("UPDATE pairs SET j = j + 1 WHERE k = %s AND j = %s AND NOT EXISTS "
                         "(SELECT FROM pairs p WHERE p.k = %s AND p.j = %s)", (k, j, k, j + 1))
        else:
            conn.execute("DELETE FROM pairs WHERE k = %s AND j = %s", (k, j))
        return
    op = rng.random()
    if op < 0.4:
        next_id["readings"] += 1
        conn.execute("INSERT INTO readings VALUES (%s, %s, %s, %s::float4)",
                     (next_id["readings"], rng.randint(0, 45), value(), value()))
    elif op < 0.8:
        conn.execute("UPDATE readings SET x = %s, y = %s::float4, grp = CASE WHEN %s THEN %s "
                     "ELSE grp END WHERE id = %s",
                     (value(), value(), rng.random() < 0.3, rng.randint(0, 45),
                      rng.randint(1, next_id["readings"])))
    else:
        conn.execute("DELETE FROM readings WHERE id = %s",
                      (rng.randint(1, next_id["readings"]),))


FLOAT_SHAPES = [
    Shape("SELECT id, x, sum(x) OVER (ORDER BY id) AS run, avg(y) OVER (ORDER BY id ROWS "
          "BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS near, sum(y) OVER (ORDER BY x, id ROWS "
          "BETWEEN CURRENT ROW AND 2 FOLLOWING) AS ahead FROM readings WHERE grp = $1", a_grp),
    Shape("SELECT j, sum(v) OVER (ORDER BY j ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s, "
          "row_number() OVER (ORDER BY j DESC) AS rn, sum(n) OVER (ORDER BY j) AS run, "
          "avg(n) OVER (ORDER BY j ROWS BETWEEN 2 PRECEDING AND 2 PRECEDING) AS back2 FROM "
          "pairs WHERE k = $1", lambda r: (r.randint(0, 21),)),
    Shape("SELECT id, avg(x) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS m, "
          "sum(x) OVER (ORDER BY y NULLS FIRST, id ROWS 3 PRECEDING) AS s FROM readings "
          "WHERE grp = $1 ORDER BY m, id LIMIT 5", a_grp, ordered=True),
]


def test_float_windows_through_weir(pg: Any, dbname: str) -> None:
    run_differential(pg, dbname, FLOAT_SHAPES, FLOAT_SCHEMA, _write, {"readings": 300})
    # (pairs: ORDER BY j alone cannot tie within one k, which the lookup fixes)


def test_a_window_postgres_errors_on_goes_upstream(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE o (id int PRIMARY KEY, k int, x float8);"
            "INSERT INTO o VALUES (1, 1, 1.5), (2, 1, 2.5), (3, 2, 1e308)", dbname)
    sql = "SELECT id, sum(x) OVER (ORDER BY id) FROM o WHERE k = %s"
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute(f"CREATE CACHE c FROM {sql.replace('%s', '$1')}")
            assert conn.execute(sql, (1,)).fetchall() == [(1, 1.5), (2, 4.0)]
            conn.execute("INSERT INTO o VALUES (4, 1, 1.7e308), (5, 1, 1.7e308)")
            server.call(server.server.service.host.barrier(10))
            for _ in range(2):  # the cached key, then the key filled again
                with pytest.raises(psycopg.errors.NumericValueOutOfRange):
                    conn.execute(sql, (1,)).fetchall()
            conn.execute("DELETE FROM o WHERE id = 5")
            server.call(server.server.service.host.barrier(10))
            assert conn.execute(sql, (1,)).fetchall() == [(1, 1.5), (2, 4.0), (4, 1.7e308)]
            last = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert last is not None and last[0] == "cache"
    finally:
        server.stop()
