"""Encode/decode of every protocol 3.0 message: round trips, known bytes, malformed input."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import ProtocolViolation
from tests.unit.wire import strategies as s

FRONTEND_NAMES = [
    "StartupMessage",
    "SSLRequest",
    "GSSENCRequest",
    "CancelRequest",
    "PasswordMessage",
    "SASLInitialResponse",
    "SASLResponse",
    "GSSResponse",
    "Query",
    "Parse",
    "Bind",
    "Describe",
    "Execute",
    "Sync",
    "Flush",
    "Close",
    "CopyData",
    "CopyDone",
    "CopyFail",
    "FunctionCall",
    "Terminate",
]
BACKEND_NAMES = [
    "AuthenticationOk",
    "AuthenticationKerberosV5",
    "AuthenticationCleartextPassword",
    "AuthenticationMD5Password",
    "AuthenticationGSS",
    "AuthenticationGSSContinue",
    "AuthenticationSSPI",
    "AuthenticationSASL",
    "AuthenticationSASLContinue",
    "AuthenticationSASLFinal",
    "BackendKeyData",
    "BindComplete",
    "CloseComplete",
    "CommandComplete",
    "CopyData",
    "CopyDone",
    "CopyInResponse",
    "CopyOutResponse",
    "CopyBothResponse",
    "DataRow",
    "EmptyQueryResponse",
    "ErrorResponse",
    "FunctionCallResponse",
    "NegotiateProtocolVersion",
    "NoData",
    "NoticeResponse",
    "NotificationResponse",
    "ParameterDescription",
    "ParameterStatus",
    "ParseComplete",
    "PortalSuspended",
    "ReadyForQuery",
    "RowDescription",
    "FieldDescription",
]


@pytest.mark.parametrize(("module", "names"), [(fe, FRONTEND_NAMES), (be, BACKEND_NAMES)])
def test_every_message_is_a_frozen_slotted_dataclass(module: object, names: list[str]) -> None:
    for name in names:
        cls = getattr(module, name)
        assert cls.__dataclass_params__.frozen, name
        assert "__slots__" in cls.__dict__, name


def _split(encoded: bytes) -> tuple[int, bytes]:
    assert int.from_bytes(encoded[1:5], "big") == len(encoded) - 1
    return encoded[0], encoded[5:]


@settings(max_examples=200, deadline=None)
@given(s.frontend_messages)
def test_frontend_round_trip(msg: fe.FrontendMessage) -> None:
    mtype, payload = _split(msg.encode())
    assert bytes((mtype,)) == type(msg).TYPE
    assert fe.decode_frontend(mtype, payload) == msg


@settings(max_examples=200, deadline=None)
@given(s.backend_messages)
def test_backend_round_trip(msg: be.BackendMessage) -> None:
    mtype, payload = _split(msg.encode())
    assert bytes((mtype,)) == type(msg).TYPE
    assert be.decode_backend(mtype, payload) == msg


@settings(max_examples=100, deadline=None)
@given(s.startup_messages)
def test_startup_round_trip(msg: fe.StartupPhaseMessage) -> None:
    encoded = msg.encode()
    assert int.from_bytes(encoded[:4], "big") == len(encoded)
    assert fe.decode_startup(encoded[4:]) == msg


@settings(max_examples=100, deadline=None)
@given(s.text, s.value, s.blob)
def test_sasl_and_gss_round_trip(mech: str, first: bytes | None, data: bytes) -> None:
    initial = fe.SASLInitialResponse(mech, first)
    assert fe.decode_sasl_initial_response(_split(initial.encode())[1]) == initial
    response = fe.SASLResponse(data)
    assert fe.decode_sasl_response(_split(response.encode())[1]) == response
    gss = fe.GSSResponse(data)
    assert fe.decode_gss_response(_split(gss.encode())[1]) == gss


def test_known_bytes() -> None:
    assert be.ReadyForQuery("I").encode() == b"Z\x00\x00\x00\x05I"
    assert (
        be.DataRow((b"1", None)).encode()
        == b"D\x00\x00\x00\x0f\x00\x02\x00\x00\x00\x011\xff\xff\xff\xff"
    )
    assert fe.Query("select 1").encode() == b"Q\x00\x00\x00\x0dselect 1\x00"
    assert fe.SSLRequest().encode() == b"\x00\x00\x00\x08\x04\xd2\x16\x2f"
    assert fe.StartupMessage({"user": "u"}).encode() == (
        b"\x00\x00\x00\x10\x00\x03\x00\x00user\x00u\x00\x00"
    )
    assert (
        be.AuthenticationMD5Password(b"abcd").encode() == b"R\x00\x00\x00\x0c\x00\x00\x00\x05abcd"
    )
    assert be.AuthenticationSASL(("SCRAM-SHA-256",)).encode() == (
        b"R\x00\x00\x00\x17\x00\x00\x00\x0aSCRAM-SHA-256\x00\x00"
    )
    assert fe.Sync().encode() == b"S\x00\x00\x00\x04"
    assert fe.Execute("", 0).encode() == b"E\x00\x00\x00\x09\x00\x00\x00\x00\x00"


def test_p_decodes_as_password_by_default() -> None:
    payload = fe.PasswordMessage("md5abc").encode()[5:]
    assert fe.decode_frontend(ord("p"), payload) == fe.PasswordMessage("md5abc")
    sasl = fe.SASLInitialResponse("SCRAM-SHA-256", b"n,,n=,r=x").encode()[5:]
    with pytest.raises(ProtocolViolation):
        fe.decode_frontend(ord("p"), sasl)


def test_authentication_codes_pick_the_class() -> None:
    for msg in (be.AuthenticationOk(), be.AuthenticationSASLFinal(b"v=x")):
        assert type(be.decode_backend(ord("R"), msg.encode()[5:])) is type(msg)
    with pytest.raises(ProtocolViolation, match="code 4"):
        be.decode_backend(ord("R"), b"\x00\x00\x00\x04")


def test_error_response_helper() -> None:
    err = be.error_response("42P01", 'relation "x" does not exist', detail="d", P="15")
    assert [c for c, _ in err.fields] == ["S", "V", "C", "M", "D", "P"]
    assert (err.severity, err.sqlstate, err.message) == ("ERROR", "42P01", err.get("M"))
    assert err.get("D") == "d"
    decoded = be.decode_backend(ord("E"), err.encode()[5:])
    assert decoded == err
    assert isinstance(decoded, be.ErrorResponse)
    assert decoded.sqlstate == "42P01"
    with pytest.raises(ValueError):
        be.error_response("42", "short sqlstate")
    notice = be.notice_response("hello", severity="WARNING", sqlstate="01000")
    assert (notice.severity, notice.sqlstate, notice.message) == ("WARNING", "01000", "hello")


def test_unsupported_protocol_version_is_feature_not_supported() -> None:
    with pytest.raises(ProtocolViolation) as info:
        fe.decode_startup(b"\x00\x02\x00\x00user\x00u\x00\x00")
    assert info.value.sqlstate == "0A000"


@pytest.mark.parametrize(
    ("decode", "mtype", "payload"),
    [
        (fe.decode_frontend, ord("Q"), b"select 1"),  # no terminator
        (fe.decode_frontend, ord("Q"), b"a\x00b"),  # trailing bytes
        (fe.decode_frontend, ord("S"), b"x"),
        (fe.decode_frontend, ord("D"), b"Xname\x00"),
        (fe.decode_frontend, ord("B"), b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05ab\x00\x00"),
        (fe.decode_frontend, ord("B"), b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xfe\x00\x00"),
        (fe.decode_frontend, ord("P"), b"\x00q\x00\xff\xff"),
        (fe.decode_frontend, ord("Z"), b""),
        (be.decode_backend, ord("Z"), b"X"),
        (be.decode_backend, ord("D"), b"\x00\x01\x00\x00"),
        (be.decode_backend, ord("T"), b"\x00\x01a\x00\x00"),
        (be.decode_backend, ord("E"), b"Mno end"),
        (be.decode_backend, ord("G"), b"\x05\x00\x00"),
        (be.decode_backend, ord("v"), b"\x00\x00\x00\x00\x7f\xff\xff\xff"),
        (be.decode_backend, ord("x"), b""),
    ],
)
def test_malformed_payloads_raise_protocol_violation(decode, mtype, payload) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ProtocolViolation) as info:
        decode(mtype, payload)
    assert info.value.sqlstate == "08P01"


def _decoders_accept_or_violate(decode, mtype: int, payload: bytes) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(ProtocolViolation):
        decode(mtype, payload)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 255), st.binary(max_size=40))
def test_random_payloads_raise_only_protocol_violation(mtype: int, payload: bytes) -> None:
    _decoders_accept_or_violate(fe.decode_frontend, mtype, payload)
    _decoders_accept_or_violate(be.decode_backend, mtype, payload)
    for decode in (fe.decode_startup, fe.decode_sasl_initial_response, fe.decode_sasl_response):
        with contextlib.suppress(ProtocolViolation):
            decode(payload)


@settings(max_examples=200, deadline=None)
@given(s.backend_messages | s.frontend_messages, st.data())
def test_mutated_payloads_raise_only_protocol_violation(msg: object, data: st.DataObject) -> None:
    encoded = msg.encode()  # type: ignore[attr-defined]
    payload = bytearray(encoded[5:])
    cut = data.draw(st.integers(0, len(payload)))
    mutated = bytes(payload[:cut])
    if payload and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
        mutated = bytes(payload)
    _decoders_accept_or_violate(fe.decode_frontend, encoded[0], mutated)
    _decoders_accept_or_violate(be.decode_backend, encoded[0], mutated)


def test_strings_in_other_encodings_pass_through_unchanged() -> None:
    """Bytes that are not UTF-8 (a LATIN1 session, an invalid byte PostgreSQL refuses with
    22021) decode to lone surrogates and encode back to the same bytes."""
    for payload in (b"SELECT 'caf\xe9'\x00", b"\xff\xfe\x00", b"SELECT '\x81\x5c'\x00"):
        msg = fe.decode_frontend(ord("Q"), payload)
        assert msg.encode()[5:] == payload
    parse = fe.Parse("s\udce9", "SELECT '\udcff'", ())
    assert fe.decode_frontend(ord("P"), parse.encode()[5:]) == parse
    error = be.decode_backend(ord("E"), b"SERROR\x00C22P02\x00Mcaf\xe9\x00\x00")
    assert error.encode()[5:] == b"SERROR\x00C22P02\x00Mcaf\xe9\x00\x00"
