"""Back-to-back conversations between the client-role and server-role state machines."""

from __future__ import annotations

import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.events import (
    CONNECTION_CLOSED,
    NEED_DATA,
    GSSENCResponse,
    Phase,
    SSLResponse,
    State,
)
from pgwire.framing import ProtocolViolation
from tests.oracle.conversation import Owed
from tests.unit.wire.pair import Pair

ROWS = be.RowDescription((be.FieldDescription("n", type_oid=23, type_size=4),))


def test_ssl_refused_then_md5_startup() -> None:
    p = Pair()
    assert p.to_server(fe.SSLRequest()) == [fe.SSLRequest()]
    assert p.server.phase is Phase.NEGOTIATING
    assert p.to_client(SSLResponse(False)) == [SSLResponse(False)]
    startup = fe.StartupMessage({"user": "bob"})
    assert p.to_server(startup) == [startup]
    assert p.server.startup_message == startup
    assert p.to_client(be.AuthenticationMD5Password(b"salt")) == [
        be.AuthenticationMD5Password(b"salt")
    ]
    assert p.to_server(fe.PasswordMessage("md5abc")) == [fe.PasswordMessage("md5abc")]
    p.to_client(be.AuthenticationOk(), be.ParameterStatus("TimeZone", "UTC"))
    assert p.client.phase is p.server.phase is Phase.STARTING
    p.to_client(be.BackendKeyData(1, 2), be.ReadyForQuery("I"))
    for conn in (p.client, p.server):
        assert conn.phase is Phase.READY
        assert conn.parameters == {"TimeZone": "UTC"}
        assert conn.backend_key == be.BackendKeyData(1, 2)
        assert conn.state is State.IDLE


def test_scram_exchange_decodes_each_p_by_what_was_asked() -> None:
    p = Pair()
    p.to_server(fe.StartupMessage({"user": "s"}))
    p.to_client(be.AuthenticationSASL(("SCRAM-SHA-256",)))
    first = fe.SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=abc")
    assert p.to_server(first) == [first]
    p.to_client(be.AuthenticationSASLContinue(b"r=abcdef,s=c2FsdA==,i=4096"))
    final = fe.SASLResponse(b"c=biws,r=abcdef,p=proof")
    assert p.to_server(final) == [final]
    events = p.to_client(be.AuthenticationSASLFinal(b"v=sig"), be.AuthenticationOk())
    assert events == [be.AuthenticationSASLFinal(b"v=sig"), be.AuthenticationOk()]
    assert p.server.phase is Phase.STARTING


def test_ssl_accept_refuses_plaintext_sent_behind_the_request() -> None:
    p = Pair()
    p.server.receive_data(fe.SSLRequest().encode() + fe.StartupMessage({"user": "x"}).encode())
    assert p.server.next_event() == fe.SSLRequest()
    with pytest.raises(ProtocolViolation, match="unencrypted"):
        p.server.send(SSLResponse(True))
    assert p.server.send(SSLResponse(False)) == b"N"


def test_client_refuses_bytes_behind_the_ssl_answer() -> None:
    p = Pair()
    p.client.send(fe.SSLRequest())
    p.client.receive_data(b"S" + be.AuthenticationOk().encode())
    with pytest.raises(ProtocolViolation, match="unencrypted"):
        p.client.next_event()


def test_gssenc_refused_then_ssl_accepted() -> None:
    p = Pair()
    p.to_server(fe.GSSENCRequest())
    assert p.to_client(GSSENCResponse(False)) == [GSSENCResponse(False)]
    p.to_server(fe.SSLRequest())
    assert p.to_client(SSLResponse(True)) == [SSLResponse(True)]
    p.handshake()
    assert p.server.phase is Phase.READY


def test_simple_query_tracks_transaction_status() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Query("begin; select 1"))
    assert p.server.state is State.SIMPLE_QUERY
    events = p.to_client(
        be.CommandComplete("BEGIN"),
        ROWS,
        be.DataRow((b"1",)),
        be.CommandComplete("SELECT 1"),
        be.ReadyForQuery("T"),
    )
    assert events[-1] == be.ReadyForQuery("T")
    assert p.client.transaction_status == p.server.transaction_status == "T"
    assert p.client.state is State.IDLE
    p.to_server(fe.Query(""))
    p.to_client(be.EmptyQueryResponse(), be.ReadyForQuery("T"))
    p.to_server(fe.Query("select x"))
    p.to_client(be.error_response("42703", "no column x"), be.ReadyForQuery("E"))
    assert p.server.transaction_status == "E"


