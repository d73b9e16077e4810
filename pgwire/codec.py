"""Primitive readers and writers for message payloads (sans-I/O).

Owns: the ``Reader`` that walks one message payload and the writer helpers that frame a
payload into a whole message. Every decoding error surfaces as ``ProtocolViolation``
(never ``IndexError``, ``struct.error`` or ``UnicodeDecodeError``); strings are
NUL-terminated and read as UTF-8 with ``surrogateescape`` (:data:`WIRE_ERRORS`): bytes that
are not UTF-8 (another client_encoding, or an invalid byte PostgreSQL itself will refuse
with 22021) come back as lone surrogates and are written back as the same bytes, so every
client encoding PostgreSQL accepts passes through weir unchanged. Readers of such a text
(the planner) see something that is not valid UTF-8 and send the statement upstream.

Invariant: ``Reader.finish()`` is called by every decoder, so a payload with trailing
bytes is rejected just as PostgreSQL's ``pq_getmsgend`` rejects it.
"""

from __future__ import annotations

import struct

from pgwire.framing import ProtocolViolation

#: the error handler of every string read from or written to the wire (see above)
WIRE_ERRORS = "surrogateescape"

_I16 = struct.Struct("!h")
_U16 = struct.Struct("!H")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_HEAD = struct.Struct("!cI")
_LEN = struct.Struct("!I")


class Reader:
    """Sequential reader over one payload; every short read raises ProtocolViolation."""

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def _fail(self, why: str) -> ProtocolViolation:
        return ProtocolViolation(f"malformed {self._what} message: {why}")

    def _take(self, n: int) -> bytes:
        pos = self._pos
        end = pos + n
        if n < 0 or end > len(self._data):
            raise self._fail("truncated")
        self._pos = end
        return self._data[pos:end]

    def byte(self) -> int:
        return self._take(1)[0]

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def uint16(self) -> int:
        return int(_U16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def uint32(self) -> int:
        return int(_U32.unpack(self._take(4))[0])

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def rest(self) -> bytes:
        data = self._data[self._pos :]
        self._pos = len(self._data)
        return data

    def cstring(self) -> str:
        data = self._data
        end = data.find(b"\x00", self._pos)
        if end < 0:
            raise self._fail("string not terminated")
        try:
            text = data[self._pos : end].decode("utf-8", WIRE_ERRORS)
        except UnicodeDecodeError as exc:
            raise self._fail(f"invalid UTF-8 ({exc.reason})") from None
        self._pos = end + 1
        return text

    def count(self) -> int:
        """An Int16 element count (must not be negative)."""
        n = self.int16()
        if n < 0:
            raise self._fail(f"negative count {n}")
        return n

    def nullable(self) -> bytes | None:
        """An Int32 length (-1 = NULL) followed by that many bytes."""
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise self._fail(f"invalid value length {n}")
        return self._take(n)

    def int16_list(self) -> tuple[int, ...]:
        n = self.count()
        return struct.unpack(f"!{n}h", self._take(2 * n)) if n else ()

    def uint32_list(self, n: int) -> tuple[int, ...]:
        return struct.unpack(f"!{n}I", self._take(4 * n)) if n else ()

    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise self._fail(f"{len(self._data) - self._pos} unexpected trailing bytes")


def cstring_at(data: bytes, pos: int, what: str) -> tuple[str, int]:
    """The NUL-terminated UTF-8 string at ``pos`` and the offset after its NUL."""
    end = data.find(b"\x00", pos)
    if end < 0:
        raise ProtocolViolation(f"malformed {what} message: string not terminated")
    try:
        return data[pos:end].decode("utf-8", WIRE_ERRORS), end + 1
    except UnicodeDecodeError as exc:
        raise ProtocolViolation(f"malformed {what} message: invalid UTF-8 ({exc.reason})") from None


def int16s_at(data: bytes, pos: int, what: str) -> tuple[tuple[int, ...], int]:
    """An Int16 count followed by that many Int16 values, and the offset after them."""
    try:
        (n,) = _I16.unpack_from(data, pos)
        if n < 0:
            raise ProtocolViolation(f"malformed {what} message: negative count {n}")
        end = pos + 2 + 2 * n
        return struct.unpack_from(f"!{n}h", data, pos + 2), end
    except struct.error:
        raise ProtocolViolation(f"malformed {what} message: truncated") from None


def values_at(data: bytes, pos: int, what: str) -> tuple[tuple[bytes | None, ...], int]:
    """An Int16 count of (Int32 length or -1, bytes) values, and the offset after them."""
    unpack = _I32.unpack_from
    size = len(data)
    try:
        (n,) = _I16.unpack_from(data, pos)
        if n < 0:
            raise ProtocolViolation(f"malformed {what} message: negative count {n}")
        pos += 2
        out: list[bytes | None] = []
        append = out.append
        for _ in range(n):
            (length,) = unpack(data, pos)
            pos += 4
            if length < 0:
                if length != -1:
                    raise ProtocolViolation(f"malformed {what} message: length {length}")
                append(None)
                continue
            end = pos + length
            if end > size:
                raise ProtocolViolation(f"malformed {what} message: truncated")
            append(data[pos:end])
            pos = end
    except struct.error:
        raise ProtocolViolation(f"malformed {what} message: truncated") from None
    return tuple(out), pos


def at_end(data: bytes, pos: int, what: str) -> None:
    """Refuse trailing bytes after the last field (as pq_getmsgend does)."""
    if pos != len(data):
        raise ProtocolViolation(f"malformed {what} message: unexpected trailing bytes")


def frame(mtype: bytes, payload: bytes) -> bytes:
    """A typed message: type byte, Int32 length (counting itself), payload."""
    return _HEAD.pack(mtype, len(payload) + 4) + payload


def frame_untyped(payload: bytes) -> bytes:
    """An untyped (startup-phase) message: Int32 length counting itself, payload."""
    return _LEN.pack(len(payload) + 4) + payload


def cstr(text: str) -> bytes:
    """``text`` as NUL-terminated UTF-8; an embedded NUL is a programming error."""
    data = text.encode("utf-8", WIRE_ERRORS)
    if b"\x00" in data:
        raise ValueError(f"string for the wire contains NUL: {text!r}")
    return data + b"\x00"


def i16(value: int) -> bytes:
    return _I16.pack(value)


def i32(value: int) -> bytes:
    return _I32.pack(value)


def u32(value: int) -> bytes:
    return _U32.pack(value)


def int16_list(values: tuple[int, ...]) -> bytes:
    return struct.pack(f"!h{len(values)}h", len(values), *values)


def nullable(value: bytes | None) -> bytes:
    if value is None:
        return b"\xff\xff\xff\xff"
    return _I32.pack(len(value)) + value


def no_payload(payload: bytes, what: str) -> None:
    """Check that a message that carries nothing has an empty payload."""
    if payload:
        raise ProtocolViolation(f"malformed {what} message: {len(payload)} unexpected bytes")
