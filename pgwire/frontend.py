"""Frontend (client -> server) messages of protocol 3.0 (sans-I/O).

Owns: one frozen slotted dataclass per frontend message, named as in the PostgreSQL
"Message Formats" page, each with ``encode() -> bytes`` (the whole message including type
byte and length; the startup-phase messages have no type byte) and a ``decode(payload)``
classmethod; the dispatch tables ``decode_frontend(mtype, payload)`` for typed messages and
``decode_startup(payload)`` for the untyped first message (by its request code); and
``decode_bind_fields`` (Cython twin in ``cython_ext/wire_codec.pyx``).

The 'p' type is shared by PasswordMessage, SASLInitialResponse, SASLResponse and
GSSResponse; only the authentication exchange tells them apart, so ``decode_frontend``
reads PasswordMessage and the state machine calls ``decode_sasl_initial_response`` /
``decode_sasl_response`` / ``decode_gss_response`` when it knows better.

Invariants: decoders raise only ``ProtocolViolation`` (SQLSTATE 08P01, or 0A000 for an
unsupported protocol version); encode/decode round-trip for every message.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import cython_ext
from pgwire.codec import (
    Reader,
    at_end,
    cstr,
    cstring_at,
    frame,
    frame_untyped,
    i16,
    i32,
    int16_list,
    int16s_at,
    no_payload,
    nullable,
    u32,
    values_at,
)
from pgwire.common import COPY_DONE, CopyData, CopyDone
from pgwire.framing import ProtocolViolation

__all__ = [
    "Bind",
    "CancelRequest",
    "Close",
    "CopyData",
    "CopyDone",
    "CopyFail",
    "Describe",
    "Execute",
    "Flush",
    "FrontendMessage",
    "FunctionCall",
    "GSSENCRequest",
    "GSSResponse",
    "Parse",
    "PasswordMessage",
    "Query",
    "SASLInitialResponse",
    "SASLResponse",
    "SSLRequest",
    "StartupMessage",
    "StartupPhaseMessage",
    "Sync",
    "Terminate",
    "decode_frontend",
    "decode_gss_response",
    "decode_sasl_initial_response",
    "decode_sasl_response",
    "decode_startup",
]

PROTOCOL_3_0 = 3 << 16
CANCEL_REQUEST_CODE = 80877102
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104


@dataclass(frozen=True, slots=True)
class StartupMessage:
    """Untyped: protocol version (3.0 = 196608) and the session parameters (user, database...)."""

    parameters: dict[str, str] = field(hash=False)
    protocol_version: int = PROTOCOL_3_0

    def encode(self) -> bytes:
        body = [u32(self.protocol_version)]
        for name, value in self.parameters.items():
            body.append(cstr(name) + cstr(value))
        body.append(b"\x00")
        return frame_untyped(b"".join(body))


@dataclass(frozen=True, slots=True)
class SSLRequest:
    """Untyped: ask to switch to TLS; the server answers one byte, 'S' or 'N'."""

    def encode(self) -> bytes:
        return frame_untyped(u32(SSL_REQUEST_CODE))


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    """Untyped: ask for GSSAPI encryption; the server answers 'G' or 'N'."""

    def encode(self) -> bytes:
        return frame_untyped(u32(GSSENC_REQUEST_CODE))


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Untyped, on a new connection: cancel the query of the session with this key."""

    process_id: int
    secret_key: int

    def encode(self) -> bytes:
        return frame_untyped(u32(CANCEL_REQUEST_CODE) + i32(self.process_id) + i32(self.secret_key))


StartupPhaseMessage = StartupMessage | SSLRequest | GSSENCRequest | CancelRequest


def _decode_startup_message(r: Reader, version: int) -> StartupMessage:
    params: dict[str, str] = {}
    while True:
        name = r.cstring()
        if not name:
            break
        params[name] = r.cstring()
    return StartupMessage(params, version)


def decode_startup(payload: bytes) -> StartupPhaseMessage:
    """Decode the untyped first message (payload after its Int32 length) by its code."""
    r = Reader(payload, "startup packet")
    code = r.uint32()
    msg: StartupPhaseMessage
    if code == SSL_REQUEST_CODE:
        msg = SSLRequest()
    elif code == GSSENC_REQUEST_CODE:
        msg = GSSENCRequest()
    elif code == CANCEL_REQUEST_CODE:
        msg = CancelRequest(r.int32(), r.int32())
    elif code >> 16 == 3:
        msg = _decode_startup_message(r, code)
    else:
        raise ProtocolViolation(
            f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
            "server supports 3.0 to 3.0",
            "0A000",
        )
    r.finish()
    return msg


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    """'p': a password (clear text, or 'md5' + hex digest)."""

    TYPE: ClassVar[bytes] = b"p"
    password: str

    def encode(self) -> bytes:
        return frame(b"p", cstr(self.password))

    @classmethod
    def decode(cls, payload: bytes) -> PasswordMessage:
        r = Reader(payload, "PasswordMessage")
        msg = cls(r.cstring())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class SASLInitialResponse:
    """'p': the chosen SASL mechanism and its initial response (None = no initial data)."""

    TYPE: ClassVar[bytes] = b"p"
    mechanism: str
    data: bytes | None

    def encode(self) -> bytes:
        return frame(b"p", cstr(self.mechanism) + nullable(self.data))

    @classmethod
    def decode(cls, payload: bytes) -> SASLInitialResponse:
        r = Reader(payload, "SASLInitialResponse")
        msg = cls(r.cstring(), r.nullable())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class SASLResponse:
    """'p': a SASL response (client-final-message for SCRAM)."""

    TYPE: ClassVar[bytes] = b"p"
    data: bytes

    def encode(self) -> bytes:
        return frame(b"p", self.data)

    @classmethod
    def decode(cls, payload: bytes) -> SASLResponse:
        return cls(bytes(payload))


