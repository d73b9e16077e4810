"""The relay's cheap paths give exactly what message-by-message observation gives.

- ``scan_backend``: the Cython twin (``cython_ext/framing.pyx``) equals the pure-Python one;
- ``Framer.take`` / ``take_backend``: any split of a stream yields the same messages;
- a relayed session (fake transports, scripted PostgreSQL conversations) ends up in the same
  state, writes the same bytes and records the same ``ctx.last`` as a reference session that
  observes every backend message one by one and decodes and routes every client message —
  through the session's own Python path and through the relay core (``Relay`` in
  ``cython_ext/relay_scan.pyx``, whatever ``WEIR_IMPL`` selects).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from pgwire import backend as be
from pgwire import framing
from pgwire import frontend as fe
from pgwire.errors import error_response
from pgwire.framing import Framer, ProtocolViolation
from proxy import transactions
from proxy.forwarding import plain_query
from proxy.relay import Phase, Session, context, relay_entries
from proxy.rules import READ_ONLY_TAGS
from proxy.server import Server
from proxy.session import SessionState
from proxy.session_core import FIELDS
from proxy.settings import Settings
from tests.unit.proxy.test_session_core_parity import ledger_on

SCAN = cython_ext.load_pair("relay_scan")
BACKEND_SCAN = cython_ext.load_pair("framing")  # (scan_backend)
CORE = cython_ext.load_pair("session_core")
if BACKEND_SCAN is not None:
    BACKEND_SCAN.set_error_class(ProtocolViolation)


def test_twin_is_built() -> None:
    assert SCAN is not None, "cython_ext.relay_scan is not built: run `make compile`"
    assert BACKEND_SCAN is not None, "cython_ext.framing is not built: run `make compile`"


def _frame(mtype: bytes, payload: bytes) -> bytes:
    return mtype + struct.pack("!I", len(payload) + 4) + payload


_TAGS = [b"SELECT 1", b"INSERT 0 1", b"GRANT", b"SET", b"DEALLOCATE", b"ROLLBACK", b"", b"SE"]
backend_message = st.one_of(
    st.tuples(st.sampled_from(b"ZZZCCESDd123nTtsIN"), st.binary(max_size=12)).map(
        lambda t: _frame(bytes((t[0],)), t[1])),
    st.sampled_from([b"I", b"T", b"E", b"X", b"", b"II"]).map(lambda p: _frame(b"Z", p)),
    st.sampled_from(_TAGS).map(lambda tag: _frame(b"C", tag + b"\0")),
)
bad_header = st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1)).map(
    lambda t: bytes((t[0],)) + struct.pack("!I", t[1]))


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except ProtocolViolation as exc:
        return ("violation", exc.message)


@settings(max_examples=200, deadline=None)
@given(st.lists(backend_message, max_size=10), st.binary(max_size=8) | bad_header,
       st.integers(0, 60), st.booleans(), st.data())
def test_scan_backend_parity(msgs: list[bytes], tail: bytes, limit: int, bulk: bool,
                             data: st.DataObject) -> None:
    assert BACKEND_SCAN is not None
    buf = b"".join(msgs) + tail
    pos = data.draw(st.integers(0, len(buf)))
    for max_length in (limit, 1 << 20):
        expected = _outcome(framing.scan_backend_python, buf, pos, max_length,
                            READ_ONLY_TAGS, bulk)
        assert _outcome(BACKEND_SCAN.scan_backend, buf, pos, max_length, READ_ONLY_TAGS,
                        bulk) == expected


def test_scan_backend_sums_up_runs_that_end_with_ready() -> None:
    run = (_frame(b"2", b"") + _frame(b"D", b"x") + _frame(b"C", b"SELECT 1\0")
           + _frame(b"Z", b"I") + _frame(b"T", b"") + _frame(b"Z", b"T"))
    end, statuses, marks = framing.scan_backend(run + b"Z\0", 0, 1000, READ_ONLY_TAGS, True)
    assert (end, statuses, marks) == (len(run), b"IT", [])
    tail = _frame(b"C", b"INSERT 0 1\0") + _frame(b"Z", b"I")
    _, statuses, marks = framing.scan_backend(run + tail, 0, 1000, READ_ONLY_TAGS, True)
    assert statuses == b"IT" and [m[0] for m in marks] == [ord("C"), ord("Z")]
    _, statuses, marks = framing.scan_backend(run, 0, 1000, READ_ONLY_TAGS, False)
    assert statuses == b"" and bytes(m[0] for m in marks) == b"2CZTZ"


@settings(max_examples=150, deadline=None)
@given(st.lists(backend_message, max_size=8), st.lists(st.integers(0, 200), max_size=6))
def test_take_is_split_invariant(msgs: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(msgs)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    whole, _, whole_marks = Framer().take_backend(stream, READ_ONLY_TAGS, False)
    front, back = Framer(), Framer()
    buffers = (front.buf, back.buf)
    got_front: list[bytes] = []
    got_back: list[bytes] = []
    for a, b in itertools.pairwise(points):
        raw, index = front.take(stream[a:b])
        got_front.extend(raw[s - 5 : e] for _, s, e in index)
        raw, _, marks = back.take_backend(stream[a:b], READ_ONLY_TAGS, False)
        got_back.extend(raw[s - 5 : e] for _, s, e in marks)
        # what the relay core relies on: one buffer, the read position within it
        assert front.buf is buffers[0] and front._pos <= len(front.buf)
        assert back.buf is buffers[1] and back._pos <= len(back.buf)
    assert got_front == msgs
    assert got_back == [whole[s - 5 : e] for _, s, e in whole_marks]
    assert front.buffered == back.buffered == 0


def test_take_refuses_an_oversized_message_before_it_arrives() -> None:
    framer = Framer(100)
    try:
        framer.take(b"Q" + struct.pack("!I", 1000) + b"x")
    except ProtocolViolation as exc:
        assert "exceeds the limit" in exc.message
    else:
        raise AssertionError("no violation")


# -- relayed sessions -----------------------------------------------------------------------


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def get_extra_info(self, name: str) -> None:
        return None  # (no socket: nothing to set options on)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def _one_by_one(state: SessionState) -> None:
    """The reference: backend messages are never summed up (as while weir swallows)."""
    state.swallowing = 1 << 30


def _compiled_core(session: Session) -> None:
    """Give ``session`` a compiled session core (the relay core reads its C fields) when
    ``WEIR_IMPL=python`` gave it the pure one: the same fields, the same ledger rules."""
    if CORE is None or isinstance(session.state, CORE.SessionCore):
        return
    state = ledger_on(CORE.SessionCore)
    for name in FIELDS:
        setattr(state, name, getattr(session.state, name))
    session.state = session.extended.core = state


class _Reference(Session):
    """The reference: client messages are always decoded and routed."""

    def _forward_seen(self, *args: Any) -> bool:
        return False


def _session(server: Server, reference: bool, core: bool = False) -> Session:
    """A READY session on fake transports; ``client_received``/``upstream_received`` go
    through the compiled relay core with ``core``, else through the Python path."""
    cls = _Reference if reference else Session
    session = cls(server, _Transport(), None)  # type: ignore[arg-type]
    if reference:
        _one_by_one(session.state)
    if core:
        _compiled_core(session)
    session.upstream = _Transport()  # type: ignore[assignment]
    session.state.phase = Phase.READY
    session.ctx = context({"user": "u", "database": "d"})
    session.ctx.parameters = session.state.parameters
    session.client_received, session.upstream_received = relay_entries(
        session, SCAN if core else None)
    return session


QUERIES = ["SELECT 1", "select 1", "SELECT 2;", "SET work_mem = '1MB'",
           "SET extra_float_digits = 2", "DEALLOCATE a", "DISCARD ALL", "BEGIN", "COMMIT",
           "INSERT INTO t VALUES (1)", "GRANT SELECT ON t TO u", "SHOW CACHES", ""]
_READY = {s: be.ReadyForQuery(s).encode() for s in "ITE"}


@st.composite
def batch(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """One client batch and PostgreSQL's answer to it."""
    status = _READY[draw(st.sampled_from("ITE"))]
    notice = draw(st.booleans())
    extra = be.ParameterStatus("TimeZone", "UTC").encode() if draw(st.booleans()) else b""
    if draw(st.booleans()):
        query = draw(st.sampled_from(QUERIES))
        if query == "SHOW CACHES":
            query = "SELECT 3"  # admin commands are answered locally (not this test's subject)
        if draw(st.integers(0, 5)) == 0:
            answer = error_response("42601", "syntax error").encode()
        elif query:
            tag = query.split()[0].upper()
            answer = (be.encode_row_description(()) + be.encode_data_row([b"1"])
                      + be.encode_command_complete(tag)) + extra
        else:
            answer = be.EmptyQueryResponse().encode()
        if notice:
            answer = _frame(b"N", b"Mhello\0\0") + answer
        return fe.Query(query).encode(), answer + status
    requests = draw(st.lists(st.sampled_from("PBDdECcH"), max_size=6))
    fail = draw(st.integers(0, 8))
    client, server = [], []
    for i, kind in enumerate(requests):
        name = draw(st.sampled_from(["", "a", "b"]))
        if kind == "P":
            client.append(fe.Parse(name, draw(st.sampled_from(QUERIES[:3])), ()).encode())
            reply = be.ParseComplete().encode()
        elif kind == "B":
            client.append(fe.Bind(name, draw(st.sampled_from(["", "a"])), (0,), (b"7",),
                                  ()).encode())
            reply = be.BindComplete().encode()
        elif kind in "Dd":
            target = "S" if kind == "d" else "P"
            client.append(fe.Describe(target, name).encode())
            rows = draw(st.booleans())
            reply = (b"t\0\0\0\x06\0\0" if target == "S" else b"") + (
                be.encode_row_description(()) if rows else be.NoData().encode())
        elif kind == "E":
            client.append(fe.Execute(name, 0).encode())
            reply = be.encode_data_row([b"1"]) + be.encode_command_complete(
                draw(st.sampled_from(["SELECT 1", "UPDATE 2", "DELETE 0", "MERGE 1",
                                      "INSERT 0 3", "CREATE TABLE"]))) + extra
        elif kind in "Cc":
            client.append(fe.Close("S" if kind == "C" else "P", name).encode())
            reply = be.CloseComplete().encode()
        else:
            client.append(fe.Flush().encode())
            reply = b""
        if i == fail:  # PostgreSQL skips the rest of the batch
            server.append(error_response("42P01", "no such thing").encode())
        elif i < fail:
            server.append(reply)
    return b"".join(client) + fe.Sync().encode(), b"".join(server) + status


