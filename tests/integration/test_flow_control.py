"""End-to-end flow control through weir (issue 19): a pipelining client is held back by a
server that is not reading, and a client that is not reading holds the server back, with
weir holding only bounded bytes in between.

The first test is asyncpg's ``test_executemany_server_failure_during_writes`` made
deterministic: asyncpg streams 32 KiB rows with ``executemany`` after a row that will
collide with the first; the server is held meanwhile (the first row waits on another
transaction's uncommitted row with the same key), so how far the generator gets is what the
path between client and server takes: through weir at most a few rows more than directly.
Released, the second row's error stops the stream before its end, both ways. (Held, weir
took fewer rows than directly before its client sockets' buffers were fixed too; what made
asyncpg's own test fail through weir is the stream's first milliseconds, which
``test_read_ahead``'s byte count with a fixed send buffer catches.)
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from typing import Any

import asyncpg

from pgwire import frontend as fe
from tests.integration.test_relay_faults import RawClient
from tests.support import eventually, weir_over

SETUP = "CREATE TABLE exmany (a text, b int PRIMARY KEY);"
ROW = 32 * 1024
#: rows of the stream: far more than the path takes while the server is held
ROWS = 400
#: rows weir may take beyond a direct connection (its receive window on the client's
#: socket, its queue towards the upstream, one segment unsent: about 125 KB, see
#: ``test_read_ahead``); measured: directly 142, through weir 50-58 (the client's send
#: buffer autotunes smaller with weir's smaller segments), 130-134 with 128 KiB buffers
EXTRA_ROWS = 6
#: no row generated for this long: the client is held back (a bound, not a synchronization)
QUIET = 1.0


async def _executemany(port: int, dsn: str) -> tuple[int, int, str]:
    """Rows generated while the server was held; rows generated in all; the error."""
    holder = await asyncpg.connect(dsn)
    con = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres",
                                database=holder._params.database)
    pos = 0
    moved = asyncio.Event()

    def rows() -> Any:
        nonlocal pos
        while pos < ROWS:
            pos += 1
            moved.set()
            yield ("a", 0) if pos < 3 else ("a" * ROW, pos)

    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("INSERT INTO exmany VALUES ('held', 0)")
        stream = asyncio.ensure_future(
            con.executemany("INSERT INTO exmany VALUES ($1, $2)", rows()))
        while True:
            moved.clear()
            try:
                await asyncio.wait_for(moved.wait(), QUIET)
            except TimeoutError:
                break
        held = pos
        await tx.rollback()  # the first row goes in; the second collides with it
        try:
            await asyncio.wait_for(stream, 30)
            error = "none"
        except asyncpg.PostgresError as exc:
            error = exc.sqlstate
        left = await holder.fetchval("SELECT count(*) FROM exmany")
        assert left == 0, left
        return held, pos, error
    finally:
        await con.close()
        await holder.close()


def test_pipelining_client_is_held_back_as_directly(pg: Any, dbname: str) -> None:
    with weir_over(pg, dbname, SETUP) as weir:
        through_weir = asyncio.run(_executemany(weir.port, pg.dsn(dbname=dbname)))
    directly = asyncio.run(_executemany(pg.port, pg.dsn(dbname=dbname)))
    assert directly[0] < ROWS, "the path took every row: nothing to compare"
    assert directly[1:] == (directly[1], "23505") and directly[1] < ROWS
    assert through_weir[2] == "23505"
    assert through_weir[0] <= directly[0] + EXTRA_ROWS, (through_weir, directly)
    assert through_weir[1] < ROWS, "the error did not stop the stream through weir"


#: the slow reader's answer: 8 KiB rows, 160 MB in all (far more than any buffer)
BIG = "SELECT repeat('x', 8192) FROM generate_series(1, 20000)"
#: the answer's size: far more than weir may hold of it (below)
BIG_BYTES = 20000 * 8192


def _held_allowed(write_buffer_bytes: int) -> int:
    """What weir may hold of an answer its client does not read: its queue towards the
    client (``--write-buffer-bytes`` and one read) and its two sockets' kernel buffers,
    autotuned up to ``tcp_rmem``'s and ``tcp_wmem``'s maxima (3.1 MB measured: 0.4 MB
    queued, 1.3 MB unread from the upstream, 1.4 MB unsent to the client). Without the
    pause it would be the whole answer."""
    def most(name: str) -> int:
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            return int(f.read().split()[2])
    return 2 * write_buffer_bytes + most("tcp_rmem") + most("tcp_wmem")


def _holdings(weir: Any) -> tuple[bool, int, int]:
    """Whether weir reads the upstream; the bytes of the answer in its transports' queues;
    those and its upstream socket's unread bytes and its client socket's unsent or
    unacknowledged ones."""
    async def measure() -> tuple[bool, int, int]:
        (session,) = [s for s in weir.server.sessions if s.upstream is not None]
        queued = session.client.get_write_buffer_size() + session.upstream.get_write_buffer_size()
        unread = _ioctl(session.upstream.get_extra_info("socket"), termios.FIONREAD)
        unsent = _ioctl(session.client.get_extra_info("socket"), termios.TIOCOUTQ)
        return session.upstream.is_reading(), queued, queued + unread + unsent
    result: tuple[bool, int, int] = weir.call(measure())
    return result


def _ioctl(sock: Any, request: int) -> int:
    out = fcntl.ioctl(sock.fileno(), request, struct.pack("i", 0))
    return int(struct.unpack("i", out)[0])


def test_slow_reader_holds_the_server_back(pg: Any, dbname: str) -> None:
    """A client that asks for 160 MB and reads nothing: weir stops reading the upstream
    once its queue towards the client is full, and holds a bounded part of the answer."""
    with weir_over(pg, dbname, SETUP) as weir:
        client = RawClient(weir.port, dbname=dbname)
        try:
            client.send(fe.Query(BIG).encode())
            seen: list[tuple[bool, int, int]] = []

            def settled() -> bool:  # paused, and nothing moved since the last look
                seen.append(_holdings(weir))
                return len(seen) > 1 and not seen[-1][0] and seen[-1] == seen[-2]
            eventually(settled, timeout=30, interval=0.5)
            _, queued, held = seen[-1]
            limit = weir.server.settings.write_buffer_bytes
            assert queued <= 2 * limit, queued
            assert 2 * _held_allowed(limit) < BIG_BYTES, "the answer must not fit: no test"
            assert 0 < held <= _held_allowed(limit), held
            # and the answer is whole when read
            client.sock.settimeout(60)
            rows = sum(1 for m in client.until_ready() if type(m).__name__ == "DataRow")
            assert rows == 20000
        finally:
            client.close()
