"""The host's set operations (``engine.plan.setops.setop_rows``) on hand-made reader rows:
PostgreSQL's semantics of UNION / INTERSECT / EXCEPT [ALL] (NULLs equal, multiset counts),
each operand's cuts, own equality parameters and page, and nested set operations."""

from __future__ import annotations

from typing import Any

from engine.plan import ir
from engine.plan.planned import Page
from engine.plan.queries import QueryPlanner
from engine.plan.ranges import RangeCut
from engine.plan.setops import Combine, Kind, SetOpStep, SideStep, setop_params_ok, setop_rows
from engine.values import oids as T
from tests.unit.sql.test_golden_plan import CATALOG

# reader rows: (value, side, operand 0's column, operand 1's column)
ROWS: list[tuple[Any, ...]] = [
    (1, 0, 10, None), (1, 0, 11, None), (None, 0, 12, None), (2, 0, 13, None),
    (1, 1, None, 5), (None, 1, None, 6), (3, 1, None, 7), (None, 1, None, None)]


EVERY_ROW = SideStep()


def _step(kind: Kind, left: SideStep = EVERY_ROW, right: SideStep = EVERY_ROW,
          limit: int | None = None) -> SetOpStep:
    return SetOpStep(Combine(kind, (0, 1)), 1, 1, (left, right), (0, 1, 2, 3), limit)


def _sorted(rows: list[tuple[Any, ...]]) -> list[str]:
    return sorted(map(repr, rows))


def test_set_operations_count_rows_and_treat_nulls_as_equal() -> None:
    def run(kind: Kind) -> list[str]:
        return _sorted(setop_rows(_step(kind), ROWS, (), ()))

    assert run("union_all") == _sorted([(1,), (1,), (None,), (2,), (1,), (None,), (3,),
                                        (None,)])
    assert run("union") == _sorted([(1,), (None,), (2,), (3,)])
    assert run("intersect") == _sorted([(1,), (None,)])
    assert run("intersect_all") == _sorted([(1,), (None,)])
    assert run("except") == _sorted([(2,)])
    assert run("except_all") == _sorted([(1,), (2,)])


def test_each_operand_is_cut_before_the_set_operation() -> None:
    left = SideStep(cuts=(RangeCut(2, ">", 1, T.INT4),))
    right = SideStep(equal=((3, 2, T.INT4),))
    # left keeps values whose column > 11: NULL (12) and 2 (13); right keeps column = 6: NULL
    assert _sorted(setop_rows(_step("except_all", left, right), ROWS, (11, 6), ())) == [
        "(2,)"]
    assert _sorted(setop_rows(_step("intersect", left, right), ROWS, (11, 6), ())) == [
        "(None,)"]
    # a NULL bound or equality parameter matches nothing
    assert setop_rows(_step("union", left, right), ROWS, (None, 6), ()) == [(None,)]
    assert setop_rows(_step("intersect", left, right), ROWS, (11, None), ()) == []


def test_own_equality_compares_nan_equal_as_postgresql_does() -> None:
    nan = float("nan")
    rows = [(1, 0, nan, None), (2, 0, 1.5, None)]
    step = _step("union_all", SideStep(equal=((2, 1, T.FLOAT8),)))
    assert setop_rows(step, rows, (float("nan"),), ()) == [(1,)]


def test_operand_pages_then_statement_order_and_limit() -> None:
    left = SideStep(order=(ir.SortKey(2, descending=True),), page=Page(2, None, 0, 1))
    step = _step("union_all", left, limit=3)
    order = (ir.SortKey(0),)
    # left sorted on its column DESC (13, 12, 11, 10), offset $1 = 1, limit 2: 12, 11
    got = setop_rows(step, ROWS, (1,), order)
    assert got == [(1,), (1,), (3,)]  # then NULLs last, cut by LIMIT 3
    assert not setop_params_ok(step, (-1,)) and setop_params_ok(step, (None,))


def test_nested_set_operations_are_computed_bottom_up() -> None:
    rows = [(1, 0), (2, 0), (2, 1), (3, 1), (2, 2), (3, 2), (4, 2)]
    sides = (SideStep(), SideStep(), SideStep())
    # 0 UNION ALL (1 INTERSECT 2), and (0 EXCEPT 1) UNION 2 with the nested one paged
    tree = Combine("union_all", (0, Combine("intersect", (1, 2))))
    step = SetOpStep(tree, 1, 1, sides, (0, 1))
    assert _sorted(setop_rows(step, rows, (), ())) == _sorted([(1,), (2,), (2,), (3,)])
    paged = Combine("except", (0, 1), (ir.SortKey(0, descending=True),), Page(1))
    step = SetOpStep(Combine("union_all", (paged, 2)), 1, 1, sides, (0, 1))
    assert _sorted(setop_rows(step, rows, (), ())) == _sorted([(1,), (2,), (3,), (4,)])


def test_planned_statements_carry_the_host_step() -> None:
    planner = QueryPlanner(CATALOG)
    sql = ("SELECT id FROM stories WHERE author_id = $1 AND id > $2 UNION SELECT story_id "
           "FROM votes WHERE user_id = $1 AND story_id > $2 ORDER BY 1 LIMIT $3")
    query = planner.classify(sql).query
    plan = query.plan
    assert plan.setop is not None and plan.setop.root.kind == "union"
    assert plan.param_types == {1: T.INT4, 2: T.INT8, 3: T.INT8}
    assert planner.classify(sql).key((3, 10, 5)) is None  # needs the host's steps
