"""engine.sql.text: shapes, lifted literals and the exact-text cache."""

from __future__ import annotations

from engine.sql.text import QueryTextCache, parse_query


def test_same_shape_for_different_constants() -> None:
    a = parse_query("SELECT id FROM t WHERE a = 1 AND b = 'x'")
    b = parse_query("SELECT id FROM t WHERE a = 42 AND b = 'it''s'")
    assert a.shape == b.shape
    assert [lit.text for lit in b.literals] == ["42", "it's"]
    assert [lit.kind for lit in b.literals] == ["int", "str"]


def test_in_list_arity_and_order_by_position_are_part_of_the_shape() -> None:
    assert parse_query("SELECT a FROM t WHERE a IN (1, 2)").shape != parse_query(
        "SELECT a FROM t WHERE a IN (1, 2, 3)").shape
    assert parse_query("SELECT a, b FROM t ORDER BY 1").shape != parse_query(
        "SELECT a, b FROM t ORDER BY 2").shape


def test_literal_kinds_and_text_forms() -> None:
    q = parse_query("SELECT 0, -7, 1.5, '', true, false, NULL, B'101' FROM t")
    assert [(lit.kind, lit.text) for lit in q.literals] == [
        ("int", "0"), ("int", "-7"), ("numeric", "1.5"), ("str", ""), ("bool", "true"),
        ("bool", "false"), ("null", None), ("bits", "b101")]


def test_errors_are_data() -> None:
    assert parse_query("SELEC 1").error is not None
    assert parse_query("SELECT 1; SELECT 2").error == "not exactly one statement"
    assert parse_query("").error == "empty statement"


def test_cache_returns_the_same_object_and_is_bounded() -> None:
    cache = QueryTextCache(capacity=2)
    first = cache.get("SELECT 1")
    assert cache.get("SELECT 1") is first
    cache.get("SELECT 2")
    cache.get("SELECT 3")
    assert len(cache) == 2
    assert cache.get("SELECT 1") is not first


def test_layout_and_comments_do_not_change_the_shape() -> None:
    a = parse_query("SELECT a FROM t WHERE b = 1")
    b = parse_query("/* app:web,request:42 */ SELECT a\n  FROM t   WHERE b = 7 -- trailing")
    c = parse_query('SELECT a FROM t WHERE b = 1 /*traceparent=00-ab-cd-01*/')
    assert a.shape == b.shape == c.shape
    assert parse_query('SELECT "a  b" FROM t').shape != parse_query('SELECT "a b" FROM t').shape


def test_number_spellings_newer_than_the_upstream_are_refused() -> None:
    for sql in ("SELECT a FROM t WHERE b = 0x1F", "SELECT a FROM t WHERE b = 1_000",
                "SELECT a FROM t WHERE b = -0o17"):
        parsed = parse_query(sql)
        assert parsed.error is not None and "newer than PostgreSQL 15" in parsed.error
    assert parse_query("SELECT a FROM t WHERE b = -3 AND c = '0x1'").error is None
