"""The recent-transaction log's pruning rule and snapshot visibility (DESIGN section 6)."""

from __future__ import annotations

from engine.changes import ChangeKind, RowChange, Snapshot, Transaction
from engine.dataflow.fills import FillManager
from tests.property.catalog import STORIES


def txn(xid: int) -> Transaction:
    return Transaction(xid, xid, (RowChange(STORIES.oid, ChangeKind.INSERT, None,
                                            (xid, 1, "t", 1)),))


def test_visibility_rule() -> None:
    s = Snapshot(10, 15, frozenset({12}))
    assert s.visible(9) and s.visible(11) and s.visible(14)
    assert not s.visible(12) and not s.visible(15) and not s.visible(20)


def test_entries_stay_until_a_snapshot_older_than_every_pending_fill_sees_them() -> None:
    fm = FillManager()
    tables = {STORIES.oid}
    fm.record(txn(5), tables)
    fm.record(txn(6), tables)
    run = fm.issue([((1, (1,), (1,)), STORIES)])
    assert run is not None
    fm.probe(Snapshot(7, 7))  # arrived after the fill was issued: not usable yet
    assert [t.xid for t in fm.log] == [5, 6]
    ready = fm.response(run.fill_id, Snapshot(6, 7, frozenset({6})), ((),))
    assert ready is None  # position not reached yet
    fill = fm.reached(run.fill_id)
    assert fill is not None
    ((_, rows),) = fm.finish(fill)
    assert rows == [(6, 1, "t", 1)]  # patched with the applied, invisible transaction 6
    assert not fm.log  # no fill pending: the probe's snapshot sees both


def test_capped_log_makes_fills_that_needed_dropped_entries_retry() -> None:
    fm = FillManager(log_cap=1)
    run = fm.issue([((1, (1,), (1,)), STORIES)])
    assert run is not None
    tables = {STORIES.oid}
    fm.record(txn(5), tables)
    fm.record(txn(6), tables)  # 5 is dropped by the cap
    fm.reached(run.fill_id)
    fill = fm.response(run.fill_id, Snapshot(5, 7, frozenset({5, 6})), ((),))
    assert fill is not None
    ((_, rows),) = fm.finish(fill)
    assert rows is None  # cannot be patched: re-issue


def test_engine_asks_for_a_snapshot_when_the_log_grows() -> None:
    from engine.api import Engine, TakeSnapshot
    from tests.property.catalog import PLANS

    engine = Engine(probe_every=3)
    engine.add_cache("hot", PLANS["hot_by_author"])
    asked = [e for x in range(10, 15) for e in engine.apply(txn(x))]
    assert asked == [TakeSnapshot()]  # once, until the probe arrives
    engine.snapshot_probe(Snapshot(15, 15))
    assert not engine.fills.log
    assert [e for x in range(15, 18) for e in engine.apply(txn(x))] == [TakeSnapshot()]


def test_a_local_fill_installs_at_once_without_patch_or_position_wait() -> None:
    """Rows read from local bases are as of the applied position: they are installed as given,
    and the logged transactions are not applied to them (a patch would add transaction 5's
    row to the empty answer given here; an upstream fill's snapshot would need it)."""
    from engine.api import Engine, ReadReady, RunFill
    from tests.property.catalog import PLANS

    engine = Engine()
    engine.add_cache("hot", PLANS["hot_by_author"])
    engine.apply(txn(5))  # in the log, and (by the contract) already in the local base
    miss = engine.read("hot", (1,))
    assert miss.rows is None
    runs = [e for e in miss.effects if isinstance(e, RunFill)]
    assert len(runs) == 1 and len(runs[0].requests) == 1
    effects = engine.fill_local(runs[0].fill_id, [[]])
    ready = [e for e in effects if isinstance(e, ReadReady)]
    assert ready and ready[0].key == (1,) and ready[0].rows == ()
    assert engine.read("hot", (1,)).rows == ()
    assert not engine.fills.pending and not engine.fills.in_flight
    # a second call for the same fill does nothing (it is installed)
    assert engine.fill_local(runs[0].fill_id, [[]]) == ()
