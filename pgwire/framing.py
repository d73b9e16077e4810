"""Framing of the PostgreSQL v3 byte stream into messages (sans-I/O).

Owns: finding message boundaries in a growing buffer, the length limits, and the
``ProtocolViolation`` error that every decoder in ``pgwire`` raises for bad input.

Two shapes of message exist on the wire:
- *typed*: one type byte, an Int32 length that counts itself but not the type byte, payload;
- *untyped*: the first message a client sends (StartupMessage, SSLRequest, GSSENCRequest,
  CancelRequest): an Int32 length that counts itself, then payload.

Invariant: any split of the same byte stream into ``feed``/``take`` calls yields the same
messages (property-tested). ``scan_messages`` and ``scan_backend`` are the hot kernels (their
Cython twins live in ``cython_ext/framing.pyx``): the relay
forwards whole runs of complete messages with one write, usually the very bytes object it
received (``Framer.take``), and looks only at the few messages it tracks.
"""

from __future__ import annotations

import cython_ext
from pgwire.classes import ANSWER_BLOCK, ANSWER_IDLE, ANSWER_WRITE, answer_class

#: PostgreSQL's own limit for the startup packet (MAX_STARTUP_PACKET_LENGTH).
MAX_STARTUP_LENGTH = 10_000
#: Default cap for one message from a client (PostgreSQL allows up to 1 GB for some types).
DEFAULT_MAX_MESSAGE_LENGTH = 64 * 1024 * 1024
#: Cap used for messages from the upstream server (what PostgreSQL itself may send).
UPSTREAM_MAX_MESSAGE_LENGTH = 0x3FFFFFFF


class ProtocolViolation(Exception):
    """Malformed or oversized protocol input. ``sqlstate`` is what the peer should be told."""

    def __init__(self, message: str, sqlstate: str = "08P01") -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


def scan_messages(
    buf: bytes | bytearray, pos: int, max_length: int
) -> tuple[list[tuple[int, int, int]], int]:
    """Find the complete typed messages in ``buf[pos:]``.

    Returns ``(messages, end)``: one ``(type_byte, payload_start, payload_end)`` per complete
    message, in order, and the offset just past the last complete one (``pos`` if none).
    Raises ProtocolViolation for a length below 4 or above ``max_length``, even when the
    rest of that message has not arrived yet (so an oversized message is refused early).
    """
    out: list[tuple[int, int, int]] = []
    n = len(buf)
    while n - pos >= 5:
        length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > max_length:
            raise ProtocolViolation(f"message of {length} bytes exceeds the limit of {max_length}")
        end = pos + 1 + length
        if end > n:
            break
        out.append((buf[pos], pos + 5, end))
        pos = end
    return out, pos


_UNMARKED = frozenset(map(ord, "Dd"))  # DataRow, CopyData


def scan_backend(
    buf: bytes, pos: int, max_length: int, quiet_tags: tuple[bytes, ...], bulk: bool
) -> tuple[int, bytes, list[tuple[int, int, int]]]:
    """Frame the backend messages in ``buf[pos:]`` and sum up what a session must observe.

    Returns ``(end, statuses, marks)``: ``end`` as for :func:`scan_messages`; with ``bulk``,
    ``statuses`` has the status byte of every ReadyForQuery up to the last one that comes
    before any *special* message, and ``marks`` lists ``(type, payload_start, payload_end)``
    of the messages after that ReadyForQuery, DataRow and CopyData left out. Special are
    ErrorResponse, ParameterStatus, a malformed ReadyForQuery, and CommandComplete whose tag's
    first 8 bytes do not start with one of ``quiet_tags`` (``pgwire.classes.answer_class``
    from ``ANSWER_WRITE`` on). Without ``bulk``, ``statuses`` is
    empty and ``marks`` covers every message. Lengths are checked as by :func:`scan_messages`.
    """
    statuses = bytearray()
    marks: list[tuple[int, int, int]] = []
    clean = bulk
    n = len(buf)
    while n - pos >= 5:
        length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > max_length:
            raise ProtocolViolation(f"message of {length} bytes exceeds the limit of {max_length}")
        end = pos + 1 + length
        if end > n:
            break
        mtype = buf[pos]
        if mtype not in _UNMARKED:
            if clean:
                answer = answer_class(mtype, buf[pos + 5 : end], quiet_tags)
                if answer in (ANSWER_IDLE, ANSWER_BLOCK):
                    statuses.append(buf[pos + 5])
                    marks = []
                    pos = end
                    continue
                if answer >= ANSWER_WRITE:
                    clean = False
            marks.append((mtype, pos + 5, end))
        pos = end
    return pos, bytes(statuses), marks


