"""The first phases of a relayed session: startup and the relayed authentication.

Owns: answering SSLRequest/GSSENCRequest (TLS when configured), forwarding CancelRequest,
passing the StartupMessage on with the client's own parameters, opening the upstream
connection, and relaying the authentication exchange — the upstream decides; SASL
mechanisms ending in ``-PLUS`` are withheld because channel binding cannot cross a proxy;
the upstream's BackendKeyData secret is replaced by weir's own (the pid stays the
upstream backend's) — until the first ReadyForQuery,
when the session enters ``Phase.READY`` (``proxy.relay``) and relays everything after it.
Also the routing context built from the startup parameters (:func:`context`).

A ``proxy.relay.Session`` holds one :class:`Handshake`; the handshake sees the session
through :class:`proxy.roles.HandshakeSession` (its transports, framers, session core and the
hooks it calls), and keeps what only it needs: the startup message, the upstream's own
BackendKeyData, the upstream stream pair.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from engine import effective_search_path
from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.authmsg import AuthenticationSASL, decode_authentication
from pgwire.events import Phase
from pgwire.framing import ProtocolViolation
from proxy import identity, limits
from proxy.endpoints import bound_upstream
from proxy.metrics import own_error, own_violation
from proxy.roles import HandshakeSession
from proxy.router import SessionContext
from proxy.upstream import UpstreamUnavailable, open_stream

log = logging.getLogger("weir.relay")

_T_AUTH = ord("R")
_T_KEY = ord("K")
_T_READY = ord("Z")
_T_ERROR = ord("E")
_T_TERMINATE = ord("X")


class Handshake:
    """Startup and authentication of one session (see the module docstring)."""

    __slots__ = ("login", "session", "startup", "streams", "upstream_key")

    def __init__(self, session: HandshakeSession) -> None:
        self.session = session
        #: the login timeout (stopped at the first ReadyForQuery or when the session ends)
        self.login = limits.LoginClock(session.server.settings.login_timeout, self._expired)
        self.startup: fe.StartupMessage | None = None
        #: the upstream backend's own (pid, secret): what weir's cancel forwarding sends
        self.upstream_key: tuple[int, int] | None = None
        #: StreamWriter closes its transport when collected: the pair is kept for the
        #: session's life
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def _expired(self) -> None:
        s = self.session
        if s.state.phase is not Phase.READY and s.state.phase is not Phase.CLOSED:
            s.fatal(limits.login_timeout_error())

    def received(self) -> None:
        """The client sent data (now in the session's framer) before READY."""
        phase = self.session.state.phase
        if phase is Phase.STARTUP:
            self._startup_messages()
        elif phase is Phase.AUTHENTICATING:
            self._forward_auth_from_client()

    def upstream_received(self) -> None:
        """The upstream sent data (now in the session's framer) before READY."""
        if self.session.state.phase is Phase.AUTHENTICATING:
            self._relay_auth_from_upstream()

    def _startup_messages(self) -> None:
        s = self.session
        while s.state.phase is Phase.STARTUP:
            payload = s.cframer.next_startup()
            if payload is None:
                return
            msg = fe.decode_startup(payload)
            if isinstance(msg, fe.SSLRequest):
                self._answer_ssl_request()
            elif isinstance(msg, fe.GSSENCRequest):
                s.client.write(b"N")
                s.cframer.expect_startup()
            elif isinstance(msg, fe.CancelRequest):
                s.state.phase = Phase.CONNECTING  # nothing more is read from this connection
                s.server.spawn(self._cancel(msg))
                return
            else:
                self._begin(msg)

    async def _cancel(self, msg: fe.CancelRequest) -> None:
        s = self.session
        try:
            await s.server.cancel(msg.process_id, msg.secret_key)
        finally:
            s.close()

    def _answer_ssl_request(self) -> None:
        s = self.session
        if s.cframer.buffered:
            raise ProtocolViolation("unencrypted data after SSL request")
        s.cframer.expect_startup()
        if s.server.tls is None:
            s.client.write(b"N")
            return
        s.client.write(b"S")
        s.state.phase = Phase.CONNECTING  # nothing may be processed until the handshake is done
        s.server.spawn(self._start_tls())

    async def _start_tls(self) -> None:
        s = self.session
        assert s.server.tls is not None
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                s.client, s.endpoint, s.server.tls, server_side=True
            )
        except (OSError, ConnectionError) as exc:
            log.info("client TLS handshake failed: %s", exc)
            s.close()
            return
        if transport is None or s.state.phase is Phase.CLOSED:
            return
        s.client = transport
        s.state.phase = Phase.STARTUP
        self._startup_messages()

    def _begin(self, msg: fe.StartupMessage) -> None:
        s = self.session
        if msg.protocol_version >> 16 != 3:
            raise ProtocolViolation(
                f"unsupported frontend protocol {msg.protocol_version >> 16}."
                f"{msg.protocol_version & 0xFFFF}: server supports 3.0 to 3.0",
                "0A000",
            )
        if "user" not in msg.parameters:
            raise ProtocolViolation("no PostgreSQL user name specified in startup packet", "28000")
        limits.admit(len(s.server.sessions), s.server.settings.max_client_connections)
        self.startup = msg
        s.ctx = context(msg.parameters)
        s.ctx.defaults_version = s.server.service.gates.defaults_version
        s.ctx.before_caching = s.server.service.registry is None
        s.ctx.parameters = s.state.parameters
        s.state.phase = Phase.CONNECTING
        s.pause_client("connecting")
        s.server.spawn(self._connect(msg))

    async def _connect(self, msg: fe.StartupMessage) -> None:
        s = self.session
        try:
            reader, writer = await open_stream(
                s.server.upstream, s.server.settings.connect_timeout
            )
        except UpstreamUnavailable as exc:
            log.warning("%s", exc)
            s.fatal(own_error("08006", str(exc), severity="FATAL"))
            return
        transport = cast(asyncio.Transport, writer.transport)
        if s.state.phase is Phase.CLOSED:
            transport.close()
            return
        # StreamWriter closes its transport when collected: keep the pair for the session's life.
        self.streams = (reader, writer)
        transport.set_protocol(s.upstream_protocol())
        bound_upstream(transport, s.server.settings.write_buffer_bytes)
        s.upstream = transport
        s.state.phase = Phase.AUTHENTICATING
        transport.write(msg.encode())
        s.resume_client("connecting")
        try:  # what the client sent while weir connected (found by tests/.../test_fuzz_wire)
            self._forward_auth_from_client()
        except ProtocolViolation as exc:
            log.warning("protocol violation from client: %s", exc.message)
            s.fatal(own_violation(exc))

    def _forward_auth_from_client(self) -> None:
        s = self.session
        raw, index = s.cframer.drain()
        if raw and s.upstream is not None:
            s.upstream.write(raw)
            if any(t == _T_TERMINATE for t, _, _ in index):
                s.terminated = True

    def _relay_auth_from_upstream(self) -> None:
        """Relay messages one by one until ReadyForQuery, rewriting K and SASL offers."""
        s = self.session
        out: list[bytes] = []
        while s.state.phase is Phase.AUTHENTICATING:
            item = s.uframer.next()
            if item is None:
                break
            mtype, payload = item
            out.append(self._rewrite_auth(mtype, payload))
            if mtype == _T_READY:
                s.state.phase = Phase.READY
                self.login.stop()  # logged in: the login timeout ends, the message limit rises
                s.cframer.limit(s.server.settings.max_message_bytes)
                s.state.backend(be.decode_backend(mtype, payload))
            elif mtype == ord("S"):
                s.state.backend(be.decode_backend(mtype, payload))
            elif mtype == _T_ERROR:
                s.fatal_relayed = True
        if out:
            s.client.write(b"".join(out))
        if s.state.phase is Phase.READY:
            s.relay_from_upstream(b"")  # what came after ReadyForQuery

    def _rewrite_auth(self, mtype: int, payload: bytes) -> bytes:
        s = self.session
        if mtype == _T_KEY:
            key = be.decode_backend(mtype, payload)
            assert isinstance(key, be.BackendKeyData)
            self.upstream_key = (key.process_id, key.secret_key)
            own = s.key = s.server.register_key(s,
                                                                      key.process_id)
            return be.BackendKeyData(*own).encode()
        if mtype == _T_AUTH:
            auth = decode_authentication(payload)
            if isinstance(auth, AuthenticationSASL):
                offered = tuple(m for m in auth.mechanisms if not m.endswith("-PLUS"))
                return AuthenticationSASL(offered).encode()
        return bytes([mtype]) + (len(payload) + 4).to_bytes(4, "big") + payload


def context(parameters: dict[str, str]) -> SessionContext:
    """Routing context from the client's startup parameters."""
    user = parameters.get("user", "")
    ctx = SessionContext(database=parameters.get("database") or user, user=user,
                         search_path=effective_search_path('"$user", public', user))
    identity.taint_for_life(ctx, identity.startup_taint(parameters))
    for name in ("extra_float_digits", "bytea_output"):
        if name in parameters:
            ctx.settings[name] = parameters[name]
    return ctx
