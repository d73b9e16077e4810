"""Scripted dataflow scenarios: the tricky cases of the seed-000 checklist, one by one.

Every test drives the real ``Engine`` against the simulated upstream; the host checks each
answer against the reference evaluator, and the tests assert the protocol (which fills are
issued, hits versus misses, what is evicted) on top.
"""

from __future__ import annotations

import random
from decimal import Decimal

from engine.api import Engine, ReadFailed, ReadReady
from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange, Snapshot, extend_xid
from engine.dataflow.fills import RunFill
from engine.plan import ir
from engine.values import oids as T
from tests.property.catalog import PLANS, STORIES, TABLES, USERS, VOTES, col, const
from tests.property.simulated import Host, Upstream

I4 = T.INT4


def make(data: dict[int, list[tuple[object, ...]]], plans: dict[str, ir.Reader] | None = None,
         budget: int | None = None) -> Host:
    full: dict[int, dict[tuple[object, ...], tuple[object, ...]]] = {oid: {} for oid in TABLES}
    for oid, rows in data.items():
        full[oid] = {(r[0],): r for r in rows}
    plans = plans if plans is not None else dict(PLANS)
    engine = Engine(memory_budget=budget)
    for name, plan in plans.items():
        engine.add_cache(name, plan)
    return Host(engine, Upstream(TABLES, full), plans, random.Random(0), lag=False)


def ins(table: ir.TableRef, row: tuple[object, ...]) -> RowChange:
    return RowChange(table.oid, ChangeKind.INSERT, None, row)


def upd(table: ir.TableRef, row: tuple[object, ...]) -> RowChange:
    return RowChange(table.oid, ChangeKind.UPDATE, None, row)


def dele(table: ir.TableRef, pk: int) -> RowChange:
    old = (pk,) + (UNCHANGED_TOAST,) * (len(table.columns) - 1)
    return RowChange(table.oid, ChangeKind.DELETE, old, None)


def answer(host: Host, cache: str, key: tuple[object, ...]) -> tuple[tuple[object, ...], ...]:
    """Read until answered (settling fills); the answer has been checked by the host."""
    host.read_settled(cache, key)
    return host.answers[(cache, key)]


def peek(host: Host, cache: str, key: tuple[object, ...]) -> tuple[tuple[object, ...], ...] | None:
    """One read; a miss's fill effects go to the host (not run yet)."""
    res = host.engine.read(cache, key)
    host.effects(res.effects)
    return res.rows


def write(host: Host, *changes: RowChange) -> None:
    host.write(changes)
    host.deliver(len(host.stream))


# ----------------------------------------------------------------------------- aggregates


def test_group_disappears_and_reappears_with_sql_null_semantics() -> None:
    host = make({VOTES.oid: [(1, 7, 1, None)]})
    assert answer(host, "votecount", (7,)) == ((7, 1, 0, None, None, 1, None, 1),)
    write(host, dele(VOTES, 1))
    assert peek(host, "votecount", (7,)) == ()  # group gone, key still present
    write(host, ins(VOTES, (2, 7, 3, Decimal("2.5"))), ins(VOTES, (3, 7, 2, Decimal("1"))))
    rows = peek(host, "votecount", (7,))
    assert rows == ((7, 2, 2, Decimal("3.5"), Decimal("1.7500000000000000"), 2, Decimal("2.5"),
                     2),)


def test_global_aggregate_over_empty_table_has_one_row() -> None:
    host = make({})
    assert answer(host, "count_all", ()) == ((0, None),)
    write(host, ins(STORIES, (1, 1, "a", 4)))
    assert peek(host, "count_all", ()) == ((1, 4),)
    write(host, dele(STORIES, 1))
    assert peek(host, "count_all", ()) == ((0, None),)


def test_min_max_after_deleting_the_extremum() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(3)), (2, 5, 2, Decimal(9)), (3, 5, 0, None)]})
    answer(host, "votecount", (5,))
    write(host, dele(VOTES, 2), dele(VOTES, 3))
    (row,) = peek(host, "votecount", (5,)) or ((),)
    assert row[5] == 1 and row[6] == Decimal(3)


def test_batch_with_retraction_and_insert_of_one_group() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    answer(host, "votecount", (5,))
    write(host, dele(VOTES, 1), ins(VOTES, (1, 5, 1, Decimal(1))))
    assert peek(host, "votecount", (5,)) == answer(host, "votecount", (5,))


# ----------------------------------------------------------------------------- joins


