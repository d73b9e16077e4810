"""Backend (server -> client) messages of protocol 3.0 (sans-I/O).

Owns: one frozen slotted dataclass per backend message, named as in the PostgreSQL
"Message Formats" page, each with ``encode() -> bytes`` (the whole message: type byte,
length, payload) and a ``decode(payload)`` classmethod; the dispatch table
``decode_backend(mtype, payload)``; the hot encoders ``encode_data_row``,
``encode_row_description`` and ``encode_command_complete`` (Cython twins in
``cython_ext/wire_codec.pyx``); and the
``error_response`` constructor.

Invariants: ``decode_backend(m.encode()[0], m.encode()[5:]) == m`` for every message;
decoders raise only ``ProtocolViolation``; 'R' decodes to the Authentication* class its
Int32 code names. OIDs are unsigned 32-bit, other Int32 fields signed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import cython_ext
from pgwire.authmsg import (
    AuthenticationCleartextPassword,
    AuthenticationGSS,
    AuthenticationGSSContinue,
    AuthenticationKerberosV5,
    AuthenticationMD5Password,
    AuthenticationMessage,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    AuthenticationSSPI,
    decode_authentication,
)
from pgwire.codec import (
    Reader,
    at_end,
    cstr,
    cstring_at,
    frame,
    i32,
    no_payload,
    nullable,
    values_at,
)
from pgwire.common import COPY_DONE, CopyData, CopyDone
from pgwire.errors import ErrorResponse, NoticeResponse, error_response, notice_response
from pgwire.framing import ProtocolViolation

__all__ = [
    "AuthenticationCleartextPassword",
    "AuthenticationGSS",
    "AuthenticationGSSContinue",
    "AuthenticationKerberosV5",
    "AuthenticationMD5Password",
    "AuthenticationMessage",
    "AuthenticationOk",
    "AuthenticationSASL",
    "AuthenticationSASLContinue",
    "AuthenticationSASLFinal",
    "AuthenticationSSPI",
    "BackendKeyData",
    "BackendMessage",
    "BindComplete",
    "CloseComplete",
    "CommandComplete",
    "CopyBothResponse",
    "CopyData",
    "CopyDone",
    "CopyInResponse",
    "CopyOutResponse",
    "DataRow",
    "EmptyQueryResponse",
    "ErrorResponse",
    "FieldDescription",
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
    "decode_backend",
    "decode_data_row_values",
    "encode_command_complete",
    "encode_data_row",
    "encode_row_description",
    "error_response",
    "notice_response",
]

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_FIELD_TAIL = struct.Struct("!IhIhih")
_HEAD = struct.Struct("!cI")
_HEAD_COUNT = struct.Struct("!cIh")


def encode_data_row(values: Sequence[bytes | None]) -> bytes:
    """A whole DataRow message for ``values`` (bytes or bytearray; None is SQL NULL)."""
    if len(values) > 32767:
        raise ValueError(f"a DataRow holds at most 32767 values, not {len(values)}")
    parts: list[bytes] = []
    append = parts.append
    pack = _I32.pack
    for value in values:
        if value is None:
            append(b"\xff\xff\xff\xff")
        else:
            append(pack(len(value)))
            append(value)
    body = b"".join(parts)
    return _HEAD_COUNT.pack(b"D", len(body) + 6, len(values)) + body


def decode_data_row_values(payload: bytes) -> tuple[bytes | None, ...]:
    """The values of a DataRow payload (ProtocolViolation if malformed)."""
    values, pos = values_at(payload, 0, "DataRow")
    at_end(payload, pos, "DataRow")
    return values


def encode_row_description(fields: Sequence[FieldDescription]) -> bytes:
    """A whole RowDescription message for ``fields`` (ValueError for out-of-range numbers)."""
    if len(fields) > 32767:
        raise ValueError(f"a RowDescription holds at most 32767 fields, not {len(fields)}")
    parts: list[bytes] = []
    pack = _FIELD_TAIL.pack
    try:
        for f in fields:
            parts.append(cstr(f.name))
            parts.append(
                pack(f.table_oid, f.column_attr, f.type_oid, f.type_size, f.type_modifier, f.format)
            )
    except struct.error as exc:
        raise ValueError(f"out of range for the wire field: {exc}") from None
    body = b"".join(parts)
    return _HEAD_COUNT.pack(b"T", len(body) + 6, len(fields)) + body


def encode_command_complete(tag: str) -> bytes:
    """A whole CommandComplete message for ``tag`` (e.g. ``SELECT 3``)."""
    return frame(b"C", cstr(tag))


@dataclass(frozen=True, slots=True)
class BackendKeyData:
    """'K': the key a client needs to send CancelRequest for this session."""

    TYPE: ClassVar[bytes] = b"K"
    process_id: int
    secret_key: int

    def encode(self) -> bytes:
        return frame(b"K", i32(self.process_id) + i32(self.secret_key))

    @classmethod
    def decode(cls, payload: bytes) -> BackendKeyData:
        r = Reader(payload, "BackendKeyData")
        msg = cls(r.int32(), r.int32())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class BindComplete:
    """'2': Bind succeeded."""

    TYPE: ClassVar[bytes] = b"2"

    def encode(self) -> bytes:
        return b"2\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class CloseComplete:
    """'3': Close succeeded."""

    TYPE: ClassVar[bytes] = b"3"

    def encode(self) -> bytes:
        return b"3\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class EmptyQueryResponse:
    """'I': the query string was empty (replaces CommandComplete)."""

    TYPE: ClassVar[bytes] = b"I"

    def encode(self) -> bytes:
        return b"I\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class NoData:
    """'n': the described statement or portal returns no rows."""

    TYPE: ClassVar[bytes] = b"n"

    def encode(self) -> bytes:
        return b"n\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class ParseComplete:
    """'1': Parse succeeded."""

    TYPE: ClassVar[bytes] = b"1"

    def encode(self) -> bytes:
        return b"1\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class PortalSuspended:
    """'s': Execute reached its row limit; the portal can be executed again."""

    TYPE: ClassVar[bytes] = b"s"

    def encode(self) -> bytes:
        return b"s\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class CommandComplete:
    """'C': a command finished; ``tag`` is e.g. ``SELECT 3`` or ``INSERT 0 1``."""

    TYPE: ClassVar[bytes] = b"C"
    tag: str

    def encode(self) -> bytes:
        return encode_command_complete(self.tag)

    @classmethod
    def decode(cls, payload: bytes) -> CommandComplete:
        tag, pos = cstring_at(payload, 0, "CommandComplete")
        at_end(payload, pos, "CommandComplete")
        return cls(tag)


def _decode_copy_response(payload: bytes, what: str) -> tuple[int, tuple[int, ...]]:
    r = Reader(payload, what)
    overall = r.byte()
    formats = r.int16_list()
    r.finish()
    if overall not in (0, 1):
        raise ProtocolViolation(f"malformed {what} message: format {overall}")
    return overall, formats


def _encode_copy_response(mtype: bytes, overall: int, formats: tuple[int, ...]) -> bytes:
    body = bytes((overall,)) + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    return frame(mtype, body)


@dataclass(frozen=True, slots=True)
class CopyInResponse:
    """'G': the server is ready to receive COPY data (0 = text, 1 = binary)."""

    TYPE: ClassVar[bytes] = b"G"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _encode_copy_response(b"G", self.format, self.column_formats)

    @classmethod
    def decode(cls, payload: bytes) -> CopyInResponse:
        return cls(*_decode_copy_response(payload, "CopyInResponse"))


@dataclass(frozen=True, slots=True)
class CopyOutResponse:
    """'H': the server is about to send COPY data."""

    TYPE: ClassVar[bytes] = b"H"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _encode_copy_response(b"H", self.format, self.column_formats)

    @classmethod
    def decode(cls, payload: bytes) -> CopyOutResponse:
        return cls(*_decode_copy_response(payload, "CopyOutResponse"))


@dataclass(frozen=True, slots=True)
class CopyBothResponse:
    """'W': both directions carry CopyData (streaming replication)."""

    TYPE: ClassVar[bytes] = b"W"
    format: int
    column_formats: tuple[int, ...]

    def encode(self) -> bytes:
        return _encode_copy_response(b"W", self.format, self.column_formats)

    @classmethod
    def decode(cls, payload: bytes) -> CopyBothResponse:
        return cls(*_decode_copy_response(payload, "CopyBothResponse"))


@dataclass(frozen=True, slots=True)
class DataRow:
    """'D': one result row; each value is the column's bytes or None for NULL."""

    TYPE: ClassVar[bytes] = b"D"
    values: tuple[bytes | None, ...]

    def encode(self) -> bytes:
        return encode_data_row(self.values)

    @classmethod
    def decode(cls, payload: bytes) -> DataRow:
        return cls(decode_data_row_values(payload))


