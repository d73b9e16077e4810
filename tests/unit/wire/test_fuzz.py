"""Property tests of the byte-stream boundary: splits, random and mutated input.

Any split of a valid stream into ``receive_data`` calls yields the same events; random or
mutated bytes make the framer, decoders and state machines raise only ProtocolViolation.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.events import CONNECTION_CLOSED, NEED_DATA
from pgwire.framing import Framer, ProtocolViolation
from tests.oracle.client_conn import ClientConnection
from tests.oracle.server_conn import ServerConnection
from tests.unit.wire import strategies as s

STARTUP = fe.StartupMessage({"user": "fuzz", "database": "db"})
SERVER_HELLO = [be.AuthenticationOk(), be.BackendKeyData(1, 2), be.ReadyForQuery("I")]
ready_phase_messages = s.frontend_messages.filter(
    lambda m: not isinstance(m, fe.PasswordMessage | fe.Terminate)
)

TRANSCRIPT: list[be.BackendMessage] = [
    be.AuthenticationSASL(("SCRAM-SHA-256",)),
    be.AuthenticationSASLContinue(b"r=abc,s=c2FsdA==,i=4096"),
    be.AuthenticationSASLFinal(b"v=x"),
    be.AuthenticationOk(),
    be.ParameterStatus("client_encoding", "UTF8"),
    be.BackendKeyData(7, 8),
    be.ReadyForQuery("I"),
    be.RowDescription((be.FieldDescription("a"), be.FieldDescription("b", type_oid=23))),
    *[be.DataRow((b"x" * i, None)) for i in range(20)],
    be.CommandComplete("SELECT 20"),
    be.ReadyForQuery("I"),
]
CLIENT_SENDS: list[fe.FrontendMessage] = [
    fe.SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=abc"),
    fe.SASLResponse(b"c=biws,r=abc,p=x"),
    fe.Query("select a, b from t"),
]


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _events(conn: ServerConnection | ClientConnection, pieces: list[bytes]) -> list[object]:
    out: list[object] = []
    for piece in pieces:
        conn.receive_data(piece)
        while (event := conn.next_event()) is not NEED_DATA:
            out.append(event)
            if event is CONNECTION_CLOSED:
                return out
    return out


def _ready_server() -> ServerConnection:
    server = ServerConnection()
    server.receive_data(STARTUP.encode())
    assert server.next_event() == STARTUP
    for msg in SERVER_HELLO:
        server.send(msg)
    return server


@settings(max_examples=150, deadline=None)
@given(st.lists(ready_phase_messages, max_size=8), st.lists(st.integers(0, 10_000), max_size=8))
def test_server_events_do_not_depend_on_the_split(
    msgs: list[fe.FrontendMessage], cuts: list[int]
) -> None:
    stream = b"".join(m.encode() for m in msgs)
    assert _events(_ready_server(), _pieces(stream, cuts)) == msgs


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 10_000), max_size=12))
def test_client_events_do_not_depend_on_the_split(cuts: list[int]) -> None:
    client = ClientConnection()
    client.send(STARTUP)
    stream = b"".join(m.encode() for m in TRANSCRIPT[:1])
    events = _events(client, _pieces(stream, cuts))
    client.send(CLIENT_SENDS[0])
    stream = b"".join(m.encode() for m in TRANSCRIPT[1:2])
    events += _events(client, _pieces(stream, cuts))
    client.send(CLIENT_SENDS[1])
    stream = b"".join(m.encode() for m in TRANSCRIPT[2:7])
    events += _events(client, _pieces(stream, cuts))
    client.send(CLIENT_SENDS[2])
    stream = b"".join(m.encode() for m in TRANSCRIPT[7:])
    events += _events(client, _pieces(stream, cuts))
    assert events == TRANSCRIPT
    assert client.parameters == {"client_encoding": "UTF8"}


def _framed(framer: Framer, chunks: list[bytes], batch: bool) -> tuple[list[object], bool]:
    out: list[object] = []
    try:
        for chunk in chunks:
            framer.feed(chunk)
            if batch:
                raw, index = framer.drain()
                out += [(t, raw[a:b]) for t, a, b in index]
            else:
                while (item := framer.next()) is not None:
                    out.append(item)
    except ProtocolViolation:
        return out, True
    return out, False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=6), st.integers(0, 64))
def test_framer_drain_matches_next(chunks: list[bytes], limit: int) -> None:
    assert _framed(Framer(limit), chunks, False) == _framed(Framer(limit), chunks, True)


@settings(max_examples=150, deadline=None)
@given(st.lists(s.backend_messages, max_size=8), st.lists(st.integers(0, 10_000), max_size=8))
def test_framer_does_not_depend_on_the_split(msgs: list[object], cuts: list[int]) -> None:
    stream = b"".join(m.encode() for m in msgs)  # type: ignore[attr-defined]
    items, failed = _framed(Framer(), _pieces(stream, cuts), False)
    assert not failed
    assert (
        [(bytes((t,)), p) for t, p in items]
        == [  # type: ignore[misc]
            (m.encode()[:1], m.encode()[5:])  # type: ignore[attr-defined]
            for m in msgs
        ]
    )


def _only_violations(conn: ServerConnection | ClientConnection, data: bytes) -> None:
    try:
        _events(conn, [data])
    except ProtocolViolation as exc:
        assert exc.sqlstate in ("08P01", "0A000")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_into_the_state_machines(data: bytes) -> None:
    _only_violations(ServerConnection(), data)
    _only_violations(_ready_server(), data)
    client = ClientConnection()
    client.send(STARTUP)
    _only_violations(client, data)


@settings(max_examples=200, deadline=None)
@given(st.lists(ready_phase_messages, min_size=1, max_size=6), st.data())
def test_mutated_frontend_streams(msgs: list[fe.FrontendMessage], data: st.DataObject) -> None:
    stream = bytearray(STARTUP.encode() + b"".join(m.encode() for m in msgs))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(stream) - 1))
        stream[at] = data.draw(st.integers(0, 255))
    server = ServerConnection()
    try:
        events = _events(server, [bytes(stream)])
    except ProtocolViolation:
        return
    # (a byte mutated into 'X' makes a Terminate: the client is gone, nothing is owed it)
    if events and isinstance(events[0], fe.StartupMessage) and CONNECTION_CLOSED not in events:
        for msg in SERVER_HELLO:
            server.send(msg)
    _only_violations(server, b"")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_backend_streams(data: st.DataObject) -> None:
    stream = bytearray(b"".join(m.encode() for m in TRANSCRIPT[7:]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(stream) - 1))
        stream[at] = data.draw(st.integers(0, 255))
    stream = stream[: data.draw(st.integers(0, len(stream)))]
    client = ClientConnection()
    client.send(STARTUP)
    assert len(_events(client, [b"".join(m.encode() for m in TRANSCRIPT[3:7])])) == 4
    client.send(fe.Query("select a, b from t"))
    _only_violations(client, bytes(stream))
