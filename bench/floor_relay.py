"""A relay that only copies bytes (uvloop, one upstream connection per client): the floor
for any Python proxy on this event loop, as a reference target of ``bench/passthrough.py``.

    python bench/floor_relay.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT
"""

from __future__ import annotations

import asyncio
import sys

import uvloop


class _Upstream(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.upstream: asyncio.Transport | None = None
        self.waiting: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        upstream, _ = await loop.create_connection(lambda: _Upstream(self.transport),
                                                   *self.address)
        self.upstream = upstream
        for data in self.waiting:
            upstream.write(data)

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.waiting.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _serve(listen: int, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(host, port), "127.0.0.1", listen)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(_serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
