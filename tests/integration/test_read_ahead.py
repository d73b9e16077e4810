"""How far a pipelining client writes ahead of a server that is not reading: through weir
about as far as directly (issue 19, asyncpg's ``test_executemany_server_failure_during_writes``).

A client streaming Bind/Execute pairs without waiting (asyncpg's ``executemany``) learns of a
server error early in the stream only when its writes are held back meanwhile; directly they
are, once its send buffer and the server's receive buffer are full. Here the server is held
deterministically — the first row's INSERT waits on a lock another session holds, so
PostgreSQL reads nothing more — and the client writes until nothing more is taken, once
directly and once through weir: weir may add its own small buffers, not megabytes. Then the
lock goes, the second row collides with the first, and the client gets the error and no row.
"""

from __future__ import annotations

import select
import socket
from typing import Any

import psycopg

from pgwire import frontend as fe
from pgwire.errors import ErrorResponse
from tests.integration.test_relay_faults import RawClient
from tests.support import eventually, weir_over

SETUP = "CREATE TABLE exmany (a text, b int PRIMARY KEY);"
#: what weir may hold beyond a direct connection: its client socket's receive window (32
#: KiB buffer), one read, its upstream queue (16 KiB) and unsent bytes (4 KiB and one
#: segment): about 125 KB measured; 458 KB with a 128 KiB receive buffer and a 64 KiB queue,
#: 5 MB before any bound
EXTRA_ALLOWED = 192 * 1024
#: the stream's end if nothing holds the client back (the test then fails)
MOST_ROWS = 1500
#: nothing more taken for this long: the client is held back (a bound, not a synchronization)
QUIET = 1.0


def _row(key: int, text: str) -> bytes:
    bind = fe.Bind("", "", params=(text.encode(), str(key).encode()))
    return bind.encode() + fe.Execute().encode()


def _stream(port: int, pg: Any, dbname: str) -> tuple[int, list[object]]:
    """Bytes of rows the client could write while the server was held; then what the
    server answered once released and synced."""
    holder = psycopg.connect(pg.dsn(dbname=dbname))
    watcher = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
    client = RawClient(port, dbname=dbname)
    try:
        holder.execute("LOCK TABLE exmany")
        # fixed, so that the measure is the path's and not the client's send autotuning
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        client.send(fe.Parse("", "INSERT INTO exmany VALUES ($1, $2)").encode() + _row(0, "a"))
        eventually(lambda: watcher.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted "
            "AND relation = 'exmany'::regclass").fetchone() == (1,))
        rows = [_row(0, "a")] + [_row(key, "a" * 32768) for key in range(1, MOST_ROWS)]
        sent, pending = _write_until_held(client.sock, rows)
        holder.commit()  # the INSERT goes on; the second row collides with the first
        client.sock.setblocking(True)
        client.send(pending + fe.Sync().encode())
        answers = client.until_ready()
        assert watcher.execute("SELECT count(*) FROM exmany").fetchone() == (0,)
        return sent, answers
    finally:
        client.close()
        holder.close()
        watcher.close()


def _write_until_held(sock: socket.socket, rows: list[bytes]) -> tuple[int, bytes]:
    """Write ``rows`` without blocking until nothing more is taken for ``QUIET`` seconds;
    returns the bytes taken and the rest."""
    sock.setblocking(False)
    rest = b"".join(rows)
    sent = 0
    while rest:
        try:
            n = sock.send(rest[:1 << 20])
        except BlockingIOError:
            if not select.select([], [sock], [], QUIET)[1]:
                break
            continue
        sent += n
        rest = rest[n:]
    return sent, rest


def _sqlstates(answers: list[object]) -> list[str]:
    return [m.sqlstate for m in answers if isinstance(m, ErrorResponse)]


def test_client_is_held_back_as_directly(pg: Any, dbname: str) -> None:
    with weir_over(pg, dbname, SETUP) as weir:
        through_weir, weir_answers = _stream(weir.port, pg, dbname)
    directly, direct_answers = _stream(pg.port, pg, dbname)
    assert _sqlstates(direct_answers) == ["23505"]
    assert _sqlstates(weir_answers) == ["23505"]
    total = sum(map(len, [_row(0, "a")] + [_row(k, "a" * 32768) for k in range(1, MOST_ROWS)]))
    assert directly < total, "the server's buffers took every row: nothing to compare"
    assert through_weir <= directly + EXTRA_ALLOWED, (through_weir, directly)
