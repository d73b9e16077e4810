"""``proxy.missfast_position.Tail``: the answer of weir's position read cut out of a session's
upstream byte stream, whatever the chunking; the client's answers before it, asynchronous
messages inside it and the answers after it reach the client unchanged and in order."""

from __future__ import annotations

import itertools

from pgwire import backend as be
from proxy.metrics import own_error
from proxy.missfast_position import BATCH, NAME, Tail

_CLIENT = (be.BindComplete().encode() + be.DataRow((b"v1",)).encode()
           + be.CommandComplete("SELECT 1").encode() + be.ReadyForQuery("I").encode())
_NOTIFY = be.NotificationResponse(7, "chan", "x").encode()
_POSITION = (be.ParseComplete().encode() + be.BindComplete().encode()
             + be.DataRow((b"1/2A0", b"1/200")).encode() + be.CommandComplete("SELECT 1").encode()
             + be.CloseComplete().encode())
_READY = be.ReadyForQuery("I").encode()
_AFTER = be.DataRow((b"later",)).encode() + be.ReadyForQuery("I").encode()


def _feed(tail: Tail, stream: bytes, cuts: tuple[int, ...]) -> bytes:
    out, last = [], 0
    for cut in (*cuts, len(stream)):
        out.append(tail.feed(stream[last:cut]))
        last = cut
    return b"".join(out)


def test_the_position_is_read_and_cut_out_at_every_split() -> None:
    stream = _CLIENT + _POSITION + _NOTIFY + _READY + _AFTER  # (a notification inside it)
    for cuts in itertools.chain(((i,) for i in range(len(stream) + 1)),
                                ((i, i + 3) for i in range(len(stream) - 2))):
        tail = Tail(1, 0.0)
        assert _feed(tail, stream, cuts) == _CLIENT + _NOTIFY + _AFTER, cuts
        assert tail.done and tail.lsn == (1 << 32) | 0x2A0
        assert tail.flushed == (1 << 32) | 0x200


def test_a_row_without_the_flush_position_has_the_position_alone() -> None:
    one = _POSITION.replace(be.DataRow((b"1/2A0", b"1/200")).encode(),
                            be.DataRow((b"1/2A0",)).encode())
    tail = Tail(1, 0.0)
    assert tail.feed(_CLIENT + one + _READY) == _CLIENT
    assert tail.done and tail.lsn == (1 << 32) | 0x2A0 and tail.flushed is None


def test_every_ready_for_query_before_it_is_the_clients() -> None:
    two = _CLIENT + _CLIENT
    tail = Tail(2, 0.0)
    assert tail.feed(two + _POSITION + _READY) == two
    assert tail.done and tail.lsn is not None


def test_a_failed_read_has_no_position_and_is_swallowed() -> None:
    error = own_error("26000", f'prepared statement "{NAME}" already exists')
    tail = Tail(1, 0.0)
    assert tail.feed(_CLIENT + error + _READY + _AFTER) == _CLIENT + _AFTER
    assert tail.done and tail.lsn is None


def test_nothing_is_done_before_its_ready_for_query() -> None:
    tail = Tail(1, 0.0)
    assert tail.feed(_CLIENT + _POSITION) == _CLIENT
    assert not tail.done
    assert tail.feed(_READY) == b"" and tail.done


def test_the_batch_is_parse_bind_execute_close_sync_of_the_named_statement() -> None:
    assert [BATCH[i:i + 1] for i in _starts(BATCH)] == [b"P", b"B", b"E", b"C", b"S"]
    assert NAME.encode() in BATCH and b"pg_catalog.pg_current_wal_insert_lsn()" in BATCH
    assert b"pg_catalog.pg_current_wal_flush_lsn()" in BATCH


def _starts(raw: bytes) -> list[int]:
    pos, starts = 0, []
    while pos < len(raw):
        starts.append(pos)
        pos += 1 + int.from_bytes(raw[pos + 1 : pos + 5], "big")
    return starts



def test_the_whole_read_way_and_the_message_by_message_way_agree() -> None:
    """``Tail.feed`` frames a read's complete messages at once; ``Tail._feed`` (any state,
    a message cut by a read) goes message by message: both give the client the same bytes
    and read the same position, whatever the cuts (every pair of cut points)."""
    notice = be.ParameterStatus("application_name", "x").encode()
    stream = (_CLIENT + notice + _CLIENT + _POSITION[:10] + _NOTIFY + _POSITION[10:] + _READY
              + _AFTER + _CLIENT)
    for i in range(0, len(stream) + 1, 3):
        for j in range(i, len(stream) + 1, 7):
            whole, single = Tail(2, 0.0), Tail(2, 0.0)
            out = _feed(whole, stream, (i, j))
            one = b"".join(single._feed(stream[a:b]) for a, b in
                           ((0, i), (i, j), (j, len(stream))))
            assert out == one == _CLIENT + notice + _CLIENT + _NOTIFY + _AFTER + _CLIENT
            assert (whole.done, whole.lsn, whole.flushed) == (single.done, single.lsn,
                                                              single.flushed)
