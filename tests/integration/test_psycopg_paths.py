"""psycopg 3's protocol paths through weir, differential against PostgreSQL directly.

psycopg keeps its own test suite in its repository only (its source distribution has no
tests), so its protocol paths are covered here: pipeline mode (with an error in the middle),
prepared statements at every ``prepare_threshold``, binary results and parameters, COPY in
and out (text and binary), server-side cursors, ``executemany`` (with ``returning``), and
notifications. Every scenario runs directly and through weir in each caching mode (off;
explicit with caches over the queries it reads; auto creating a cache after one run), three
times through weir so the later runs meet warm caches; the answers must be equal. The cached
modes must also have served some reads from the caches, so the cached paths were taken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support import InProcessWeir, eventually

Scenario = Callable[[str], list[Any]]

SCHEMA = """
CREATE TABLE pp (id int PRIMARY KEY, v text, n int, b bytea, t timestamptz);
INSERT INTO pp SELECT g, 'v' || g, g * 10, decode(lpad(to_hex(g), 4, '0'), 'hex'),
                      '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 hour'
FROM generate_series(1, 50) g;
CREATE TABLE pp_sink (id int PRIMARY KEY, v text);
"""
READ = "SELECT v, n FROM pp WHERE id = %s"
READ_ALL = "SELECT id, v, n, b, t FROM pp WHERE id = %s"
CACHES = ("CREATE CACHE pp_read FROM SELECT v, n FROM pp WHERE id = $1",
          "CREATE CACHE pp_all FROM SELECT id, v, n, b, t FROM pp WHERE id = $1")


def _rows(cur: psycopg.Cursor[Any]) -> list[Any]:
    return [tuple(r) for r in cur.fetchall()]


@contextlib.contextmanager
def _sink(dsn: str) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Cursor[Any]]]:
    """An autocommit connection with ``pp_sink`` emptied, and a cursor on it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE pp_sink")
        with conn.cursor() as cur:
            yield conn, cur


def _result_sets(cur: psycopg.Cursor[Any]) -> list[Any]:
    """The rows of each result set an ``executemany(..., returning=True)`` left."""
    sets = []
    while True:
        sets.append(_rows(cur))
        if not cur.nextset():
            return sets


def pipeline(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE pp_sink")
        # outside a pipeline (auto mode counts a statement only when nothing is pending)
        out.append(_rows(conn.execute(READ, (1,))))
        with conn.pipeline():
            curs = [conn.execute(READ, (i,)) for i in (1, 2, 3)]
            ins = conn.execute("INSERT INTO pp_sink VALUES (%s, %s)", (1, "x"))
            after = conn.execute("SELECT v FROM pp_sink WHERE id = %s", (1,))
            curs2 = [conn.execute(READ_ALL, (i,)) for i in (4, 5)]
        out += [_rows(c) for c in curs] + [ins.rowcount, _rows(after)]
        out += [_rows(c) for c in curs2]
        # an error in the middle: the rest of the pipeline is skipped, as PostgreSQL does
        # (unprepared: psycopg itself loses track of a statement it prepared in a failed
        # pipeline, directly too)
        with pytest.raises(psycopg.errors.DivisionByZero), conn.pipeline():
            first = conn.execute(READ, (6,), prepare=False)
            conn.execute("SELECT 1 / 0")
            conn.execute(READ, (7,), prepare=False)
        out.append(_rows(first))
        with conn.pipeline() as p:  # explicit syncs between groups
            a = conn.execute(READ, (8,))
            p.sync()
            b = conn.execute(READ, (9,), binary=True)
        out += [_rows(a), _rows(b)]
    return out


def prepared(dsn: str) -> list[Any]:
    out: list[Any] = []
    for threshold in (0, 1, 5, None):
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=threshold) as conn:
            for i in range(1, 8):
                out.append(_rows(conn.execute(READ, (i,))))
            out.append(_rows(conn.execute(READ_ALL, (3,), prepare=True)))
            conn.execute("DEALLOCATE ALL")
            out.append(_rows(conn.execute(READ, (4,))))
    return out


