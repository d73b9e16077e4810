"""Every client encoding PostgreSQL accepts works through weir, and malformed input gets
PostgreSQL's own ERROR with the session going on (issue 20, repro 8). Each outcome through
weir (the result's bytes, or the SQLSTATE) is compared with PostgreSQL's directly."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.support import InProcessWeir

#: the client-side encodings of PostgreSQL 15 (its documentation's table of character sets)
ENCODINGS = ("BIG5", "EUC_CN", "EUC_JP", "EUC_JIS_2004", "EUC_KR", "EUC_TW", "GB18030", "GBK",
             "ISO_8859_5", "ISO_8859_6", "ISO_8859_7", "ISO_8859_8", "JOHAB", "KOI8R", "KOI8U",
             "LATIN1", "LATIN2", "LATIN3", "LATIN4", "LATIN5", "LATIN6", "LATIN7", "LATIN8",
             "LATIN9", "LATIN10", "MULE_INTERNAL", "SJIS", "SHIFT_JIS_2004", "SQL_ASCII", "UHC",
             "UTF8", "WIN866", "WIN874", "WIN1250", "WIN1251", "WIN1252", "WIN1253", "WIN1254",
             "WIN1255", "WIN1256", "WIN1257", "WIN1258")
#: queries whose answers or error texts hold non-ASCII characters in the client's encoding
QUERIES = (b"SELECT 'plain', 1", b"SELECT chr(233), chr(12354), chr(1046)",
           b"SELECT chr(233)::int", b"SELECT chr(1046)::int", b"SELECT 'caf\xc3\xa9'",
           b"SELECT 'caf\xe9'", b"SELECT '\xff'")


@pytest.fixture(params=["off", "explicit"])
def through(pg: Any, request: pytest.FixtureRequest) -> Iterator[InProcessWeir]:
    server = InProcessWeir.start(pg.dsn(), caching=request.param)
    try:
        yield server
    finally:
        server.stop()


def _outcome(conn: Any, sql: bytes) -> tuple[Any, ...]:
    res = conn.pgconn.exec_(sql)
    if res.status == pq.ExecStatus.TUPLES_OK:
        return ("rows", tuple(res.get_value(0, i) for i in range(res.nfields)))
    return ("error", res.error_field(pq.DiagnosticField.SQLSTATE),
            res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_client_encoding(pg: Any, through: InProcessWeir, encoding: str) -> None:
    with psycopg.connect(through.dsn(), autocommit=True) as mine, \
            psycopg.connect(pg.dsn(), autocommit=True) as theirs:
        for conn in (mine, theirs):
            conn.pgconn.exec_(f"SET client_encoding = '{encoding}'".encode())
        for sql in QUERIES:
            assert _outcome(mine, sql) == _outcome(theirs, sql), (encoding, sql)
        assert mine.pgconn.status == pq.ConnStatus.OK
        assert _outcome(mine, b"SELECT 1") == ("rows", (b"1",))


def test_latin1_at_startup_with_psycopg(pg: Any, through: InProcessWeir) -> None:
    with psycopg.connect(through.dsn(), autocommit=True, client_encoding="LATIN1") as conn:
        assert conn.execute("SELECT 'café', %s::text", ("thé",)).fetchone() == ("café", "thé")
        with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="é"):
            conn.execute("SELECT 'é'::int")
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _raw_session(port: int) -> tuple[socket.socket, Framer]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    sock.sendall(fe.StartupMessage({"user": "postgres", "database": "postgres"}).encode())
    framer = Framer()
    _until_ready(sock, framer)
    return sock, framer


def _until_ready(sock: socket.socket, framer: Framer) -> list[object]:
    out: list[object] = []
    while True:
        while (item := framer.next()) is not None:
            msg = be.decode_backend(*item)
            out.append(msg)
            if isinstance(msg, be.ReadyForQuery):
                return out
        data = sock.recv(65536)
        assert data, out
        framer.feed(data)


def _frame(mtype: bytes, payload: bytes) -> bytes:
    return mtype + (len(payload) + 4).to_bytes(4, "big") + payload


MALFORMED = {  # what weir cannot decode; PostgreSQL answers an ERROR and goes on
    "query with a NUL inside": _frame(b"Q", b"SELECT 1\0SELECT 2\0"),
    "parse with trailing bytes": _frame(b"P", b"\0SELECT 1\0\0\0junk") + _frame(b"S", b""),
    "bind with a bad length": _frame(b"B", b"\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0")
    + _frame(b"S", b""),
    "describe of a bad kind": _frame(b"D", b"Xname\0") + _frame(b"S", b""),
    "close without a name": _frame(b"C", b"S") + _frame(b"S", b""),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_messages_get_an_error_and_the_session_goes_on(
        pg: Any, through: InProcessWeir, name: str) -> None:
    outcomes = []
    for port in (through.port, pg.port):
        sock, framer = _raw_session(port)
        with sock:
            sock.sendall(MALFORMED[name])
            answer = _until_ready(sock, framer)
            errors = [dict(m.fields) for m in answer if isinstance(m, be.ErrorResponse)]
            outcomes.append([(e["S"], e["C"]) for e in errors])
            sock.sendall(fe.Query("SELECT 7").encode())
            answer = _until_ready(sock, framer)
            assert any(isinstance(m, be.DataRow) for m in answer), answer
    assert outcomes[0] == outcomes[1], outcomes  # PostgreSQL's own error, through weir too
    assert [severity for severity, _ in outcomes[0]] == ["ERROR"], outcomes
