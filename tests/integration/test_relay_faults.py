"""Bad input, lost upstreams, half-closed sockets and backpressure at the relay."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.errors import ErrorResponse
from pgwire.framing import Framer
from tests.support import InProcessWeir, eventually


class RawClient:
    """A blocking socket speaking the protocol by hand (no driver smoothing anything over)."""

    def __init__(self, port: int, user: str = "postgres", dbname: str = "postgres") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.framer = Framer(1 << 30)
        self.sock.sendall(fe.StartupMessage({"user": user, "database": dbname}).encode())
        self.until_ready()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def messages(self) -> Iterator[object]:
        """Messages until the peer closes."""
        while True:
            item = self.framer.next()
            if item is not None:
                yield be.decode_backend(*item)
                continue
            data = self.sock.recv(65536)
            if not data:
                return
            self.framer.feed(data)

    def until_ready(self) -> list[object]:
        out = []
        for msg in self.messages():
            out.append(msg)
            if isinstance(msg, be.ReadyForQuery):
                return out
        raise AssertionError(f"closed before ReadyForQuery: {out}")

    def close(self) -> None:
        self.sock.close()


def _works(server: InProcessWeir) -> bool:
    with psycopg.connect(server.dsn()) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_malformed_message_gets_08P01_and_others_unaffected(weir_inproc: InProcessWeir) -> None:
    bystander = psycopg.connect(weir_inproc.dsn(), autocommit=True)
    client = RawClient(weir_inproc.port)
    client.send(b"Q\x00\x00\x00\x08abcd")  # no NUL terminator inside the message
    # as PostgreSQL does (weir forwards it for PostgreSQL's own answer): an ERROR, and the
    # session goes on (issue 20)
    msgs = client.until_ready()
    errors = [m for m in msgs if isinstance(m, ErrorResponse)]
    assert [(e.sqlstate, e.severity) for e in errors] == [("08P01", "ERROR")], msgs
    client.send(fe.Query("SELECT 3").encode())
    assert any(isinstance(m, be.DataRow) for m in client.until_ready())
    bystander.execute("SELECT 1")
    client.send(b"F\x00\x00\x00\x06ab")  # a malformed FunctionCall: PostgreSQL's ERROR too
    msgs = client.until_ready()
    errors = [m for m in msgs if isinstance(m, ErrorResponse)]
    assert [(e.sqlstate, e.severity) for e in errors] == [("08P01", "ERROR")], msgs
    client.send(fe.Query("SELECT 4").encode())
    assert any(isinstance(m, be.DataRow) for m in client.until_ready())
    assert bystander.execute("SELECT 2").fetchone() == (2,)
    bystander.close()


@pytest.mark.parametrize("payload", [
    b"Q\x00\x00\x00\x02",  # length below 4
    b"Q\x7f\xff\xff\xff",  # far over the limit: refused before it arrives
    b"\x01\x00\x00\x00\x05x",  # unknown message type
])
def test_bad_frames(weir_inproc: InProcessWeir, payload: bytes) -> None:
    client = RawClient(weir_inproc.port)
    client.send(payload)
    msgs = list(client.messages())
    assert isinstance(msgs[-1], ErrorResponse) and msgs[-1].sqlstate == "08P01"
    assert _works(weir_inproc)


def test_bad_startup_packet(weir_inproc: InProcessWeir) -> None:
    with socket.create_connection(("127.0.0.1", weir_inproc.port), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x04")  # startup length below the minimum
        data = sock.recv(65536)
        framer = Framer()
        framer.feed(data)
        item = framer.next()
        assert item is not None
        msg = be.decode_backend(*item)
        assert isinstance(msg, ErrorResponse) and msg.sqlstate == "08P01"
    assert _works(weir_inproc)


def test_half_closed_client_still_gets_its_results(weir_inproc: InProcessWeir) -> None:
    client = RawClient(weir_inproc.port)
    client.send(fe.Query("SELECT generate_series(1, 5000)").encode())
    client.sock.shutdown(socket.SHUT_WR)
    msgs = list(client.messages())
    rows = [m for m in msgs if isinstance(m, be.DataRow)]
    assert len(rows) == 5000
    assert isinstance(msgs[-1], be.ReadyForQuery)


def test_upstream_terminated_mid_query(pg: Any, weir_inproc: InProcessWeir) -> None:
    with psycopg.connect(weir_inproc.dsn(), autocommit=True) as victim, \
            psycopg.connect(pg.dsn(), autocommit=True) as admin:
        application = "weir_victim"
        victim.execute(f"SET application_name = '{application}'")

        def kill() -> None:
            eventually(lambda: admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE application_name = '{application}' AND state = 'active'").fetchall())

        threading.Thread(target=kill).start()
        with pytest.raises(psycopg.OperationalError, match="terminating connection"):
            victim.execute("SELECT pg_sleep(60)")
    assert _works(weir_inproc)


class SilentlyDyingUpstream:
    """A scripted upstream: completes startup, then drops the connection on the first Query."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop).result(10)
        self.port: int = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        length = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(length - 4)
        writer.write(be.decode_backend(ord("R"), b"\x00\x00\x00\x00").encode()  # AuthenticationOk
                     + be.BackendKeyData(42, 4242).encode() + be.ReadyForQuery("I").encode())
        await reader.read(1)  # the first byte of the first query
        writer.transport.abort()

    def stop(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_upstream_vanishes_without_a_word() -> None:
    upstream = SilentlyDyingUpstream()
    server = InProcessWeir.start(f"postgresql://weir@127.0.0.1:{upstream.port}/db?sslmode=disable")
    try:
        client = RawClient(server.port)
        client.send(fe.Query("SELECT 1").encode())
        msgs = list(client.messages())
        assert isinstance(msgs[-1], ErrorResponse)
        assert msgs[-1].sqlstate == "08006" and "closed the connection" in msgs[-1].message
    finally:
        server.stop()
        upstream.stop()


def test_unreachable_upstream_is_a_clear_error(pg: Any) -> None:
    from proxy.localpg import free_port

    server = InProcessWeir.start(f"postgresql://weir@127.0.0.1:{free_port()}/db?sslmode=disable")
    try:
        with pytest.raises(psycopg.OperationalError, match="could not connect to upstream"):
            psycopg.connect(server.dsn()).close()
    finally:
        server.stop()


def test_slow_client_backpressure(pg: Any) -> None:
    """A client that stops reading makes weir stop reading upstream: bounded buffering."""
    limit = 64 * 1024
    server = InProcessWeir.start(pg.dsn(), write_buffer_bytes=limit)
    try:
        client = RawClient(server.port)
        client.send(fe.Query("SELECT repeat('x', 1000) FROM generate_series(1, 50000)").encode())

        def session() -> Any:
            sessions = list(server.server.sessions)
            return sessions[0] if sessions else None

        sess = eventually(session)
        eventually(lambda: sess.upstream is not None and not sess.upstream.is_reading(), 20)
        buffered = sess.client.get_write_buffer_size() + sess.uframer.buffered
        assert buffered < limit + 1024 * 1024  # one socket read past the mark at most
        rows = sum(isinstance(m, be.DataRow) for m in client.until_ready())
        assert rows == 50000
    finally:
        server.stop()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(garbage=st.binary(min_size=1, max_size=300))
def test_fuzzed_streams_never_hurt_the_proxy(weir_inproc: InProcessWeir, garbage: bytes) -> None:
    client = RawClient(weir_inproc.port)
    try:
        client.send(garbage + fe.Sync().encode() + fe.Terminate().encode())
        client.sock.shutdown(socket.SHUT_WR)
        for msg in client.messages():
            if isinstance(msg, ErrorResponse) and msg.severity == "FATAL":
                assert msg.sqlstate in ("08P01", "0A000", "08006", "57P01", "XX000", "22021",
                                        "54000", "42601", "26000", "34000", "08004", "22P03")
    except ConnectionResetError:
        pass
    finally:
        client.close()
    assert _works(weir_inproc)
