"""Queries whose result depends on a collation weir cannot reproduce go upstream, and say so.

A column under an ICU collation (``en-x-icu``: ``a A b B``, not the byte order ``A B a b``):
ORDER BY, min/max and comparisons on it are answered by PostgreSQL (the same rows as directly,
EXPLAIN LAST STATEMENT says upstream) and SHOW PROXIED QUERIES gives the collation as the
reason; CREATE CACHE refuses them with it. The same statements on a "C" column are cached.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support import InProcessWeir

SCHEMA = """
CREATE TABLE people (id int PRIMARY KEY, name text COLLATE "en-x-icu", code text COLLATE "C");
INSERT INTO people VALUES (1, 'b', 'b'), (2, 'A', 'A'), (3, 'a', 'a'), (4, 'B', 'B');
"""
ICU = ["SELECT id, name FROM people ORDER BY name, id", "SELECT min(name), max(name) FROM people",
       "SELECT id FROM people WHERE name < 'b' ORDER BY id"]


def test_collation_dependent_reads_go_upstream_with_the_reason(pg: Any, dbname: str) -> None:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            c_order = "SELECT id, code FROM people ORDER BY code, id"
            conn.execute(f"CREATE CACHE FROM {c_order}")  # caching on (queries are noted)
            assert conn.execute(c_order).fetchall() == direct.execute(c_order).fetchall()
            row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert row is not None and row[0] == "cache"
            for sql in ICU:
                for _ in range(2):
                    assert conn.execute(sql).fetchall() == direct.execute(sql).fetchall()
                    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
                    assert row is not None and row[0] == "upstream", sql
                with pytest.raises(psycopg.Error, match="en-x-icu"):
                    conn.execute(f"CREATE CACHE FROM {sql}")
            assert conn.execute(ICU[0]).fetchall()[:2] == [(3, "a"), (2, "A")]  # not bytes
            shown = {r[1]: r[2] for r in conn.execute("SHOW PROXIED QUERIES WITH LITERALS")}
            for sql in ICU:
                assert "collation en-x-icu" in shown[sql], shown
    finally:
        server.stop()
