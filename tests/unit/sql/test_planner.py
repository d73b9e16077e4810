"""The planner's contracts: identity and caching, lookup keys, never raising, rules that keep
results, and literal typing."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.plan.evaluate import evaluate_reader
from engine.plan.literals import LiteralError, literal_value
from engine.plan.pgtypes import arithmetic_type, common_type
from engine.plan.planner import PlannedQuery, plan_select
from engine.plan.queries import CachedQuery, QueryPlanner, merge_lookups
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import Relation
from engine.sql.text import parse_query
from engine.values import oids as T
from tests.unit.sql.test_golden_plan import CATALOG, GOLDEN

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "queries.sql"


def cached(planner: QueryPlanner, sql: str, path: tuple[str, ...] = ("public",)) -> CachedQuery:
    query = planner.classify(sql, path).query
    assert isinstance(query, CachedQuery), query
    return query


def test_a_repeated_text_is_one_lookup() -> None:
    planner = QueryPlanner(CATALOG)
    first = planner.classify("SELECT id FROM stories WHERE author_id = 3")
    assert planner.classify("SELECT id FROM stories WHERE author_id = 3") is first


def test_lifted_literals_share_one_cache_and_become_the_key() -> None:
    planner = QueryPlanner(CATALOG)
    a = planner.classify("SELECT id FROM stories WHERE author_id = 3 AND title = 'x'")
    b = planner.classify("SELECT id FROM stories WHERE author_id = 42 AND title = 'it''s'")
    assert a.query is b.query
    assert a.key() == (3, "x")
    assert b.key() == (42, "it's")


def test_a_literal_and_a_parameter_in_one_place_share_identity_not_plan() -> None:
    """``= 3`` and ``= $1`` are one query (a cache made from either serves both), but the
    key comes from the literal in one and from the Bind in the other, whichever came first."""
    for first, second in ((0, 1), (1, 0)):
        planner = QueryPlanner(CATALOG)
        texts = ("SELECT id FROM stories WHERE author_id = 3",
                 "SELECT id FROM stories WHERE author_id = $1")
        answers = {i: planner.classify(texts[i]) for i in (first, second)}
        assert cached(planner, texts[0]).identity == cached(planner, texts[1]).identity
        assert answers[0].key() == (3,)
        assert answers[1].key([42]) == (42,)
        # texts seen later take the plan of their own form
        assert planner.classify("SELECT id FROM stories WHERE author_id = 4").key() == (4,)
        assert planner.classify("SELECT id FROM stories WHERE author_id = $1 ").key([5]) == (5,)


def test_pinned_literals_are_part_of_the_identity() -> None:
    planner = QueryPlanner(CATALOG)
    a = cached(planner, "SELECT id FROM stories WHERE score > 3")
    b = cached(planner, "SELECT id FROM stories WHERE score > 4")
    assert a.identity != b.identity
    assert a.identity.shape == b.identity.shape
    c = cached(planner, "SELECT id FROM stories ORDER BY id LIMIT 5")
    d = cached(planner, "SELECT id FROM stories ORDER BY id LIMIT 6")
    assert c.identity != d.identity and d.plan.reader.limit == 6


def test_identity_includes_the_relations_the_search_path_resolves() -> None:
    planner = QueryPlanner(CATALOG)
    public = cached(planner, "SELECT id FROM users WHERE id = 1", ("public",))
    app = cached(planner, "SELECT id FROM users WHERE id = 1", ("app", "public"))
    assert public.identity.relations == (16401,)
    assert app.identity.relations == (16409,)
    assert public.identity != app.identity


def test_parameters_and_literals_in_the_key() -> None:
    planner = QueryPlanner(CATALOG)
    answer = planner.classify("SELECT id FROM stories WHERE author_id = $2 AND score = 7 "
                              "AND published = $1")
    assert answer.key([True, 5]) == (5, 7, True)
    assert answer.key([True]) is None  # $2 not bound


def test_a_lifted_literal_that_is_no_value_of_its_type_forwards() -> None:
    planner = QueryPlanner(CATALOG)
    good = planner.classify("SELECT title FROM stories WHERE id = 5")
    bad = planner.classify("SELECT title FROM stories WHERE id = 'abc'")
    assert good.key() == (5,)
    assert bad.query is planner.classify("SELECT title FROM stories WHERE id = '7'").query
    assert bad.key() is None  # PostgreSQL raises: the host forwards the statement
    huge = cached(planner, "SELECT title FROM stories WHERE id = 99999999999999999999")
    assert huge.plan.reader.key == ()  # a numeric literal is compared, not lifted


def test_aggregate_without_group_by_is_keyed_with_an_empty_row() -> None:
    planner = QueryPlanner(CATALOG)
    a = cached(planner, "SELECT count(*), sum(value) FROM votes WHERE story_id = 1")
    b = cached(planner, "SELECT count(*), sum(value) FROM votes WHERE story_id = 2")
    assert a is b and a.plan.reader.key == (2,) and a.plan.empty_row == (0, None)
    tables = {16403: [(1, 1, 1, 1), (2, 1, 2, -1)]}
    assert evaluate_reader(a.plan.reader, tables, (1,)) == [(2, 0)]
    assert evaluate_reader(a.plan.reader, tables, (2,)) == []  # the host answers empty_row


def test_a_null_key_parameter_still_answers_the_empty_row() -> None:
    """``count(*) ... WHERE column = $1`` with a NULL $1: no lookup (NULL matches nothing),
    and PostgreSQL still returns its one row (count 0); the same for a key pulled out of an
    EXISTS subquery. Without the rule merge_lookups answered no row at all."""
    planner = QueryPlanner(CATALOG)
    for sql in ("SELECT count(*), sum(value) FROM votes WHERE story_id = $1",
                "SELECT count(*), sum(s.score) FROM stories s WHERE EXISTS (SELECT 1 FROM votes"
                " v WHERE v.story_id = s.id AND v.user_id = $1)"):
        answer = planner.classify(sql)
        assert isinstance(answer.query, CachedQuery)
        assert answer.keys([None]) == []
        assert merge_lookups(answer.query.plan, [], [None]) == [(0, None)]


def test_aggregate_with_having_but_no_group_by_pins_its_literal() -> None:
    planner = QueryPlanner(CATALOG)
    sql = "SELECT count(*) FROM votes WHERE story_id = {} HAVING count(*) > 1"
    a, b = cached(planner, sql.format(1)), cached(planner, sql.format(2))
    assert a.plan.reader.key == () and a.plan.empty_row is None and a.identity != b.identity


def _corpus() -> list[str]:
    text = "\n".join(x for x in CORPUS.read_text().splitlines() if not x.startswith("--"))
    return [q.strip() for q in text.split(";") if q.strip()]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_classify_never_raises(data: st.DataObject) -> None:
    """Arbitrary text and mangled corpus statements give a plan or a reason, never raise."""
    queries = _corpus()
    base = data.draw(st.sampled_from(queries))
    tokens = base.split(" ")
    cut = data.draw(st.lists(st.integers(0, len(tokens) - 1), max_size=3))
    mangled = " ".join(t for i, t in enumerate(tokens) if i not in cut)
    junk = data.draw(st.text(max_size=40))
    planner = QueryPlanner(CATALOG)
    for sql in (mangled, junk, base + " " + junk):
        answer = planner.classify(sql)
        if isinstance(answer.query, Unsupported):
            assert answer.query.reason
            assert not answer.query.reason.startswith("internal planner error"), sql
        else:
            assert answer.query.explain


def _golden_sql() -> list[str]:
    out = []
    for path in sorted(GOLDEN.glob("*.txt")):
        head = path.read_text().partition("----\n")[0]
        out.append("\n".join(x for x in head.splitlines() if not x.startswith("--")).strip())
    return out


def _random_tables(rng: random.Random) -> dict[int, list[tuple[Any, ...]]]:
    def val(oid: int) -> Any:
        if rng.random() < 0.15:
            return None
        return {T.INT2: lambda: rng.randint(-3, 3), T.INT4: lambda: rng.randint(0, 6),
                T.INT8: lambda: rng.randint(0, 6), T.TEXT: lambda: rng.choice(["a", "b", "ab"]),
                T.VARCHAR: lambda: rng.choice(["x", "y"]), T.BOOL: lambda: rng.random() < 0.5,
                T.NUMERIC: lambda: Decimal(rng.randint(0, 500)) / 100,
                T.FLOAT8: lambda: float(rng.randint(0, 9)),
                T.TIMESTAMP: lambda: datetime(2024, 1, rng.randint(1, 31)),
                T.DATE: lambda: date(2024, 1, rng.randint(1, 31))}.get(oid, lambda: None)()
    def rows(rel: Relation) -> list[tuple[Any, ...]]:
        # a primary key holds (the rules may rely on it: eager aggregation): unique, not NULL
        pk = [i for i, c in enumerate(rel.columns) if c.name in rel.primary_key]
        out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for n in range(25):
            row = [val(c.type_oid) for c in rel.columns]
            if len(pk) == 1:
                row[pk[0]] = n
            key = tuple(row[i] for i in pk) if pk else (n,)
            if None not in key:
                out.setdefault(key, tuple(row))
        return list(out.values())

    return {rel.oid: rows(rel) for rel in CATALOG.relations}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rules_preserve_results(seed: int) -> None:
    """Every supported golden plan returns the same rows with and without the rewrite rules."""
    rng = random.Random(seed)
    tables = _random_tables(rng)
    compared = 0
    for sql in _golden_sql():
        parsed = parse_query(sql)
        if parsed.stmt is None:
            continue
        plain = plan_select(parsed.stmt, CATALOG, ("public",), parsed.literals, rules=False)
        if not isinstance(plain, PlannedQuery):
            continue
        ruled = plan_select(parsed.stmt, CATALOG, ("public",), parsed.literals)
        assert isinstance(ruled, PlannedQuery)
        key = tuple(rng.randint(0, 6) if t in (T.INT4, T.INT8) else True
                    for t in plain.key_types)
        try:
            want = evaluate_reader(plain.reader, tables, key)
        except (ArithmeticError, ValueError):
            continue  # e.g. overflow in random data: PostgreSQL would raise too
        got = evaluate_reader(ruled.reader, tables, key)
        if plain.reader.order_by:
            assert got == want, sql
        else:
            assert Counter(got) == Counter(want), sql
        compared += 1
    assert compared >= 50


@pytest.mark.parametrize(("oid", "text", "value"), [
    (T.INT4, " 42 ", 42), (T.INT8, "-9223372036854775808", -2**63),
    (T.NUMERIC, "1.50", Decimal("1.50")), (T.NUMERIC, "1e3", Decimal("1E+3")),
    (T.BOOL, "yes", True), (T.BOOL, "OFF", False), (T.TEXT, "it's", "it's"),
    (T.DATE, "2024-02-29", date(2024, 2, 29)),
    (T.TIMESTAMP, "2024-01-15", datetime(2024, 1, 15)),
    (T.TIMESTAMP, "2024-01-15 10:20:30.5", datetime(2024, 1, 15, 10, 20, 30, 500000)),
    (T.UUID, "{12345678123456781234567812345678}",
     __import__("uuid").UUID("12345678-1234-5678-1234-567812345678")),
])
def test_literal_values(oid: int, text: str, value: Any) -> None:
    assert literal_value(oid, text) == value


@pytest.mark.parametrize(("oid", "text"), [
    (T.INT2, "40000"), (T.INT4, "1.5"), (T.INT4, "1_000"), (T.BOOL, "of"),
    (T.DATE, "2023-02-29"), (T.DATE, "Jan 1 2024"), (T.TIMESTAMPTZ, "2024-01-01"),
    (T.TEXT, "a\x00b"), (T.INT4, "\u0663"), (T.NUMERIC, "\u0661.5"),
    (T.UUID, "urn:uuid:12345678-1234-5678-1234-567812345678"),
])
def test_literals_not_typed_exactly_are_refused(oid: int, text: str) -> None:
    with pytest.raises(LiteralError):
        literal_value(oid, text)


def test_type_resolution_matches_postgres() -> None:
    assert arithmetic_type("+", T.INT2, T.INT2) == T.INT2
    assert arithmetic_type("*", T.INT4, T.INT8) == T.INT8
    assert arithmetic_type("+", T.INT4, T.NUMERIC) == T.NUMERIC
    assert arithmetic_type("+", T.INT4, T.FLOAT4) == T.FLOAT8
    assert arithmetic_type("%", T.FLOAT8, T.INT4) is None
    assert common_type([T.VARCHAR, T.TEXT]) == T.VARCHAR
    assert common_type([T.TEXT, T.VARCHAR]) == T.TEXT
    assert common_type([T.INT4, T.FLOAT4]) == T.FLOAT4
    assert common_type([T.INT4, T.INT8, T.NUMERIC]) == T.NUMERIC
    assert common_type([T.UNKNOWN, T.INT4]) == T.INT4
    assert common_type([T.INT4, T.TEXT]) is None


def test_query_ids_are_stable_and_follow_identity() -> None:
    planner = QueryPlanner(CATALOG)
    a = cached(planner, "SELECT id FROM stories WHERE author_id = 3")
    b = cached(QueryPlanner(CATALOG), "SELECT id FROM stories WHERE author_id = 4")
    c = cached(planner, "SELECT id FROM stories WHERE score > 4")
    assert a.identity.query_id == b.identity.query_id != c.identity.query_id
    assert a.identity.query_id.startswith("q_") and len(a.identity.query_id) == 18


def test_planner_caches_are_bounded() -> None:
    planner = QueryPlanner(CATALOG, capacity=8)
    for i in range(50):
        planner.classify(f"SELECT id FROM stories WHERE score > {i}")
        planner.classify(f"SELECT id FROM t{i}")
    assert len(planner._texts) <= 8 and len(planner._plans) <= 8
    assert len(planner._shapes) <= 8


def test_in_list_keys_expand_to_distinct_lookups_and_merge() -> None:
    from engine.plan.queries import MAX_LOOKUPS, merge_lookups
    planner = QueryPlanner(CATALOG)
    a = planner.classify("SELECT id, score FROM stories WHERE author_id IN (1, 2, 2) "
                         "AND published = $1 ORDER BY score DESC, id LIMIT 2")
    b = planner.classify("SELECT id, score FROM stories WHERE author_id IN (7, 8, 9) "
                         "AND published = $1 ORDER BY score DESC, id LIMIT 2")
    assert a.query is b.query
    assert a.keys([True]) == [(1, True), (2, True)]  # 2 matches once
    assert a.key([True]) is None  # several lookups
    assert isinstance(a.query, CachedQuery)
    merged = merge_lookups(a.query.plan, [[(5, 10), (6, 3)], [(7, 10), (8, 1)]])
    assert merged == [(5, 10), (7, 10)]
    many = ", ".join(str(i) for i in range(MAX_LOOKUPS + 1))
    assert planner.classify(f"SELECT id FROM stories WHERE author_id IN ({many})").keys() is None


def test_null_rejection_analysis() -> None:
    from engine.plan import ir
    from engine.plan.rules.outer_joins import rejects_nulls
    a, b = ir.ColumnRef(0, T.INT4), ir.ColumnRef(1, T.TEXT)
    five = ir.Const(5, T.INT4)
    gt = ir.Compare(">", a, five)
    assert rejects_nulls(gt) == {0}
    assert rejects_nulls(ir.IsNull(a)) == set()
    assert rejects_nulls(ir.IsNull(a, negated=True)) == {0}
    assert rejects_nulls(ir.Not(ir.IsNull(a))) == {0}
    assert rejects_nulls(ir.BoolOp("or", (gt, ir.Like(b, ir.Const("x", T.TEXT))))) == set()
    assert rejects_nulls(ir.BoolOp("and", (gt, ir.Like(b, ir.Const("x", T.TEXT))))) == {0, 1}
    concat = ir.Func("concat", (b, ir.Const("!", T.TEXT)), T.TEXT)
    assert rejects_nulls(ir.Compare("=", concat, ir.Const("x!", T.TEXT))) == set()
    assert rejects_nulls(ir.Compare(">", ir.Coalesce((a, five), T.INT4), five)) == set()
    # lax in some operands: 5 IN (a, 5) and 5 NOT BETWEEN a AND 3 are TRUE with a NULL, as
    # is cardinality(ARRAY[a]) = 1; only the tested value of IN / BETWEEN counts
    assert rejects_nulls(ir.InList(five, (a, five))) == set()
    assert rejects_nulls(ir.InList(a, (five,))) == {0}
    assert rejects_nulls(ir.Between(five, a, ir.Const(3, T.INT4), negated=True)) == set()
    assert rejects_nulls(ir.Not(ir.Between(five, a, ir.Const(3, T.INT4)))) == set()
    assert rejects_nulls(ir.Between(a, five, five)) == {0}
    array = ir.Func("array_construct", (a,), T.ARRAY_OF[T.INT4])
    card = ir.Func("cardinality", (array,), T.INT4)
    assert rejects_nulls(ir.Compare("=", card, ir.Const(1, T.INT4))) == set()


def test_limit_and_offset_parameters_are_cut_by_the_host() -> None:
    from engine.plan.queries import merge_lookups
    planner = QueryPlanner(CATALOG)
    answer = planner.classify("SELECT id FROM stories WHERE author_id = $1 "
                              "ORDER BY id LIMIT $2 OFFSET $3")
    assert isinstance(answer.query, CachedQuery)
    plan = answer.query.plan
    assert plan.page is not None and plan.reader.limit is None
    assert answer.key([1, 2, 1]) is None  # the router must use keys + merge_lookups
    # top-k state (id is NOT NULL): the key ends with an unbounded span of OFFSET + LIMIT
    # first rows; LIMIT NULL asks for them all
    from engine.dataflow.state.intervals import span_of
    keys = answer.keys([1, 2, 1])
    assert keys is not None and len(keys) == 1 and keys[0][0] == 1
    span = span_of(keys[0])
    assert span is not None and span.first == 3 and span.lo is None and span.hi is None
    keys = answer.keys([1, None, 1])
    assert keys is not None and span_of(keys[0]).first is None  # type: ignore[union-attr]
    keys = answer.keys([1, 2**63 - 1, 5])  # (OFFSET + LIMIT past int8: every row)
    assert keys is not None and span_of(keys[0]).first is None  # type: ignore[union-attr]
    rows = [(1,), (2,), (3,), (4,)]
    assert merge_lookups(plan, [rows], [1, 2, 1]) == [(2,), (3,)]
    assert merge_lookups(plan, [rows], [1, None, 3]) == [(4,)]
    assert answer.keys([1, -1, 0]) is None and answer.keys([1, "2", 0]) is None


def test_unsupported_texts_of_one_shape_share_an_id() -> None:
    planner = QueryPlanner(CATALOG)
    a = planner.classify("SELECT id FROM stories WHERE created_at > now() - 1")
    b = planner.classify("SELECT id  FROM stories WHERE created_at > now() - 2 -- tag")
    c = planner.classify("SELECT id FROM stories WHERE author_id = 3")
    assert isinstance(a.query, Unsupported)
    assert a.query_id == b.query_id != c.query_id
    assert c.query_id == cached(planner, "SELECT id FROM stories WHERE author_id = 4"
                                ).identity.query_id


def test_any_array_parameter_keys_one_lookup_per_element() -> None:
    from engine.plan.queries import MAX_LOOKUPS, merge_lookups
    planner = QueryPlanner(CATALOG)
    answer = planner.classify("SELECT id, score FROM stories WHERE author_id = ANY($1) "
                              "ORDER BY score DESC, id LIMIT 2")
    assert isinstance(answer.query, CachedQuery)
    plan = answer.query.plan
    assert plan.param_types == {1: 1007}  # int4[]: what PostgreSQL infers for $1
    assert answer.keys([(3, None, (4, 3))]) == [(3,), (4,)]  # NULL skipped, nested flattened
    assert answer.keys([()]) == [] and answer.keys([None]) == []
    assert answer.key([(3,)]) == (3,) and answer.key([(3, 4)]) is None
    assert answer.keys([5]) is None  # not an array: forwarded
    assert answer.keys([tuple(range(MAX_LOOKUPS + 1))]) is None
    assert merge_lookups(plan, [], [()]) == []
    assert merge_lookups(plan, [[(1, 5)], [(2, 9), (3, 1)]], [(1, 2)]) == [(2, 9), (1, 5)]
    same = planner.classify("SELECT id, score FROM stories WHERE author_id = ANY($1::int4[]) "
                            "ORDER BY score DESC, id LIMIT 2")
    assert isinstance(same.query, CachedQuery) and same.query.plan.param_types == {1: 1007}
    for text in ("SELECT count(*) FROM stories WHERE author_id = ANY($1)",
                 "SELECT id FROM stories WHERE author_id = ANY($1::int8[])",
                 "SELECT id FROM stories WHERE author_id <> ANY($1)"):
        assert isinstance(planner.classify(text).query, Unsupported), text
