"""Decoding of one pgoutput (protocol 1) message payload into a message dataclass (sans-I/O).

Owns: the byte layouts of Begin, Commit, Origin, Relation, Type, Insert, Update, Delete,
Truncate and Message, and :class:`PgoutputError`.

Invariants: ``decode_message`` either returns exactly one message that consumed the whole
payload or raises :class:`PgoutputError` naming the message type and the problem; it never
raises anything else for any input bytes (fuzz-tested).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from cdc.pgoutput.messages import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Message,
    Origin,
    PgoutputMessage,
    Relation,
    Truncate,
    TupleData,
    Type,
    Update,
)
from cdc.pgoutput.tuples import decode_tuple_data


class PgoutputError(ValueError):
    """A pgoutput payload that does not follow the protocol 1 layout."""


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 1) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.buf):
            raise PgoutputError(f"truncated: need {size} bytes at offset {self.pos}")
        chunk = self.buf[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        pos = self.pos
        end = pos + layout.size
        if end > len(self.buf):
            raise PgoutputError(f"truncated: need {layout.size} bytes at offset {pos}")
        self.pos = end
        return layout.unpack_from(self.buf, pos)

    def u8(self) -> int:
        return self._take(1)[0]

    def int16(self) -> int:
        return int.from_bytes(self._take(2), "big", signed=True)

    def int32(self) -> int:
        return int.from_bytes(self._take(4), "big", signed=True)

    def uint32(self) -> int:
        return int.from_bytes(self._take(4), "big")

    def int64(self) -> int:
        return int.from_bytes(self._take(8), "big", signed=True)

    def uint64(self) -> int:
        return int.from_bytes(self._take(8), "big")

    def string(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise PgoutputError(f"unterminated string at offset {self.pos}")
        raw = self.buf[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PgoutputError(f"invalid UTF-8 in string at offset {self.pos}") from exc

    def tuple_data(self) -> TupleData:
        try:
            values, self.pos = decode_tuple_data(self.buf, self.pos, UNCHANGED_TOAST)
        except ValueError as exc:
            raise PgoutputError(str(exc)) from exc
        return values

    def rest(self) -> bytes:
        return self._take(len(self.buf) - self.pos)


_BEGIN = struct.Struct("!QqI")
_COMMIT = struct.Struct("!BQQq")
_OID_KIND = struct.Struct("!Ic")


def _begin(r: _Reader) -> Begin:
    return Begin(*r.unpack(_BEGIN))


def _commit(r: _Reader) -> Commit:
    return Commit(*r.unpack(_COMMIT))


def _origin(r: _Reader) -> Origin:
    return Origin(r.uint64(), r.string())


def _relation(r: _Reader) -> Relation:
    oid, namespace, name = r.uint32(), r.string(), r.string()
    identity = chr(r.u8())
    ncols = r.int16()
    if ncols < 0:
        raise PgoutputError(f"negative column count {ncols}")
    columns = tuple(Column(r.u8(), r.string(), r.uint32(), r.int32()) for _ in range(ncols))
    return Relation(oid, namespace, name, identity, columns)


def _type(r: _Reader) -> Type:
    return Type(r.uint32(), r.string(), r.string())


def _expect(r: _Reader, allowed: bytes, what: str) -> str:
    kind = r.u8()
    if kind not in allowed:
        raise PgoutputError(f"{what}: unexpected tuple marker {kind:#04x} at offset {r.pos - 1}")
    return chr(kind)


def _oid_and_marker(r: _Reader, allowed: tuple[bytes, ...], what: str) -> tuple[int, bytes]:
    oid, kind = r.unpack(_OID_KIND)
    if kind not in allowed:
        raise PgoutputError(f"{what}: unexpected tuple marker {kind!r} at offset {r.pos - 1}")
    return oid, kind


def _insert(r: _Reader) -> Insert:
    oid, _ = _oid_and_marker(r, (b"N",), "Insert")
    return Insert(oid, r.tuple_data())


def _update(r: _Reader) -> Update:
    oid, kind = _oid_and_marker(r, (b"N", b"K", b"O"), "Update")
    if kind == b"N":
        return Update(oid, "", None, r.tuple_data())
    old = r.tuple_data()
    _expect(r, b"N", "Update")
    return Update(oid, kind.decode(), old, r.tuple_data())


def _delete(r: _Reader) -> Delete:
    oid, kind = _oid_and_marker(r, (b"K", b"O"), "Delete")
    return Delete(oid, kind.decode(), r.tuple_data())


def _truncate(r: _Reader) -> Truncate:
    count = r.int32()
    if count < 0:
        raise PgoutputError(f"negative relation count {count}")
    options = r.u8()
    return Truncate(options, tuple(r.uint32() for _ in range(count)))


def _message(r: _Reader) -> Message:
    flags, lsn, prefix = r.u8(), r.uint64(), r.string()
    length = r.int32()
    if length < 0:
        raise PgoutputError(f"negative message content length {length}")
    return Message(flags, lsn, prefix, r._take(length))


DECODERS: dict[int, Callable[[_Reader], PgoutputMessage]] = {
    ord("B"): _begin,
    ord("C"): _commit,
    ord("O"): _origin,
    ord("R"): _relation,
    ord("Y"): _type,
    ord("I"): _insert,
    ord("U"): _update,
    ord("D"): _delete,
    ord("T"): _truncate,
    ord("M"): _message,
}


def decode_message(payload: bytes) -> PgoutputMessage:
    """Decode one pgoutput message (the XLogData payload) or raise :class:`PgoutputError`."""
    if not payload:
        raise PgoutputError("empty pgoutput message")
    decoder = DECODERS.get(payload[0])
    if decoder is None:
        raise PgoutputError(
            f"unknown pgoutput message type {payload[:1]!r} (protocol 1 expected; streaming "
            "messages need proto_version 2, which weir does not request)"
        )
    reader = _Reader(payload if type(payload) is bytes else bytes(payload))
    try:
        message = decoder(reader)
    except PgoutputError as exc:
        raise PgoutputError(f"{chr(payload[0])} message: {exc}") from exc
    if reader.pos != len(payload):
        raise PgoutputError(
            f"{chr(payload[0])} message: {len(payload) - reader.pos} trailing bytes"
        )
    return message
