"""The sessions' barriers (``Barriers.pipelined``, ``proxy.seen``) against the real cluster:
they cover every commit before them, never queue behind the heartbeat's barrier, and fail
(never hang) when their connection is lost, the next one opening a new connection."""

from __future__ import annotations

import asyncio
from typing import Any

from cdc.connection import UpstreamError
from tests.integration.cdc.harness import changes_of, execute, run, streaming
from tests.support import eventually_async


def test_pipelined_barriers_cover_earlier_commits_beside_a_stuck_heartbeat(
        pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE pb (id int PRIMARY KEY)", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await stream.barrier()
            async with stream.barriers._lock:  # the heartbeat's barrier connection is busy
                for i in range(1, 4):
                    await execute(pg, dbname, f"INSERT INTO pb VALUES ({i})")
                    # three in flight at once, pipelined on one connection
                    await asyncio.wait_for(asyncio.gather(
                        *(stream.barriers.pipelined(10.0) for _ in range(3))), 10.0)
                    assert [c.new for c in changes_of(sink, "pb")] == [
                        (k,) for k in range(1, i + 1)]
            # every emitting statement answers too (the applier may pass a barrier before
            # its own connection has read that answer)
            async def answered() -> bool:
                return stream.barriers._pipe is not None and not stream.barriers._pipe_sent
            await eventually_async(answered)

    run(body)


def test_a_pipelined_barrier_fails_when_its_connection_is_lost(pg: Any, dbname: str) -> None:
    async def body() -> None:
        async with streaming(pg, dbname) as (stream, _sink):
            await stream.barriers.pipelined(10.0)
            pipe = stream.barriers._pipe
            assert pipe is not None and pipe.backend_key is not None
            await execute(pg, dbname,
                          f"SELECT pg_terminate_backend({pipe.backend_key.process_id})")
            outcomes: list[str] = []
            for _ in range(3):  # (the loss may be noticed before or after the next send)
                try:
                    await stream.barriers.pipelined(10.0)  # a hang fails the test here
                    outcomes.append("passed")
                    break
                except (ConnectionError, UpstreamError):
                    outcomes.append("failed")
            assert outcomes[-1] == "passed" and stream.barriers._pipe is not pipe

    run(body)
