"""The client sockets' receive buffer and segment size (``proxy.endpoints.bound_listener``):
set on the listening socket, inherited by each accepted connection, for every value
``--client-receive-bytes`` accepts."""

from __future__ import annotations

import socket

import pytest

from proxy.endpoints import LARGEST_MAXSEG, bound_listener
from proxy.settings import MIN_RECEIVE_BYTES


def _accepted(receive_bytes: int) -> tuple[int, int]:
    """The receive buffer of a connection the bounded listener accepted, and the segment
    size its peer sends with."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        bound_listener(listener, receive_bytes)
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                return (accepted.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                        client.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG))


@pytest.mark.parametrize("receive_bytes", [MIN_RECEIVE_BYTES, 32 * 1024, 128 * 1024, 1 << 20])
def test_bounds_are_inherited(receive_bytes: int) -> None:
    rcvbuf, mss = _accepted(receive_bytes)
    assert rcvbuf == 2 * receive_bytes  # the kernel doubles what it is given
    assert mss <= min(receive_bytes // 4, LARGEST_MAXSEG)


def test_zero_leaves_the_kernel_its_autotuning() -> None:
    rcvbuf, mss = _accepted(0)
    default = socket.socket().getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert rcvbuf == default
    assert mss > 32 * 1024 // 4  # loopback's own segments
