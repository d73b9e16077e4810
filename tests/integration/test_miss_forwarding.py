"""Misses of a held prepared statement forwarded as the client sent them (``proxy.missfast``),
against the real upstream: PostgreSQL's answers reach the client unchanged, each miss is
counted once and queues its key's fill, and the fills then serve the same statement."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import proxy.relay
from proxy import missfast
from proxy.misses import MISS
from tests.support import InProcessWeir, eventually, weir_over

SETTINGS = {"misses": "upstream", "admission": "always", "hit_lanes": 0}
QUERY = "SELECT v, k FROM kv WHERE k = %s"
KV = ("CREATE TABLE kv (k int PRIMARY KEY, v text);"
      "INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, 20) g")


@contextlib.contextmanager
def _kv_cached(pg: Any, dbname: str) -> Iterator[tuple[InProcessWeir, psycopg.Connection[Any]]]:
    """weir over ``kv`` (20 rows) and a session through it that made the cache ``kv1``."""
    with weir_over(pg, dbname, KV, **SETTINGS) as server, \
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute("CREATE CACHE kv1 FROM SELECT v, k FROM kv WHERE k = $1")
        yield server, conn


@pytest.fixture
def forwarded(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The chunks ``proxy.missfast.try_forward`` forwarded (a spy; it still runs)."""
    seen: list[bytes] = []
    real = missfast.try_forward

    def spy(session: Any, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
        done = real(session, raw, index)
        if done:
            seen.append(raw)
        return done

    monkeypatch.setattr(proxy.relay, "try_forward", spy)
    return seen


def _last(conn: Any) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return (row[0], row[1])


def test_misses_of_a_prepared_statement_go_upstream_as_sent(pg: Any, dbname: str,
                                                             forwarded: list[bytes]) -> None:
    with _kv_cached(pg, dbname) as (server, conn):
        host = server.server.service.host
        cur = conn.cursor()
        # the first miss prepares the held statement upstream (the general path)
        assert cur.execute(QUERY, (1,), prepare=True).fetchall() == [("v1", 1)]
        assert not forwarded
        for k in range(2, 8):
            cur.execute(QUERY, (k,), prepare=True)
            assert cur.description is not None
            assert [d.name for d in cur.description] == ["v", "k"]
            assert cur.fetchall() == [(f"v{k}", k)]
            assert _last(conn) == ("upstream", MISS)
        assert len(forwarded) == 6  # every later miss went upstream as sent
        assert host.engine.stats.misses == 7  # each counted once
        # a missing key (no row upstream) is a miss too, answered by PostgreSQL
        assert cur.execute(QUERY, (99,), prepare=True).fetchall() == []
        assert len(forwarded) == 7
        # the fills queued by the forwarded misses serve the statement (keys 5 and 6 may be
        # filled by different upstream transactions, so each is waited for)
        eventually(lambda: all(
            cur.execute(QUERY, (k,), prepare=True).fetchall() == [(f"v{k}", k)]
            and _last(conn) == ("cache", "served by cache kv1") for k in (5, 6)))
        hits, before = host.engine.stats.hits, len(forwarded)
        assert cur.execute(QUERY, (6,), prepare=True).fetchall() == [("v6", 6)]
        assert _last(conn) == ("cache", "served by cache kv1")
        assert host.engine.stats.hits == hits + 1  # a hit is counted once
        assert len(forwarded) == before  # (hits are not forwarded)
        # inside a transaction block the general path decides (reads go upstream)
        with conn.transaction():
            assert cur.execute(QUERY, (11,), prepare=True).fetchall() == [("v11", 11)]
        assert len(forwarded) == before


def test_a_statement_only_weir_holds_is_not_forwarded(pg: Any, dbname: str,
                                                      forwarded: list[bytes]) -> None:
    """Until PostgreSQL confirmed the statement, a miss takes the general path (which
    prepares it upstream); a statement closed by the client is gone for both."""
    with _kv_cached(pg, dbname) as (_server, conn):
        cur = conn.cursor()
        assert cur.execute(QUERY, (3,), prepare=True).fetchall() == [("v3", 3)]
        assert cur.execute(QUERY, (4,), prepare=True).fetchall() == [("v4", 4)]
        assert len(forwarded) == 1
        conn.execute("DEALLOCATE ALL")  # psycopg prepares it again next time
        assert cur.execute(QUERY, (8,), prepare=True).fetchall() == [("v8", 8)]
        assert len(forwarded) == 1
        assert cur.execute(QUERY, (9,), prepare=True).fetchall() == [("v9", 9)]
        assert len(forwarded) == 2
