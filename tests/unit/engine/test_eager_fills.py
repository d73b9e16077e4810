"""The story page after eager aggregation is still one fill from cold (issue 24).

Its plan joins the stories by id with an aggregate of the votes by story: the aggregate is
not a chain of filters and projections over a base table, so the join's semi-join prefetch
does not apply; ``JoinNode._partners_ahead`` pulls the votes of the story the read binds as
soon as the story itself misses, so both are fetched in the same fill.
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
