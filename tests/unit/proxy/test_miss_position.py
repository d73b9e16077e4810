"""``proxy.missfast_position.Tail``: the answer of weir's position read cut out of a session's
upstream byte stream, whatever the chunking; the client's answers before it, asynchronous
messages inside it and the answers after it reach the client unchanged and in order; a
position whose answer came with a later answer does not cover the session (``arrived``)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from pgwire import backend as be
from proxy.metrics import own_error
from proxy.missfast_position import BATCH, NAME, Tail, arrived
from proxy.seen import Coverage, Seen

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


def test_answers_after_it_in_the_same_read_are_marked() -> None:
    """``Tail.after``: bytes came after the batch's ReadyForQuery in the read that completed
    it (answers to requests sent after the batch), whatever the cuts before it; not when the
    read ends with it."""
    stream = _CLIENT + _POSITION + _READY
    for cut in range(len(stream) + 1):
        alone, followed = Tail(1, 0.0), Tail(1, 0.0)
        _feed(alone, stream, (cut,))
        assert alone.done and not alone.after, cut
        assert _feed(followed, stream + _AFTER, (cut,)) == _CLIENT + _AFTER
        assert followed.done and followed.after, cut
    whole = Tail(1, 0.0)  # (the one-read way, with no cut)
    assert whole.feed(stream + _AFTER) == _CLIENT + _AFTER and whole.after


async def _never(on_pass: Any) -> None:  # (no barrier is emitted in these tests)
    raise AssertionError("a barrier was emitted")


class _Barriers:
    def __init__(self) -> None:
        self.waits: list[int] = []

    def at(self, lsn: int, call: Any, patience: float = 0.0) -> None:
        self.waits.append(lsn)


def _session(tail: Tail) -> tuple[Any, Seen, _Barriers]:
    seen, barriers = Seen(at=1.0, pending=True, missed=True), _Barriers()
    host = SimpleNamespace(coverage=Coverage(_never),
                           stream=SimpleNamespace(barriers=barriers))
    service = SimpleNamespace(host=host, lanes=None,
                              settings=SimpleNamespace(read_your_writes="on"))
    session = SimpleNamespace(
        miss_tail=tail, ctx=SimpleNamespace(seen=seen), server=SimpleNamespace(service=service),
        state=SimpleNamespace(swallowing=1, idle=True, transaction_status="I"),
        miss_waiting=None)
    return session, seen, barriers


def test_a_position_is_not_waited_for_when_a_later_answer_came_with_it() -> None:
    """A write, then a second write the client sent once it had the first's answer: the
    second's answer came in the same read as the position's and was observed first (the
    session looks idle). The position, read before the second write, must not cover the
    session (read-your-writes): no wait for it, seen(s) left for the relay to settle after
    the second answer and cover with a probe (``aftermiss.answered``). Without a later
    answer, the stream's reaching the position is waited for."""
    for after in (False, True):
        tail = Tail(0, 0.5, write=True)
        tail.feed(_POSITION + _READY + (_AFTER if after else b""))
        session, seen, barriers = _session(tail)
        arrived(session, tail)
        assert session.miss_tail is None and session.state.swallowing == 0
        if after:
            assert barriers.waits == [] and session.miss_waiting is None
            assert seen.pending and seen.missed and seen.at == 1.0
        else:
            assert barriers.waits == [(1 << 32) | 0x2A0] and session.miss_waiting is not None
