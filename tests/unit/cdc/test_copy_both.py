"""``PgConnection.copy_both``: CopyData payloads handed over from the transport's callback, in
order, those read before it first; its end (CopyDone, a closed socket, a failing handler)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from cdc.connection import PgConnection
from pgwire.common import CopyData

COPY_DONE = b"c\x00\x00\x00\x04"


async def _pair() -> tuple[PgConnection, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=ours)
    return PgConnection(reader, writer), theirs


async def _until(cond: object) -> None:
    for _ in range(1000):
        if callable(cond) and cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


def test_payloads_read_before_and_after_are_handed_over_in_order() -> None:
    async def body() -> list[bytes]:
        conn, peer = await _pair()
        got: list[bytes] = []
        # before the switch: one payload read and framed behind the message the caller took
        # (as START_REPLICATION's CopyBothResponse), one and half of a third only given to
        # the reader (never read), the rest after
        peer.send(b"Z\x00\x00\x00\x05I" + CopyData(b"one").encode())
        assert (await conn._next())[0] == ord("Z")
        third = CopyData(b"three").encode()
        peer.send(CopyData(b"two").encode() + third[:4])
        await _until(lambda: conn._given > conn._taken)
        task = asyncio.ensure_future(conn.copy_both(got.append))
        await asyncio.sleep(0)
        peer.send(third[4:] + CopyData(b"four").encode())
        await _until(lambda: len(got) == 4)
        peer.send(COPY_DONE)
        assert await asyncio.wait_for(task, 5) is None
        peer.close()
        await conn.close()
        return got

    assert asyncio.run(body()) == [b"one", b"two", b"three", b"four"]


def test_a_closed_socket_and_a_failing_handler_end_it() -> None:
    async def closed() -> None:
        conn, peer = await _pair()
        task = asyncio.ensure_future(conn.copy_both(lambda _: None))
        await asyncio.sleep(0.01)
        peer.close()
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(task, 5)
        await conn.close()

    async def failing() -> None:
        conn, peer = await _pair()

        def handle(payload: bytes) -> None:
            raise ValueError(payload.decode())

        task = asyncio.ensure_future(conn.copy_both(handle))
        peer.send(CopyData(b"bad").encode())
        with pytest.raises(ValueError, match="bad"):
            await asyncio.wait_for(task, 5)
        peer.close()
        await conn.close()

    asyncio.run(closed())
    asyncio.run(failing())
