"""The small interfaces the proxy's helpers need of a session and of the cache service.

Owns: :class:`RoutingState` (what recognising plain Queries and the forwarding memos use of
the service, ``proxy.forwarding``), :class:`CachedReads` (what the cached read of a local
portal uses of the service, ``proxy.portal_reads``), :class:`ExtendedService` and
:class:`ExtendedSession` (what ``proxy.extended.Extended`` uses of the service and of its
session), :class:`HandshakeSession` and :class:`HandshakeServer` (what
``proxy.handshake.Handshake`` uses of its session and of the server). ``CacheService``,
``Server`` and ``relay.Session`` meet them structurally (mypy checks it);
the helpers import these instead of the classes, so that they see only what they use and
import no module above them.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from pgwire import frontend as fe
from pgwire.framing import Framer
from proxy.fillstamps import FillStamps
from proxy.gates import Gates
from proxy.hitpath import Hit, HitMemos
from proxy.reads import ReadPath
from proxy.router import Route, SessionContext
from proxy.routing import Routing
from proxy.session import SessionState
from proxy.settings import Settings, UpstreamAddress

#: (cache, key, engine answer) for each key read (the hit path's memo keeps them)
Reads = list[tuple[str, tuple[Any, ...], object]]


class RoutingState(Protocol):
    """The routing state (``proxy.routing.Routing``), as ``proxy.forwarding`` reads it."""

    @property
    def registry(self) -> Any: ...

    @property
    def cached_names(self) -> tuple[str, ...]: ...

    @property
    def settings(self) -> Settings: ...

    def plain_text(self, text: str) -> bool: ...


class CachedReads(Protocol):
    """The service as local portals use it (``proxy.portal_reads``): its cached reads
    (``proxy.reads.ReadPath``) and the routing of a statement whose cache was dropped."""

    @property
    def reads(self) -> ReadPath: ...

    @property
    def routing(self) -> Routing: ...

    @property
    def gates(self) -> Gates: ...  # (the shape checks of held statements)

    @property
    def fillstamps(self) -> FillStamps: ...  # (what a miss leaves for its fill's install)

    def is_current(self, entry: Any) -> bool: ...


class ExtendedSession(Protocol):
    """What ``Extended`` needs of its session (``proxy.relay.Session``)."""

    @property
    def client(self) -> asyncio.Transport: ...

    @property
    def ctx(self) -> SessionContext | None: ...

    @property
    def state(self) -> SessionState: ...

    def forward(self, msg: object, raw: bytes) -> None: ...

    def forward_malformed(self, mtype: int, raw: bytes) -> None: ...

    def inject(self, msg: fe.Parse | fe.Bind | fe.Close, replace: bytes = b"",
               skipped: Callable[[], object] | None = None) -> None: ...

    def inject_flush(self) -> None: ...

    lane_miss_run: int  # (reset by a hit: ``proxy.aftermiss.mostly_misses``)
    lane_recent: int  # (a 0 shifted in by a hit: ``proxy.lane_switch.switch_args``)


class Stamper(Protocol):
    """What the general path uses of the hit lanes (``proxy.lanes.HitLanes``)."""

    def stamp(self, memo: dict[bytes, Hit], rest: bytes, hit: Hit) -> bool: ...


class ExtendedService(CachedReads, Protocol):
    """What ``Extended`` needs of the cache service (``proxy.service.CacheService``)."""

    @property
    def lanes(self) -> Stamper | None: ...

    @property
    def enabled(self) -> bool: ...

    @property
    def registry(self) -> Any: ...

    @property
    def hits(self) -> HitMemos: ...

    async def admin(self, route: Route, ctx: SessionContext) -> bytes: ...


class HandshakeServer(Protocol):
    """What the handshake needs of the server (``proxy.server.Server``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def tls(self) -> ssl.SSLContext | None: ...

    @property
    def upstream(self) -> UpstreamAddress: ...

    @property
    def sessions(self) -> set[Any]: ...  # the live sessions (``limits.admit``, the relay)

    @property
    def service(self) -> Any: ...  # ``proxy.service.CacheService`` (its ``gates``)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    async def cancel(self, process_id: int, secret_key: int) -> None: ...

    def register_key(self, session: Any, upstream_pid: int) -> tuple[int, int]: ...


class HandshakeSession(Protocol):
    """What the handshake needs of its session (``proxy.relay.Session``): the transports,
    the framers, the session core and the hooks it calls."""

    client: asyncio.Transport
    upstream: asyncio.Transport | None
    ctx: SessionContext | None
    key: tuple[int, int] | None
    terminated: bool
    fatal_relayed: bool

    @property
    def server(self) -> HandshakeServer: ...

    @property
    def endpoint(self) -> asyncio.Protocol: ...

    @property
    def state(self) -> SessionState: ...

    @property
    def cframer(self) -> Framer: ...

    @property
    def uframer(self) -> Framer: ...

    def pause_client(self, why: str) -> None: ...

    def resume_client(self, why: str) -> None: ...

    def upstream_protocol(self) -> asyncio.Protocol: ...

    def relay_from_upstream(self, data: bytes) -> None:
        """Relay upstream messages (``Phase.READY``): what is buffered, then ``data``."""

    def fatal(self, error: bytes) -> None: ...

    def close(self) -> None: ...