def test_left_join_padding_flips_both_ways_and_within_one_batch() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 6)]})
    assert answer(host, "story_vc", (1,)) == ((1, "a", None, None),)
    write(host, ins(VOTES, (1, 1, 1, Decimal(2))))
    assert peek(host, "story_vc", (1,)) == ((1, "a", 1, 1),)
    write(host, dele(VOTES, 1))
    assert peek(host, "story_vc", (1,)) == ((1, "a", None, None),)
    write(host, ins(VOTES, (2, 1, 1, None)), dele(VOTES, 2))
    assert peek(host, "story_vc", (1,)) == ((1, "a", None, None),)


def test_incongruent_join_prefetches_the_partner_in_one_round_trip() -> None:
    host = make({STORIES.oid: [(1, 4, "a", 6)], USERS.oid: [(4, "ann"), (5, "bob")]})
    res = host.engine.read("story_user", (1,))
    assert res.rows is None and len(res.effects) == 1
    (run,) = res.effects
    assert isinstance(run, RunFill) and [r.via is not None for r in run.requests] == [False, True]
    host.effects(res.effects)
    host.settle()
    assert host.engine.stats.fills == 1
    assert peek(host, "story_user", (1,)) == (("a", "ann"),)
    # the author changes to a user nothing has loaded: evict, never present-but-empty
    write(host, upd(STORIES, (1, 5, "a", 6)))
    assert peek(host, "story_user", (1,)) is None
    assert answer(host, "story_user", (1,)) == (("a", "bob"),)


def test_dependent_fill_when_the_patch_introduces_a_new_partner() -> None:
    host = make({STORIES.oid: [(1, 4, "a", 6)], USERS.oid: [(4, "ann"), (5, "bob")]})
    host.effects(host.engine.read("story_user", (1,)).effects)
    host.run_fill(0)  # snapshot: author 4 (prefetched)
    marker = host.stream.pop()
    host.write([upd(STORIES, (1, 5, "a", 6))])  # commits before the fill's marker
    host.stream.append(marker)
    host.respond(0)
    host.deliver(len(host.stream))  # patched to author 5: users.id = 5 was not prefetched
    assert len(host.to_run) == 1 and host.to_run[0].requests[0].table == USERS
    host.settle()
    assert host.answers[("story_user", (1,))] == (("a", "bob"),)


def test_reader_keyed_on_the_right_side_of_a_join() -> None:
    host = make({STORIES.oid: [(1, 4, "a", 6), (2, 4, "b", 1)], USERS.oid: [(4, "ann")]})
    assert sorted(answer(host, "by_user_name", ("ann",))) == [(1, "a"), (2, "b")]
    write(host, ins(STORIES, (3, 4, "c", 2)), upd(USERS, (4, "bob")))
    assert peek(host, "by_user_name", ("ann",)) in (None, ())
    assert answer(host, "by_user_name", ("ann",)) == ()
    assert len(answer(host, "by_user_name", ("bob",))) == 3


# ------------------------------------------------------------------- top-k, distinct, union


def test_topk_refills_after_losing_a_member() -> None:
    host = make({STORIES.oid: [(i, 1, "t", s) for i, s in enumerate((9, 8, 7, 6, 5, 1))]})
    assert answer(host, "top2", (1,)) == ((0, 9), (1, 8))
    write(host, dele(STORIES, 0), dele(STORIES, 1), dele(STORIES, 2), dele(STORIES, 3))
    assert answer(host, "top2", (1,)) == ((4, 5), (5, 1))
    write(host, ins(STORIES, (9, 1, "t", None)), ins(STORIES, (10, 1, "t", 7)))
    assert answer(host, "top2", (1,)) == ((10, 7), (4, 5))


def test_distinct_counts_rows() -> None:
    host = make({VOTES.oid: [(1, 3, 1, None), (2, 3, 1, None), (3, 3, 2, None)]})
    assert sorted(answer(host, "voters", (3,))) == [(1,), (2,)]
    write(host, dele(VOTES, 1))
    assert sorted(peek(host, "voters", (3,)) or ()) == [(1,), (2,)]
    write(host, dele(VOTES, 2))
    assert peek(host, "voters", (3,)) == ((2,),)


def _setop(kind: ir.SetOpKind) -> ir.Reader:
    """Per story, the voters (with repeats) ``kind`` the story's author."""
    votes = ir.Project(ir.Scan(VOTES), (col(1), col(2), const(0)), ("s", "u", "?side?"))
    authors = ir.Project(ir.Scan(STORIES), (col(0), col(1), const(1)), ("s", "u", "?side?"))
    return ir.Reader(ir.Distinct(ir.UnionAll((votes, authors)), kind), (0,), (1,))


