"""Hit lanes (``proxy.lanes``) inside weir, against the real upstream.

- Differential, byte for byte: the same raw client byte stream (prepared reads with and
  without Describe, pipelined runs, runs mixed with other messages in one write, statements
  weir does not cache) sent through a weir with a lane and a weir without lanes, with upstream
  writes in between, gets the same reply bytes from both; the lane must have answered many
  reads. The event loop's hit path is the lanes' pure-Python twin: this is their parity test.
- A session in a lane still gets what the upstream sends it (a notification), and is taken
  back when its client goes away or weir stops.

Under ``WEIR_IMPL=python`` there are no lanes (asking for them logs a warning): the same
byte streams must then come from the event loop, and the lane-only checks say so.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
from types import SimpleNamespace
from typing import Any

import asyncpg
import psycopg
import pytest

import cython_ext
from tests.integration.test_wire_client import connect
from tests.support import InProcessWeir, eventually, eventually_async

LANES = cython_ext.load("lanes") is not None
QUERY = "SELECT id, name, score FROM things WHERE grp = $1"


def _setup(pg: Any, dbname: str) -> None:
    pg.psql(
        "CREATE TABLE things (id int PRIMARY KEY, grp int, name text, score int);"
        "INSERT INTO things SELECT g, g % 10, 'n' || (g * 7 % 13), (g * 31) % 50 "
        "FROM generate_series(1, 200) g",
        dbname,
    )


def msg(t: bytes, payload: bytes) -> bytes:
    return t + struct.pack("!I", len(payload) + 4) + payload


def parse(name: str, sql: str) -> bytes:
    return msg(b"P", name.encode() + b"\x00" + sql.encode() + b"\x00\x00\x00")


def run(name: str, key: int, describe: bool, binary: bool = False) -> bytes:
    value = str(key).encode()
    formats = b"\x00\x01\x00\x01" if binary else b"\x00\x00"
    out = msg(b"B", b"\x00" + name.encode() + b"\x00\x00\x00\x00\x01"
              + struct.pack("!I", len(value)) + value + formats)
    if describe:
        out += msg(b"D", b"P\x00")
    return out + msg(b"E", b"\x00\x00\x00\x00\x00") + msg(b"S", b"")


def query(sql: str) -> bytes:
    return msg(b"Q", sql.encode() + b"\x00")


def replies(sock: socket.socket, ready: int) -> bytes:
    """Raw bytes up to and including the ``ready``-th ReadyForQuery."""
    buf = b""
    pos = seen = 0
    while seen < ready:
        while len(buf) - pos >= 5 and len(buf) - pos >= 1 + int.from_bytes(buf[pos + 1:pos + 5],
                                                                            "big"):
            if buf[pos:pos + 1] == b"Z":
                seen += 1
            pos += 1 + int.from_bytes(buf[pos + 1:pos + 5], "big")
            if seen == ready:
                break
        if seen < ready:
            chunk = sock.recv(65536)
            assert chunk, "weir closed the connection"
            buf += chunk
    assert pos == len(buf), "bytes after the last ReadyForQuery"
    return buf


def same_replies(socks: list[socket.socket], chunk: bytes, ready: int, split: int = 0) -> bool:
    """Send ``chunk`` on every socket (in two writes when ``split`` is inside it) and whether
    the reply bytes up to its ``ready``-th ReadyForQuery are the same on all (printed if
    not)."""
    got = []
    for sock in socks:
        if 0 < split < len(chunk):
            sock.sendall(chunk[:split])
            sock.sendall(chunk[split:])
        else:
            sock.sendall(chunk)
        got.append(replies(sock, ready))
    if any(reply != got[0] for reply in got):
        print("MISMATCH", chunk, got)
        return False
    return True


def _status(server: InProcessWeir) -> dict[str, Any]:
    lanes = server.server.service.lanes
    return lanes.stats() if lanes is not None else {}


def _raw_session(server: InProcessWeir, dbname: str) -> socket.socket:
    s = connect(SimpleNamespace(host="127.0.0.1", port=server.port), "postgres", dbname)
    s.sock.settimeout(20)
    sock: socket.socket = s.sock
    return sock


@pytest.mark.parametrize("lanes", [1, None], ids=["one lane", "a pinned lane per CPU"])
def test_lanes_answer_byte_for_byte_as_the_event_loop(pg: Any, dbname: str,
                                                      lanes: int | None) -> None:
    """The same byte streams through a weir with lanes (one unpinned lane, or the default:
    one per CPU, pinned, sessions moving to the lane of the CPU the client sends from) and
    through one without get the same replies."""
    _setup(pg, dbname)
    rng = random.Random(20261122)
    with_lane = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=lanes)
    without = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=0)
    try:
        assert (with_lane.server.service.lanes is not None) == LANES
        assert without.server.service.lanes is None
        socks = []
        for server in (with_lane, without):
            sock = _raw_session(server, dbname)
            sock.sendall(query(f"CREATE CACHE lanes_by_grp FROM {QUERY}"))
            replies(sock, 1)
            # (a batch with anything upstream goes upstream whole: s2 on its own)
            sock.sendall(parse("s1", QUERY) + parse("s3", QUERY) + msg(b"S", b""))
            sock.sendall(parse("s2", "SELECT $1::int + 1") + msg(b"S", b""))
            replies(sock, 2)
            socks.append(sock)
        direct = psycopg.connect(pg.dsn(dbname=dbname), autocommit=True)
        mismatches = compared = 0
        for step in range(400):
            if step % 100 == 99:  # an upstream write: stamped answers must not outlive it
                direct.execute("UPDATE things SET score = score + 1 WHERE grp = %s",
                               (rng.randint(0, 12),))
                for server in (with_lane, without):
                    server.call(server.server.service.host.barrier(10))
            chunk, ready = b"", 0
            mixed = step % 100 < 40  # phases of mixed chunks, then of cached reads only
            for _ in range(rng.choice((1, 1, 1, 2, 4))):
                kind = rng.random() if mixed else 0.0
                key = rng.randint(0, 3) if kind < 0.7 else rng.randint(0, 12)
                if kind < 0.7:
                    chunk += run(rng.choice(("s1", "s3")), key, rng.random() < 0.5,
                                 binary=rng.random() < 0.3)
                elif kind < 0.8:
                    chunk += run("s2", key, rng.random() < 0.5)  # not a cached statement
                elif kind < 0.9:
                    chunk += query("SELECT 1")
                else:
                    chunk += query(f"SELECT id, name, score FROM things WHERE grp = {key}")
                ready += 1
            compared += 1
            mismatches += not same_replies(socks, chunk, ready)
        assert mismatches == 0
        stats = _status(with_lane)
        print(f"compared {compared}; lane stats {stats}")
        if LANES:
            assert stats["lane_answers"] > 100
            assert stats["lane_entered"] >= 3  # writes sent the session back to the loop
            pinned = ",".join(map(str, sorted(os.sched_getaffinity(0))[:64]))
            assert stats["lane_cpus"] == ("none" if lanes == 1 and "," in pinned else pinned)
        for sock in socks:
            sock.close()
        direct.close()
    finally:
        with_lane.stop()
        without.stop()


def test_a_session_in_a_lane_gets_notifications_and_is_taken_back(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as admin:
            admin.execute(f"CREATE CACHE lanes_notify FROM {QUERY}")

        async def scenario() -> list[str]:
            got: list[str] = []
            conn = await asyncpg.connect(server.dsn(dbname=dbname))
            try:
                await conn.add_listener("lanes_ch", lambda *args: got.append(args[3]))
                want = [tuple(r) for r in await conn.fetch(
                    "SELECT id, name, score FROM things WHERE grp = 3", timeout=10)]

                async def read_in_lane() -> bool:
                    rows = [tuple(r) for r in await conn.fetch(QUERY, 3)]
                    assert sorted(rows) == sorted(want)
                    return not LANES or _status(server)["lane_sessions"] == 1

                await eventually_async(read_in_lane, 10)
                direct = await asyncpg.connect(pg.dsn(dbname=dbname))
                await direct.execute("NOTIFY lanes_ch, 'hello'")
                await direct.close()

                async def notified() -> list[str]:
                    return got

                await eventually_async(notified, 10)
                rows = [tuple(r) for r in await conn.fetch(QUERY, 3)]
                assert sorted(rows) == sorted(want)
                return got
            finally:
                await conn.close()

        assert asyncio.run(scenario()) == ["hello"]
        eventually(lambda: not server.server.sessions, 10)
        if LANES:
            assert _status(server)["lane_sessions"] == 0
    finally:
        server.stop()


def test_sessions_in_lanes_end_with_their_client_and_with_weir(pg: Any, dbname: str) -> None:
    _setup(pg, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), hit_lanes=1)
    stopped = False
    try:
        socks = [_raw_session(server, dbname) for _ in range(2)]
        socks[0].sendall(query(f"CREATE CACHE lanes_end FROM {QUERY}"))
        replies(socks[0], 1)
        for i, sock in enumerate(socks):
            sock.sendall(parse("s1", QUERY) + msg(b"S", b""))
            replies(sock, 1)

            def read_in_lane(sock: socket.socket = sock, want: int = i + 1) -> bool:
                sock.sendall(run("s1", 4, False))
                replies(sock, 1)
                return not LANES or _status(server)["lane_sessions"] == want

            eventually(read_in_lane, 10)
        socks[0].close()  # the client goes away while a lane reads it
        eventually(lambda: len(server.server.sessions) == 1, 10)
        if LANES:
            assert _status(server)["lane_sessions"] == 1
        server.stop()  # weir stops while a lane reads the other one
        stopped = True
        while socks[1].recv(65536):  # weir closed it (a timeout fails the test)
            pass
        assert not server.server.sessions
        socks[1].close()
    finally:
        if not stopped:
            server.stop()