def binary(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.cursor(binary=True) as cur:
            for i in (1, 2, 2, 3):
                out.append(_rows(cur.execute(READ_ALL, (i,))))
        cur2 = conn.cursor()
        for i in (4, 4):
            out.append(_rows(cur2.execute(READ_ALL, (i,), binary=True)))
            out.append([c.type_code for c in cur2.description or ()])
        # binary parameters
        cur3 = conn.cursor()
        out.append(_rows(cur3.execute("SELECT v, n FROM pp WHERE id = %b", (5,))))
    return out


def copy(dsn: str) -> list[Any]:
    out: list[Any] = []
    with _sink(dsn) as (conn, cur):
        with cur.copy("COPY (SELECT id, v FROM pp WHERE id <= 5 ORDER BY id) TO STDOUT") as cp:
            out.append([bytes(chunk) for chunk in cp])
        with cur.copy("COPY (SELECT id, v FROM pp WHERE id <= 5 ORDER BY id) "
                      "TO STDOUT (FORMAT BINARY)") as cp:
            cp.set_types(["int4", "text"])
            out.append(list(cp.rows()))
        with cur.copy("COPY pp_sink (id, v) FROM STDIN") as cp:
            for i in range(3):
                cp.write_row((100 + i, f"c{i}"))
        with cur.copy("COPY pp_sink (id, v) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int4", "text"])
            for i in range(3):
                cp.write_row((200 + i, f"b{i}"))
        out.append(cp.rowcount if hasattr(cp, "rowcount") else None)
        out.append(_rows(cur.execute("SELECT id, v FROM pp_sink ORDER BY id")))
        out.append(_rows(cur.execute(READ, (1,))))
        # a failing COPY FROM leaves the session usable
        with pytest.raises(psycopg.errors.UniqueViolation), conn.cursor() as cur, \
                cur.copy("COPY pp_sink (id, v) FROM STDIN") as cp:
            cp.write_row((100, "dup"))
        out.append(_rows(conn.execute(READ, (2,))))
    return out


def server_cursors(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn) as conn:  # named cursors need a transaction (autocommit off)
        with conn.cursor(name="pp_cur") as cur:
            cur.itersize = 7
            cur.execute("SELECT id, v FROM pp ORDER BY id")
            out.append([tuple(r) for r in cur])
        with conn.cursor(name="pp_cur2") as cur:
            cur.execute(READ_ALL, (3,))
            out.append([tuple(r) for r in cur.fetchmany(5)])
        with conn.cursor(name="pp_cur3", scrollable=True) as cur:
            cur.execute("SELECT id FROM pp ORDER BY id")
            cur.scroll(10)
            out.append([tuple(r) for r in cur.fetchmany(3)])
            cur.scroll(0, mode="absolute")
            out.append(tuple(cur.fetchone() or ()))
        conn.commit()
        with conn.cursor(name="pp_hold", withhold=True) as cur:
            cur.execute("SELECT id FROM pp WHERE id < 4 ORDER BY id")
            conn.commit()
            out.append([tuple(r) for r in cur])
        out.append(_rows(conn.execute(READ, (3,))))
        conn.commit()
    return out


def executemany(dsn: str) -> list[Any]:
    out: list[Any] = []
    with _sink(dsn) as (conn, cur):
        cur.executemany("INSERT INTO pp_sink VALUES (%s, %s)",
                        [(i, f"m{i}") for i in range(20)])
        out.append(cur.rowcount)
        cur.executemany("SELECT v, n FROM pp WHERE id = %s", [(i,) for i in (1, 2, 3)],
                        returning=True)
        out.append(_result_sets(cur))
        cur.executemany("UPDATE pp_sink SET v = %s WHERE id = %s RETURNING id, v",
                        [(f"u{i}", i) for i in range(3)], returning=True)
        out.append(_result_sets(cur))
        out.append(_rows(conn.execute("SELECT count(*), min(v) FROM pp_sink")))
        out.append(_rows(conn.execute(READ, (3,))))
    return out