@dataclass(frozen=True, slots=True)
class FunctionCallResponse:
    """'V': the result of a FunctionCall (None for NULL)."""

    TYPE: ClassVar[bytes] = b"V"
    result: bytes | None

    def encode(self) -> bytes:
        return frame(b"V", nullable(self.result))

    @classmethod
    def decode(cls, payload: bytes) -> FunctionCallResponse:
        r = Reader(payload, "FunctionCallResponse")
        msg = cls(r.nullable())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class NegotiateProtocolVersion:
    """'v': the newest minor version the server supports and the options it did not know."""

    TYPE: ClassVar[bytes] = b"v"
    newest_minor: int
    unrecognized_options: tuple[str, ...]

    def encode(self) -> bytes:
        opts = self.unrecognized_options
        body = i32(self.newest_minor) + i32(len(opts)) + b"".join(cstr(o) for o in opts)
        return frame(b"v", body)

    @classmethod
    def decode(cls, payload: bytes) -> NegotiateProtocolVersion:
        r = Reader(payload, "NegotiateProtocolVersion")
        minor = r.int32()
        n = r.int32()
        if n < 0 or n > len(payload):
            raise ProtocolViolation(f"malformed NegotiateProtocolVersion message: count {n}")
        opts = tuple(r.cstring() for _ in range(n))
        r.finish()
        return cls(minor, opts)