def test_intersect_and_except_count_copies_on_each_side() -> None:
    plans = {k: _setop(k) for k in ("intersect", "intersect_all", "except", "except_all")}
    host = make({VOTES.oid: [(1, 3, 7, None), (2, 3, 7, None), (3, 3, 8, None)],
                 STORIES.oid: [(3, 7, "t", 1)]}, plans)
    got = {k: sorted(answer(host, k, (3,))) for k in plans}
    assert got == {"intersect": [(7,)], "intersect_all": [(7,)], "except": [(8,)],
                   "except_all": [(7,), (8,)]}
    write(host, dele(VOTES, 1), ins(VOTES, (4, 3, 8, None)))  # 7 once, 8 twice
    got = {k: sorted(peek(host, k, (3,)) or ()) for k in plans}
    assert got == {"intersect": [(7,)], "intersect_all": [(7,)], "except": [(8,)],
                   "except_all": [(8,), (8,)]}
    write(host, upd(STORIES, (3, 8, "t", 1)))  # the author is now 8
    got = {k: sorted(peek(host, k, (3,)) or ()) for k in plans}
    assert got == {"intersect": [(8,)], "intersect_all": [(8,)], "except": [(7,)],
                   "except_all": [(7,), (8,)]}
    write(host, dele(VOTES, 2))  # no more 7: a row of the right side alone is no output
    assert {k: sorted(peek(host, k, (3,)) or ()) for k in plans}["except"] == []


def test_union_diamond_update_across_both_branches() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 9)]})
    assert answer(host, "union", (1,)) == ((1,), (1,))  # in both branches
    write(host, upd(STORIES, (1, 1, "a", 2)))
    assert peek(host, "union", (1,)) == ((1,),)
    write(host, upd(STORIES, (1, 2, "a", 2)))
    assert peek(host, "union", (1,)) == ()


def test_filter_replacement_crossing_the_threshold() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 1)]})
    assert answer(host, "hot_by_author", (1,)) == ()
    write(host, upd(STORIES, (1, 1, UNCHANGED_TOAST, 9)))
    assert peek(host, "hot_by_author", (1,)) == ((1, "a", 9),)


# ----------------------------------------------------------------------------- fills


def test_concurrent_reads_share_one_fill_and_empty_results_are_present() -> None:
    host = make({}, {"a": PLANS["hot_by_author"], "b": PLANS["hot_by_author"]})
    first = host.engine.read("a", (3,))
    second = host.engine.read("b", (3,))
    again = host.engine.read("a", (3,))
    assert sum(isinstance(e, RunFill) for e in first.effects + second.effects + again.effects) == 1
    host.effects(first.effects)
    host.run_fill(0)
    host.respond(0)
    effects = host.engine.position_reached(host.stream[-1][1])
    assert {e.cache for e in effects if isinstance(e, ReadReady)} == {"a", "b"}
    hit = host.engine.read("a", (3,))
    assert hit.rows == () and not hit.effects


def test_change_during_fill_is_counted_exactly_once() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    res = host.engine.read("votecount", (5,))
    host.effects(res.effects)
    write(host, ins(VOTES, (2, 5, 1, Decimal(1))))  # applied before the snapshot: visible
    host.run_fill(0)
    host.write([ins(VOTES, (3, 5, 1, Decimal(1)))])  # after the snapshot: patched/applied
    host.respond(0)
    host.deliver(len(host.stream))
    assert peek(host, "votecount", (5,))[0][1] == 3  # type: ignore[index]


def test_applied_transaction_invisible_to_snapshot_is_patched() -> None:
    """F2: the engine applied T, but the fill's snapshot does not see it yet."""
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    res = host.engine.read("votecount", (5,))
    host.effects(res.effects)
    write(host, ins(VOTES, (2, 5, 1, Decimal(1))), dele(VOTES, 1))
    run = host.to_run.pop()
    snap, data = host.up.snapshot(random.Random(0), lag=False)
    hidden = host.up.committed[-1].xid
    snap = Snapshot(hidden, snap.xmax, frozenset({hidden}))  # T committed but invisible
    data[VOTES.oid] = {(1,): (1, 5, 1, Decimal(1))}  # what that snapshot sees
    rows = tuple(tuple(r for r in data[req.table.oid].values() if r[1] == 5)
                 for req in run.requests)
    assert host.engine.position_reached(run.fill_id) == ()  # position first, response later
    effects = host.engine.fill_response(run.fill_id, snap, rows)
    host.effects(effects)
    assert peek(host, "votecount", (5,)) == answer(host, "votecount", (5,))


