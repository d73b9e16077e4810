"""The applier on the golden pgoutput stream captured from PostgreSQL 15."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.applier import Applier, ApplierError
from cdc.events import UNCHANGED_TOAST, ChangeKind, RowChange
from cdc.pgoutput import Begin, Commit, decode_message
from engine.values import NUMERIC_NAN, TextValue
from tests.unit.cdc.recording import RecordingSink

GOLDEN = json.loads(Path(__file__).with_name("golden.json").read_text())
MESSAGES = [decode_message(bytes.fromhex(h)) for h in GOLDEN["messages"]]
T = UNCHANGED_TOAST


def _run(applier: Applier) -> None:
    for msg in MESSAGES:
        applier.feed(msg)


def _changes(sink: RecordingSink) -> list[RowChange]:
    return [c for t in sink.transactions for c in t.changes]


def test_golden_stream_applies_typed_changes_per_transaction() -> None:
    sink = RecordingSink()
    _run(Applier(sink))
    assert len(sink.transactions) == sum(isinstance(m, Commit) for m in MESSAGES)
    lsns = [t.commit_lsn for t in sink.transactions]
    assert lsns == sorted(lsns)
    first = sink.transactions[0]
    assert first.xid == 733
    assert [c.kind for c in first.changes] == [ChangeKind.INSERT, ChangeKind.INSERT]
    assert first.changes[0].new == (1, "one", "x" * 5000, Decimal("1.50"),
                                     datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert first.changes[1].new is not None and first.changes[1].new[3] is NUMERIC_NAN
    plain_update = sink.transactions[1].changes[0]
    assert plain_update.kind is ChangeKind.UPDATE and not plain_update.old_full
    assert plain_update.old is None
    assert plain_update.new is not None and plain_update.new[2] is UNCHANGED_TOAST
    key_update = sink.transactions[2].changes[0]
    assert (key_update.old, key_update.old_full) == ((2, T, T, T, T), False)
    delete = sink.transactions[3].changes[0]
    assert (delete.kind, delete.old, delete.new) == (ChangeKind.DELETE, (10, T, T, T, T), None)


def test_xids_are_extended_to_64_bits() -> None:
    sink = RecordingSink()
    applier = Applier(sink)
    applier.xid_reference = (7 << 32) + 700
    _run(applier)
    assert sink.transactions[0].xid == (7 << 32) + 733


def test_full_identity_truncate_custom_type_and_barrier() -> None:
    sink = RecordingSink()
    _run(Applier(sink, on_barrier=sink.barrier))
    changes = _changes(sink)
    full_update = next(c for c in changes if c.kind is ChangeKind.UPDATE and c.old_full)
    assert (full_update.old, full_update.new) == ((1, "v1"), (1, "v2"))
    full_delete = next(c for c in changes if c.kind is ChangeKind.DELETE and c.old_full)
    assert full_delete.old == (1, "v2")
    enum_insert = next(c for c in changes if c.new is not None and len(c.new) == 2
                       and isinstance(c.new[1], TextValue))
    assert enum_insert.new is not None and enum_insert.new[1] == TextValue(16406, "ok")
    truncates = [c for c in changes if c.kind is ChangeKind.TRUNCATE]
    assert len(truncates) == 2
    assert [b for b, _ in sink.barriers] == ["barrier-1"]
    barrier_commit = next(m for m in MESSAGES if isinstance(m, Commit)
                          and m.commit_lsn == sink.transactions[-2].commit_lsn)
    assert sink.barriers[0][1] == barrier_commit.end_lsn


def test_schema_change_resets_only_that_table_before_applying() -> None:
    sink = RecordingSink()
    _run(Applier(sink))
    pk_oid = sink.schemas[0].oid
    assert [oid for oid, _ in sink.resets] == [pk_oid]
    assert sink.events.index(("reset", "pk")) < len(sink.events) - 1
    assert sink.events[-1][0] == "apply"
    assert [c.new for c in sink.transactions[-1].changes] == [(3, "héllo", "b", None, None, 7)]


def test_replayed_stream_is_applied_exactly_once() -> None:
    sink = RecordingSink()
    applier = Applier(sink)
    _run(applier)
    count = len(sink.transactions)
    applier.connection_lost()
    _run(applier)
    assert len(sink.transactions) == count
    assert applier.skipped == count
    resumed = RecordingSink()
    later = Applier(resumed, applied_commit_lsn=sink.transactions[4].commit_lsn)
    _run(later)
    assert [t.xid for t in resumed.transactions] == [t.xid for t in sink.transactions[5:]]


def test_schemas_reach_the_sink_even_from_skipped_transactions() -> None:
    resumed = RecordingSink()
    _run(Applier(resumed, applied_commit_lsn=2**63))  # everything was applied before
    assert resumed.transactions == []
    assert {s.name for s in resumed.schemas} == {"pk", "nopk", "full_", "typed"}


def test_structure_errors() -> None:
    applier = Applier(RecordingSink())
    with pytest.raises(ApplierError):
        applier.feed(Commit(0, 1, 2, 3))
    applier.feed(Begin(10, 0, 1))
    with pytest.raises(ApplierError):
        applier.feed(Begin(11, 0, 2))
    with pytest.raises(ApplierError, match="before its Relation"):
        applier.feed(decode_message(b"I\0\0\0\x07N\0\0"))