@dataclass(frozen=True, slots=True)
class GSSResponse:
    """'p': GSSAPI or SSPI response data."""

    TYPE: ClassVar[bytes] = b"p"
    data: bytes

    def encode(self) -> bytes:
        return frame(b"p", self.data)

    @classmethod
    def decode(cls, payload: bytes) -> GSSResponse:
        return cls(bytes(payload))


decode_sasl_initial_response = SASLInitialResponse.decode
decode_sasl_response = SASLResponse.decode
decode_gss_response = GSSResponse.decode


@dataclass(frozen=True, slots=True)
class Query:
    """'Q': a simple-protocol query string (may hold several statements)."""

    TYPE: ClassVar[bytes] = b"Q"
    query: str

    def encode(self) -> bytes:
        return frame(b"Q", cstr(self.query))

    @classmethod
    def decode(cls, payload: bytes) -> Query:
        query, pos = cstring_at(payload, 0, "Query")
        at_end(payload, pos, "Query")
        return cls(query)


@dataclass(frozen=True, slots=True)
class Parse:
    """'P': prepare ``query`` as statement ``name`` ('' = unnamed) with parameter type OIDs."""

    TYPE: ClassVar[bytes] = b"P"
    name: str
    query: str
    param_types: tuple[int, ...] = ()

    def encode(self) -> bytes:
        types = self.param_types
        tail = struct.pack(f"!h{len(types)}I", len(types), *types)
        return frame(b"P", cstr(self.name) + cstr(self.query) + tail)

    @classmethod
    def decode(cls, payload: bytes) -> Parse:
        name, pos = cstring_at(payload, 0, "Parse")
        query, pos = cstring_at(payload, pos, "Parse")
        r = Reader(payload[pos:], "Parse")
        types = r.uint32_list(r.count())
        r.finish()
        return cls(name, query, types)


@dataclass(frozen=True, slots=True)
class Bind:
    """'B': bind parameters to statement ``statement`` as portal ``portal``."""

    TYPE: ClassVar[bytes] = b"B"
    portal: str
    statement: str
    param_formats: tuple[int, ...] = ()
    params: tuple[bytes | None, ...] = ()
    result_formats: tuple[int, ...] = ()

    def encode(self) -> bytes:
        parts = [cstr(self.portal), cstr(self.statement), int16_list(self.param_formats)]
        parts.append(i16(len(self.params)))
        parts.extend(nullable(p) for p in self.params)
        parts.append(int16_list(self.result_formats))
        return frame(b"B", b"".join(parts))

    @classmethod
    def decode(cls, payload: bytes) -> Bind:
        return cls(*decode_bind_fields(payload))


BindFields = tuple[str, str, tuple[int, ...], tuple[bytes | None, ...], tuple[int, ...]]


def decode_bind_fields(payload: bytes) -> BindFields:
    """Portal, statement, parameter formats, parameters and result formats of a Bind payload."""
    portal, pos = cstring_at(payload, 0, "Bind")
    statement, pos = cstring_at(payload, pos, "Bind")
    param_formats, pos = int16s_at(payload, pos, "Bind")
    params, pos = values_at(payload, pos, "Bind")
    result_formats, pos = int16s_at(payload, pos, "Bind")
    at_end(payload, pos, "Bind")
    return portal, statement, param_formats, params, result_formats


_TARGET_KINDS = {ord("S"): "S", ord("P"): "P"}


def _decode_target(payload: bytes, what: str) -> tuple[str, str]:
    kind = _TARGET_KINDS.get(payload[0]) if payload else None
    if kind is None:
        raise ProtocolViolation(f"invalid {what} message subtype {payload[:1]!r}")
    name, pos = cstring_at(payload, 1, what)
    at_end(payload, pos, what)
    return kind, name


@dataclass(frozen=True, slots=True)
class Describe:
    """'D': describe statement ('S') or portal ('P') ``name``."""

    TYPE: ClassVar[bytes] = b"D"
    kind: str
    name: str

    def encode(self) -> bytes:
        return frame(b"D", self.kind.encode("ascii") + cstr(self.name))

    @classmethod
    def decode(cls, payload: bytes) -> Describe:
        return cls(*_decode_target(payload, "Describe"))


