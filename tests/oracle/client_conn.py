"""The client role of a v3 connection: weir facing the upstream PostgreSQL (sans-I/O).

Owns: turning frontend messages into bytes (``send``), the upstream's bytes into backend
message events (``receive_data`` / ``next_event``, or ``next_raw`` for relaying without
decoding), and keeping the shared ``Conversation`` in step. It records what the upstream
said during startup: ParameterStatus values, BackendKeyData and the last
NegotiateProtocolVersion.

Startup: ``send(SSLRequest())`` makes the next event the one-byte ``SSLResponse`` (or
``GSSENCResponse``); if the server accepted, any byte already buffered behind the answer
is refused (CVE-2021-23222: it was not protected by TLS). Then the I/O layer does the TLS
handshake and continues with ``send(StartupMessage(...))``.

Invariants: bad upstream input raises ``ProtocolViolation`` (08P01). ``receive_data(b"")``
means EOF: buffered messages are still returned, then ``CONNECTION_CLOSED``.
"""

from __future__ import annotations

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.events import (
    ConnectionClosed,
    GSSENCResponse,
    NeedData,
    NegotiationResponse,
    Phase,
    SSLResponse,
)
from pgwire.framing import UPSTREAM_MAX_MESSAGE_LENGTH, Framer, ProtocolViolation
from tests.oracle.endpoint import Endpoint

ClientEvent = be.BackendMessage | NegotiationResponse | NeedData | ConnectionClosed
RawMessages = tuple[bytes, list[tuple[int, int, int]]]

#: (request sent, answer byte) -> the event.
_ANSWERS: dict[tuple[str, int], NegotiationResponse] = {
    ("SSLRequest", ord("S")): SSLResponse(True),
    ("SSLRequest", ord("N")): SSLResponse(False),
    ("GSSENCRequest", ord("G")): GSSENCResponse(True),
    ("GSSENCRequest", ord("N")): GSSENCResponse(False),
}
_S = ord("S")
_K = ord("K")


class ClientConnection(Endpoint):
    """One upstream connection, seen from weir (the client side)."""

    __slots__ = ("_negotiating",)

    def __init__(self, max_message_length: int = UPSTREAM_MAX_MESSAGE_LENGTH) -> None:
        super().__init__(Framer(max_message_length))
        self._negotiating = ""

    def send(self, msg: fe.FrontendMessage | fe.StartupPhaseMessage) -> bytes:
        """The bytes for ``msg``; the conversation records it (and refuses misplaced ones)."""
        data = msg.encode()
        if isinstance(msg, fe.StartupPhaseMessage):
            name = type(msg).__name__
            self.conversation.startup(name)
            self._negotiating = name
        else:
            self.conversation.frontend(data[0], data[5:])
        return data

    def send_relayed(self, raw: bytes, index: list[tuple[int, int, int]]) -> bytes:
        """Record already-encoded typed frontend messages (e.g. from the app); return raw."""
        record = self.conversation.frontend
        for mtype, start, end in index:
            record(mtype, raw[start:end])
        return raw

    def next_event(self) -> ClientEvent:
        """The next complete backend message, or NEED_DATA / CONNECTION_CLOSED."""
        phase = self.conversation.phase
        if phase is Phase.NEGOTIATING:
            return self._next_answer()
        if phase is Phase.STARTUP:
            if self._framer.buffered:
                raise ProtocolViolation(f"unexpected data from the server in phase {phase.value}")
            return self._nothing()
        item = self._framer.next()
        if item is None:
            return self._nothing()
        mtype, payload = item
        msg = be.decode_backend(mtype, payload)
        self._record(mtype, payload)
        return msg

    def next_raw(self) -> RawMessages | NeedData | ConnectionClosed:
        """All complete backend messages as ``(raw, index)`` for forwarding, without decoding.

        Only after the startup packet went out; the conversation still records each message.
        """
        if self.conversation.phase in (Phase.STARTUP, Phase.NEGOTIATING):
            raise ProtocolViolation(f"next_raw in phase {self.conversation.phase.value}")
        raw, index = self._framer.drain()
        if not index:
            return self._nothing()
        for mtype, start, end in index:
            self._record(mtype, raw[start:end])
        return raw, index

    def _record(self, mtype: int, payload: bytes) -> None:
        self.conversation.backend(mtype, payload)
        if mtype == _S:
            status = be.ParameterStatus.decode(payload)
            self.parameters[status.name] = status.value
        elif mtype == _K:
            self.backend_key = be.BackendKeyData.decode(payload)

    def _next_answer(self) -> ClientEvent:
        byte = self._framer.next_byte()
        if byte is None:
            return self._nothing()
        answer = _ANSWERS.get((self._negotiating, byte))
        if answer is None:
            raise ProtocolViolation(f"invalid answer {bytes((byte,))!r} to {self._negotiating}")
        if answer.accept and self._framer.buffered:
            raise ProtocolViolation("received unencrypted data after the encryption answer")
        self.conversation.startup("answer")
        return answer
