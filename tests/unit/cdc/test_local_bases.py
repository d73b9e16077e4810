"""``cdc.bases.local.LocalBases`` without a cluster: the batch local fills read through, what is
durable (and so confirmable), a failed transaction dropping the batch, and fill lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.bases.local import LocalBases
from cdc.bases.store import BaseStore
from cdc.bootstrap.plan import Column, Partitioning, TableSpec, table_to_json
from cdc.pgoutput import Begin, Commit, Delete, Insert, Relation, Update
from cdc.pgoutput.messages import Column as RelColumn
from engine import FillRequest, RunFill
from engine.dataflow.fills import SemiJoin
from engine.plan.ir import Column as IrColumn
from engine.plan.ir import TableRef

SPEC = TableSpec("public", "t", (Column("id", "bigint", "int64", 20),
                                 Column("v", "text", "text", 25),
                                 Column("g", "integer", "int32", 23)),
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


def test_a_type_change_under_the_same_column_names_makes_the_bases_stale(tmp_path: Path) -> None:
    from cdc.bases.follow import BasesLost

    local = _bases(tmp_path)
    # g became numeric(10,2) upstream (ALTER TABLE ... TYPE rewrote every row's text, which
    # the stream never carries): the engine's caches are planned again with the new type...
    numeric = TableRef(7, "public", "t", (IrColumn("id", 20), IrColumn("v", 25),
                                          IrColumn("g", 1700)), (0,))
    assert local.rows(RunFill(1, (FillRequest(numeric, (0,), (1,)),))) is None  # upstream
    assert _get(local, 1) == [(1, "a", 1)]  # (the old shape is still served by the store)
    # ...the catalog check sees it (every heartbeat and session)...
    t = local.relation_names()[0]  # as COLUMNS_QUERY returns it
    found = [(t, "id", 20, -1, "bigint"), (t, "v", 25, -1, "text"), (t, "g", 23, -1, "integer")]
    assert local.changed_columns(found) is None
    assert local.changed_columns([]) == "the columns of public.t changed (gone)"
    assert local.changed_columns(found[:2]) is not None  # a column dropped
    assert local.changed_columns([*found, (t, "w", 25, -1, "text")]) is not None  # added
    # the type's text depends on the search_path: the oid and typmod decide
    assert local.changed_columns([*found[:2], (t, "g", 23, -1, "pg_catalog.int4")]) is None
    found[2] = (t, "g", 1700, (10 << 16 | 2) + 4, "numeric(10,2)")
    assert local.changed_columns(found) == (
        "the columns of public.t changed (now [('id', 'bigint'), ('v', 'text'), ('g', "
        "'numeric(10,2)')], stored [('id', 'bigint'), ('v', 'text'), ('g', 'integer')])")
    # ...and so does the Relation message the table's next change brings
    local.tap(RELATION)
    _txn(local, 20, 0x200, Insert(7, ("4", "d", "3")))
    retyped = Relation(7, "public", "t", "d", (*RELATION.columns[:2],
                                               RelColumn(0, "g", 1700, (10 << 16 | 2) + 4)))
    with pytest.raises(BasesLost, match=r"columns of public\.t changed"):
        local.tap(retyped)
    assert local.stale is not None and not local.ready
    assert local.resume == (0, 0x100)
    local.close()


def test_a_typmod_change_is_a_change_too(tmp_path: Path) -> None:
    from cdc.bases.follow import BasesLost

    local = _bases(tmp_path)
    wider = Relation(7, "public", "t", "d", (*RELATION.columns[:2], RelColumn(0, "g", 23, 8)))
    with pytest.raises(BasesLost):
        local.tap(wider)
    local.close()


def _by_g(local: LocalBases, g: int) -> list[Any] | None:
    found = local.rows(RunFill(9, (FillRequest(REF, (2,), (g,)),)))
    return None if found is None else sorted(found[0])


def test_a_secondary_index_is_built_in_slices_while_changes_keep_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cdc.bases.local as local_module

    data: dict[str, Any] = {
        "version": 1, "slot": "s", "publication": "p", "lsn": "0/100", "snapshot": "10:10:",
        "tables": [{**table_to_json(SPEC), "qualified": SPEC.qualified,
                    "partitions": [{"index": 0, "file": "", "snapshot": "10:10:"}]}]}
    rows = {i: (str(i), f"r{i}", str(i % 7)) for i in range(1, 1001)}
    BaseStore.build(tmp_path / "b", data, lambda t: list(rows.values())).close()
    local = LocalBases(str(tmp_path / "b"), "postgresql://u@127.0.0.1:1/db")
    local.ready = True
    monkeypatch.setattr(local_module, "SCAN_ROWS", 10)  # the table is "large"
    assert _by_g(local, 3) is None  # no index: upstream, and one is wanted
    assert list(local.wanted) == [("public.t", ("g",))]
    local.build_indexes(seconds=0)  # the first slice: 256 rows (keys in byte order)
    assert _by_g(local, 3) is None  # not built yet
    local.tap(RELATION)
    # changes before and after the build's position, while it is being built
    _txn(local, 20, 0x200, Update(7, "K", ("1", None, None), ("1", "a", "5")),
         Update(7, "K", ("999", None, None), ("999", "z", "5")),
         Insert(7, ("2000", "new", "3")), Delete(7, "K", ("998", None, None)))
    rows[1], rows[999], rows[2000] = ("1", "a", "5"), ("999", "z", "5"), ("2000", "new", "3")
    del rows[998]
    for _ in range(10):
        local.build_indexes(seconds=0)
    _txn(local, 21, 0x300, Update(7, "K", ("5", None, None), ("5", "b", "3")))
    rows[5] = ("5", "b", "3")

    def expected(g: int) -> list[Any]:
        return sorted((int(r[0]), r[1], int(r[2])) for r in rows.values() if r[2] == str(g))

    for g in range(7):
        assert _by_g(local, g) == expected(g), g
    assert local.durable_lsn() == 0x308
    local.close()
    reopened = LocalBases(str(tmp_path / "b"), "postgresql://u@127.0.0.1:1/db")
    reopened.ready = True
    assert reopened.wanted == {}  # the store kept its index
    reopened.tap(RELATION)
    _txn(reopened, 22, 0x400, Delete(7, "K", ("5", None, None)))
    del rows[5]
    for g in range(7):
        assert _by_g(reopened, g) == expected(g), g
    reopened.close()
