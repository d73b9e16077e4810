"""Differential and invariant tests of cached reads against the real upstream.

- Differential: random tables and data, caches for several supported query shapes, random
  multi-row write transactions through weir and directly upstream; after each barrier every
  read through weir equals the same query run directly upstream — under a memory budget small
  enough to force evictions all the time.
- Invariant: concurrent transfers between accounts upstream while clients read cached
  ``SUM(balance)`` totals through weir: not one read may see another total.
"""

from __future__ import annotations

import random
import threading
from decimal import Decimal
from typing import Any

import psycopg

from tests.support import InProcessWeir

TEMPLATES = [
    # (cache definition with a literal key, template with {k})
    "SELECT id, name, score FROM {t} WHERE grp = {k}",
    "SELECT grp, count(*), sum(score), min(name), max(score) FROM {t} WHERE grp = {k} GROUP BY grp",
    "SELECT a.id, a.name, count(b.id) AS n FROM {t} a LEFT JOIN {u} b ON b.ref = a.id "
    "WHERE a.id = {k} GROUP BY a.id, a.name",
    "SELECT id, score FROM {t} WHERE grp = {k} ORDER BY score DESC, id LIMIT 3",
    "SELECT DISTINCT score FROM {t} WHERE grp = {k}",
    "SELECT b.id, b.note, a.name FROM {u} b JOIN {t} a ON a.id = b.ref WHERE b.ref = {k}",
    "SELECT count(*) FROM {t} WHERE grp = {k} AND score > 10",
]


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], ordered: bool) -> bool:
    return got == want if ordered else sorted(map(repr, got)) == sorted(map(repr, want))


def test_differential_random_writes_and_reads(pg: Any, dbname: str) -> None:
    rng = random.Random(20261121)
    pg.psql(
        "CREATE TABLE things (id int PRIMARY KEY, grp int, name text, score int);"
        "CREATE TABLE notes (id int PRIMARY KEY, ref int, note text)",
        dbname,
    )
    pg.psql(
        "INSERT INTO things SELECT g, g % 20, 'n' || (g * 7 % 13), (g * 31) % 50 "
        "FROM generate_series(1, 300) g;"
        "INSERT INTO notes SELECT g, g % 40, 'note ' || g FROM generate_series(1, 400) g",
        dbname,
    )
    server = InProcessWeir.start(pg.dsn(dbname=dbname), memory_budget=20_000)
    try:
        through = psycopg.connect(
            server.dsn(dbname=dbname), autocommit=True, prepare_threshold=None
        )
        direct = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
        shapes = [t.format(t="things", u="notes", k="{k}") for t in TEMPLATES]
        for i, shape in enumerate(shapes):
            through.execute(f"CREATE CACHE c{i} FROM " + shape.format(k=1))
        next_id = {"things": 1000, "notes": 1000}
        served = mismatches = 0
        for _step in range(120):
            conn = through if rng.random() < 0.5 else direct
            with conn.transaction():
                for _ in range(rng.randint(1, 4)):
                    _random_write(conn, rng, next_id)
            server.call(server.server.service.host.barrier(10))
            for _ in range(12):
                shape = rng.choice(shapes)
                sql = shape.format(k=rng.randint(0, 45))
                got = _rows(through, sql)
                where = through.execute("EXPLAIN LAST STATEMENT").fetchone()
                want = _rows(direct, sql)
                served += where is not None and where[0] == "cache"
                if not _same(got, want, "ORDER BY" in sql):
                    mismatches += 1
                    print("MISMATCH", sql, got, want)
        stats = dict(through.execute("SHOW WEIR STATUS").fetchall())
        print(f"served from cache: {served} of {120 * 12}; evictions {stats['evictions']}; "
              f"memoized answers {stats['memoized_answers']}")
        assert mismatches == 0
        assert served > 120 * 12 * 0.8
        assert int(stats["evictions"]) > 0
    finally:
        server.stop()


