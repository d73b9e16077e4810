"""The staleness bound (docs/consistency.md): a cached read is served only while weir's
replication stream is known to be at most ``--staleness-bound`` seconds behind the upstream;
past it, the read goes upstream and EXPLAIN LAST STATEMENT says why, in both protocols and on
the memoized hit path of repeated prepared reads."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support import InProcessWeir, eventually


def _setup(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            "INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, 10) g", dbname)


def _read(conn: psycopg.Connection[Any], k: int) -> tuple[str, str]:
    """Read key ``k`` (prepared after the first time); where it was served and why."""
    assert conn.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone() == (f"v{k}",)
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    assert row is not None
    return (row[0], row[1])


def _connect(server: InProcessWeir, dbname: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(server.dsn(dbname=dbname), autocommit=True, prepare_threshold=0)
    conn.execute("CREATE CACHE kv_by_k FROM SELECT v FROM kv WHERE k = $1")
    return conn


def test_reads_past_the_staleness_bound_go_upstream(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), staleness_bound=0.0)
    try:
        with _connect(server, dbname) as conn:
            where = [_read(conn, k) for k in (1, 1, 2, 2, 2, 2)]
    finally:
        server.stop()
    assert all(dest == "upstream" for dest, _ in where), where
    assert all("staleness bound" in why or "heartbeat" in why for _, why in where), where


def test_reads_within_the_staleness_bound_are_cached(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), staleness_bound=30.0)
    try:
        with _connect(server, dbname) as conn:
            eventually(lambda: _read(conn, 2)[0] == "cache")
            assert [_read(conn, 2)[0] for _ in range(3)] == ["cache"] * 3
    finally:
        server.stop()