def _snapshot(session: Session) -> tuple[Any, ...]:
    state, ctx = session.state, session.ctx
    assert ctx is not None
    return (state.transaction_status, dict(state.parameters), state.parameters_version,
            {k: (v.query, v.param_types) for k, v in state.statements.items()},
            dict(state.portals), [p.kind for p in state.pending], ctx.last,
            dict(ctx.settings), ctx.tainted, state.batch_upstream, state.batch_local,
            sorted(state.held), sorted(state.held_portals), dict(state.reasons), dict(state.routes),
            dict(state.portal_statements), state.phase,
            # read-your-writes: a write's tag (router.wrote) marks seen(s)
            ctx.seen.pending, ctx.seen.missed)


def _pieces(data: st.DataObject, whole: bytes) -> list[bytes]:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=4)))
    return [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(batch(), min_size=1, max_size=3), max_size=6),
       st.sampled_from(["explicit", "off"]), st.data())
def test_relayed_session_matches_one_by_one_observation(
    rounds: list[list[tuple[bytes, bytes]]], caching: str, data: st.DataObject
) -> None:
    _compare_relayed(rounds, caching, lambda whole: _pieces(data, whole))


def test_block_noted_then_ended_idle_is_settled_by_every_path() -> None:
    """A statement that may change the identity noted a transaction block (status T); the
    block ends idle; the next Query goes by the quiet path, which must settle the block's
    record as the one-by-one path does (found by hypothesis above)."""
    error = b"E\x00\x00\x00(SERROR\x00VERROR\x00C42601\x00Msyntax error\x00\x00"
    select = (b"Q\x00\x00\x00\rSELECT 1\x00", error + b"Z\x00\x00\x00\x05I")
    rounds = [[(b"S\x00\x00\x00\x04", b"Z\x00\x00\x00\x05I"), select,
               (b"S\x00\x00\x00\x04", b"Z\x00\x00\x00\x05T")],
              [(b"Q\x00\x00\x00\x10DISCARD ALL\x00", error + b"Z\x00\x00\x00\x05I")],
              [(b"S\x00\x00\x00\x04", b"Z\x00\x00\x00\x05I"), select]]
    _compare_relayed(rounds, "explicit", lambda whole: [whole])