def notifies(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as conn, \
            psycopg.connect(dsn, autocommit=True) as other:
        conn.execute("LISTEN pp_chan")
        conn.execute("NOTIFY pp_chan, 'self'")
        other.execute("SELECT pg_notify('pp_chan', 'other')")
        out.append(_rows(conn.execute(READ, (1,))))
        got = []
        for n in conn.notifies(timeout=5, stop_after=2):
            got.append((n.channel, n.payload, n.pid == conn.info.backend_pid,
                        n.pid == other.info.backend_pid))
        out.append(got)
        conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier("pp_chan")))
    return out


def transactions(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn) as conn:  # autocommit off: psycopg begins a transaction
        out += [_rows(conn.execute(READ, (i,))) for i in (1, 2, 1)]
        conn.execute("UPDATE pp SET n = n + 1 WHERE id = 2")
        out += [_rows(conn.execute(READ, (i,))) for i in (2, 3)]
        conn.rollback()
        out.append(_rows(conn.execute(READ, (2,))))
        with conn.transaction():  # a savepoint inside the open transaction
            out.append(_rows(conn.execute(READ_ALL, (4,))))
        conn.commit()
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        out += [_rows(conn.execute(READ, (i,))) for i in (5, 5)]
        conn.commit()
    return out


SCENARIOS: dict[str, Scenario] = {
    "pipeline": pipeline, "prepared": prepared, "binary": binary, "copy": copy,
    "server_cursors": server_cursors, "executemany": executemany, "notifies": notifies,
    "transactions": transactions,
}
MODES = {
    "off": {"caching": "off"},
    "explicit": {"caching": "explicit"},
    "auto": {"caching": "auto", "auto_after": 1},
}


@pytest.fixture(params=list(MODES))
def through(request: Any, pg: Any, dbname: str) -> Iterator[tuple[str, InProcessWeir]]:
    pg.psql(SCHEMA, dbname)
    mode = request.param
    weir = InProcessWeir.start(pg.dsn(dbname=dbname), **MODES[mode])
    try:
        if mode == "explicit":
            with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
                for create in CACHES:
                    conn.execute(create)
        yield mode, weir
    finally:
        weir.stop()


def _hits(weir: InProcessWeir, dbname: str) -> int:
    with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
        rows = dict(conn.execute("SHOW WEIR STATUS").fetchall())
    return int(rows.get("hits", 0))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_psycopg_path_is_transparent(pg: Any, dbname: str, name: str,
                                     through: tuple[str, InProcessWeir]) -> None:
    mode, weir = through
    scenario = SCENARIOS[name]
    direct = scenario(pg.dsn(dbname=dbname))

    def run() -> bool:
        assert scenario(weir.dsn(dbname=dbname)) == direct
        return mode == "off" or _hits(weir, dbname) > 0

    # auto mode: the first run makes the caches, the second fills them, the third hits
    for _ in range(3):
        run()
    if mode != "off" and name not in ("copy", "notifies", "server_cursors", "transactions"):
        eventually(run, 20)


@pytest.mark.parametrize("encoding", ["LATIN1", "KOI8R"])
def test_statements_in_another_client_encoding(pg: Any, dbname: str, encoding: str) -> None:
    """A client whose client_encoding is not UTF-8 sends statement texts in that encoding:
    weir relays them byte for byte (it used to close the connection: "invalid UTF-8")."""
    pg.psql("CREATE TABLE enc_t (id int PRIMARY KEY, v text);"
            "INSERT INTO enc_t VALUES (1, 'é'), (2, 'ж')", dbname)
    weir = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=1)
    text = "é" if encoding == "LATIN1" else "ж"
    try:
        answers = []
        for dsn in (pg.dsn(dbname=dbname), weir.dsn(dbname=dbname)):
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"SET client_encoding = '{encoding}'")
                for _ in range(3):
                    answers.append(conn.execute(
                        f"SELECT id, v FROM enc_t WHERE v = '{text}'").fetchall())
                    answers.append(conn.execute("SELECT v FROM enc_t WHERE id = %s",
                                                (1 if encoding == "LATIN1" else 2,)).fetchall())
        assert answers[:6] == answers[6:]
    finally:
        weir.stop()