class Framer:
    """Incremental splitter: ``feed`` bytes, take messages with ``next`` / ``drain``.

    ``startup=True`` makes the first message untyped (the client side of a fresh
    connection); after it (or after an SSLRequest answered ``N``, by calling
    ``expect_startup`` again) messages are typed.

    Invariants the relay core (``cython_ext/relay_scan.pyx``) relies on: :attr:`buf` is
    one bytearray for the framer's life (changed in place only), and the read position never
    passes its end, so nothing waits exactly when :attr:`buf` is empty. :attr:`buf` and
    :attr:`max_length` are read-only to everyone else.
    """

    __slots__ = ("_pos", "_startup", "buf", "max_length")

    def __init__(self, max_length: int = DEFAULT_MAX_MESSAGE_LENGTH, startup: bool = False) -> None:
        self.buf = bytearray()
        self._pos = 0
        self.max_length = max_length
        self._startup = startup

    def limit(self, max_length: int) -> None:
        """Change the largest typed message accepted (before authentication ends, a
        smaller one; the relay core reads the limit once the session is READY)."""
        self.max_length = max_length

    def expect_startup(self) -> None:
        """The next message is untyped (after SSLRequest/GSSENCRequest was answered)."""
        self._startup = True

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as messages."""
        return len(self.buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos >= len(self.buf) // 2:
            del self.buf[: self._pos]
            self._pos = 0
        self.buf += data

    def take(self, data: bytes) -> tuple[bytes, list[tuple[int, int, int]]]:
        """``feed(data)`` then :meth:`drain`, without copying when ``data`` holds whole
        messages and nothing was waiting (the usual case: then ``raw`` is ``data`` itself)."""
        joined = data if self._pos == len(self.buf) == 0 else self._join(data)
        if not joined:
            return b"", []
        found, end = scan_messages(joined, 0, self.max_length)
        return (joined if end == len(joined) else self._keep(joined, end)), found

    def take_backend(
        self, data: bytes, quiet_tags: tuple[bytes, ...], bulk: bool
    ) -> tuple[bytes, bytes, list[tuple[int, int, int]]]:
        """:meth:`take` for the upstream side: ``(raw, statuses, marks)`` as described by
        :func:`scan_backend` (offsets relative to ``raw``)."""
        joined = data if self._pos == len(self.buf) == 0 else self._join(data)
        if not joined:
            return b"", b"", []
        end, statuses, marks = scan_backend(joined, 0, self.max_length, quiet_tags, bulk)
        return (joined if end == len(joined) else self._keep(joined, end)), statuses, marks

    def _join(self, data: bytes) -> bytes:
        """What is waiting followed by ``data``; empty while the first waiting message is
        still incomplete (so a large message arriving in pieces is copied once, not per
        piece)."""
        buf, pos = self.buf, self._pos
        if len(buf) == pos:
            if pos:
                buf.clear()
                self._pos = 0
            return data
        buf += data
        if len(buf) - pos >= 5:
            length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
            if 4 <= length <= self.max_length and len(buf) - pos < 1 + length:
                return b""
        else:
            return b""
        joined = bytes(buf[pos:])
        buf.clear()
        self._pos = 0
        return joined

    def _keep(self, joined: bytes, end: int) -> bytes:
        """Keep ``joined[end:]`` (an incomplete message) waiting; return ``joined[:end]``."""
        if end == len(joined):
            return joined
        self.buf += memoryview(joined)[end:]
        return joined[:end]

    def next_startup(self) -> bytes | None:
        """The next untyped message's payload (without its length), or None if incomplete."""
        buf, pos = self.buf, self._pos
        if len(buf) - pos < 4:
            return None
        length = int.from_bytes(buf[pos : pos + 4], "big")
        if length < 8 or length > MAX_STARTUP_LENGTH:
            raise ProtocolViolation(f"invalid startup packet length {length}")
        if len(buf) - pos < length:
            return None
        self._pos = pos + length
        self._startup = False
        return bytes(buf[pos + 4 : pos + length])

    def next_byte(self) -> int | None:
        """One raw byte (the answer to SSLRequest / GSSENCRequest), or None if none yet."""
        if self._pos >= len(self.buf):
            return None
        self._pos += 1
        return self.buf[self._pos - 1]

    def next(self) -> tuple[int, bytes] | None:
        """The next message as ``(type, payload)``; type is 0 for an untyped startup message."""
        if self._startup:
            payload = self.next_startup()
            return None if payload is None else (0, payload)
        buf, pos = self.buf, self._pos
        if len(buf) - pos < 5:
            return None
        length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > self.max_length:
            raise ProtocolViolation(
                f"message of {length} bytes exceeds the limit of {self.max_length}")
        stop = pos + 1 + length
        if stop > len(buf):
            return None
        self._pos = stop
        return buf[pos], bytes(buf[pos + 5 : stop])

    def drain(self) -> tuple[bytes, list[tuple[int, int, int]]]:
        """All complete typed messages at once: ``(raw, index)``.

        ``raw`` holds the complete messages' bytes exactly as received (to forward with one
        write); ``index`` has ``(type, payload_start, payload_end)`` relative to ``raw``.
        """
        found, end = scan_messages(self.buf, self._pos, self.max_length)
        if not found:
            return b"", []
        base = self._pos
        raw = bytes(self.buf[base:end])
        self._pos = end
        if base:
            found = [(t, s - base, e - base) for t, s, e in found]
        return raw, found


#: The pure-Python reference, whatever ``WEIR_IMPL`` selects (for parity tests).
scan_messages_python = scan_messages

scan_backend_python = scan_backend

_fast = cython_ext.load("framing")
if _fast is not None:
    _fast.set_error_class(ProtocolViolation)
    scan_messages = _fast.scan_messages
    scan_backend = _fast.scan_backend
