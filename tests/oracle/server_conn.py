"""The server role of a v3 connection: weir facing an application (sans-I/O, h11's shape).

Owns: turning the application's bytes into frontend message events (``receive_data`` /
``next_event``, or ``next_raw`` for relaying without decoding), turning backend messages
into bytes (``send`` / ``send_relayed``), and keeping the shared ``Conversation`` in step
with both directions. It also records what the session told the client: the startup
message, ParameterStatus values and BackendKeyData.

Startup: the first message is untyped. After an SSLRequest/GSSENCRequest the machine
waits for ``send(SSLResponse(accept))``; accepting while unencrypted bytes are already
buffered is refused (PostgreSQL's "received unencrypted data after SSL request"). Then the
next message is untyped again (decrypted by the I/O layer). A 'p' message is decoded as the
kind the last authentication request asked for.

Invariants: bad input raises ``ProtocolViolation`` (08P01; 0A000 for an unsupported
protocol version); the caller answers it with ``errors.violation_response`` and closes.
``receive_data(b"")`` means EOF: buffered messages are still returned, then
``CONNECTION_CLOSED``.
"""

from __future__ import annotations

from collections.abc import Callable

from pgwire import frontend as fe
from pgwire.backend import BackendKeyData, BackendMessage, ParameterStatus
from pgwire.events import (
    CONNECTION_CLOSED,
    ConnectionClosed,
    GSSENCResponse,
    NeedData,
    NegotiationResponse,
    Phase,
    SSLResponse,
)
from pgwire.framing import DEFAULT_MAX_MESSAGE_LENGTH, Framer, ProtocolViolation
from tests.oracle.conversation import PasswordKind
from tests.oracle.endpoint import Endpoint

ServerEvent = fe.FrontendMessage | fe.StartupPhaseMessage | NeedData | ConnectionClosed
RawMessages = tuple[bytes, list[tuple[int, int, int]]]

_PASSWORD_DECODERS: dict[PasswordKind, Callable[[bytes], fe.FrontendMessage]] = {
    PasswordKind.PASSWORD: fe.PasswordMessage.decode,
    PasswordKind.SASL_INITIAL: fe.decode_sasl_initial_response,
    PasswordKind.SASL: fe.decode_sasl_response,
    PasswordKind.GSS: fe.decode_gss_response,
}
_P = ord("p")
_S = ord("S")
_K = ord("K")


class ServerConnection(Endpoint):
    """One application connection, seen from weir (the server side)."""

    __slots__ = ("startup_message",)

    def __init__(self, max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH) -> None:
        super().__init__(Framer(max_message_length, startup=True))
        self.startup_message: fe.StartupMessage | None = None

    def next_event(self) -> ServerEvent:
        """The next complete frontend message, or NEED_DATA / CONNECTION_CLOSED."""
        conv = self.conversation
        if conv.phase is Phase.CLOSED:
            return CONNECTION_CLOSED
        if conv.phase is Phase.NEGOTIATING:
            return self._nothing()
        if conv.phase is Phase.STARTUP:
            return self._next_startup()
        item = self._framer.next()
        if item is None:
            return self._nothing()
        mtype, payload = item
        kind = conv.password_kind
        if mtype == _P and kind is not None:
            msg = _PASSWORD_DECODERS[kind](payload)
        else:
            msg = fe.decode_frontend(mtype, payload)
        conv.frontend(mtype, payload)
        return msg

    def _next_startup(self) -> ServerEvent:
        payload = self._framer.next_startup()
        if payload is None:
            return self._nothing()
        msg = fe.decode_startup(payload)
        self.conversation.startup(type(msg).__name__)
        if isinstance(msg, fe.StartupMessage):
            self.startup_message = msg
        return msg

    def next_raw(self) -> RawMessages | NeedData | ConnectionClosed:
        """All complete typed messages as ``(raw, index)`` for forwarding, without decoding.

        Only once authenticated (Phase.STARTING or READY); the conversation still records
        each message. ``index`` holds ``(type, payload_start, payload_end)`` into ``raw``.
        """
        phase = self.conversation.phase
        if phase is Phase.CLOSED:
            return CONNECTION_CLOSED
        if phase not in (Phase.STARTING, Phase.READY):
            raise ProtocolViolation(f"next_raw in phase {phase.value}")
        raw, index = self._framer.drain()
        if not index:
            return self._nothing()
        record = self.conversation.frontend
        for mtype, start, end in index:
            record(mtype, raw[start:end])
        return raw, index

    def send(self, msg: BackendMessage | NegotiationResponse) -> bytes:
        """The bytes for ``msg``; the conversation records it (and refuses misplaced ones)."""
        if isinstance(msg, SSLResponse | GSSENCResponse):
            return self._answer_negotiation(msg)
        data = msg.encode()
        self._record(data[0], data[5:])
        return data

    def send_relayed(self, raw: bytes, index: list[tuple[int, int, int]]) -> bytes:
        """Record already-encoded backend messages (e.g. relayed from upstream); return raw."""
        for mtype, start, end in index:
            self._record(mtype, raw[start:end])
        return raw

    def _record(self, mtype: int, payload: bytes) -> None:
        self.conversation.backend(mtype, payload)
        if mtype == _S:
            status = ParameterStatus.decode(payload)
            self.parameters[status.name] = status.value
        elif mtype == _K:
            self.backend_key = BackendKeyData.decode(payload)

    def _answer_negotiation(self, msg: NegotiationResponse) -> bytes:
        if msg.accept and self._framer.buffered:
            what = "SSL" if isinstance(msg, SSLResponse) else "GSSAPI encryption"
            raise ProtocolViolation(f"received unencrypted data after {what} request")
        self.conversation.startup("answer")
        self._framer.expect_startup()
        return msg.encode()
