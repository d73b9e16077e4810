"""The story page after eager aggregation is still one fill from cold (issue 24).

Its plan joins the stories by id with an aggregate of the votes by story: the aggregate is
not a chain of filters and projections over a base table; when the read binds the join value,
``JoinNode._partners_ahead`` pulls the votes of the story the read binds as soon as the story
itself misses, so both are fetched in the same fill. When it does not (an author's top stories),
the semi-join prefetch reaches through the aggregate (``Node.prefetch_columns``).
"""

from __future__ import annotations

from engine.api import Engine, ReadReady
from engine.changes import Snapshot
from engine.dataflow.fills import RunFill
from engine.plan.queries import CachedQuery, QueryPlanner
from tests.unit.sql.test_golden_plan import CATALOG

STORY_PAGE = ("SELECT s.id, s.title, s.score, count(v.user_id) AS votes FROM stories s "
              "LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = $1 "
              "GROUP BY s.id, s.title, s.score")


def test_a_cold_story_page_is_one_fill() -> None:
    query = QueryPlanner(CATALOG).classify(STORY_PAGE).query
    assert isinstance(query, CachedQuery) and "Aggregate GROUP BY (story_id)" in query.explain
    engine = Engine()
    engine.add_cache("story_page", query.plan.reader)
    fills = [e for e in engine.read("story_page", (5,)).effects if isinstance(e, RunFill)]
    assert len(fills) == 1
    asked = sorted((r.table.name, r.columns, r.key) for r in fills[0].requests)
    assert asked == [("stories", (0,), (5,)), ("votes", (1,), (5,))]
    story = (5, 7, "five", None, 3, True, None)
    votes = [(i, 5, 100 + i, 1) for i in range(3)]
    rows = [(story,) if r.table.name == "stories" else tuple(votes) for r in fills[0].requests]
    effects = [*engine.fill_response(fills[0].fill_id, Snapshot(10, 10), rows),
               *engine.position_reached(fills[0].fill_id)]
    assert not [e for e in effects if isinstance(e, RunFill)]  # nothing left to fetch
    ready = [e for e in effects if isinstance(e, ReadReady)]
    assert [list(e.rows) for e in ready] == [[(5, "five", 3, 3)]]


AUTHOR_TOP = ("SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s JOIN votes v "
              "ON v.story_id = s.id WHERE s.author_id = $1 GROUP BY s.id, s.title "
              "ORDER BY votes DESC, s.id LIMIT 2")


def test_a_cold_author_top_is_one_fill_with_a_semi_join_into_the_aggregate() -> None:
    """The read binds the author, not the join value: the votes aggregate's input is fetched
    by a semi-join through the author's stories in the same fill (before: a second fill with
    one request per story)."""
    query = QueryPlanner(CATALOG).classify(AUTHOR_TOP).query
    assert isinstance(query, CachedQuery) and "Aggregate GROUP BY (story_id)" in query.explain
    engine = Engine()
    engine.add_cache("author_top", query.plan.reader)
    fills = [e for e in engine.read("author_top", (7,)).effects if isinstance(e, RunFill)]
    assert len(fills) == 1
    by_table = {r.table.name: r for r in fills[0].requests}
    assert sorted(by_table) == ["stories", "votes"]
    assert (by_table["stories"].columns, by_table["stories"].key) == ((1,), (7,))
    via = by_table["votes"].via
    assert via is not None and by_table["votes"].columns == (1,)
    assert (via.table.name, via.columns, via.key, via.join_columns) == \
        ("stories", (1,), (7,), (0,))
    stories = [(s, 7, f"s{s}", None, 0, True, None) for s in (1, 2, 3)]
    votes = [(10, 1, 100, 1), (11, 2, 100, 1), (12, 2, 101, 1), (13, 9, 100, 1)]
    rows = [tuple(stories) if r.table.name == "stories" else tuple(votes[:3])
            for r in fills[0].requests]
    effects = [*engine.fill_response(fills[0].fill_id, Snapshot(10, 10), rows),
               *engine.position_reached(fills[0].fill_id)]
    assert not [e for e in effects if isinstance(e, RunFill)]  # nothing left to fetch
    ready = [e for e in effects if isinstance(e, ReadReady)]
    assert [list(e.rows) for e in ready] == [[(2, "s2", 2), (1, "s1", 1)]]
