"""Parity: the Cython twin of the base store's apply loop (``cython_ext.basestore``) equals
the pure ``engine.dataflow.state.base.apply_changes`` on random change streams: inserts,
updates (with unchanged TOASTed columns, primary-key changes), deletes, truncates, rows that
are not covered, for tables with and without a primary key."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange
from engine.dataflow import records
from engine.dataflow.records import UNKNOWN
from engine.dataflow.state import base
from engine.dataflow.state.intervals import Span
from engine.plan import ir
from engine.values import oids as T

fast = cython_ext.load_pair("basestore")

COLS = (ir.Column("id", T.INT4), ir.Column("g", T.INT4), ir.Column("t", T.TEXT))
WITH_PK = ir.TableRef(1, "public", "t", COLS, (0,))
NO_PK = ir.TableRef(2, "public", "u", COLS, ())

ROW = st.tuples(st.integers(0, 5), st.integers(0, 2), st.sampled_from(("a", "bb", None)))


@st.composite
def changes(draw: st.DrawFn, table: ir.TableRef) -> RowChange:
    kind = draw(st.sampled_from(("i", "i", "u", "u", "d", "t")))
    new: tuple[object, ...] = draw(ROW)
    old: tuple[object, ...] = draw(ROW)
    old_row: tuple[object, ...] | None
    if kind == "i":
        return RowChange(table.oid, ChangeKind.INSERT, None, new)
    if kind == "t":
        return RowChange(table.oid, ChangeKind.TRUNCATE, None, None)
    if table.primary_key:
        key_only = (old[0], UNCHANGED_TOAST, UNCHANGED_TOAST)
        old_row = draw(st.sampled_from((None, key_only))) if kind == "u" else key_only
        if kind == "u" and draw(st.booleans()):
            new = (new[0], new[1], UNCHANGED_TOAST)
        if kind == "u" and old_row is None:
            new = (old[0], *new[1:])
        full = False
    else:
        old_row, full = old, True
    kind_of = ChangeKind.UPDATE if kind == "u" else ChangeKind.DELETE
    return RowChange(table.oid, kind_of, old_row, None if kind == "d" else new, full)


def _state(store: base.BaseStore) -> Any:
    return (store.rows, store.bytes,
            {c: (i.present, i.by_key) for c, i in store.indexes.items()})


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.basestore is not built: run `make compile`"


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from((WITH_PK, NO_PK)), st.sets(st.integers(0, 2)),
       st.booleans())
def test_apply_changes_parity(data: st.DataObject, table: ir.TableRef, present: set[int],
                              whole: bool) -> None:
    assert fast is not None
    fast.configure(ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.DELETE, UNCHANGED_TOAST,
                   UNKNOWN, base.Index, records.consolidate_python)
    stores = [base.BaseStore(table) for _ in range(2)]
    for store in stores:
        store.install((1,), (0,), [])
        for g in present:
            store.install((1,), (g,), [])
        if whole:
            store.install((), (), [])
    for _ in range(data.draw(st.integers(1, 4))):
        batch = data.draw(st.lists(changes(table), max_size=6))
        got = [fn(store, batch) for store, fn in zip(
            stores, (base.apply_changes_python, fast.apply_changes), strict=True)]
        assert repr(got[0]) == repr(got[1])
        assert _state(stores[0]) == _state(stores[1])
        for cols in stores[0].indexes:
            for key in [(g,) for g in range(3)] if cols else [()]:
                assert fast.present_rows(stores[0], cols, key) == base.present_rows_python(
                    stores[0], cols, key)


@settings(max_examples=100, deadline=None)
@given(st.data(), st.sampled_from(("values", "nulls", "only_nulls", "range")))
def test_apply_changes_parity_with_filled_intervals(data: st.DataObject, piece: str) -> None:
    """A store with filled intervals (range-partial and top-k state), including the NULL
    point past every value (top-k over a nullable column): rows whose column becomes or
    stops being NULL move into and out of the pieces the same way in both (the twin applies
    such a store's changes through the pure loop)."""
    assert fast is not None
    fast.configure(ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.DELETE, UNCHANGED_TOAST,
                   UNKNOWN, base.Index, records.consolidate_python)
    span = {"values": Span(1, T.INT4, hi=1, hi_incl=True),
            "nulls": Span(1, T.INT4, lo=1, nulls=True),
            "only_nulls": Span(1, T.INT4, nulls=True, only_nulls=True),
            "range": Span(1, T.INT4, lo=0)}[piece]
    stores = [base.BaseStore(WITH_PK) for _ in range(2)]
    for store in stores:
        store.install_span((1,), (), span, [])
    nullable = st.tuples(st.integers(0, 5), st.sampled_from((0, 1, 2, None)),
                         st.sampled_from(("a", None)))
    for _ in range(data.draw(st.integers(1, 4))):
        batch = []
        for _ in range(data.draw(st.integers(0, 6))):
            new = data.draw(nullable)
            kind = data.draw(st.sampled_from((ChangeKind.INSERT, ChangeKind.UPDATE,
                                              ChangeKind.DELETE)))
            old = (new[0], UNCHANGED_TOAST, UNCHANGED_TOAST)
            batch.append(RowChange(WITH_PK.oid, kind, None if kind is ChangeKind.INSERT
                                   else old, None if kind is ChangeKind.DELETE else new))
        got = [fn(store, batch) for store, fn in zip(
            stores, (base.apply_changes_python, fast.apply_changes), strict=True)]
        assert repr(got[0]) == repr(got[1])
        assert _state(stores[0]) == _state(stores[1])
        for store in stores:  # (S2: exactly the rows whose value lies in the piece)
            assert all(span.holds(e[0][1]) for e in store.rows.values())
