"""Limits like PostgreSQL's (issue 20, repros 6 and 7): messages before authentication are
capped as PostgreSQL caps them, a login that takes too long ends (57014), one client too
many gets 53300, memory of large messages goes back to the system, the open files limit is
raised at start."""

from __future__ import annotations

import resource
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.support import (
    InProcessWeir,
    WeirProcess,
    create_database,
    eventually,
    unique_name,
)


def _messages_until_closed(sock: socket.socket, timeout: float = 10.0) -> list[object]:
    """Every backend message until the server closes the connection."""
    sock.settimeout(timeout)
    framer = Framer()
    out: list[object] = []
    while True:
        data = sock.recv(65536)
        if not data:
            return out
        framer.feed(data)
        while (item := framer.next()) is not None:
            out.append(be.decode_backend(*item))


def _startup(user: str, dbname: str) -> bytes:
    return fe.StartupMessage({"user": user, "database": dbname}).encode()


def _error_code(messages: list[object]) -> str:
    errors = [m for m in messages if isinstance(m, be.ErrorResponse)]
    assert errors, messages
    return str(dict(errors[-1].fields)["C"])


@pytest.fixture
def server(pg: Any) -> Iterator[InProcessWeir]:
    s = InProcessWeir.start(pg.dsn(), login_timeout=1.0, max_client_connections=3)
    try:
        yield s
    finally:
        s.stop()


def test_password_message_is_capped_before_authentication(pg: Any, server: InProcessWeir
                                                           ) -> None:
    md5 = unique_name("md5")
    pg.psql(f"SET password_encryption = 'md5'; CREATE ROLE {md5} LOGIN PASSWORD 'pw' "
            "IN ROLE weir_md5")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_startup(md5, "postgres"))
        sock.settimeout(10)
        asked = b""
        while len(asked) < 13:  # AuthenticationMD5Password: the password is asked for
            asked += sock.recv(13 - len(asked))
        assert asked[:1] == b"R"
        # a password message announcing 60 MiB: refused at once, nothing buffered
        sock.sendall(b"p" + struct.pack("!i", 60 * 1024 * 1024) + b"x" * 1000)
        assert _error_code(_messages_until_closed(sock)) == "08P01"


def test_login_timeout(server: InProcessWeir) -> None:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # sends nothing
        messages = _messages_until_closed(sock)
    assert _error_code(messages) == "57014"
    assert time.monotonic() - started < 9


def test_too_many_clients(server: InProcessWeir) -> None:
    conns = [psycopg.connect(server.dsn()) for _ in range(3)]
    try:
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(server.dsn())
    finally:
        for c in conns:
            c.close()
    eventually(lambda: not server.server.sessions)  # the closed ones are gone: room again
    with psycopg.connect(server.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_fd_limit_raised_and_memory_returned(pg: Any) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 1024)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        proc = WeirProcess.start(pg)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        limits = Path(f"/proc/{proc.proc.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        assert int(line.split()[3]) == hard, line
        dbname = create_database(pg)
        big = "SELECT 1 /*" + "x" * (24 * 1024 * 1024) + "*/"

        def round_() -> None:
            conns = [psycopg.connect(proc.dsn(dbname=dbname), autocommit=True)
                     for _ in range(4)]
            for c in conns:
                c.execute(big)
            for c in conns:
                c.close()

        round_()
        time.sleep(0.5)  # not synchronization: lets the process settle before measuring
        baseline = _rss(proc.proc.pid)
        for _ in range(4):
            round_()
        after = _rss(proc.proc.pid)
        assert after < baseline + 48 * 1024 * 1024, (baseline, after)
    finally:
        proc.stop()
