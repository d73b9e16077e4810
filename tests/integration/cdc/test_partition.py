"""A network partition: the upstream goes silent without closing the connection.

A small TCP forwarder sits between weir and PostgreSQL; ``freeze()`` stops forwarding on
the existing connections (new connections still work), as a partition that heals would.
The stream must notice the silence (receive_timeout), reconnect, and go on - for a
persistent slot by ending the stale session the server still believes holds the slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from cdc.connection import ConnectParams
from cdc.stream import ReplicationStream, StreamConfig
from tests.integration.cdc.harness import changes_of, execute, run
from tests.support import unique_name
from tests.unit.cdc.recording import RecordingSink


class Forwarder:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.frozen: list[asyncio.Event] = []
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    def freeze(self) -> None:
        for event in self.frozen:
            event.set()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        frozen = asyncio.Event()
        self.frozen.append(frozen)
        pipes = [asyncio.create_task(self._pipe(reader, up_writer, frozen)),
                 asyncio.create_task(self._pipe(up_reader, writer, frozen))]
        self.tasks.update(pipes)
        await asyncio.gather(*pipes, return_exceptions=True)
        for w in (writer, up_writer):
            w.transport.abort()

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    frozen: asyncio.Event) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while not frozen.is_set():
                data = await src.read(65536)
                if not data or frozen.is_set():
                    break
                dst.write(data)
                await dst.drain()
        if not frozen.is_set():
            dst.close()
        else:
            await asyncio.Event().wait()  # hold the socket open, silent, until cancelled

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def test_silent_upstream_is_detected_and_the_persistent_slot_taken_back(pg: Any,
                                                                         dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY)", dbname)
    slot = unique_name("weir_part")

    async def body() -> None:
        forwarder = Forwarder(pg.host, pg.port)
        port = await forwarder.start()
        sink = RecordingSink()
        config = StreamConfig(ConnectParams(pg.host, port, pg.superuser, dbname,
                                            sslmode="disable"),
                              publication="p", slot=slot, temporary=False,
                              status_interval=0.2, receive_timeout=1.0)
        stream = ReplicationStream(config, sink)
        await stream.start()
        try:
            await execute(pg, dbname, "INSERT INTO t VALUES (1)")
            await stream.barrier()
            forwarder.freeze()
            await execute(pg, dbname, "INSERT INTO t VALUES (2)")
            await stream.barrier(timeout=60)
            assert stream.sessions >= 2
            assert [c.new for c in changes_of(sink, "t")] == [(1,), (2,)]
            assert sink.reset_alls == []
        finally:
            await stream.stop()
            await forwarder.close()
            pg.psql(f"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                    f" WHERE slot_name = '{slot}' AND active_pid IS NOT NULL")
            pg.psql(f"SELECT pg_drop_replication_slot('{slot}')")

    run(body)
