"""ErrorResponse and NoticeResponse: the field-list messages of protocol 3.0 (sans-I/O).

Owns: both dataclasses (fields kept as an ordered tuple of ``(code char, value)`` exactly
as received, so relaying re-encodes byte-identically), their accessors, and the
constructors ``error_response`` / ``notice_response`` that build them the way PostgreSQL
does (S, V, C, M, then optional fields). Re-exported by ``pgwire.backend``.

Invariant: decoders raise only ``ProtocolViolation``; a field code is one non-NUL byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pgwire.codec import Reader, cstr, frame
from pgwire.framing import ProtocolViolation

#: Field codes by the keyword names ``error_response(**extra)`` accepts.
FIELD_CODES: dict[str, str] = {
    "severity": "S",
    "severity_nonlocalized": "V",
    "sqlstate": "C",
    "message": "M",
    "detail": "D",
    "hint": "H",
    "position": "P",
    "internal_position": "p",
    "internal_query": "q",
    "where": "W",
    "schema_name": "s",
    "table_name": "t",
    "column_name": "c",
    "data_type_name": "d",
    "constraint_name": "n",
    "file": "F",
    "line": "L",
    "routine": "R",
}

Fields = tuple[tuple[str, str], ...]


def _decode_fields(payload: bytes, what: str) -> Fields:
    r = Reader(payload, what)
    out = []
    while True:
        code = r.byte()
        if code == 0:
            break
        out.append((chr(code), r.cstring()))
    r.finish()
    return tuple(out)


def _encode_fields(mtype: bytes, fields: Fields) -> bytes:
    parts = []
    for code, value in fields:
        if len(code) != 1 or code == "\x00" or ord(code) > 255:
            raise ValueError(f"invalid field code {code!r}")
        parts.append(bytes((ord(code),)) + cstr(value))
    parts.append(b"\x00")
    return frame(mtype, b"".join(parts))


class _FieldsMixin:
    """Accessors shared by ErrorResponse and NoticeResponse."""

    __slots__ = ()
    fields: Fields

    def get(self, code: str, default: str | None = None) -> str | None:
        """The value of the first field with ``code`` (one char, e.g. 'D' for detail)."""
        for c, value in self.fields:
            if c == code:
                return value
        return default

    @property
    def severity(self) -> str:
        """The non-localized severity ('V') when present, else the localized one ('S')."""
        return self.get("V") or self.get("S") or ""

    @property
    def sqlstate(self) -> str:
        return self.get("C") or ""

    @property
    def message(self) -> str:
        return self.get("M") or ""


@dataclass(frozen=True, slots=True)
class ErrorResponse(_FieldsMixin):
    """'E': an error; ``fields`` in wire order."""

    TYPE: ClassVar[bytes] = b"E"
    fields: Fields

    def encode(self) -> bytes:
        return _encode_fields(b"E", self.fields)

    @classmethod
    def decode(cls, payload: bytes) -> ErrorResponse:
        return cls(_decode_fields(payload, "ErrorResponse"))


@dataclass(frozen=True, slots=True)
class NoticeResponse(_FieldsMixin):
    """'N': a notice or warning; ``fields`` in wire order."""

    TYPE: ClassVar[bytes] = b"N"
    fields: Fields

    def encode(self) -> bytes:
        return _encode_fields(b"N", self.fields)

    @classmethod
    def decode(cls, payload: bytes) -> NoticeResponse:
        return cls(_decode_fields(payload, "NoticeResponse"))


def _build(sqlstate: str, message: str, severity: str, extra: dict[str, str]) -> Fields:
    if len(sqlstate) != 5:
        raise ValueError(f"SQLSTATE must have 5 characters, not {sqlstate!r}")
    fields = [("S", severity), ("V", severity), ("C", sqlstate), ("M", message)]
    for key, value in extra.items():
        code = FIELD_CODES.get(key, key)
        if len(code) != 1:
            raise ValueError(f"unknown error field {key!r}")
        fields.append((code, str(value)))
    return tuple(fields)


def error_response(
    sqlstate: str, message: str, severity: str = "ERROR", **extra: str
) -> ErrorResponse:
    """An ErrorResponse as PostgreSQL builds it; ``extra`` by name (detail=, hint=...)."""
    return ErrorResponse(_build(sqlstate, message, severity, extra))


def notice_response(
    message: str, severity: str = "NOTICE", sqlstate: str = "00000", **extra: str
) -> NoticeResponse:
    """A NoticeResponse as PostgreSQL builds it."""
    return NoticeResponse(_build(sqlstate, message, severity, extra))


def violation_response(exc: ProtocolViolation) -> ErrorResponse:
    """The ErrorResponse a peer gets for a protocol violation (then the connection closes)."""
    return error_response(exc.sqlstate, exc.message, "FATAL")
