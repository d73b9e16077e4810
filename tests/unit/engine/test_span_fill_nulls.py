"""Interval fills of top-k state over a nullable column (``Span.nulls``): what a fill's
fetched rows fill (``fills.filled_span``) and the statement that fetches them
(``fill_sql.span_query``). NULL is the point past every value: last ascending, first
descending, and the k-th row is counted with the NULL rows."""

from __future__ import annotations

from engine.dataflow.fills import filled_span
from engine.dataflow.state.intervals import Span
from engine.plan.fill_sql import span_query
from engine.plan.ir import Column, TableRef
from engine.values import oids as T

POSTS = TableRef(11, "public", "posts", (Column("id", T.INT4), Column("rank", T.INT4)), (0,))


def _span(**kw: object) -> Span:
    return Span(1, T.INT4, **kw)  # type: ignore[arg-type]


def test_ascending_fill_with_a_null_kth_fills_the_whole_span() -> None:
    span = _span(first=3, nulls=True)
    assert filled_span(span, 1, [(1, 5), (2, None), (3, None)]) == _span(nulls=True)
    # a valued k-th: up to it, the NULL point not reached
    assert filled_span(span, 1, [(1, 5), (2, 7), (3, 7)]) == _span(hi=7, hi_incl=True)
    # fewer rows than asked: all of it, NULLs included
    assert filled_span(span, 1, [(1, 5)]) == _span(nulls=True)


def test_descending_fill_counts_the_nulls_first() -> None:
    span = _span(first=2, nulls=True, from_top=True)
    assert filled_span(span, 1, [(1, None), (2, None), (3, None)]) == _span(
        nulls=True, only_nulls=True)  # the k-th is NULL: the NULL point alone
    assert filled_span(span, 1, [(1, None), (2, 4), (3, 9)]) == _span(
        lo=4, lo_incl=True, nulls=True)


def test_span_query_reaches_the_null_rows() -> None:
    sql, params = span_query(POSTS, 1, _span(nulls=True, only_nulls=True))
    assert sql.endswith('WHERE "rank" IS NULL') and params == ()
    sql, params = span_query(POSTS, 1, _span(lo=3, nulls=True), ((0, 8),))
    assert sql.endswith('WHERE "id" = $1 AND ("rank" > $2 OR "rank" IS NULL)')
    assert params == (8, 3)
    sql, _ = span_query(POSTS, 1, _span(nulls=True, first=4))
    assert 'WHERE TRUE AND ((SELECT "rank" FROM "public"."posts" WHERE TRUE ORDER BY "rank" ' \
        'OFFSET 3 LIMIT 1) IS NULL OR "rank" <=' in sql
    sql, _ = span_query(POSTS, 1, _span(nulls=True, first=4, from_top=True))
    assert '"rank" IS NULL OR ((SELECT "rank" IS NULL FROM' in sql and "DESC" in sql
    assert span_query(POSTS, 1, _span())[0].endswith('WHERE "rank" IS NOT NULL')
