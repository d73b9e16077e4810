"""``proxy.rules.with_writes``: a data-modifying WITH whose own statement writes (its tag
tells, so it hides no write) against every form it must leave to ``hides_write``."""

from __future__ import annotations

import pytest

from proxy.rules import hides_write, hiding_words, with_writes

TELLS = [
    "WITH v AS (INSERT INTO votes VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING story_id) "
    "UPDATE stories SET score = score + 1 WHERE id IN (SELECT story_id FROM v)",
    "with recursive a(x) as (select 1), b as materialized (delete from t returning 1) "
    "insert into u select * from b",
    "with a as not materialized (select ')' as p), \"b \"\" c\" as (select 1) delete from t",
    "  WITH a AS (SELECT 1)\n\tMERGE INTO t USING a ON true WHEN MATCHED THEN DO NOTHING",
]

HIDES = [
    "with v as (insert into t values (1) returning x) select * from v",  # SELECT tag
    "with a as (delete from t returning 1) (select 1)",  # a parenthesized SELECT
    "with a as (delete from t returning 1) update t set x = 1; select 1",  # two statements
    "with a as (delete from t -- )\n) update t set x = 1",  # a comment
    "with a as (delete from t where s = $$)$$) update t set x = 1",  # a dollar quote
    "with a as (delete from t where s = e'\\')') update t set x = 1",  # an escape string
    "with recursive a(x) as (delete from t returning 1) search depth first by x set update "
    "select 1",  # SEARCH (a column may be named update)
    "with a as (delete from t returning 1 update",  # not closed
    "with a as ((delete from t returning 1)) updated",  # not a write word
    "explain analyze with a as (select 1) update t set x = 1",  # EXPLAIN's tag
]


@pytest.mark.parametrize("text", TELLS)
def test_a_with_whose_statement_writes_tells(text: str) -> None:
    lowered = text.lower()
    assert hides_write(lowered, hiding_words(()))  # what hides_write alone says
    assert with_writes(lowered)


@pytest.mark.parametrize("text", HIDES)
def test_anything_else_is_left_to_hides_write(text: str) -> None:
    assert not with_writes(text.lower())


def test_statements_not_starting_with_with_are_not_its_business() -> None:
    for text in ("update t set x = 1", "select 1", "", "with", "with a", "with a as"):
        assert not with_writes(text)
