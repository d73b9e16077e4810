"""Bind parameter values -> canonical engine values (pure).

Owns: decoding the bytes a client sent in a Bind message, in text or binary format, into the
canonical values the engine keys on, for the types that can key a cache. The type used is the
one the client declared in Parse when it did (a binary value's layout depends on it), else the
column type the parameter is compared with. A declared type of another family than the column
(e.g. float8 against numeric) is refused: PostgreSQL would compare after a cast whose result
weir does not reproduce, so such a statement goes upstream.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from engine import decode_text, oids


class ParamError(ValueError):
    """The parameter cannot be turned into a key value exactly (the statement goes upstream)."""


_INTS = frozenset({oids.INT2, oids.INT4, oids.INT8, oids.OID})
_TEXTS = frozenset({oids.TEXT, oids.VARCHAR, oids.NAME})


def _family(oid: int) -> int:
    if oid in _INTS:
        return oids.INT8
    if oid in _TEXTS:
        return oids.TEXT
    return oid


def _struct(fmt: str) -> Callable[[bytes], Any]:
    unpack = struct.Struct(fmt).unpack

    def decode(data: bytes) -> Any:
        try:
            return unpack(data)[0]
        except struct.error as exc:
            raise ParamError(f"binary parameter of {len(data)} bytes: {exc}") from exc

    return decode


def _utf8(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ParamError("parameter is not valid UTF-8") from exc


def _bool(data: bytes) -> bool:
    if len(data) != 1:
        raise ParamError("binary bool is one byte")
    return data != b"\x00"


def _uuid(data: bytes) -> uuid.UUID:
    if len(data) != 16:
        raise ParamError("binary uuid is 16 bytes")
    return uuid.UUID(bytes=data)


BINARY_DECODERS: dict[int, Callable[[bytes], Any]] = {
    oids.INT2: _struct("!h"),
    oids.INT4: _struct("!i"),
    oids.INT8: _struct("!q"),
    oids.OID: _struct("!I"),
    oids.TEXT: _utf8,
    oids.VARCHAR: _utf8,
    oids.NAME: _utf8,
    oids.BOOL: _bool,
    oids.UUID: _uuid,
    oids.BYTEA: bytes,
}


def decode_param(value: bytes | None, fmt: int, declared: int, column_type: int) -> Any:
    """The canonical value of one Bind parameter compared with a column of ``column_type``."""
    if value is None:
        return None
    if declared and _family(declared) != _family(column_type):
        raise ParamError(f"parameter declared as type {declared} for a column of type "
                         f"{column_type}")
    kind = declared or column_type
    if fmt == 0:
        try:
            result = decode_text(column_type, _utf8(value))
        except ParamError:
            raise
        except Exception as exc:
            raise ParamError(f"invalid text value for type {column_type}: {exc}") from exc
        if column_type in _INTS and not isinstance(result, int):
            raise ParamError("not an integer")
        return result
    if fmt != 1:
        raise ParamError(f"unknown parameter format {fmt}")
    decoder = BINARY_DECODERS.get(kind)
    if decoder is None:
        raise ParamError(f"binary parameters of type {kind} are not decoded by weir")
    return decoder(value)


def formats_for(count: int, codes: tuple[int, ...]) -> tuple[int, ...]:
    """Per-item format codes from a Bind's list (empty: all text; one: all that one)."""
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return codes * count
    if len(codes) != count:
        raise ParamError(f"{len(codes)} format codes for {count} items")
    return codes
