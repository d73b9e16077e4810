"""A forwarded miss's coverage read on the session's own upstream connection, in the same
round trip as the miss (issue 18, session 16).

Owns: :func:`append` (``proxy.missfast`` calls it as it forwards a miss: the batch that reads
the upstream's WAL insert position is written after the client's, in the same write),
:class:`Tail` (sans-I/O: cuts that batch's answer out of the upstream byte stream and reads
the position from it) and :func:`arrived` (the position handed to seen(s) coverage).

Why: a session's next cached read after a miss waits until the applier has applied every
commit the miss's answer could show (``proxy.seen``). That was a probe sent on a connection of
weir's own once the answer was relayed (``cdc.barrier.Barriers.covering``), and a cold Zipf
run measured it: 85% of the probes were passed by the stream the moment their answer was read
(the stream was already there), the answer itself took 3.2 ms on average on a loaded machine
(a second backend woken, and the event loop reaching its socket), the stream wait of the
other 15% 1.2 ms. Here the position comes with the miss's answer: the session's own backend,
still running, reads it right after the miss, with no second backend and no second socket.

The batch: ``Parse`` of a statement named :data:`NAME` (``SELECT
pg_catalog.pg_current_wal_insert_lsn(), pg_catalog.pg_current_wal_flush_lsn()``: the flush
position, read after the insert position, below it means WAL before the position is not yet
flushed, so only a flush lets the stream reach it; then the fallback barrier comes after
``UNFLUSHED_PATIENCE``, 2 ms, rather than ``PROBE_PATIENCE``, as for fills; issue 24),
``Bind`` of it to the unnamed portal, ``Execute``,
``Close`` of the statement, ``Sync``. Its answers (ParseComplete, BindComplete, the DataRow,
CommandComplete, CloseComplete, or an ErrorResponse, then ReadyForQuery) never reach the
client; asynchronous messages in between (NotificationResponse, ParameterStatus) do. While
it is outstanding the session's ``swallowing`` count holds one more (the relay core hands
its upstream data to the Python path, the lanes do not take it, ``proxy.aftermiss`` waits).

Exactness: the position is read by the statement after the miss on the same backend, so it
is at or after the end of every commit record the miss's snapshot could see (a transaction
is visible only after its commit record was inserted); every earlier answer of the session
was received before the batch was sent, so it is covered too (``proxy.seen``'s probe rule).
An answer to a request the client sent after the batch (it had the answer before it, a write
after a write) may come in the same read as the batch's answer, and is observed before
:func:`arrived` runs, when the session looks idle: then the position does not cover the
session (``Tail.after``), and a probe sent after that answer does (``aftermiss.answered``;
without this, a read after two writes in a row was served a state without the second, about
one run in a hundred of ``tests/integration/test_write_position.py``'s, session 21).
Once the stream's position reaches it (``Barriers.at``, which emits a barrier whose commit
flushes the WAL when the stream is not there within the probes' patience; a hit parked
meanwhile, ``proxy.aftermiss.park``, waits for that too, with no probe of its own), everything the
session saw is applied: its ``seen(s)`` is moved back to the batch's send time, which
coverage then has passed (every answer anyone received before that time is covered by the
same position). The session is moved back only if nothing else went upstream since and no
pass lane holds it (else a probe covers it, as before).

Invisible to the client: the client's messages are unchanged and come first; after its Sync
with the session idle outside a transaction block (``transaction_status`` "I" before a
SELECT's batch, which cannot open one) the batch runs in its own implicit transaction and
ends idle; the unnamed portal of the client's batch was dropped at its Sync; the statement is
named (the client's unnamed statement survives, which a simple Query would drop) and closed in
the same batch (``pg_prepared_statements`` of the session never shows it to the client's next
statement, which PostgreSQL runs after the batch), and not sent when the client holds a
statement of that name; an error (the function revoked, a server in recovery) is swallowed
and changes no session state, and coverage falls back to the pipe probe. Not invisible to
server-side observers: ``pg_stat_activity.query`` of the backend shows the batch's statement
while idle, ``pg_stat_statements`` (when loaded) counts it, ``log_statement = all`` logs it.
Hence ``--miss-position auto`` (the default) does not send it where the upstream loads
``pg_stat_statements`` or logs every statement (``proxy.seen.observers``), and
``probe`` never. Nor is it sent for a session whose reads are mostly misses lately (its last
pass lane that forwarded misses relayed a run of them, ``proxy.aftermiss.mostly_misses``): its
next read is likely a miss too, which needs no coverage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cdc import PROBE_PATIENCE, UNFLUSHED_PATIENCE, parse_lsn
from pgwire import frontend as fe
from pgwire.events import Phase
from pgwire.framing import ProtocolViolation, scan_messages
from proxy import aftermiss

#: the statement the batch prepares and closes (never sent when the client holds one so named)
NAME = "weir_miss_position"
BATCH = b"".join(m.encode() for m in (
    fe.Parse(NAME, "SELECT pg_catalog.pg_current_wal_insert_lsn(), "
             "pg_catalog.pg_current_wal_flush_lsn()"), fe.Bind("", NAME),
    fe.Execute("", 0), fe.Close("S", NAME), fe.Sync()))

_Z, _D, _E = ord("Z"), ord("D"), ord("E")
#: asynchronous messages that may come between the batch's answers: relayed
_ASYNC = frozenset(b"ANS")  # NotificationResponse, NoticeResponse, ParameterStatus
#: the batch's answers :meth:`Tail._answer` reads (the others are only cut out)
_READ = frozenset((_D, _E, _Z))
#: no length limit on the upstream's messages here (the relay checks them)
_ANY_LENGTH = 1 << 62


class Tail:
    """The upstream byte stream of a session with the batch outstanding: :meth:`feed` returns
    what the client gets (everything but the batch's answers, in order), :attr:`done` once the
    batch's ReadyForQuery came, :attr:`lsn` its position (None when it failed), :attr:`flushed`
    the WAL flush position read right after it (None when not read).

    ``before``: the ReadyForQuery messages that come first (the client's batch and whatever
    was outstanding before it); ``sent``: ``time.monotonic()`` before the batch was written.
    A NoticeResponse in the batch's answer is relayed (a notice is never a state change)."""

    __slots__ = ("_buf", "_failed", "_left", "after", "before", "done", "flushed", "lsn", "sent",
                 "write")

    def __init__(self, before: int, sent: float, write: bool = False) -> None:
        self.before = before
        self.sent = sent
        self.write = write  # (after a write, ``proxy.write_position``: not a miss)
        self.done = False
        #: bytes came after the batch's ReadyForQuery in the read that completed it: answers
        #: to requests sent after the batch, already observed when :func:`arrived` runs
        self.after = False
        self.lsn: int | None = None
        self.flushed: int | None = None
        self._buf = b""  # an incomplete message (the batch's) or header (any)
        self._left = 0  # bytes of the message being relayed that have not come yet
        self._failed = False

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` (the next upstream bytes) the client gets (class docstring)."""
        if self._left or self._buf or self.done:
            return self._feed(data)
        # the usual case, the whole answer in one read: its complete messages framed at once
        # (the compiled ``scan_messages``), the client's relayed as slices between the batch's;
        # a message cut by the read's end is left to :meth:`_feed`, which keeps its state
        try:
            found, end = scan_messages(data, 0, _ANY_LENGTH)
        except ProtocolViolation:
            return self._feed(data)
        out: list[bytes] = []
        keep = 0  # where the bytes not placed yet start (the client's, up to the batch's next)
        for mtype, start, stop in found:
            if self.before or mtype in _ASYNC:  # the client's: relayed
                if mtype == _Z and self.before:
                    self.before -= 1
                continue
            if start - 5 > keep:
                out.append(data[keep : start - 5])
            keep = stop
            if mtype in _READ:  # (the batch's others only need cutting out: ``_answer``)
                self._answer(mtype, data[start:stop])
                if self.done:  # after the batch's ReadyForQuery: the client's again
                    out.append(data[stop:])
                    self.after = stop < len(data)
                    return b"".join(out)
        if end > keep:
            out.append(data[keep:end])
        if end < len(data):
            out.append(self._feed(data[end:]))
        return b"".join(out)

    def _feed(self, data: bytes) -> bytes:
        """:meth:`feed` message by message, from any state (a message cut by a read)."""
        out: list[bytes] = []
        if self._left:  # the rest of a relayed message
            take = min(self._left, len(data))
            out.append(data[:take])
            self._left -= take
            data = data[take:]
        data = self._buf + data
        self._buf = b""
        pos, n = 0, len(data)
        while pos < n and not self.done:
            if n - pos < 5:
                self._buf = data[pos:]
                pos = n
                break
            mtype = data[pos]
            end = pos + 1 + int.from_bytes(data[pos + 1 : pos + 5], "big")
            if self.before or mtype in _ASYNC:  # the client's: relayed
                if mtype == _Z and self.before:
                    self.before -= 1
                if end > n:
                    out.append(data[pos:])
                    self._left = end - n
                    pos = n
                    break
                out.append(data[pos:end])
            else:  # the batch's: kept whole until read
                if end > n:
                    self._buf = data[pos:]
                    pos = n
                    break
                self._answer(mtype, data[pos + 5 : end])
            pos = end
        if pos < n:  # after the batch's ReadyForQuery: the client's again
            out.append(data[pos:])
            self.after = True
        return b"".join(out)

    def _answer(self, mtype: int, body: bytes) -> None:
        if mtype == _D and not self._failed and len(body) > 6:
            size = int.from_bytes(body[2:6], "big", signed=True)
            if size > 0:
                self.lsn = parse_lsn(body[6 : 6 + size].decode("ascii"))
                at = 6 + size  # (the flush position, when the row has it)
                if len(body) >= at + 4:
                    size = int.from_bytes(body[at : at + 4], "big", signed=True)
                    if size > 0:
                        self.flushed = parse_lsn(body[at + 4 : at + 4 + size].decode("ascii"))
        elif mtype == _E:
            self._failed = True
            self.lsn = None
        elif mtype == _Z:
            self.done = True


def append(session: Any, raw: bytes, write: bool = False) -> bytes:
    """``raw`` (a miss's batch going upstream, already observed; ``write``: a write's run,
    ``proxy.write_position``) with the batch that reads the position after it, when the
    session may have it (module docstring); ``raw`` as it is otherwise."""
    state, service = session.state, session.server.service
    mode = service.settings.miss_position
    if session.miss_tail is not None or mode == "probe" \
            or (mode == "auto" and service.host.observers is not None) \
            or service.settings.read_your_writes != "on" or NAME in state.statements \
            or state.transaction_status != "I" or state.skipping \
            or (not write and aftermiss.mostly_misses(session)):  # (mostly misses lately:
        return raw  # its next read likely one too, which needs no coverage; a hit asks at its
    before = sum(1 for item in state.pending if item.kind in ("sync", "query"))  # park)
    session.miss_tail = Tail(before, time.monotonic(), write)
    service.host.coverage.write_positions += write
    state.swallowing += 1
    return raw + BATCH


def arrived(session: Any, tail: Tail) -> None:
    """The batch's answer came (``Session.relay_from_upstream``): the session is covered once
    the stream reaches its position, and then goes back to its lane (module docstring)."""
    session.miss_tail = None
    state, service = session.state, session.server.service
    state.swallowing -= 1
    ctx, host, lsn = session.ctx, service.host, tail.lsn
    if ctx is None or host is None or not ctx.seen.missed or not state.idle \
            or state.transaction_status != "I" or tail.after:  # (``after``: an answer to a
        return  # request sent after the batch came with it, which its position does not
    # cover; the relay settles seen(s) after it and asks for a probe, ``aftermiss.answered``)
    if lsn is None:  # (the read failed: the pipe probe, as without it)
        host.coverage.positions_failed += 1
        aftermiss.answered(session)
    if service.lanes is not None and not tail.write \
            and not aftermiss.mostly_hits(session):  # (the relay core would have offered it:
        service.lanes.after_miss(session)  # Python relayed it; first, as there: a pass lane
        # that forwards misses; after a write, or when its reads are mostly hits lately, its
        # hit lane once covered, as there: ``aftermiss.back`` when the stream reaches it)
    if lsn is not None:
        _cover(session, ctx.seen, host, tail.sent, lsn,
               tail.flushed is not None and tail.flushed < lsn, tail.write)


def _cover(session: Any, seen: Any, host: Any, sent: float, lsn: int,
           unflushed: bool = False, write: bool = False) -> None:
    """Settle ``seen`` and cover it once the stream reaches ``lsn`` (module docstring)."""
    seen.settle(time.monotonic())
    at = seen.at
    coverage = host.coverage
    coverage.positions += 1
    parked: list[Callable[[], object]] = []  # (reads parked meanwhile: ``aftermiss.park``)
    session.miss_waiting = (at, parked)

    def reached() -> None:
        mine = session.miss_waiting is not None and session.miss_waiting[1] is parked
        if mine:
            session.miss_waiting = None
        coverage.passed(sent)
        if session.phase is Phase.CLOSED:
            return
        if seen.at == at and not seen.pending and not session.lane:  # (nothing else went
            # upstream since, and no pass lane relays it meanwhile)
            seen.at = min(at, sent)
            coverage.positions_passed += 1
            coverage.write_positions_passed += write
            calls = list(parked) if mine else []
            parked.clear()
            for call in calls:
                call()
            aftermiss.back(session)
        else:  # (``seen(s)`` moved: the parked reads ask coverage as without the position)
            calls = list(parked)
            parked.clear()
            for call in calls:
                coverage.when(at, call)

    # (``at`` emits a barrier when the stream has not reached ``lsn`` within the probes'
    # patience: WAL past the last flush is decoded after the next flush, which its commit makes;
    # when the flush position read with it lay below it, within the fills' shorter one)
    coverage.positions_unflushed += unflushed
    host.stream.barriers.at(lsn, reached, UNFLUSHED_PATIENCE if unflushed else PROBE_PATIENCE)