def _random_write(
    conn: psycopg.Connection[Any], rng: random.Random, next_id: dict[str, int]
) -> None:
    op = rng.random()
    if op < 0.35:
        next_id["things"] += 1
        conn.execute(
            "INSERT INTO things VALUES (%s, %s, %s, %s)",
            (next_id["things"], rng.randint(0, 45), f"n{rng.randint(0, 12)}", rng.randint(0, 60)),
        )
    elif op < 0.55:
        next_id["notes"] += 1
        conn.execute(
            "INSERT INTO notes VALUES (%s, %s, %s)",
            (next_id["notes"], rng.randint(0, 45), f"note {rng.randint(0, 999)}"),
        )
    elif op < 0.8:
        conn.execute(
            "UPDATE things SET score = score + %s, grp = CASE WHEN %s THEN %s ELSE grp END "
            "WHERE id = %s",
            (
                rng.randint(-5, 5),
                rng.random() < 0.3,
                rng.randint(0, 45),
                rng.randint(1, next_id["things"]),
            ),
        )
    elif op < 0.9:
        conn.execute("DELETE FROM things WHERE id = %s", (rng.randint(1, next_id["things"]),))
    else:
        conn.execute(
            "UPDATE notes SET ref = %s WHERE id = %s",
            (rng.randint(0, 45), rng.randint(1, next_id["notes"])),
        )


def test_transfers_never_show_a_torn_total(pg: Any, dbname: str) -> None:
    accounts, per_branch = 40, 10
    pg.psql(
        "CREATE TABLE accounts (id int PRIMARY KEY, branch int NOT NULL, balance numeric NOT NULL)",
        dbname,
    )
    pg.psql(
        f"INSERT INTO accounts SELECT g, g % {accounts // per_branch}, 100 "
        f"FROM generate_series(0, {accounts - 1}) g",
        dbname,
    )
    total = Decimal(100 * accounts)
    branch_total = Decimal(100 * per_branch)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    stop = threading.Event()
    errors: list[str] = []

    def transfers() -> None:
        rng = random.Random(7)
        with psycopg.connect(pg.dsn(dbname=dbname)) as conn:
            while not stop.is_set():
                a = rng.randrange(accounts)
                b = (a + (accounts // per_branch) * rng.randint(1, per_branch - 1)) % accounts
                amount = rng.randint(1, 50)
                with conn.transaction():
                    conn.execute(
                        "UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, a)
                    )
                    conn.execute(
                        "UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, b)
                    )

    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute("CREATE CACHE total FROM SELECT sum(balance) FROM accounts")
            admin.execute(
                "CREATE CACHE by_branch FROM SELECT sum(balance) FROM accounts WHERE branch = 1"
            )
        writer = threading.Thread(target=transfers)
        writer.start()

        def reader(seed: int) -> None:
            rng = random.Random(seed)
            prepared = seed % 2 == 1  # named prepared statements: the hit path's other memo
            with psycopg.connect(
                server.dsn(dbname=dbname), autocommit=True,
                prepare_threshold=0 if prepared else None
            ) as conn:
                for _ in range(300):
                    got = conn.execute("SELECT sum(balance) FROM accounts").fetchone()
                    if got != (total,):
                        errors.append(f"total {got}")
                    branch = rng.randrange(accounts // per_branch)
                    got = (conn.execute("SELECT sum(balance) FROM accounts WHERE branch = %s",
                                        (branch,)) if prepared else conn.execute(
                        f"SELECT sum(balance) FROM accounts WHERE branch = {branch}")
                           ).fetchone()
                    if got != (branch_total,):
                        errors.append(f"branch {branch}: {got}")
                    last = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
                    if last is None or last[0] != "cache":
                        errors.append(f"not served from cache: {last}")

        readers = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        stop.set()
        writer.join()
        assert errors == []
        assert server.server.service.hits.served > 0
    finally:
        stop.set()
        server.stop()