def test_extended_batch_with_an_error_skips_until_sync() -> None:
    p = Pair()
    p.handshake()
    batch = [
        fe.Parse("", "select $1::int", (23,)),
        fe.Bind("", "", (0,), (b"5",), (0,)),
        fe.Describe("P", ""),
        fe.Execute("", 0),
        fe.Parse("s2", "select nope"),
        fe.Bind("", "s2"),
        fe.Execute(),
        fe.Sync(),
        fe.Query("select 2"),
    ]
    assert p.to_server(*batch) == batch
    assert p.server.state is State.EXTENDED
    p.to_client(be.ParseComplete(), be.BindComplete(), ROWS, be.DataRow((b"5",)))
    p.to_client(be.CommandComplete("SELECT 1"))
    assert p.client.conversation.pending[0] is Owed.PARSE
    p.to_client(be.error_response("42703", 'column "nope" does not exist'))
    assert p.client.conversation.pending == (Owed.SYNC, Owed.QUERY)
    p.to_client(be.ReadyForQuery("I"))
    assert p.client.state is State.SIMPLE_QUERY
    p.to_client(ROWS, be.DataRow((b"2",)), be.CommandComplete("SELECT 1"), be.ReadyForQuery("I"))
    assert p.client.state is p.server.state is State.IDLE


def test_error_before_sync_ignores_messages_until_sync() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Parse("", "select bad"), fe.Bind("", ""), fe.Execute(), fe.Flush())
    p.to_client(be.error_response("42703", "bad"))
    assert p.server.state is State.SKIP_UNTIL_SYNC
    p.to_server(fe.Bind("", ""), fe.Execute(), fe.Query("select 1"))
    assert p.server.conversation.pending == ()
    with pytest.raises(ProtocolViolation):
        p.server.send(be.BindComplete())
    p.to_server(fe.Sync())
    assert p.server.conversation.pending == (Owed.SYNC,)
    p.to_client(be.ReadyForQuery("I"))
    assert p.server.state is State.IDLE


def test_describe_statement_then_portal_suspended() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Parse("s", "select n from t where k = $1"), fe.Describe("S", "s"), fe.Sync())
    p.to_client(be.ParseComplete(), be.ParameterDescription((23,)), ROWS, be.ReadyForQuery("I"))
    p.to_server(fe.Bind("p", "s", (), (b"1",)), fe.Execute("p", 1), fe.Execute("p", 1), fe.Sync())
    p.to_client(be.BindComplete(), be.DataRow((b"1",)), be.PortalSuspended())
    p.to_client(be.CommandComplete("SELECT 0"))
    p.to_client(be.ReadyForQuery("I"))
    p.to_server(fe.Close("S", "s"), fe.Describe("S", "gone"), fe.Sync())
    p.to_client(be.CloseComplete(), be.error_response("26000", "no such statement"))
    p.to_client(be.ReadyForQuery("I"))
    assert p.client.state is State.IDLE


def test_copy_in_simple_query() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Query("copy t from stdin"))
    p.to_client(be.CopyInResponse(0, (0, 0)))
    assert p.server.state is State.COPY_IN
    data = [fe.CopyData(b"1\ta\n"), fe.CopyData(b"2\tb\n"), fe.CopyDone()]
    assert p.to_server(*data) == data
    p.to_client(be.CommandComplete("COPY 2"), be.ReadyForQuery("I"))
    assert p.server.state is State.IDLE
    assert p.server.conversation.pending == ()


def test_copy_in_extended_swallows_the_sync_sent_before_the_data() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Parse("", "copy t from stdin"), fe.Bind("", ""), fe.Execute(), fe.Sync())
    p.to_client(be.ParseComplete(), be.BindComplete(), be.CopyInResponse(0, (0,)))
    assert p.client.state is State.COPY_IN
    p.to_server(fe.CopyData(b"1\n"), fe.CopyDone(), fe.Sync())
    p.to_client(be.CommandComplete("COPY 1"))
    assert p.client.conversation.pending == (Owed.SYNC,)
    p.to_client(be.ReadyForQuery("I"))
    assert p.client.state is State.IDLE


def test_copy_in_failing_midway_in_extended_mode() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Parse("", "copy t from stdin"), fe.Bind("", ""), fe.Execute(), fe.Sync())
    p.to_client(be.ParseComplete(), be.BindComplete(), be.CopyInResponse(0, (0,)))
    p.to_server(fe.CopyData(b"x\n"))
    p.to_client(be.error_response("22P02", "invalid input syntax"))
    assert p.server.state is State.SKIP_UNTIL_SYNC
    p.to_server(fe.CopyData(b"y\n"), fe.CopyFail("stop"), fe.Sync())
    p.to_client(be.ReadyForQuery("I"))
    assert p.server.state is State.IDLE


def test_copy_out_and_copy_both() -> None:
    p = Pair()
    p.handshake()
    p.to_server(fe.Query("copy t to stdout"))
    p.to_client(be.CopyOutResponse(0, (0,)), be.CopyData(b"1\n"), be.CopyDone())
    assert p.client.state is State.COPY_OUT
    p.to_client(be.CommandComplete("COPY 1"), be.ReadyForQuery("I"))
    p.to_server(fe.Query("START_REPLICATION SLOT s LOGICAL 0/0"))
    p.to_client(be.CopyBothResponse(0, ()), be.CopyData(b"k..."))
    assert p.server.state is State.COPY_BOTH
    p.to_server(fe.CopyData(b"r..."), fe.CopyDone())
    p.to_client(be.CopyData(b"w..."), be.CopyDone(), be.CommandComplete("COPY 0"))
    p.to_client(be.ReadyForQuery("I"))
    assert p.server.state is State.IDLE
    assert p.server.conversation.pending == ()