@dataclass(frozen=True, slots=True)
class NotificationResponse:
    """'A': a NOTIFY delivered to this session's LISTEN."""

    TYPE: ClassVar[bytes] = b"A"
    process_id: int
    channel: str
    payload: str

    def encode(self) -> bytes:
        return frame(b"A", i32(self.process_id) + cstr(self.channel) + cstr(self.payload))

    @classmethod
    def decode(cls, payload: bytes) -> NotificationResponse:
        r = Reader(payload, "NotificationResponse")
        msg = cls(r.int32(), r.cstring(), r.cstring())
        r.finish()
        return msg


@dataclass(frozen=True, slots=True)
class ParameterDescription:
    """'t': the type OIDs of a prepared statement's parameters."""

    TYPE: ClassVar[bytes] = b"t"
    type_oids: tuple[int, ...]

    def encode(self) -> bytes:
        oids = self.type_oids
        return frame(b"t", struct.pack(f"!h{len(oids)}I", len(oids), *oids))

    @classmethod
    def decode(cls, payload: bytes) -> ParameterDescription:
        r = Reader(payload, "ParameterDescription")
        oids = r.uint32_list(r.uint16())
        r.finish()
        return cls(oids)


@dataclass(frozen=True, slots=True)
class ParameterStatus:
    """'S': the current value of a reported run-time parameter."""

    TYPE: ClassVar[bytes] = b"S"
    name: str
    value: str

    def encode(self) -> bytes:
        return frame(b"S", cstr(self.name) + cstr(self.value))

    @classmethod
    def decode(cls, payload: bytes) -> ParameterStatus:
        r = Reader(payload, "ParameterStatus")
        msg = cls(r.cstring(), r.cstring())
        r.finish()
        return msg


_READY = {"I": b"Z\x00\x00\x00\x05I", "T": b"Z\x00\x00\x00\x05T", "E": b"Z\x00\x00\x00\x05E"}


@dataclass(frozen=True, slots=True)
class ReadyForQuery:
    """'Z': ready for a new query; status 'I' idle, 'T' in a transaction, 'E' failed one."""

    TYPE: ClassVar[bytes] = b"Z"
    status: str

    def encode(self) -> bytes:
        encoded = _READY.get(self.status)
        if encoded is None:
            raise ValueError(f"invalid transaction status {self.status!r}")
        return encoded

    @classmethod
    def decode(cls, payload: bytes) -> ReadyForQuery:
        msg = _READY_BY_PAYLOAD.get(bytes(payload))
        if msg is None:
            raise ProtocolViolation(f"malformed ReadyForQuery message: {bytes(payload)!r}")
        return msg


_READY_BY_PAYLOAD = {s.encode(): ReadyForQuery(s) for s in "ITE"}