def test_read_of_an_erroring_row_fails_and_goes_upstream() -> None:
    plan = ir.Reader(ir.Project(ir.Scan(STORIES), (
        col(0), ir.Arith("/", const(100), col(3), I4)), ("id", "q")), (0,), (1,))
    host = make({STORIES.oid: [(1, 1, "a", 0)]}, {"q": plan})
    host.effects(host.engine.read("q", (1,)).effects)
    host.run_fill(0)
    host.respond(0)
    failures: list[ReadFailed] = []
    for _kind, item in list(host.stream):
        failures.extend(e for e in host.engine.position_reached(item) if isinstance(e, ReadFailed))
    assert [(f.cache, f.sqlstate) for f in failures] == [("q", "22012")]


# ----------------------------------------------------------------------------- eviction


def test_reader_key_outgrowing_a_small_bag_and_back() -> None:
    """A reader key's bag is a list up to 8 rows and a dict beyond: 20 rows (equal weights
    printed differently among them) come in several batches and leave again, every answer
    checked against the reference on the way."""
    plan = ir.Reader(ir.Scan(VOTES), (1,), (0, 3))
    host = make({VOTES.oid: [(1, 7, 1, Decimal("1"))]}, {"by_story": plan})
    assert answer(host, "by_story", (7,)) == ((1, Decimal("1")),)
    weights = (Decimal("1"), Decimal("1.0"), Decimal("1.00"), Decimal("2"))
    for start in range(2, 22, 5):
        write(host, *(ins(VOTES, (i, 7, 1, weights[i % 4])) for i in range(start, start + 5)))
        assert len(answer(host, "by_story", (7,))) == start + 4
    assert isinstance(host.engine._readers["by_story"].state[(7,)], dict)  # outgrown
    for start in range(1, 22, 3):
        write(host, *(dele(VOTES, i) for i in range(start, min(start + 3, 22))))
        answer(host, "by_story", (7,))
    assert answer(host, "by_story", (7,)) == ()


def test_eviction_at_the_reader_replays_locally_without_a_fill() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    answer(host, "votecount", (5,))
    reader = host.engine.graph.caches["votecount"][0]
    host.engine.graph.evict(reader.nid, (5,))
    again = host.engine.read("votecount", (5,))
    assert again.rows is not None and not again.effects


def test_evicting_base_state_evicts_downstream_and_drops_later_changes() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    answer(host, "votecount", (5,))
    base = host.engine.graph.bases[VOTES.oid]
    host.engine.graph.evict(base.nid, ((1,), (5,)))
    assert peek(host, "votecount", (5,)) is None
    write(host, ins(VOTES, (2, 5, 1, Decimal(1))))
    assert answer(host, "votecount", (5,))[0][1] == 2


def test_tiny_budget_keeps_memory_bounded_and_answers_right() -> None:
    host = make({STORIES.oid: [(i, i % 3, "t", i) for i in range(30)]}, budget=1200)
    for i in range(30):
        answer(host, "hot_by_author", (i % 3,))
        answer(host, "titles", (i,))
    assert host.engine.memory_total() <= 1200
    assert host.engine.stats.evictions > 0


def test_memory_by_cache_and_node_sharing_and_drop() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]},
                {"a": PLANS["votecount"], "b": PLANS["votecount"], "c": PLANS["story_vc"]})
    answer(host, "a", (5,))
    answer(host, "c", (5,))
    engine = host.engine
    assert engine.graph.caches["a"][0] is engine.graph.caches["b"][0]
    mem = engine.memory_by_cache()
    assert mem["a"] == mem["b"] > 0 and mem["c"] > 0
    before = len(engine.graph.nodes)
    engine.drop_cache("a")
    assert len(engine.graph.nodes) == before
    engine.drop_cache("b")
    assert len(engine.graph.nodes) < before
    engine.drop_cache("c")
    assert not engine.graph.nodes and engine.memory_total() == 0


def test_toasted_update_of_a_row_that_is_not_stored_evicts() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 9), (2, 2, "b", 9)]})
    assert answer(host, "hot_by_author", (1,)) == ((1, "a", 9),)
    write(host, upd(STORIES, (2, 1, UNCHANGED_TOAST, 9)))  # story 2 was not loaded
    assert peek(host, "hot_by_author", (1,)) is None
    assert sorted(answer(host, "hot_by_author", (1,))) == [(1, "a", 9), (2, "b", 9)]


