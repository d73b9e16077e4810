"""The asyncio protocols of a session's two sockets: each hands everything to its session.

Owns: :class:`ClientEndpoint` (the application's socket; it makes the session when the
connection is made) and :class:`UpstreamEndpoint` (the upstream server's socket), with the
small interfaces they need of the session (:class:`ClientSide`, :class:`UpstreamSide`; the
relay's ``Session`` is both). Both set ``data_received`` to the session's own entry (one call
less per read; see ``proxy.relay.relay_entries``). Backpressure: a full send buffer on one
side pauses reading on the other.

Read-ahead (``bound_upstream``, ``bound_listener``): a direct client writing faster than
PostgreSQL reads is held back once its own send buffer and the server's receive buffer are
full. Through weir its bytes would also fill weir's receive buffer on the client's socket
(autotuned by the kernel up to ``tcp_rmem``'s maximum, megabytes, while weir reads fast),
weir's user-space queue towards the upstream and the upstream socket's autotuned send buffer
(up to ``tcp_wmem``'s maximum): megabytes more, so that a pipelining client (asyncpg's
``executemany``) writes all its rows before a server error early in the stream reaches it.
So the upstream socket takes only a few unsent bytes (``TCP_NOTSENT_LOWAT``), the upstream
transport's high-water mark, past which reading the client pauses, is at most
``UPSTREAM_QUEUE_BYTES``, and the client sockets' receive buffer is fixed
(``--client-receive-bytes``, 32 KiB by default) with segments of at most a quarter of it:
a receive window smaller than a segment (loopback's are 64 KiB) stalls the sender — the
receiver's silly-window avoidance advertises a zero window until a whole segment is free,
and the sender waits for its persist timer (bulk writes fell to 54 rows of 2 KB a second) —
so the MSS weir announces is cut to fit four in the window.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Protocol, cast

#: unsent bytes the upstream socket holds before a write stops being taken (TCP_NOTSENT_LOWAT)
UPSTREAM_UNSENT_BYTES = 4 * 1024
#: the upstream transport's high-water mark at most: past it, reading the client pauses
UPSTREAM_QUEUE_BYTES = 16 * 1024


class ClientSide(Protocol):
    """What the client's socket needs of its session."""

    upstream: asyncio.Transport | None

    def client_received(self, data: bytes) -> None: ...

    def client_data(self, data: bytes) -> None: ...

    def client_eof(self) -> bool: ...

    def client_lost(self) -> None: ...

    def pause_client(self, why: str) -> None: ...

    def resume_client(self, why: str) -> None: ...


class UpstreamSide(Protocol):
    """What the upstream's socket needs of its session."""

    def upstream_received(self, data: bytes) -> None: ...

    def upstream_data(self, data: bytes) -> None: ...

    def upstream_lost(self) -> None: ...

    def pause_client(self, why: str) -> None: ...

    def resume_client(self, why: str) -> None: ...


class ClientEndpoint(asyncio.Protocol):
    """The socket from the application; hands everything to its Session."""

    def __init__(self, new_session: Callable[[asyncio.Transport, ClientEndpoint], ClientSide]
                 ) -> None:
        self.new_session = new_session
        self.session: ClientSide | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they have its interface.
        self.session = self.new_session(cast(asyncio.Transport, transport), self)
        # one call less per read: the session takes the data itself (the transport keeps
        # the bound ``data_received`` it finds when the protocol is set, so set it again)
        self.data_received = self.session.client_received  # type: ignore[method-assign]
        cast(asyncio.Transport, transport).set_protocol(self)

    def data_received(self, data: bytes) -> None:
        if self.session is not None:
            self.session.client_data(data)

    def eof_received(self) -> bool:
        return self.session.client_eof() if self.session is not None else False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.session is not None:
            self.session.client_lost()

    def pause_writing(self) -> None:
        # the client is not reading: stop reading what would be sent to it, from the
        # upstream and from the client itself (weir's own answers)
        if self.session is not None:
            if self.session.upstream is not None:
                self.session.upstream.pause_reading()
            self.session.pause_client("client send buffer full")

    def resume_writing(self) -> None:
        if self.session is not None:
            if self.session.upstream is not None:
                self.session.upstream.resume_reading()
            self.session.resume_client("client send buffer full")


class UpstreamEndpoint(asyncio.Protocol):
    """The socket to the upstream server for one session."""

    def __init__(self, session: UpstreamSide) -> None:
        self.session = session
        # one call less per read (see ClientEndpoint.connection_made)
        self.data_received = session.upstream_received  # type: ignore[method-assign]

    def data_received(self, data: bytes) -> None:
        self.session.upstream_data(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.session.upstream_lost()

    def pause_writing(self) -> None:
        self.session.pause_client("upstream send buffer full")

    def resume_writing(self) -> None:
        self.session.resume_client("upstream send buffer full")


#: the largest TCP_MAXSEG Linux takes (a larger one fails the listening socket)
LARGEST_MAXSEG = 32767


def bound_listener(sock: socket.socket, receive_bytes: int) -> None:
    """Fix the receive buffer of the client sockets ``sock`` accepts at ``receive_bytes``
    (``SO_RCVBUF``; 0: left to the kernel's autotuning) and their segments at a quarter of it
    (``TCP_MAXSEG``: the MSS weir announces; at most :data:`LARGEST_MAXSEG`). Set on the
    listening socket, so that each connection's window scale is chosen for it. TCP only."""
    if receive_bytes and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_bytes)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG,
                        min(receive_bytes // 4, LARGEST_MAXSEG))


def bound_upstream(transport: asyncio.Transport, write_buffer_bytes: int) -> None:
    """Hold the upstream socket to a few unsent bytes and its transport's queue to at most
    ``UPSTREAM_QUEUE_BYTES`` (or ``write_buffer_bytes``, when smaller)."""
    transport.set_write_buffer_limits(high=min(write_buffer_bytes, UPSTREAM_QUEUE_BYTES))
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, UPSTREAM_UNSENT_BYTES)