@dataclass(frozen=True, slots=True)
class FieldDescription:
    """One column of a RowDescription."""

    name: str
    table_oid: int = 0
    column_attr: int = 0
    type_oid: int = 25
    type_size: int = -1
    type_modifier: int = -1
    format: int = 0


@dataclass(frozen=True, slots=True)
class RowDescription:
    """'T': the columns of the rows that follow."""

    TYPE: ClassVar[bytes] = b"T"
    fields: tuple[FieldDescription, ...]

    def encode(self) -> bytes:
        return encode_row_description(self.fields)

    @classmethod
    def decode(cls, payload: bytes) -> RowDescription:
        r = Reader(payload, "RowDescription")
        n = r.count()
        fields = []
        for _ in range(n):
            name = r.cstring()
            tail = _FIELD_TAIL.unpack(r.raw(_FIELD_TAIL.size))
            fields.append(FieldDescription(name, *tail))
        r.finish()
        return cls(tuple(fields))


BIND_COMPLETE = BindComplete()
CLOSE_COMPLETE = CloseComplete()
EMPTY_QUERY_RESPONSE = EmptyQueryResponse()
NO_DATA = NoData()
PARSE_COMPLETE = ParseComplete()
PORTAL_SUSPENDED = PortalSuspended()

BackendMessage = (
    AuthenticationMessage
    | BackendKeyData
    | BindComplete
    | CloseComplete
    | CommandComplete
    | CopyData
    | CopyDone
    | CopyInResponse
    | CopyOutResponse
    | CopyBothResponse
    | DataRow
    | EmptyQueryResponse
    | ErrorResponse
    | FunctionCallResponse
    | NegotiateProtocolVersion
    | NoData
    | NoticeResponse
    | NotificationResponse
    | ParameterDescription
    | ParameterStatus
    | ParseComplete
    | PortalSuspended
    | ReadyForQuery
    | RowDescription
)


def _singleton(msg: BackendMessage, what: str) -> Callable[[bytes], BackendMessage]:
    def decode(payload: bytes) -> BackendMessage:
        no_payload(payload, what)
        return msg

    return decode


_DECODERS: dict[int, Callable[[bytes], BackendMessage]] = {
    ord("R"): decode_authentication,
    ord("K"): BackendKeyData.decode,
    ord("2"): _singleton(BIND_COMPLETE, "BindComplete"),
    ord("3"): _singleton(CLOSE_COMPLETE, "CloseComplete"),
    ord("C"): CommandComplete.decode,
    ord("d"): CopyData.decode,
    ord("c"): _singleton(COPY_DONE, "CopyDone"),
    ord("G"): CopyInResponse.decode,
    ord("H"): CopyOutResponse.decode,
    ord("W"): CopyBothResponse.decode,
    ord("D"): DataRow.decode,
    ord("I"): _singleton(EMPTY_QUERY_RESPONSE, "EmptyQueryResponse"),
    ord("E"): ErrorResponse.decode,
    ord("V"): FunctionCallResponse.decode,
    ord("v"): NegotiateProtocolVersion.decode,
    ord("n"): _singleton(NO_DATA, "NoData"),
    ord("N"): NoticeResponse.decode,
    ord("A"): NotificationResponse.decode,
    ord("t"): ParameterDescription.decode,
    ord("S"): ParameterStatus.decode,
    ord("1"): _singleton(PARSE_COMPLETE, "ParseComplete"),
    ord("s"): _singleton(PORTAL_SUSPENDED, "PortalSuspended"),
    ord("Z"): ReadyForQuery.decode,
    ord("T"): RowDescription.decode,
}


def decode_backend(mtype: int, payload: bytes) -> BackendMessage:
    """Decode one backend message given its type byte and payload."""
    decoder = _DECODERS.get(mtype)
    if decoder is None:
        raise ProtocolViolation(f"unknown backend message type {bytes((mtype,))!r}")
    return decoder(payload)


#: The pure-Python references, whatever ``WEIR_IMPL`` selects (for parity tests).
encode_data_row_python = encode_data_row
encode_row_description_python = encode_row_description
encode_command_complete_python = encode_command_complete
decode_data_row_values_python = decode_data_row_values

_fast = cython_ext.load("wire_codec")
if _fast is not None:
    encode_data_row = _fast.encode_data_row
    encode_row_description = _fast.encode_row_description
    encode_command_complete = _fast.encode_command_complete
    _fast.set_error_class(ProtocolViolation)
    decode_data_row_values = _fast.decode_data_row_values
