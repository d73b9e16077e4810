"""Property: eager aggregation (``engine.plan.rules.eager_aggs``) keeps every answer.

Random plans of the form the rule rewrites - an aggregate over an inner or left join whose
groups contain the left input's primary key, with count(*), count, count DISTINCT, sum, avg,
min and max of right columns (random tables: nullable small-domain columns, so NULL join
values, NULL arguments and left rows without partners are frequent) - run in one engine
twice: as written and rewritten. Both caches' answers are checked against the reference
evaluation of the plan *as written*, through the late, out-of-order fills, lagging snapshots,
deletes, updates that move a right row between join values and truncates of the shared
harness (``tests.property.simulated``), with and without a tiny memory budget.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.api import Engine
from engine.plan import ir
from engine.plan.rules.eager_aggs import aggregate_before_joins, unique_on
from engine.values import oids as T
from tests.property.random_plans import (
    INTS,
    PlanGen,
    random_changes,
    random_data,
    random_key,
    random_tables,
)
from tests.property.simulated import Host, Upstream

OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2**16)), min_size=1, max_size=80)
FUNCS = ("count", "count_distinct", "sum", "avg", "min", "max")


def _left(gen: PlanGen, rng: random.Random) -> tuple[ir.Rel, int]:
    """A left input and the position of its primary key column."""
    table = gen.tables[rng.choice(sorted(gen.tables))]
    rel: ir.Rel = ir.Scan(table)
    if rng.random() < 0.3:
        rel = ir.Filter(rel, gen.predicate(rel))
    if rng.random() < 0.4:  # keep the key somewhere among other columns
        cols = list(range(len(table.columns)))
        rng.shuffle(cols)
        cols = cols[:rng.randint(1, len(cols))]
        if 0 not in cols:
            cols.append(0)
        exprs = tuple(ir.ColumnRef(c, table.columns[c].type_oid) for c in cols)
        return ir.Project(rel, exprs, tuple(f"l{i}" for i in cols)), cols.index(0)
    return rel, 0


def _call(rng: random.Random, col: ir.ColumnRef, name: str) -> ir.AggCall:
    func = rng.choice(FUNCS)
    oid = {"count": T.INT8, "count_distinct": T.INT8, "avg": T.NUMERIC,
           "sum": T.INT8 if col.type_oid == T.INT4 else T.NUMERIC}.get(func, col.type_oid)
    return ir.AggCall(func, col, oid, name)  # type: ignore[arg-type]


def eager_form(tables: dict[int, ir.TableRef], rng: random.Random) -> ir.Reader | None:
    """A random reader the rule rewrites (None when the drawn inputs cannot be joined)."""
    gen = PlanGen(tables, rng)
    left, pk = _left(gen, rng)
    right = gen.rel(1)
    lc, rc = gen._int_col(left), gen._int_col(right)
    if lc is None or rc is None or lc.type_oid != rc.type_oid:
        return None
    kind = "left" if rng.random() < 0.6 else "inner"
    join = ir.Join(left, right, (lc.index,), (rc.index,), kind)  # type: ignore[arg-type]
    nl = len(left.columns)
    others = [c for c in range(nl) if c != pk]
    group = tuple(sorted({pk, *rng.sample(others, rng.randint(0, min(2, len(others))))}))
    aggs: list[ir.AggCall] = []
    if rng.random() < 0.5:
        aggs.append(ir.AggCall("count_star", None, T.INT8, "n"))
    ints = [i for i, c in enumerate(right.columns) if c.type_oid in INTS]
    for i in range(rng.randint(1 if not aggs else 0, 2)):
        r = rng.choice(ints)
        aggs.append(_call(rng, ir.ColumnRef(nl + r, right.columns[r].type_oid), f"a{i}"))
    rel = ir.Aggregate(join, group, tuple(aggs))
    width = len(rel.columns)
    # keyed on group columns mostly; sometimes on an aggregate (the state goes full)
    pool = list(range(len(group))) if rng.random() < 0.8 else list(range(width))
    key = tuple(rng.sample(pool, rng.randint(0, min(2, len(pool)))))
    return ir.Reader(rel, key, tuple(range(width)))


def drive(seed: int, ops: list[tuple[int, int]], budget: int | None) -> Host | None:
    rng = random.Random(seed)
    tables = random_tables(rng)
    plan = eager_form(tables, rng)
    if plan is None:
        return None
    eager = aggregate_before_joins(plan)
    assert eager != plan and not isinstance(eager.input, ir.Aggregate), plan
    up = Upstream(tables, random_data(tables, rng))
    engine = Engine(memory_budget=budget)
    engine.add_cache("written", plan)
    engine.add_cache("eager", eager)
    # both checked against the reference evaluation of the plan as written
    host = Host(engine, up, {"written": plan, "eager": plan}, rng, lag=True)
    host.play(ops, lambda r: random_changes(tables, up.data, r),
              lambda cache, r: random_key(plan, r), final_reads=3)
    return host


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_eager_aggregation_unbounded(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, None)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), OPS)
def test_eager_aggregation_tiny_budget(seed: int, ops: list[tuple[int, int]]) -> None:
    drive(seed, ops, 2500)


def test_the_rule_leaves_other_forms_alone() -> None:
    """Groups that are not one left row, an aggregate of a left column or of an expression,
    and an ordered aggregate keep the plan as written."""
    tables = random_tables(random.Random(3))
    t = tables[min(tables)]
    scan = ir.Scan(t)
    join = ir.Join(scan, scan, (1,), (1,), "left")
    nl = len(t.columns)
    right_col = ir.ColumnRef(nl, T.INT4)
    count = ir.AggCall("count", right_col, T.INT8, "n")
    cases = [
        ir.Aggregate(join, (1,), (count,)),  # not the left key: a group is many left rows
        ir.Aggregate(join, (0, nl), (count,)),  # a right group column
        ir.Aggregate(join, (0,), (ir.AggCall("sum", ir.ColumnRef(1, T.INT4), T.INT8, "s"),)),
        ir.Aggregate(join, (0,), (ir.AggCall(  # count(coalesce(x, 0)) counts padded rows
            "count", ir.Coalesce((right_col, ir.Const(0, T.INT4)), T.INT4), T.INT8, "n"),)),
        ir.Aggregate(join, (0,), (ir.AggCall("array_agg", right_col, 1007, "a",
                                             order=(ir.AggSort(right_col),)),)),
    ]
    for rel in cases:
        reader = ir.Reader(rel, (), tuple(range(len(rel.columns))))
        assert aggregate_before_joins(reader) is reader, rel
    assert unique_on(scan, {0}) and not unique_on(scan, {1})
    assert unique_on(ir.Aggregate(scan, (1,), (count,)), {0})
    assert unique_on(join, {0, nl}) and not unique_on(join, {0})
