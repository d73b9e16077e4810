"""The operations endpoint on ``--metrics-listen``: ``/metrics``, ``/healthz``, ``/readyz``.

Owns: a minimal HTTP/1.1 server on weir's event loop (one request per connection; the
request line parsed without I/O in ``parse_request``), the dispatch of paths to answers, and
what alive and ready mean:

- ``/healthz``: 200 while the event loop answers (a stuck loop times the probe out).
- ``/readyz``: 200 when weir accepts clients (not draining) and the upstream accepts a TCP
  connection (what relaying needs first); caches still warming do not matter. 503 otherwise,
  with the failing check in the JSON body.
- ``/metrics``: Prometheus text from ``proxy.collector.WeirCollector`` and the process
  collector, gathered on the loop so that the state read is consistent.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector
from prometheus_client.exposition import generate_latest

from proxy.collector import WeirCollector
from proxy.server import Server
from proxy.settings import parse_listen

log = logging.getLogger("weir.health")

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}
_JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    content_type: str = _JSON

    def encode(self, head_only: bool = False) -> bytes:
        head = (f"HTTP/1.1 {self.status} {_REASONS.get(self.status, '')}\r\n"
                f"Content-Type: {self.content_type}\r\n"
                f"Content-Length: {len(self.body)}\r\n"
                "Connection: close\r\n\r\n").encode()
        return head if head_only else head + self.body


def parse_request(head: bytes) -> tuple[str, str] | None:
    """(method, path without query) from an HTTP request's first line, or None."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/") or not parts[1].startswith("/"):
        return None
    return parts[0], parts[1].split("?", 1)[0]


def _json(code: int, **body: object) -> Answer:
    return Answer(code, json.dumps(body).encode())


class MetricsEndpoint:
    """Serves the three paths for one ``Server``; ``await start()``, ``await close()``."""

    def __init__(self, server: Server, probe_timeout: float = 2.0) -> None:
        self.server = server
        self.probe_timeout = probe_timeout
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(WeirCollector(server))
        ProcessCollector(registry=self.registry)
        self._http: asyncio.Server | None = None
        self._routes: dict[str, Callable[[], Awaitable[Answer]]] = {
            "/metrics": self._metrics,
            "/healthz": self._healthz,
            "/readyz": self._readyz,
        }

    @property
    def port(self) -> int:
        assert self._http is not None and self._http.sockets
        port: int = self._http.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        listen = self.server.settings.metrics_listen
        assert listen is not None
        host, port = parse_listen(listen, "--metrics-listen")
        self._http = await asyncio.start_server(self._handle, host, port, reuse_address=True)
        log.info("metrics and health on %s:%d", host, self.port)

    async def close(self) -> None:
        if self._http is not None:
            self._http.close()
            await self._http.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            answer, head_only = await self.answer(head)
            writer.write(answer.encode(head_only))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        except Exception:
            log.exception("the metrics endpoint failed")
        finally:
            writer.close()

    async def answer(self, head: bytes) -> tuple[Answer, bool]:
        """The answer to one request (and whether only its head is sent: HEAD)."""
        request = parse_request(head)
        if request is None:
            return _json(400, error="bad request"), False
        method, path = request
        if method not in ("GET", "HEAD"):
            return _json(405, error="only GET and HEAD"), False
        route = self._routes.get(path)
        if route is None:
            return _json(404, error=f"no {path}; try /metrics, /healthz or /readyz"), False
        return await route(), method == "HEAD"

    async def _metrics(self) -> Answer:
        return Answer(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    async def _healthz(self) -> Answer:
        return _json(200, status="alive")

    async def _readyz(self) -> Answer:
        server = self.server
        if server.draining:
            return _json(503, status="draining")
        if not server.accepting:
            return _json(503, status="not accepting clients")
        addr = server.upstream
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(addr.host, addr.port), self.probe_timeout)
        except (TimeoutError, OSError) as exc:
            return _json(503, status="upstream unreachable",
                         upstream=f"{addr.host}:{addr.port}", error=str(exc) or "timeout")
        writer.close()  # (no bytes sent: PostgreSQL does not log a connection without any)
        service = server.service
        host = service.host
        caching = "off" if not service.enabled else \
            "running" if host is not None and host.stream.stats().connected else "warming"
        return _json(200, status="ready", caching=caching)