def _compare_relayed(rounds: list[list[tuple[bytes, bytes]]], caching: str,
                     cut: Callable[[bytes], list[bytes]]) -> None:
    """Feed ``rounds`` (cut into pieces by ``cut``) to a relayed session, one with the relay
    core and one observed message by message; their states and bytes must agree."""
    assert SCAN is not None
    server = Server(Settings(upstream="postgresql://u@127.0.0.1:1/d", caching=caching))
    slow = _session(server, True)
    sessions = (_session(server, False), _session(server, False, core=True), slow)
    for batches in rounds:  # a round is pipelined: its batches go out before any answer
        client = b"".join(c for c, _ in batches)
        answer = b"".join(a for _, a in batches)
        for piece in cut(client):
            for session in sessions:
                session.client_received(piece)
        for piece in cut(answer):
            for session in sessions:
                session.upstream_received(piece)
            for session in sessions[:2]:
                assert _snapshot(session) == _snapshot(slow)
    for session in sessions[:2]:
        for attr in ("client", "upstream"):
            assert b"".join(getattr(session, attr).written) \
                == b"".join(getattr(slow, attr).written)
    assert all(session.phase is Phase.READY for session in sessions)


def test_plain_queries_are_recognised_and_forgotten_when_routing_changes() -> None:
    server = Server(Settings(upstream="postgresql://u@127.0.0.1:1/d"))
    service = server.service
    session = _session(server, False)
    assert session.ctx is not None
    for text in ("SET work_mem = 1", "DEALLOCATE a", "\u017fET x = 1"):
        session.client_data(fe.Query(text).encode())
        assert session.memos.plain_last is None  # watched first words are never plain
    session.client_data(fe.Query("SELECT 1").encode())
    assert session.memos.plain_last == session.ctx.last == ("upstream", "no cache for this query")
    assert plain_query(*_payload(fe.Query(" select 2;").encode()), service)
    for text in ("\x1cSET x = 1", " \tReset all", "discard all", "-- c\nSELECT 1", "",
                 " show caches"):
        assert not plain_query(*_payload(fe.Query(text).encode()), service)
    assert not plain_query(*_payload(b"Q\0\0\0\x0bSELECT\0\0"), service)  # NUL inside
    assert not plain_query(*_payload(b"Q\0\0\0\x0aSELE\xff\0"), service)  # not UTF-8
    session.client_data(fe.Parse("", "SELECT 1").encode())
    assert len(session.memos.parses) == 1
    # as when a cache over t is created: the memos are forgotten
    service.routing.cached_names = ("t",)
    session.client_data(fe.Query("SELECT 2").encode())
    assert session.memos.parses == {} and session.memos.plain_last is not None


