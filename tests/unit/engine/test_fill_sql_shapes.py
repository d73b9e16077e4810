"""``engine.plan.fill_sql.fill_query``: a fill's SQL text is built once per shape.

The demo's cold run (issue 24) spent about as long building each prefetch's text with sqlglot
as fetching its rows, on weir's one event loop. The text depends on the shape only (tables,
their columns, the key and join columns); the key values are parameters."""

from __future__ import annotations

from typing import Any

import pytest
from sqlglot import exp

from engine import FillRequest, fill_query
from engine.dataflow.fills import SemiJoin
from engine.plan.ir import Column, TableRef

STORIES = TableRef(11, "public", "stories", (Column("id", 23), Column("author_id", 23),
                                             Column("title", 25)), (0,))
VOTES = TableRef(12, "public", "votes", (Column("story_id", 23), Column("user_id", 23)), (0, 1))
USERS = TableRef(13, "public", "users", (Column("id", 23), Column("name", 25)), (0,))


def _prefetch(story: int, table: TableRef = USERS) -> FillRequest:
    return FillRequest(table, (0,), (), SemiJoin(STORIES, (0,), (story,), (1,)))


def test_a_prefetch_is_built_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    first, params = fill_query(_prefetch(1))
    assert params == (1,)
    assert first == ('SELECT "id", "name" FROM "public"."users" WHERE "id" IN '
                     '(SELECT "author_id" FROM "public"."stories" WHERE "id" = $1)')

    def no_sqlglot(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the prefetch's text was built again for a shape seen before")

    monkeypatch.setattr(exp, "select", no_sqlglot)
    for story in (2, 3, 99):  # the same shape, other keys: the text is reused
        assert fill_query(_prefetch(story)) == (first, (story,))


def test_other_shapes_get_their_own_text() -> None:
    users, _ = fill_query(_prefetch(5))
    other = TableRef(14, "public", "people", USERS.columns, (0,))
    people, params = fill_query(_prefetch(5, other))
    assert params == (5,) and '"people"' in people and people != users
    by_two = FillRequest(VOTES, (0, 1), (), SemiJoin(STORIES, (0,), (5,), (0, 1)))
    votes, _ = fill_query(by_two)
    assert '("story_id", "user_id") IN' in votes and '"votes"' in votes
    renamed = TableRef(11, "public", "stories", (Column("id", 23), Column("writer", 23),
                                                 Column("title", 25)), (0,))
    after_ddl, _ = fill_query(FillRequest(USERS, (0,), (), SemiJoin(renamed, (0,), (5,), (1,))))
    assert '"writer"' in after_ddl  # a column renamed upstream changes the TableRef: new text
