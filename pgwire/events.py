"""Events and sentinels of the v3 connection state machines (sans-I/O).

Owns: the ``NEED_DATA`` and ``CONNECTION_CLOSED`` sentinels that ``next_event`` returns when
no message is available, the one-byte answers to SSLRequest / GSSENCRequest (they are not
framed messages), and the ``Phase`` enum of a connection's life.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Final


class NeedData:
    """``next_event`` needs more bytes (call ``receive_data``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


class ConnectionClosed:
    """The peer closed the connection (EOF), or the conversation ended (Terminate)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CONNECTION_CLOSED"


NEED_DATA: Final = NeedData()
CONNECTION_CLOSED: Final = ConnectionClosed()


@dataclass(frozen=True, slots=True)
class SSLResponse:
    """The server's one-byte answer to SSLRequest: 'S' (start TLS now) or 'N'."""

    ACCEPT: ClassVar[bytes] = b"S"
    accept: bool

    def encode(self) -> bytes:
        return b"S" if self.accept else b"N"


@dataclass(frozen=True, slots=True)
class GSSENCResponse:
    """The server's one-byte answer to GSSENCRequest: 'G' (start GSSAPI) or 'N'."""

    ACCEPT: ClassVar[bytes] = b"G"
    accept: bool

    def encode(self) -> bytes:
        return b"G" if self.accept else b"N"


NegotiationResponse = SSLResponse | GSSENCResponse


class Phase(enum.Enum):
    """The life of one connection — the one enum for both the sans-I/O connection roles
    and the proxy's relayed sessions (``proxy.relay``).

    STARTUP -> (SSLRequest|GSSENCRequest) NEGOTIATING -> (answer) STARTUP
    STARTUP -> (StartupMessage) AUTHENTICATING -> (AuthenticationOk) STARTING
    STARTING -> (ReadyForQuery) READY;  STARTUP -> (CancelRequest) CLOSED
    READY -> (Terminate, or a FATAL ErrorResponse) CLOSED
    AUTHENTICATING|STARTING -> (ErrorResponse) CLOSED
    In CLOSED no frontend message is accepted; backend messages still owed (a Terminate
    pipelined behind a query) are.

    A relayed session (``proxy.handshake``) goes STARTUP -> CONNECTING (opening the
    upstream connection, or a TLS handshake or a cancel request in progress) ->
    AUTHENTICATING (relaying the authentication exchange, up to the first ReadyForQuery)
    -> READY -> CLOSED.
    """

    __hash__ = object.__hash__  # members are singletons; Enum's name hash is slow

    STARTUP = "startup"
    NEGOTIATING = "negotiating"
    CONNECTING = "connecting"
    AUTHENTICATING = "authenticating"
    STARTING = "starting"
    READY = "ready"
    CLOSED = "closed"


class State(enum.Enum):
    """What a READY connection is doing, seen from the responses still owed (see Conversation)."""

    IDLE = "idle"
    SIMPLE_QUERY = "simple query"
    EXTENDED = "extended batch"
    SKIP_UNTIL_SYNC = "skip until Sync"
    FUNCTION_CALL = "function call"
    COPY_IN = "copy in"
    COPY_OUT = "copy out"
    COPY_BOTH = "copy both"
