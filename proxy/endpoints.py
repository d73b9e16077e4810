"""The asyncio protocols of a session's two sockets: each hands everything to its session.

Owns: :class:`ClientEndpoint` (the application's socket; it makes the session when the
connection is made) and :class:`UpstreamEndpoint` (the upstream server's socket), with the
small interfaces they need of the session (:class:`ClientSide`, :class:`UpstreamSide`; the
relay's ``Session`` is both). Both set ``data_received`` to the session's own entry (one call
less per read; see ``proxy.relay.relay_entries``). Backpressure: a full send buffer on one
side pauses reading on the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast


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
