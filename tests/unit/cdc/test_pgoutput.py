"""pgoutput decoder: golden payloads captured from PostgreSQL 15, hand-built edge cases, fuzz."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Message,
    Origin,
    PgoutputError,
    PrimaryKeepalive,
    Relation,
    Truncate,
    Type,
    Update,
    XLogData,
    decode_copy_data,
    decode_message,
    format_lsn,
    parse_lsn,
    standby_status_update,
)

GOLDEN = json.loads(Path(__file__).with_name("golden.json").read_text())
PAYLOADS = [bytes.fromhex(h) for h in GOLDEN["messages"]]
DECODED = [decode_message(p) for p in PAYLOADS]


def _of(kind: type) -> list[object]:
    return [m for m in DECODED if isinstance(m, kind)]


def test_golden_stream_has_every_message_type_in_transaction_shape() -> None:
    kinds = {type(m).__name__ for m in DECODED}
    assert kinds >= {"Begin", "Commit", "Relation", "Type", "Insert", "Update", "Delete",
                     "Truncate", "Message"}
    begins, commits = _of(Begin), _of(Commit)
    assert len(begins) == len(commits)
    for b, c in zip(begins, commits, strict=True):
        assert isinstance(b, Begin) and isinstance(c, Commit)
        assert b.final_lsn == c.commit_lsn < c.end_lsn and b.commit_time == c.commit_time


def test_golden_relation_and_type() -> None:
    pk = _of(Relation)[0]
    assert pk == Relation(pk.oid, "public", "pk", "d", (
        Column(1, "id", 23, -1), Column(0, "name", 25, -1), Column(0, "big", 25, -1),
        Column(0, "n", 1700, -1), Column(0, "ts", 1184, -1)))
    full = next(r for r in _of(Relation) if isinstance(r, Relation) and r.name == "full_")
    assert full.replica_identity == "f" and all(c.is_key for c in full.columns)
    typ = _of(Type)[0]
    assert isinstance(typ, Type) and (typ.namespace, typ.name) == ("public", "mood")
    altered = [r for r in _of(Relation) if isinstance(r, Relation) and r.name == "pk"][-1]
    assert [c.name for c in altered.columns][-1] == "extra"


def test_golden_row_changes() -> None:
    inserts = _of(Insert)
    assert isinstance(inserts[0], Insert) and inserts[0].new[:2] == ("1", "one")
    assert inserts[0].new[2] == "x" * 5000
    assert inserts[1] == Insert(inserts[0].relation_oid, ("2", None, "small", "NaN", None))
    assert inserts[-1].new == ("3", "héllo", "b", None, None, "7")  # type: ignore[attr-defined]
    plain, key_change, full = _of(Update)
    assert plain == Update(inserts[0].relation_oid, "", None,
                           ("1", "uno", UNCHANGED_TOAST, "1.50", "2020-01-02 03:04:05+00"))
    assert isinstance(key_change, Update) and key_change.old_kind == "K"
    assert key_change.old == ("2", None, None, None, None)
    assert isinstance(full, Update) and (full.old, full.new) == (("1", "v1"), ("1", "v2"))
    dk, df = _of(Delete)
    assert isinstance(dk, Delete) and (dk.old_kind, dk.old) == ("K", ("10", None, None, None, None))
    assert isinstance(df, Delete) and (df.old_kind, df.old) == ("O", ("1", "v2"))


def test_golden_truncate_and_messages() -> None:
    (trunc,) = _of(Truncate)
    assert isinstance(trunc, Truncate) and trunc.options == 3 and len(trunc.relation_oids) == 2
    tx, nontx = _of(Message)
    assert isinstance(tx, Message) and tx.transactional and (tx.prefix, tx.content) == (
        "weir", b"barrier-1")
    assert isinstance(nontx, Message) and not nontx.transactional and nontx.content == b"\x00\xff"


def test_origin_hand_built() -> None:
    payload = b"O" + struct.pack("!Q", 0x1_0000_0002) + b"node_a\0"
    assert decode_message(payload) == Origin(0x1_0000_0002, "node_a")


@pytest.mark.parametrize("index", range(len(PAYLOADS)))
def test_every_truncation_of_a_golden_payload_is_a_clear_error(index: int) -> None:
    payload = PAYLOADS[index]
    for cut in range(len(payload) - 1, -1, -max(1, len(payload) // 40)):
        with pytest.raises(PgoutputError):
            decode_message(payload[:cut])


def test_trailing_bytes_and_unknown_types_are_errors() -> None:
    with pytest.raises(PgoutputError, match="trailing"):
        decode_message(PAYLOADS[0] + b"\0")
    with pytest.raises(PgoutputError, match="unknown pgoutput message type"):
        decode_message(b"S\0\0\0\1\1")
    with pytest.raises(PgoutputError, match="unexpected tuple marker"):
        decode_message(b"I\0\0\0\1X\0\0")
    with pytest.raises(PgoutputError, match="column kind"):
        decode_message(b"I\0\0\0\1N\0\1z")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(b"BCORYIUDTMx"), st.binary(max_size=64))
def test_fuzzed_payloads_decode_or_raise_pgoutput_error(kind: int, body: bytes) -> None:
    with contextlib.suppress(PgoutputError):
        decode_message(bytes([kind]) + body)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PAYLOADS), st.data())
def test_mutated_golden_payloads_decode_or_raise_pgoutput_error(payload: bytes,
                                                                data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(payload) - 1))
    byte = data.draw(st.integers(0, 255))
    with contextlib.suppress(PgoutputError):
        decode_message(payload[:i] + bytes([byte]) + payload[i + 1 :])


def test_copy_data_messages() -> None:
    xlog = b"w" + struct.pack("!QQq", 10, 20, 30) + b"B..."
    assert decode_copy_data(xlog) == XLogData(10, 20, 30, b"B...")
    keep = b"k" + struct.pack("!QqB", 99, 5, 1)
    assert decode_copy_data(keep) == PrimaryKeepalive(99, 5, True)
    with pytest.raises(PgoutputError):
        decode_copy_data(b"k\0")
    with pytest.raises(PgoutputError):
        decode_copy_data(b"w\0\0")
    with pytest.raises(PgoutputError):
        decode_copy_data(b"z")
    status = standby_status_update(1, 2, 3, 4)
    assert status == b"r" + struct.pack("!QQQqB", 1, 2, 3, 4, 0)


def test_lsn_text() -> None:
    assert format_lsn(0x16_B374D848) == "16/B374D848"
    assert parse_lsn("16/B374D848") == 0x16_B374D848