@dataclass(frozen=True, slots=True)
class Close:
    """'C': close statement ('S') or portal ('P') ``name``."""

    TYPE: ClassVar[bytes] = b"C"
    kind: str
    name: str

    def encode(self) -> bytes:
        return frame(b"C", self.kind.encode("ascii") + cstr(self.name))

    @classmethod
    def decode(cls, payload: bytes) -> Close:
        return cls(*_decode_target(payload, "Close"))


@dataclass(frozen=True, slots=True)
class Execute:
    """'E': run portal ``portal``, at most ``max_rows`` rows (0 = all)."""

    TYPE: ClassVar[bytes] = b"E"
    portal: str = ""
    max_rows: int = 0

    def encode(self) -> bytes:
        return frame(b"E", cstr(self.portal) + i32(self.max_rows))

    @classmethod
    def decode(cls, payload: bytes) -> Execute:
        portal, pos = cstring_at(payload, 0, "Execute")
        if len(payload) != pos + 4:
            raise ProtocolViolation("malformed Execute message: bad length")
        return cls(portal, int.from_bytes(payload[pos:], "big", signed=True))


@dataclass(frozen=True, slots=True)
class Sync:
    """'S': end of an extended-protocol batch; the server answers ReadyForQuery."""

    TYPE: ClassVar[bytes] = b"S"

    def encode(self) -> bytes:
        return b"S\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class Flush:
    """'H': send everything pending without ending the batch."""

    TYPE: ClassVar[bytes] = b"H"

    def encode(self) -> bytes:
        return b"H\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class Terminate:
    """'X': the client is closing the connection."""

    TYPE: ClassVar[bytes] = b"X"

    def encode(self) -> bytes:
        return b"X\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class CopyFail:
    """'f': abort COPY FROM STDIN with this message."""

    TYPE: ClassVar[bytes] = b"f"
    message: str

    def encode(self) -> bytes:
        return frame(b"f", cstr(self.message))

    @classmethod
    def decode(cls, payload: bytes) -> CopyFail:
        r = Reader(payload, "CopyFail")
        msg = cls(r.cstring())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """'F': the legacy fast-path function call."""

    TYPE: ClassVar[bytes] = b"F"
    function_oid: int
    arg_formats: tuple[int, ...] = ()
    args: tuple[bytes | None, ...] = ()
    result_format: int = 0

    def encode(self) -> bytes:
        parts = [u32(self.function_oid), int16_list(self.arg_formats), i16(len(self.args))]
        parts.extend(nullable(a) for a in self.args)
        parts.append(i16(self.result_format))
        return frame(b"F", b"".join(parts))

    @classmethod
    def decode(cls, payload: bytes) -> FunctionCall:
        r = Reader(payload, "FunctionCall")
        oid = r.uint32()
        formats = r.int16_list()
        args = tuple(r.nullable() for _ in range(r.count()))
        result_format = r.int16()
        r.finish()
        return cls(oid, formats, args, result_format)


SYNC = Sync()
FLUSH = Flush()
TERMINATE = Terminate()

FrontendMessage = (
    PasswordMessage
    | SASLInitialResponse
    | SASLResponse
    | GSSResponse
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Sync
    | Flush
    | Close
    | CopyData
    | CopyDone
    | CopyFail
    | FunctionCall
    | Terminate
)


def _singleton(msg: FrontendMessage, what: str) -> Callable[[bytes], FrontendMessage]:
    def decode(payload: bytes) -> FrontendMessage:
        no_payload(payload, what)
        return msg

    return decode


_DECODERS: dict[int, Callable[[bytes], FrontendMessage]] = {
    ord("p"): PasswordMessage.decode,
    ord("Q"): Query.decode,
    ord("P"): Parse.decode,
    ord("B"): Bind.decode,
    ord("D"): Describe.decode,
    ord("E"): Execute.decode,
    ord("S"): _singleton(SYNC, "Sync"),
    ord("H"): _singleton(FLUSH, "Flush"),
    ord("C"): Close.decode,
    ord("d"): CopyData.decode,
    ord("c"): _singleton(COPY_DONE, "CopyDone"),
    ord("f"): CopyFail.decode,
    ord("F"): FunctionCall.decode,
    ord("X"): _singleton(TERMINATE, "Terminate"),
}


def decode_frontend(mtype: int, payload: bytes) -> FrontendMessage:
    """Decode one typed frontend message ('p' as PasswordMessage; see the module doc)."""
    decoder = _DECODERS.get(mtype)
    if decoder is None:
        raise ProtocolViolation(f"invalid frontend message type {mtype}")
    return decoder(payload)


#: The pure-Python reference, whatever ``WEIR_IMPL`` selects (for parity tests).
decode_bind_fields_python = decode_bind_fields

_fast = cython_ext.load("wire_codec")
if _fast is not None:
    _fast.set_error_class(ProtocolViolation)
    decode_bind_fields = _fast.decode_bind_fields
