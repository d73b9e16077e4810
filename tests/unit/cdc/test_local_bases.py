"""``cdc.bases.local.LocalBases`` without a cluster: the batch local fills read through, what is
durable (and so confirmable), a failed transaction dropping the batch, and fill lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.bases.local import LocalBases
from cdc.bases.store import BaseStore
from cdc.bootstrap.plan import Column, Partitioning, TableSpec, table_to_json
from cdc.pgoutput import Begin, Commit, Insert, Relation, Update
from cdc.pgoutput.messages import Column as RelColumn
from engine import FillRequest, RunFill
from engine.dataflow.fills import SemiJoin
from engine.plan.ir import Column as IrColumn
from engine.plan.ir import TableRef

SPEC = TableSpec("public", "t", (Column("id", "bigint", "int64"), Column("v", "text", "text"),
                                 Column("g", "integer", "int32")),
                 ("id",), Partitioning("hash", 1), 3)
REF = TableRef(7, "public", "t", (IrColumn("id", 20), IrColumn("v", 25), IrColumn("g", 23)), (0,))
RELATION = Relation(7, "public", "t", "d", (RelColumn(1, "id", 20, -1), RelColumn(0, "v", 25, -1),
                                            RelColumn(0, "g", 23, -1)))


def _bases(tmp_path: Path) -> LocalBases:
    data: dict[str, Any] = {
        "version": 1, "slot": "s", "publication": "p", "lsn": "0/100", "snapshot": "10:10:",
        "tables": [{**table_to_json(SPEC), "qualified": SPEC.qualified,
                    "partitions": [{"index": 0, "file": "", "snapshot": "10:10:"}]}]}
    rows = [("1", "a", "1"), ("2", "b", "1"), ("3", None, "2")]
    BaseStore.build(tmp_path / "b", data, lambda t: rows).close()
    local = LocalBases(str(tmp_path / "b"), "postgresql://u@127.0.0.1:1/db")
    local.ready = True
    return local


def _txn(local: LocalBases, xid: int, lsn: int, *changes: Any) -> None:
    local.tap(Begin(lsn, 0, xid))
    for change in changes:
        local.tap(change)
    local.tap(Commit(0, lsn, lsn + 8, 0))


def _get(local: LocalBases, key: int) -> Any:
    rows = local.rows(RunFill(1, (FillRequest(REF, (0,), (key,)),)))
    assert rows is not None
    return rows[0]


def test_fills_see_applied_transactions_before_they_are_durable(tmp_path: Path) -> None:
    local = _bases(tmp_path)
    assert local.resume == (0, 0x100) and local.durable_lsn() == 0x100
    assert _get(local, 1) == [(1, "a", 1)]
    local.tap(RELATION)
    _txn(local, 20, 0x200, Update(7, "K", ("1", None, None), ("1", "a2", "1")))
    assert _get(local, 1) == [(1, "a2", 1)]  # read through the open batch
    assert local.resume == (0, 0x100)  # not durable yet: nothing more may be confirmed
    assert local.durable_lsn() == 0x208  # the stream's status update commits the batch
    assert local.resume == (0x200, 0x208)
    local.close()
    reopened = LocalBases(str(tmp_path / "b"), "postgresql://u@127.0.0.1:1/db")
    reopened.ready = True
    assert reopened.resume == (0x200, 0x208)
    assert _get(reopened, 1) == [(1, "a2", 1)]
    reopened.close()


def test_a_transaction_the_store_cannot_apply_drops_the_batch(tmp_path: Path) -> None:
    local = _bases(tmp_path)
    local.tap(RELATION)
    _txn(local, 20, 0x200, Insert(7, ("4", "d", "3")))
    with pytest.raises(KeyError):  # an unchanged TOAST value of a row the store lacks
        from cdc.pgoutput import UNCHANGED_TOAST
        _txn(local, 21, 0x300, Update(7, "K", ("9", None, None), ("9", UNCHANGED_TOAST, "1")))
    assert local.resume == (0, 0x100)  # back to the durable state: the stream resends
    assert _get(local, 4) == []  # the batch (transaction 20 too) was dropped
    assert local.durable_lsn() == 0x100
    local.close()


def test_lookups_by_key_scan_and_semi_join(tmp_path: Path) -> None:
    local = _bases(tmp_path)
    assert _get(local, 9) == []
    by_g = local.rows(RunFill(2, (FillRequest(REF, (2,), (1,)),)))  # small table: a scan
    assert by_g is not None and sorted(by_g[0]) == [(1, "a", 1), (2, "b", 1)]
    whole = local.rows(RunFill(3, (FillRequest(REF, (), ()),)))
    assert whole is not None and len(whole[0]) == 3
    null_key = local.rows(RunFill(4, (FillRequest(REF, (0,), (None,)),)))
    assert null_key == [[]]
    # rows of t whose id is the g of t's row 3 (a semi-join, like a join's prefetch)
    via = FillRequest(REF, (0,), (), SemiJoin(REF, (0,), (3,), (2,)))
    joined = local.rows(RunFill(5, (via,)))
    assert joined == [[(2, "b", 1)]]
    other = TableRef(8, "public", "u", REF.columns, (0,))
    assert local.rows(RunFill(6, (FillRequest(other, (0,), (1,)),))) is None  # not local
    local.ready = False
    assert local.rows(RunFill(7, (FillRequest(REF, (0,), (1,)),))) is None
    local.close()


def test_a_local_table_whose_columns_changed_makes_the_bases_stale(tmp_path: Path) -> None:
    from cdc.bases.follow import BasesLost

    local = _bases(tmp_path)
    local.tap(RELATION)  # the same columns: nothing happens
    _txn(local, 20, 0x200, Insert(7, ("4", "d", "3")))
    added = Relation(7, "public", "t", "d", (*RELATION.columns, RelColumn(0, "w", 25, -1)))
    with pytest.raises(BasesLost, match=r"columns of public\.t changed"):
        local.tap(added)
    assert local.stale is not None and not local.ready
    assert local.resume == (0, 0x100)  # the batch was dropped with it
    local.close()