def test_extend_xid_across_epochs() -> None:
    assert extend_xid(5, 2**32 - 10) == 2**32 + 5
    assert extend_xid(2**32 - 3, 2**32 + 4) == 2**32 - 3
    assert extend_xid(100, 3 * 2**32 + 90) == 3 * 2**32 + 100
    assert extend_xid(7, 3) == 7


def test_duplicate_transactions_are_skipped_and_params_rejected() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal(1))]})
    answer(host, "votecount", (5,))
    txn = host.up.commit([ins(VOTES, (2, 5, 1, Decimal(1)))])
    host.engine.apply(txn)
    host.engine.apply(txn)  # redelivered after a reconnect: applied once
    assert peek(host, "votecount", (5,))[0][1] == 2  # type: ignore[index]
    bad = ir.Reader(ir.Filter(ir.Scan(STORIES), ir.Compare("=", col(0), ir.Param(1, I4))),
                    (), (0,))
    try:
        host.engine.add_cache("bad", bad)
    except ValueError as exc:
        assert "parameters" in str(exc)
    else:
        raise AssertionError("a plan with $1 must be rejected")


def test_abandoned_fill_fails_its_reads_and_a_new_read_refills() -> None:
    host = make({STORIES.oid: [(1, 1, "a", 9)]})
    res = host.engine.read("hot_by_author", (1,))
    (run,) = res.effects
    assert isinstance(run, RunFill)
    assert host.engine.read("hot_by_author", (1,)).effects == ()  # joins the pending fill
    failed = host.engine.abandon_fill(run.fill_id)
    assert [(f.cache, f.key) for f in failed if isinstance(f, ReadFailed)] == [
        ("hot_by_author", (1,))]
    assert not host.engine.fills.pending and not host.engine.fills.in_flight
    again = host.engine.read("hot_by_author", (1,))
    assert len(again.effects) == 1  # a fresh fill
    host.effects(again.effects)
    host.settle()
    assert host.answers[("hot_by_author", (1,))] == ((1, "a", 9),)


def test_numeric_sum_keeps_postgres_scale_and_specials_under_retraction() -> None:
    from engine.dataflow.ops.accumulators import accumulator

    acc = accumulator("sum", T.NUMERIC, T.NUMERIC)
    for v in ("1.50", "NaN", "2"):
        acc.add(Decimal(v), 1)
    assert str(acc.value()) == "NaN"
    acc.add(Decimal("NaN"), -1)
    assert str(acc.value()) == "3.50"
    acc.add(Decimal("1.50"), -1)
    assert str(acc.value()) == "2"  # PostgreSQL's sum over {2} prints 2, not 2.00
    acc.add(Decimal("Infinity"), 1)
    acc.add(Decimal("-Infinity"), 1)
    assert str(acc.value()) == "NaN"
    avg = accumulator("avg", T.NUMERIC, T.INT4)
    avg.add(1, 1)
    avg.add(2, 1)
    assert str(avg.value()) == "1.5000000000000000"


def test_update_that_only_changes_numeric_scale_is_visible() -> None:
    host = make({VOTES.oid: [(1, 5, 1, Decimal("1.0"))]},
                {"w": ir.Reader(ir.Scan(VOTES), (1,), (3,))})
    assert [str(r[0]) for r in answer(host, "w", (5,))] == ["1.0"]
    write(host, upd(VOTES, (1, 5, 1, Decimal("1.00"))))
    assert [str(r[0]) for r in peek(host, "w", (5,)) or ()] == ["1.00"]
    write(host, ins(VOTES, (2, 5, 1, Decimal("1"))))
    assert sorted(str(r[0]) for r in peek(host, "w", (5,)) or ()) == ["1", "1.00"]


def test_sum_whose_scale_alone_changes_is_re_emitted() -> None:
    """1.5 + 0.00 prints 1.50; updating 0.00 to 0 leaves an equal value that prints 1.5."""
    host = make({VOTES.oid: [(1, 7, 1, Decimal("1.5")), (2, 7, 1, Decimal("0.00"))]})
    assert str(answer(host, "votecount", (7,))[0][3]) == "1.50"
    write(host, upd(VOTES, (2, 7, 1, Decimal("0"))))
    rows = peek(host, "votecount", (7,)) or ()
    assert [str(r[3]) for r in rows] == ["1.5"]
    assert answer(host, "votecount", (7,)) == rows
