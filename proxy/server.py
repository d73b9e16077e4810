"""The listening server: accepts client connections, owns the sessions and the cancel keys.

Owns: the listening socket, the set of live sessions, weir's own BackendKeyData for each
session and its mapping to the upstream's (so a CancelRequest sent to weir cancels the right
upstream backend), background tasks spawned by sessions (kept referenced until done), the
drain (no new clients; sessions end once outside a transaction) and orderly shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from collections.abc import Coroutine
from functools import partial
from typing import Any

from pgwire.events import Phase
from proxy import limits
from proxy.endpoints import ClientEndpoint, bound_listener
from proxy.metrics import own_error
from proxy.relay import Session
from proxy.service import CacheService
from proxy.settings import Settings, UpstreamAddress
from proxy.tls import server_context
from proxy.upstream import send_cancel

log = logging.getLogger("weir.server")


class Server:
    """weir's front door. ``await start()``, then ``await serve_forever()`` or ``close()``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.upstream: UpstreamAddress = settings.upstream_address
        self.tls: ssl.SSLContext | None = (
            server_context(settings.tls_cert, settings.tls_key)
            if settings.tls_cert and settings.tls_key
            else None
        )
        self.service = CacheService(settings)
        self.sessions: set[Session] = set()
        self._keys: dict[int, tuple[int, Session]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.draining = False  # (``/readyz`` says not ready)

    @property
    def port(self) -> int:
        """The bound port (useful when listening on port 0)."""
        assert self._server is not None and self._server.sockets
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def accepting(self) -> bool:
        """Whether new clients are accepted (started, not draining)."""
        return self._server is not None and self._server.is_serving() and not self.draining

    async def start(self) -> None:
        host, port = self.settings.listen_address
        loop = asyncio.get_running_loop()
        soft, hard = limits.raise_fd_limit()
        limits.return_large_buffers()
        log.info("open files limit %d (hard limit %d), at most %d clients", soft, hard,
                 self.settings.max_client_connections)
        if 2 * self.settings.max_client_connections + 64 > soft:
            log.warning("--max-client-connections %d needs about %d open files, more than "
                        "the limit of %d", self.settings.max_client_connections,
                        2 * self.settings.max_client_connections + 64, soft)
        self.service.start_lanes()
        await self.service.start_if_restoring()
        self._server = await loop.create_server(
            lambda: ClientEndpoint(partial(Session, self)), host, port, reuse_address=True,
            backlog=1024, start_serving=False,
        )
        for sock in self._server.sockets:  # before any client connects (its window scale)
            bound_listener(sock, self.settings.client_receive_bytes)
        await self._server.start_serving()
        log.info(
            "listening on %s:%d, upstream %s:%d",
            host,
            self.port,
            self.upstream.host,
            self.upstream.port,
        )

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def drain(self, grace: float, every: float = 0.05) -> None:
        """Stop accepting clients (new connections are refused), then end each session as
        soon as it is quiet: idle, outside a transaction block, nothing held (it is told
        57P01, as PostgreSQL's own shutdown does). Returns when none is left or after
        ``grace`` seconds; ``close`` cuts off the rest."""
        self.draining = True
        if self._server is not None:
            self._server.close()
        self.service.stop_lanes(replay=True)  # the event loop sees every session's state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        bye = own_error("57P01", "terminating connection due to administrator command",
                        severity="FATAL")
        while True:
            for session in list(self.sessions):
                if quiet(session):
                    session.fatal(bye)
            if not self.sessions:
                log.info("drained: every session ended")
                return
            if loop.time() >= deadline:
                log.warning("drain: %d session(s) still in a transaction after %.0f s",
                            len(self.sessions), grace)
                return
            await asyncio.sleep(every)

    async def close(self, grace: float = 5.0) -> None:
        """Stop accepting, end every session (a client that does not take its last bytes
        within ``grace`` seconds is cut off), wait for background tasks."""
        if self._server is not None:
            self._server.close()
        self.service.stop_lanes()
        for session in list(self.sessions):
            session.client.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), grace)
            except TimeoutError:
                log.warning("%d sessions did not close within %.0f s: cut off",
                            len(self.sessions), grace)
                for session in list(self.sessions):
                    session.client.abort()
                    if session.upstream is not None:
                        session.upstream.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        try:  # the replication stream or a fill stuck on the upstream must not hold us
            await asyncio.wait_for(self.service.stop(), grace)
        except TimeoutError:
            log.warning("the cache service did not stop within %.0f s", grace)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a session's background step, keeping a reference until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("session task failed", exc_info=task.exception())

    # -- cancel keys --------------------------------------------------------------------------

    def register_key(self, session: Session, upstream_pid: int) -> tuple[int, int]:
        """The (process id, secret) ``session`` shows its client: the upstream backend's real
        process id (what ``pg_backend_pid()`` and notifications name, and what
        ``pg_terminate_backend()`` needs) with a secret of weir's own, so the upstream's secret
        never leaves weir. A live backend's pid is unique on the upstream; a session whose
        backend ended and whose pid was reused is replaced here (its release then leaves the
        new entry alone, as the secrets differ)."""
        secret = secrets.randbits(32) - (1 << 31)
        self._keys[upstream_pid] = (secret, session)
        return upstream_pid, secret

    def release_key(self, key: tuple[int, int]) -> None:
        entry = self._keys.get(key[0])
        if entry is not None and entry[0] == key[1]:
            del self._keys[key[0]]

    async def cancel(self, process_id: int, secret_key: int) -> None:
        """Forward a client's CancelRequest to the upstream backend it names, if any, and
        return once the upstream has taken it (the caller then closes the client's cancel
        connection: a client that waits for that close, as libpq does, knows the cancel was
        delivered before it sends its next statement)."""
        entry = self._keys.get(process_id)
        if entry is None or not secrets.compare_digest(
            entry[0].to_bytes(4, "big", signed=True), secret_key.to_bytes(4, "big", signed=True)
        ):
            log.info("cancel request with an unknown key ignored")
            return
        session = entry[1]
        if session.handshake.upstream_key is None:
            return
        pid, secret = session.handshake.upstream_key
        await send_cancel(self.upstream, pid, secret, self.settings.connect_timeout)


def quiet(session: Session) -> bool:
    """Whether a session may be ended without cutting a statement or transaction short."""
    return session.phase is Phase.READY and session.state.idle \
        and not session.state.in_transaction and not session.state.local_busy \
        and not session.state.waiting