def _payload(message: bytes) -> tuple[bytes, int, int]:
    return message, 5, len(message)




def test_a_write_in_a_block_marks_it_on_every_path() -> None:
    """A prepared UPDATE run in a transaction block (its answer a quiet run but for its
    writing tag, which the relay core observes itself: ``router.wrote``) marks the block as
    having written, on the Python path and through the relay core alike; outside a block
    it does not (an autocommit write)."""
    assert SCAN is not None
    server = Server(Settings(upstream="postgresql://u@127.0.0.1:1/d", caching="explicit"))
    run = fe.Bind("", "w", (0,), (b"7",), ()).encode() + fe.Execute("", 0).encode() \
        + fe.Sync().encode()
    answer = be.BindComplete().encode() + be.encode_command_complete("UPDATE 1")
    for core in (False, True):
        session = _session(server, False, core=core)
        ctx = session.ctx
        assert ctx is not None
        session.client_received(fe.Parse("w", "UPDATE t SET x = $1", ()).encode()
                                + fe.Sync().encode())
        session.upstream_received(be.ParseComplete().encode() + _READY["I"])
        session.client_received(run)
        session.upstream_received(answer + _READY["I"])
        assert ctx.seen.pending and ctx.block.upstream is None, core  # autocommit
        assert session.memos.binds, core  # the next run's Bind is seen before
        session.client_received(fe.Query("BEGIN").encode())
        session.upstream_received(be.encode_command_complete("BEGIN") + _READY["T"])
        session.client_received(run)
        session.upstream_received(answer + _READY["T"])
        assert ctx.block.upstream == transactions.WROTE, core
        assert session.state.transaction_status == "T"
