"""Malformed messages while weir holds the session's statements (issue 20, repro 8): a
statement served by a cache is prepared (weir holds it, PostgreSQL does not), then a
malformed message arrives. PostgreSQL answers an ERROR and the session goes on; through weir
the same ERROR comes (PostgreSQL's own: the message goes upstream as it is), and the held
statement still answers afterwards."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.integration.test_security_encodings import MALFORMED, _frame, _until_ready
from tests.support import InProcessWeir

PREPARE = fe.Parse("s1", "SELECT v FROM notes WHERE id = $1", (23,)).encode() \
    + fe.Sync().encode()
RUN = fe.Bind("", "s1", (), (b"1",), ()).encode() + fe.Execute("").encode() \
    + fe.Sync().encode()


@pytest.fixture
def through(pg: Any, dbname: str) -> Iterator[InProcessWeir]:
    pg.psql("CREATE TABLE notes (id int PRIMARY KEY, v text);"
            "INSERT INTO notes VALUES (1, 'held-row')", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute("CREATE CACHE notes_v FROM SELECT v FROM notes WHERE id = $1")
        yield server
    finally:
        server.stop()


def _session(port: int, dbname: str) -> tuple[socket.socket, Framer]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    sock.sendall(fe.StartupMessage({"user": "postgres", "database": dbname}).encode())
    framer = Framer()
    _until_ready(sock, framer)
    return sock, framer


def _rows(answer: list[object]) -> list[bytes | None]:
    return [m.values[0] for m in answer if isinstance(m, be.DataRow)]


def _held_sessions(ports: tuple[int, ...], dbname: str) -> Iterator[tuple[socket.socket, Framer]]:
    """A session on each port in turn whose statement ``s1`` is prepared and answered (weir
    holds it); after the loop's body, it must still answer (the session went on)."""
    for port in ports:
        sock, framer = _session(port, dbname)
        with sock:
            sock.sendall(PREPARE)
            _until_ready(sock, framer)
            sock.sendall(RUN)
            assert _rows(_until_ready(sock, framer)) == [b"held-row"]
            yield sock, framer
            sock.sendall(RUN)  # the session goes on, its statement still there
            assert _rows(_until_ready(sock, framer)) == [b"held-row"]


@pytest.mark.parametrize("name", [*sorted(MALFORMED), "bind of an unknown statement"])
def test_malformed_message_while_statements_are_held(
        pg: Any, dbname: str, through: InProcessWeir, name: str) -> None:
    message = MALFORMED.get(name) or (
        _frame(b"B", b"\0nope\0\0\x01\xff\xff\xff\xfe\0\0") + _frame(b"S", b""))
    outcomes = []
    for sock, framer in _held_sessions((through.port, pg.port), dbname):
        sock.sendall(message)
        answer = _until_ready(sock, framer)
        errors = [dict(m.fields) for m in answer if isinstance(m, be.ErrorResponse)]
        outcomes.append([(e["S"], e["C"]) for e in errors])
    assert outcomes[0] == outcomes[1], outcomes  # PostgreSQL's own error, through weir too
    assert [severity for severity, _ in outcomes[0]] == ["ERROR"], outcomes


def _kinds(answer: list[object]) -> list[object]:
    """The answer as PostgreSQL's message kinds, errors as (severity, SQLSTATE)."""
    out: list[object] = []
    for m in answer:
        if isinstance(m, be.ErrorResponse):
            fields = dict(m.fields)
            out.append((fields["S"], fields["C"]))
        elif isinstance(m, be.DataRow):
            out.append(("row", *m.values))
        elif not isinstance(m, (be.ParameterStatus, be.NoticeResponse)):
            out.append(type(m).__name__)
    return out


BACKEND_PID = (2026).to_bytes(4, "big") + b"\0\0\0\0\0\0"
LATER = {  # malformed after weir already answered part of the batch, or outside the rules
    "parse after a held statement's execute": RUN[:-5] + MALFORMED["parse with trailing bytes"],
    "bind after a held statement's execute": RUN[:-5] + MALFORMED["bind with a bad length"],
    "malformed bind of the held statement": _frame(b"B", b"\0s1\0\0\x01\xff\xff\xff\xfe\0\0")
    + _frame(b"S", b""),
    "function call cut short": _frame(b"F", b"\0\0"),
    # pg_backend_pid (oid 2026): no formats, no arguments, text result, then four bytes more
    "function call with trailing bytes": _frame(b"F", BACKEND_PID + b"junk"),
    "function call": _frame(b"F", BACKEND_PID),
    "a cached statement's parse after a malformed bind": MALFORMED["bind with a bad length"][:-5]
    + fe.Parse("s2", "SELECT v FROM notes WHERE id = $1", (23,)).encode() + RUN[:-5].replace(
        b"s1", b"s2") + fe.Sync().encode(),
    "copy data outside copy": _frame(b"d", b"stray") + fe.Query("SELECT 7").encode(),
    "copy done outside copy": _frame(b"c", b"") + fe.Query("SELECT 7").encode(),
    "copy fail outside copy": _frame(b"f", b"why\0") + fe.Query("SELECT 7").encode(),
}


@pytest.mark.parametrize("name", sorted(LATER))
def test_malformed_or_stray_message_later_in_a_batch(
        pg: Any, dbname: str, through: InProcessWeir, name: str) -> None:
    """As PostgreSQL: an ERROR (or nothing, for copy messages outside COPY) and the session
    goes on; every answer compared message by message with PostgreSQL's own."""
    outcomes = []
    for sock, framer in _held_sessions((through.port, pg.port), dbname):
        sock.sendall(LATER[name])
        outcomes.append(_kinds(_until_ready(sock, framer)))
    assert outcomes[0] == outcomes[1], outcomes
    assert not any(kind[0] == "FATAL" for kind in outcomes[0] if isinstance(kind, tuple))
