"""engine.sql.cacheable: the syntactic screen and its reasons."""

from __future__ import annotations

import pytest

from engine.sql.cacheable import SUPPORTED, Unsupported, check_statement
from engine.sql.text import parse_query


def screen(sql: str) -> object:
    stmt = parse_query(sql).stmt
    assert stmt is not None
    return check_statement(stmt)


@pytest.mark.parametrize(("sql", "reason"), [
    ("SELECT now()", "volatile function now()"),
    ("SELECT a FROM t WHERE b < random()", "volatile function random()"),
    ("SELECT a FROM t WHERE d = CURRENT_DATE", "volatile function current_date"),
    ("SELECT a FROM t FOR UPDATE", "FOR UPDATE"),
    ("SELECT a FROM t FOR SHARE", "FOR SHARE"),
    ("INSERT INTO t VALUES (1)", "not a SELECT (INSERT)"),
    ("SELECT DISTINCT ON (a) a, b FROM t", "DISTINCT ON"),
    ("SELECT ntile(2) OVER () FROM t", "window function ntile() OVER (...)"),
    ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", "recursive CTE (WITH RECURSIVE)"),
    ("SELECT * FROM generate_series(1, 3)", "function in FROM"),
    ("SELECT a FROM ONLY t", "ONLY (inheritance control)"),
    ("SELECT a FROM t GROUP BY ROLLUP (a)", "GROUPING SETS / ROLLUP / CUBE"),
    ("SELECT a FROM t ORDER BY a COLLATE \"C\"", "explicit COLLATE"),
    ("VALUES (1), (2)", "VALUES list"),  # a FROM item VALUES is left to the planner
    ("SELECT * FROM (VALUES (1) ORDER BY 1) v", "VALUES list"),
    ("SELECT (r).x FROM t", "field selection"),
])
def test_unsupported_reasons(sql: str, reason: str) -> None:
    assert screen(sql) == Unsupported(reason)


@pytest.mark.parametrize("sql", [
    "SELECT a, count(*) FROM t WHERE b = $1 GROUP BY a HAVING count(*) > 2 ORDER BY a LIMIT 5",
    "SELECT a FROM t UNION ALL SELECT a FROM u",
    "WITH x AS (SELECT a FROM t) SELECT a FROM x",
    "SELECT DISTINCT a FROM t",
    "SELECT a[1:2], a[:1], ARRAY[a, b] FROM t",  # left to the planner
])
def test_supported_shapes_pass(sql: str) -> None:
    assert screen(sql) is SUPPORTED
