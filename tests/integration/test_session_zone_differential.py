"""Caches of date/time forms that read the session TimeZone, against the real upstream.

Two sessions through weir in different TimeZones (Europe/Paris and America/New_York) each
create caches of the same statements: the zone is part of the cache identity, so each gets
its own cache, computed in its zone. Random write transactions (through weir and directly),
then reads from both sessions (text and binary) must equal PostgreSQL's answers in a direct
session of the same TimeZone, most of them served by the cache. A statement prepared in one
zone and run after ``SET TimeZone`` goes upstream with the reason (EXPLAIN LAST STATEMENT),
and a session in a zone weir does not compute in sees the reason in SHOW PROXIED QUERIES.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

from tests.integration.test_cache_shapes_differential import (
    SCHEMA,
    Shape,
    _ids,
    _random_write,
    _same,
)
from tests.support import InProcessWeir

SHAPES = [
    Shape("SELECT id, date_trunc('day', at) AS day, extract(hour FROM at) AS h, "
          "extract(dow FROM at) AS d, at::date AS local_day, at::timestamp AS local "
          "FROM things WHERE grp = $1", lambda r: (r.randint(0, 45),)),
    Shape("SELECT grp, date_trunc('month', at) AS m, count(*) FROM things WHERE grp = ANY($1) "
          "GROUP BY grp, date_trunc('month', at)", lambda r: (_ids(r, 45),)),
    Shape("SELECT id, at + interval '1 month 1 day 2 hours' AS later, "
          "at - interval '3 days' AS before, date_trunc('week', day) AS wk, "
          "day::timestamptz AS midnight, made::timestamptz AS instant FROM things "
          "WHERE grp = $1", lambda r: (r.randint(0, 45),)),
    Shape("SELECT id FROM things WHERE grp = $1 AND extract(hour FROM at) < 12 ORDER BY id",
          lambda r: (r.randint(0, 45),), ordered=True),
    Shape("SELECT id, at FROM things WHERE grp = $1 AND at >= '2024-03-31 02:30:00' "
          "AND at < '2024-04-30'", lambda r: (r.randint(0, 45),)),
]
ZONES = ("Europe/Paris", "America/New_York")


def _text(shape: Shape, params: tuple[Any, ...]) -> str:
    text = shape.sql.replace("%", "%%")
    for n in range(len(params), 0, -1):
        text = text.replace(f"${n}", "%s")
    return text


def _connect(dsn: str, zone: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
    conn.adapters.register_loader("interval", TextLoader)
    conn.execute(f"SET TimeZone = '{zone}'")
    return conn


def test_two_sessions_in_two_zones(pg: Any, dbname: str) -> None:
    rng = random.Random(20261127)
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    through = {z: _connect(server.dsn(dbname=dbname), z) for z in ZONES}
    direct = {z: _connect(pg.dsn(dbname=dbname), z) for z in ZONES}
    try:
        for zone, conn in through.items():
            for i, shape in enumerate(SHAPES):
                conn.execute(f"CREATE CACHE {zone.split('/')[1].lower()}{i} FROM {shape.sql}")
        caches = through[ZONES[0]].execute("SHOW CACHES").fetchall()
        assert len(caches) == 2 * len(SHAPES), caches  # one cache per statement and zone
        next_id = {"things": 1000, "notes": 1000}
        served = reads = 0
        mismatches = []
        for _step in range(40):
            writer = direct[ZONES[0]] if rng.random() < 0.5 else through[ZONES[1]]
            with writer.transaction():
                for _ in range(rng.randint(1, 4)):
                    _random_write(writer, rng, next_id)
            server.call(server.server.service.host.barrier(10))
            for _ in range(6):
                zone, shape = rng.choice(ZONES), rng.choice(SHAPES)
                params = shape.params(rng)
                binary = rng.random() < 0.5
                want = direct[zone].execute(_text(shape, params), params, binary=binary)
                got = through[zone].execute(_text(shape, params), params, binary=binary)
                last = through[zone].execute("EXPLAIN LAST STATEMENT").fetchone()
                reads += 1
                served += last is not None and last[0] == "cache"
                if not _same(got.fetchall(), want.fetchall(), shape.ordered):
                    mismatches.append((zone, shape.sql, params))
        print(f"served from cache: {served} of {reads}")
        assert mismatches == []
        assert served > reads * 0.8
    finally:
        for conn in (*through.values(), *direct.values()):
            conn.close()
        server.stop()


def test_a_session_that_changes_zone_reads_upstream(pg: Any, dbname: str) -> None:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    shape = SHAPES[0]
    try:
        with _connect(server.dsn(dbname=dbname), "Europe/Paris") as conn, \
                _connect(pg.dsn(dbname=dbname), "Europe/Paris") as direct:
            conn.execute(f"CREATE CACHE paris FROM {shape.sql}")
            sql = _text(shape, (3,))
            for _ in range(2):  # prepared (held) once it runs twice
                assert sorted(conn.execute(sql, (3,), prepare=True).fetchall()) == \
                    sorted(direct.execute(sql, (3,)).fetchall())
                assert conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0] == "cache"  # type: ignore[index]
            for c in (conn, direct):
                c.execute("SET TimeZone = 'Asia/Tokyo'")
            got = conn.execute(sql, (3,), prepare=True).fetchall()
            assert sorted(got) == sorted(direct.execute(sql, (3,)).fetchall())
            why = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert why is not None and why[0] == "upstream", why
            assert "TimeZone 'Asia/Tokyo'" in why[1], why
            # a literal key without an offset: read in each session's zone
            for zone in ("Europe/Paris", "America/New_York"):
                for c in (conn, direct):
                    c.execute(f"SET TimeZone = '{zone}'")
                for local in ("2024-03-10 08:00:00", "2024-03-10 02:00:00", "2024-03-31 03:00"):
                    sql = f"SELECT id, grp FROM things WHERE at = '{local}'"
                    conn.execute(f"CREATE CACHE FROM {sql}")
                    for _ in range(2):
                        assert conn.execute(sql).fetchall() == direct.execute(sql).fetchall()
                    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
                    assert row is not None and row[0] == "cache", (zone, local, row)
            # a zone weir does not compute in: upstream, the reason shown
            for c in (conn, direct):
                c.execute("SET TimeZone = 'EST5EDT'")
            plain = "SELECT date_trunc('day', at) FROM things WHERE grp = 7"
            assert conn.execute(plain).fetchall() == direct.execute(plain).fetchall()
            shown = {r[1]: r[2] for r in conn.execute("SHOW PROXIED QUERIES WITH LITERALS")}
            assert "session TimeZone 'EST5EDT'" in shown[plain], shown
    finally:
        server.stop()
