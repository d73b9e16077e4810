"""Helpers for CDC integration tests: a running ReplicationStream on a test database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg

from cdc.connection import ConnectParams
from cdc.stream import ReplicationStream, StreamConfig
from tests.support import unique_name
from tests.unit.cdc.recording import RecordingSink

T = TypeVar("T")


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coro_fn()

    return asyncio.run(main())


def params(pg: Any, dbname: str, user: str | None = None, password: str | None = None,
           sslmode: str = "disable") -> ConnectParams:
    return ConnectParams(pg.host, pg.port, user or pg.superuser, dbname, password, sslmode)


@asynccontextmanager
async def streaming(pg: Any, dbname: str, temporary: bool = True, slot: str | None = None,
                    **kw: Any) -> AsyncIterator[tuple[ReplicationStream, RecordingSink]]:
    sink = RecordingSink()
    config = StreamConfig(params(pg, dbname, **kw), publication=unique_name("pub"),
                          slot=slot or unique_name("weir_test"), temporary=temporary)
    stream = ReplicationStream(config, sink)
    await stream.start()
    try:
        yield stream, sink
    finally:
        await stream.stop()


def persistent_stream(pg: Any, dbname: str, slot: str, sink: Any) -> ReplicationStream:
    """A stream on a persistent slot (publication ``p``) that a test starts and stops itself."""
    return ReplicationStream(StreamConfig(params(pg, dbname), publication="p", slot=slot,
                                          temporary=False), sink)


async def execute(pg: Any, dbname: str, *statements: str) -> None:
    """Run statements in autocommit mode (each its own transaction unless it says BEGIN)."""
    async with await psycopg.AsyncConnection.connect(pg.dsn(dbname=dbname),
                                                     autocommit=True) as conn:
        for sql in statements:
            await conn.execute(sql)  # type: ignore[arg-type]


def changes_of(sink: RecordingSink, table: str) -> list[Any]:
    oids = {s.oid for s in sink.schemas if s.name == table}
    return [c for t in sink.transactions for c in t.changes if c.table_oid in oids]
