"""The first phases of a relayed session: startup and the relayed authentication.

Owns: answering SSLRequest/GSSENCRequest (TLS when configured), forwarding CancelRequest,
passing the StartupMessage on with the client's own parameters, opening the upstream
connection, and relaying the authentication exchange — the upstream decides; SASL
mechanisms ending in ``-PLUS`` are withheld because channel binding cannot cross a proxy;
the upstream's BackendKeyData secret is replaced by weir's own (the pid stays the
upstream backend's) — until the first ReadyForQuery,
when the session enters ``Phase.READY`` (``proxy.relay``) and relays everything after it.
Also the routing context built from the startup parameters (:func:`context`).

:class:`Handshake` is the base of ``proxy.relay.Session``, which provides the attributes
declared here and the hooks at the end of the class.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING, cast

from engine import effective_search_path
from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.authmsg import AuthenticationSASL, decode_authentication
from pgwire.framing import Framer, ProtocolViolation
from proxy import identity, limits
from proxy.metrics import own_error
from proxy.router import SessionContext
from proxy.session import SessionState
from proxy.upstream import UpstreamUnavailable, open_stream

if TYPE_CHECKING:
    from proxy.relay import Session
    from proxy.server import Server

log = logging.getLogger("weir.relay")

_T_AUTH = ord("R")
_T_KEY = ord("K")
_T_READY = ord("Z")
_T_ERROR = ord("E")
_T_TERMINATE = ord("X")


class Phase(enum.Enum):
    STARTUP = "startup"  # waiting for the client's first message
    CONNECTING = "connecting"  # opening the upstream connection
    AUTH = "auth"  # relaying the authentication exchange
    READY = "ready"  # relaying queries
    CLOSED = "closed"


class Handshake:
    """Startup and authentication of a session (see the module docstring)."""

    server: Server
    client: asyncio.Transport
    endpoint: asyncio.Protocol
    upstream: asyncio.Transport | None
    phase: Phase
    state: SessionState
    key: tuple[int, int] | None
    upstream_key: tuple[int, int] | None
    startup: fe.StartupMessage | None
    ctx: SessionContext | None
    _cframer: Framer
    _uframer: Framer
    _terminated: bool
    _fatal_relayed: bool
    _streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None
    _paused: set[str]

    def pause_client(self, why: str) -> None:
        """Stop reading from the client for ``why`` (connecting upstream, the upstream's or
        the client's own send buffer full, weir answering held messages); reading resumes
        once every reason is gone."""
        if not self._paused:
            self.client.pause_reading()
        self._paused.add(why)

    def resume_client(self, why: str) -> None:
        if why in self._paused:
            self._paused.discard(why)
            if not self._paused and self.phase is not Phase.CLOSED:
                self.client.resume_reading()

    def _startup_messages(self) -> None:
        while self.phase is Phase.STARTUP:
            payload = self._cframer.next_startup()
            if payload is None:
                return
            msg = fe.decode_startup(payload)
            if isinstance(msg, fe.SSLRequest):
                self._answer_ssl_request()
            elif isinstance(msg, fe.GSSENCRequest):
                self.client.write(b"N")
                self._cframer.expect_startup()
            elif isinstance(msg, fe.CancelRequest):
                self.phase = Phase.CONNECTING  # nothing more is read from this connection
                self.server.spawn(self._cancel(msg))
                return
            else:
                self._begin(msg)

    async def _cancel(self, msg: fe.CancelRequest) -> None:
        try:
            await self.server.cancel(msg.process_id, msg.secret_key)
        finally:
            self._close()

    def _answer_ssl_request(self) -> None:
        if self._cframer.buffered:
            raise ProtocolViolation("unencrypted data after SSL request")
        self._cframer.expect_startup()
        if self.server.tls is None:
            self.client.write(b"N")
            return
        self.client.write(b"S")
        self.phase = Phase.CONNECTING  # nothing may be processed until the handshake is done
        self.server.spawn(self._start_tls())

    async def _start_tls(self) -> None:
        assert self.server.tls is not None
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                self.client, self.endpoint, self.server.tls, server_side=True
            )
        except (OSError, ConnectionError) as exc:
            log.info("client TLS handshake failed: %s", exc)
            self._close()
            return
        if transport is None or self.phase is Phase.CLOSED:
            return
        self.client = transport
        self.phase = Phase.STARTUP
        self._startup_messages()

    def _begin(self, msg: fe.StartupMessage) -> None:
        if msg.protocol_version >> 16 != 3:
            raise ProtocolViolation(
                f"unsupported frontend protocol {msg.protocol_version >> 16}."
                f"{msg.protocol_version & 0xFFFF}: server supports 3.0 to 3.0",
                "0A000",
            )
        if "user" not in msg.parameters:
            raise ProtocolViolation("no PostgreSQL user name specified in startup packet", "28000")
        limits.admit(len(self.server.sessions), self.server.settings.max_client_connections)
        self.startup = msg
        self.ctx = context(msg.parameters)
        self.ctx.parameters = self.state.parameters
        self.phase = Phase.CONNECTING
        self.pause_client("connecting")
        self.server.spawn(self._connect(msg))

    async def _connect(self, msg: fe.StartupMessage) -> None:
        try:
            reader, writer = await open_stream(
                self.server.upstream, self.server.settings.connect_timeout
            )
        except UpstreamUnavailable as exc:
            log.warning("%s", exc)
            self._fatal(own_error("08006", str(exc), severity="FATAL"))
            return
        transport = cast(asyncio.Transport, writer.transport)
        if self.phase is Phase.CLOSED:
            transport.close()
            return
        # StreamWriter closes its transport when collected: keep the pair for the session's life.
        self._streams = (reader, writer)
        transport.set_protocol(self._upstream_protocol())
        transport.set_write_buffer_limits(high=self.server.settings.write_buffer_bytes)
        self.upstream = transport
        self.phase = Phase.AUTH
        transport.write(msg.encode())
        self.resume_client("connecting")
        try:  # what the client sent while weir connected (found by tests/.../test_fuzz_wire)
            self._forward_auth_from_client()
        except ProtocolViolation as exc:
            self.client_violation(exc)

    def _forward_auth_from_client(self) -> None:
        raw, index = self._cframer.drain()
        if raw and self.upstream is not None:
            self.upstream.write(raw)
            if any(t == _T_TERMINATE for t, _, _ in index):
                self._terminated = True

    def _relay_auth_from_upstream(self) -> None:
        """Relay messages one by one until ReadyForQuery, rewriting K and SASL offers."""
        out: list[bytes] = []
        while self.phase is Phase.AUTH:
            item = self._uframer.next()
            if item is None:
                break
            mtype, payload = item
            out.append(self._rewrite_auth(mtype, payload))
            if mtype == _T_READY:
                self.phase = Phase.READY
                self._authenticated()
                self.state.backend(be.decode_backend(mtype, payload))
            elif mtype == ord("S"):
                self.state.backend(be.decode_backend(mtype, payload))
            elif mtype == _T_ERROR:
                self._fatal_relayed = True
        if out:
            self.client.write(b"".join(out))
        if self.phase is Phase.READY:
            self._relay_from_upstream(b"")  # what came after ReadyForQuery

    def _rewrite_auth(self, mtype: int, payload: bytes) -> bytes:
        if mtype == _T_KEY:
            key = be.decode_backend(mtype, payload)
            assert isinstance(key, be.BackendKeyData)
            self.upstream_key = (key.process_id, key.secret_key)
            self.key = self.server.register_key(cast("Session", self), key.process_id)
            return be.BackendKeyData(*self.key).encode()
        if mtype == _T_AUTH:
            auth = decode_authentication(payload)
            if isinstance(auth, AuthenticationSASL):
                offered = tuple(m for m in auth.mechanisms if not m.endswith("-PLUS"))
                return AuthenticationSASL(offered).encode()
        return bytes([mtype]) + (len(payload) + 4).to_bytes(4, "big") + payload

    # -- provided by the session ------------------------------------------------------------

    def _upstream_protocol(self) -> asyncio.Protocol:
        """The protocol object for the upstream connection."""
        raise NotImplementedError

    def _relay_from_upstream(self, data: bytes) -> None:
        """Relay upstream messages (``Phase.READY``): what is buffered, then ``data``."""
        raise NotImplementedError

    def _fatal(self, error: bytes) -> None:
        raise NotImplementedError

    def client_violation(self, exc: ProtocolViolation) -> None:
        raise NotImplementedError

    def _authenticated(self) -> None:
        """The first ReadyForQuery: the login timeout ends, the message limit is raised."""
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


def context(parameters: dict[str, str]) -> SessionContext:
    """Routing context from the client's startup parameters."""
    user = parameters.get("user", "")
    ctx = SessionContext(database=parameters.get("database") or user, user=user,
                         search_path=effective_search_path('"$user", public', user))
    identity.taint(ctx, identity.startup_taint(parameters))
    for name in ("extra_float_digits", "bytea_output"):
        if name in parameters:
            ctx.settings[name] = parameters[name]
    return ctx
