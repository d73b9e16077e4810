"""The sessions' probes (``Barriers.probed``, ``Barriers.covering``) against the real cluster.

A probe asks the upstream its WAL insert position (no transaction) and passes once the
stream's position reached it: never before a commit made before it is applied, and with
nothing committed after it by the walsender's keepalive alone (PostgreSQL sends one when it
has caught up with WAL its client has not confirmed) — so a probe costs no commit, no
transaction ID and no message in the stream."""

from __future__ import annotations

import time
from typing import Any

from cdc import barrier
from tests.integration.cdc.harness import changes_of, execute, run, streaming


def test_a_probe_passes_with_no_commit_after_it(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE pr1 (id int PRIMARY KEY)", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await stream.barrier()
            await execute(pg, dbname, "INSERT INTO pr1 VALUES (1)")
            applied = len(sink.transactions)
            barriers = stream.barriers
            for _ in range(3):  # (a generous patience: a keepalive must come, not a timer)
                assert await barriers.probed(10.0)
            assert changes_of(sink, "pr1")  # the insert before them was applied
            # no commit carried them: nothing but the insert's transaction came
            assert len(sink.transactions) <= applied + 1
            assert barriers.probes == 3 and barriers.probes_fell_back == 0

    run(body)


def test_a_probe_never_passes_before_a_commit_made_before_it(pg: Any, dbname: str) -> None:
    """Each probe is sent right after a commit: when it passes, that commit was applied. And
    while the stream is held (messages and keepalives kept, as ``HeldApplier`` does), a probe
    does not pass at all, however long it waits (its position is compared with what was
    applied, not with what was received)."""
    pg.psql("CREATE TABLE pr2 (id int PRIMARY KEY)", dbname)

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await stream.barrier()
            barriers = stream.barriers
            for i in range(1, 21):
                await execute(pg, dbname, f"INSERT INTO pr2 VALUES ({i})")
                await barriers.covering(10.0)
                assert [c.new for c in changes_of(sink, "pr2")] == [(k,) for k in range(1, i + 1)]
            kept: list[Any] = []
            applier = stream.applier
            applier.feed = kept.append  # type: ignore[method-assign,assignment]
            stream._keepalive = lambda conn, msg: kept.append((conn, msg))  # type: ignore[method-assign]
            await execute(pg, dbname, "INSERT INTO pr2 VALUES (21)")
            started = time.monotonic()
            assert not await barriers.probed(0.5)
            assert time.monotonic() - started >= 0.5
            assert stream.received_lsn > stream.position()  # (the insert did arrive)
            del applier.feed
            del stream._keepalive
            for msg in kept:
                if isinstance(msg, tuple):
                    stream._keepalive(*msg)
                else:
                    applier.feed(msg)
            assert await barriers.probed(10.0)
            assert len(changes_of(sink, "pr2")) == 21

    run(body)


def test_a_failing_probe_is_followed_by_a_barrier(pg: Any, dbname: str,
                                                  monkeypatch: Any) -> None:
    """A probe whose statement fails upstream (here: a call PostgreSQL refuses) does not fail
    the coverage request: a barrier follows it, and covers a commit made before."""
    pg.psql("CREATE TABLE pr3 (id int PRIMARY KEY)", dbname)
    monkeypatch.setattr(barrier, "_PROBE", "SELECT pg_current_wal_insert_lsn(1)")

    async def body() -> None:
        async with streaming(pg, dbname) as (stream, sink):
            await stream.barrier()
            await execute(pg, dbname, "INSERT INTO pr3 VALUES (1)")
            await stream.barriers.covering(10.0)
            assert [c.new for c in changes_of(sink, "pr3")] == [(1,)]
            assert stream.barriers.probes == 1 and stream.barriers.probes_fell_back == 1

    run(body)
