"""Range cuts (engine.plan.ranges): PostgreSQL's comparison semantics on canonical values."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from engine.plan.planner import PlannedQuery
from engine.plan.queries import CachedQuery, Classified, QueryPlanner, merge_lookups
from engine.plan.ranges import RangeCut, cut_rows, range_value_ok
from engine.values import FLOAT_NAN, NUMERIC_NAN, TextValue
from engine.values import oids as T
from tests.unit.sql.test_golden_plan import CATALOG


def test_cuts_follow_postgres_order_and_nulls() -> None:
    rows = [(1, Decimal("1.5")), (2, NUMERIC_NAN), (3, None), (4, Decimal("-2"))]
    gt = [RangeCut(1, ">", 1, T.NUMERIC)]
    assert cut_rows(rows, gt, [Decimal("0")]) == [(1, Decimal("1.5")), (2, NUMERIC_NAN)]
    assert cut_rows(rows, gt, [NUMERIC_NAN]) == []  # NaN is above every number, equal to NaN
    assert cut_rows(rows, [RangeCut(1, ">=", 1, T.NUMERIC)], [NUMERIC_NAN]) == [rows[1]]
    assert cut_rows(rows, gt, [None]) == []  # NULL bound: never true
    floats = [(FLOAT_NAN,), (1.0,), (float("inf"),)]
    assert cut_rows(floats, [RangeCut(0, "<", 1, T.FLOAT8)], [FLOAT_NAN]) == floats[1:]
    days = [(date(2024, 1, 1),), (TextValue(T.DATE, "infinity"),),
            (TextValue(T.DATE, "-infinity"),), (TextValue(T.DATE, "0044-03-15 BC"),),
            (TextValue(T.DATE, "0100-01-01 BC"),), (TextValue(T.DATE, "10000-01-01"),)]
    before = cut_rows(days, [RangeCut(0, "<", 1, T.DATE)], [date(1, 1, 1)])
    assert before == [days[2], days[3], days[4]]
    assert cut_rows(days, [RangeCut(0, "<", 1, T.DATE)], [TextValue(T.DATE, "0044-03-15 BC")]
                    ) == [days[2], days[4]]
    assert cut_rows(days, [RangeCut(0, ">", 1, T.DATE)], [date(9999, 12, 31)]) == [
        days[1], days[5]]
    assert range_value_ok(TextValue(T.DATE, "infinity"))
    assert not range_value_ok(TextValue(T.TIMESTAMPTZ, "2024-01-01 10:00"))
    text = [("a",), ("B",), ("ab",), ("é",)]
    assert cut_rows(text, [RangeCut(0, ">", 1, T.TEXT)], ["a"]) == [("ab",), ("é",)]


def _cached(sql: str) -> tuple[Classified, PlannedQuery]:
    """``sql`` classified against the golden plans' catalog, which must cache it; its plan."""
    answer = QueryPlanner(CATALOG).classify(sql)
    assert isinstance(answer.query, CachedQuery), answer.query
    return answer, answer.query.plan


def test_range_plans_key_cut_and_page() -> None:
    answer, plan = _cached("SELECT id, title FROM stories WHERE author_id = $1 "
                           "AND created_at >= $2 ORDER BY created_at DESC, id LIMIT 2")
    assert plan.param_types == {1: T.INT4, 2: T.TIMESTAMP}
    assert plan.hidden == 1 and [c.name for c in plan.columns] == ["id", "title"]
    params = [7, datetime(2024, 1, 2)]
    keys = answer.keys(params)  # range-partial state per author: (author, Span)
    assert answer.key(params) is None and keys is not None and len(keys) == 1
    span = keys[0][-1]
    assert keys[0][:-1] == (7,) and span.from_top and span.first == 2
    assert span.lo == datetime(2024, 1, 2) and span.lo_incl and span.hi is None
    assert answer.keys([7]) is None  # the bound is missing
    rows = [(5, "e", datetime(2024, 1, 5)), (4, "d", datetime(2024, 1, 4)),
            (3, "c", datetime(2024, 1, 3)), (1, "a", datetime(2024, 1, 1))]
    assert merge_lookups(plan, [rows], params) == [(5, "e"), (4, "d")]
    assert merge_lookups(plan, [rows], [7, datetime(2024, 1, 4, 12)]) == [(5, "e")]
    assert merge_lookups(plan, [rows], [7, None]) == []


def test_narrow_bisects_sorted_rows_like_a_scan() -> None:
    import random

    from engine.dataflow.ordering import order_key
    from engine.plan.ir import SortKey
    from engine.plan.ranges import narrow

    rng = random.Random(5)
    for _ in range(300):
        rows = [(rng.choice([None, rng.randint(0, 9)]), i) for i in range(rng.randint(0, 12))]
        lead = SortKey(0, rng.random() < 0.5, rng.choice([None, True, False]))
        rows.sort(key=order_key((lead,)))
        cuts = [RangeCut(rng.choice([0, 1]), rng.choice(["<", "<=", ">", ">="]), n, T.INT4)
                for n in (1, 2)][: rng.randint(1, 2)]
        params = [rng.choice([None, rng.randint(-1, 10)]), rng.randint(-1, 12)]
        part, rest = narrow(rows, cuts, params, lead)
        assert cut_rows(part, rest, params) == cut_rows(rows, cuts, params), (rows, cuts, params)


def test_aggregates_over_a_range_cut() -> None:
    """The host aggregates the rows the cut keeps: PostgreSQL's types and values (avg of
    ints is numeric at scale 16 or more), count 0 and NULLs over an empty range."""
    answer, plan = _cached("SELECT count(*), sum(score), avg(score) AS m, max(title) "
                           "FROM stories WHERE author_id = $1 AND created_at > $2")
    assert [(c.name, c.type_oid) for c in plan.columns] == [
        ("count", T.INT8), ("sum", T.INT8), ("m", T.NUMERIC), ("max", T.TEXT)]
    keys = answer.keys([7, datetime(2024, 1, 2)])
    assert keys is not None and keys[0][0] == 7 and keys[0][-1].lo == datetime(2024, 1, 2)
    rows = [(3, "c", datetime(2024, 1, 3)), (None, "z", datetime(2024, 1, 4)),
            (4, "a", datetime(2024, 1, 1))]  # reader rows: score, title, created_at
    assert merge_lookups(plan, [rows], [7, datetime(2024, 1, 2)]) == [
        (2, 3, Decimal("3.0000000000000000"), "z")]
    assert merge_lookups(plan, [rows], [7, datetime(2025, 1, 1)]) == [(0, None, None, None)]
    assert merge_lookups(plan, [rows], [7, None]) == [(0, None, None, None)]
    assert merge_lookups(plan, [], [None, datetime(2024, 1, 2)]) == [(0, None, None, None)]


def test_aggregates_over_a_range_grouped_on_the_key() -> None:
    """GROUP BY the equality key: a row per key value with rows in the range, none else."""
    answer, plan = _cached(
        "SELECT count(*), author_id FROM stories WHERE author_id = ANY($1) AND id > $2 "
        "GROUP BY author_id")
    assert [(c.name, c.type_oid) for c in plan.columns] == [
        ("count", T.INT8), ("author_id", T.INT4)]
    keys = answer.keys([[1, 2, None, 1], 5])
    assert keys is not None and [k[0] for k in keys] == [1, 2]
    one, two = [(1, 6), (1, 9), (1, 2)], [(2, 3)]  # reader rows: author_id, id
    assert merge_lookups(plan, [one, two], [[1, 2], 5]) == [(2, 1)]
    assert merge_lookups(plan, [one, two], [[1, 2], 10]) == []