def test_function_call_and_async_messages() -> None:
    p = Pair()
    p.handshake()
    p.to_client(be.NotificationResponse(9, "ch", "hi"), be.notice_response("note"))
    p.to_server(fe.FunctionCall(1598, (), (), 0))
    assert p.server.state is State.FUNCTION_CALL
    p.to_client(be.FunctionCallResponse(b"x"), be.ParameterStatus("a", "b"))
    p.to_client(be.ReadyForQuery("I"))
    assert p.client.parameters["a"] == "b"


def test_terminate_and_eof() -> None:
    p = Pair()
    p.handshake()
    assert p.to_server(fe.Terminate()) == [fe.Terminate(), CONNECTION_CLOSED]
    p.client.receive_data(b"")
    assert p.client.next_event() is CONNECTION_CLOSED


def test_cancel_request_ends_the_conversation() -> None:
    p = Pair()
    assert p.to_server(fe.CancelRequest(42, 7)) == [fe.CancelRequest(42, 7), CONNECTION_CLOSED]
    assert p.server.phase is Phase.CLOSED
    assert p.server.next_event() is CONNECTION_CLOSED


def test_fatal_error_while_idle_closes() -> None:
    p = Pair()
    p.handshake()
    p.to_client(be.error_response("57P01", "terminating connection", "FATAL"))
    assert p.client.phase is Phase.CLOSED


@pytest.mark.parametrize(
    "bad",
    [
        fe.Query("select 1").encode(),  # a typed message where the startup packet belongs
        b"\x00\x00\x00\x08\x00\x02\x00\x00",  # protocol 2.0
        b"\x00\x00\x00\x03",  # length too small
    ],
)
def test_bad_startup_packets(bad: bytes) -> None:
    server = Pair().server
    server.receive_data(bad)
    with pytest.raises(ProtocolViolation):
        server.next_event()


def test_messages_out_of_place_are_violations() -> None:
    p = Pair()
    p.to_server(fe.StartupMessage({"user": "u"}))
    p.server.receive_data(fe.Query("select 1").encode())
    with pytest.raises(ProtocolViolation, match="expected password response"):
        p.server.next_event()
    p = Pair()
    p.handshake()
    p.server.receive_data(fe.PasswordMessage("late").encode())
    with pytest.raises(ProtocolViolation, match="invalid frontend message type 112"):
        p.server.next_event()
    with pytest.raises(ProtocolViolation):
        p.server.send(be.ParseComplete())
    p.client.receive_data(be.DataRow(()).encode())
    with pytest.raises(ProtocolViolation):
        p.client.next_event()
    p.server.receive_data(b"Q\x00\x00\x00\x02")
    with pytest.raises(ProtocolViolation) as info:
        p.server.next_event()
    assert info.value.sqlstate == "08P01"


def test_relay_path_tracks_without_decoding() -> None:
    p = Pair()
    p.handshake()
    stream = fe.Parse("", "select 1").encode() + fe.Bind("", "").encode()
    p.server.receive_data(stream + fe.Execute().encode() + fe.Sync().encode())
    raw_index = p.server.next_raw()
    assert isinstance(raw_index, tuple)
    raw, index = raw_index
    assert [chr(t) for t, _, _ in index] == ["P", "B", "E", "S"]
    p.client.send_relayed(raw, index)
    reply = b"".join(
        m.encode()
        for m in (be.ParseComplete(), be.BindComplete(), be.DataRow((b"1",)), be.ReadyForQuery("T"))
    )
    p.client.receive_data(reply[:-3])
    first = p.client.next_raw()
    assert isinstance(first, tuple)
    p.server.send_relayed(*first)
    p.client.receive_data(reply[-3:])
    with pytest.raises(ProtocolViolation):  # CommandComplete is missing before ReadyForQuery
        p.client.next_raw()
    assert p.server.next_raw() is NEED_DATA


def test_answers_to_messages_pipelined_before_terminate_are_still_accepted() -> None:
    p = Pair()
    p.handshake()
    assert p.to_server(fe.Query("select 1"), fe.Terminate()) == [
        fe.Query("select 1"),
        fe.Terminate(),
        CONNECTION_CLOSED,
    ]
    assert p.server.next_raw() is CONNECTION_CLOSED
    events = p.to_client(ROWS, be.DataRow((b"1",)), be.CommandComplete("SELECT 1"))
    assert events[-1] == be.CommandComplete("SELECT 1")
    p.to_client(be.ReadyForQuery("I"))
    with pytest.raises(ProtocolViolation):  # nothing is owed any more
        p.server.send(be.ReadyForQuery("I"))
    with pytest.raises(ProtocolViolation):
        p.client.send(fe.Query("select 2"))
