"""Both state machines relaying real clients to a real PostgreSQL (a test-only threaded relay).

Each app connection gets a ``ServerConnection`` (facing the app) and a ``ClientConnection``
(facing the upstream). The startup and authentication messages are decoded and re-encoded;
afterwards bytes are forwarded raw with ``next_raw`` / ``send_relayed``, so both
conversations track every message. Any ProtocolViolation is recorded and fails the test: real
drivers (psycopg 3 with pipelining and COPY, asyncpg's extended protocol) must never trip the
tables of ``tests.oracle.conversation``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg
import pytest

from pgwire import frontend as fe
from pgwire.events import CONNECTION_CLOSED, NEED_DATA, Phase, SSLResponse, State
from pgwire.framing import ProtocolViolation
from tests.oracle.client_conn import ClientConnection
from tests.oracle.server_conn import ServerConnection


class RelaySession:
    def __init__(self, app: socket.socket, upstream: socket.socket, errors: list[str]) -> None:
        self.app, self.upstream, self.errors = app, upstream, errors
        self.server, self.client = ServerConnection(), ClientConnection()
        self.lock = threading.Lock()

    def app_to_upstream(self) -> None:
        while True:
            with self.lock:
                if self.server.phase in (Phase.STARTING, Phase.READY):
                    item: Any = self.server.next_raw()
                    if isinstance(item, tuple):
                        out = self.client.send_relayed(*item)
                else:
                    item = self.server.next_event()
                    if isinstance(item, fe.SSLRequest | fe.GSSENCRequest):
                        self.app.sendall(self.server.send(SSLResponse(False)))
                        continue
                    if item is not NEED_DATA and item is not CONNECTION_CLOSED:
                        out = self.client.send(item)
            if item is CONNECTION_CLOSED:
                return
            if item is NEED_DATA:
                data = self.app.recv(65536)
                with self.lock:
                    self.server.receive_data(data)
                continue
            self.upstream.sendall(out)
            if self.server.phase is Phase.CLOSED:
                return

    def upstream_to_app(self) -> None:
        while True:
            with self.lock:
                if self.client.phase is Phase.STARTUP:  # the startup packet is not out yet
                    item: Any = self.client.next_event()
                else:
                    item = self.client.next_raw()
                if isinstance(item, tuple):
                    out = self.server.send_relayed(*item)
            if item is CONNECTION_CLOSED:
                return
            if item is NEED_DATA:
                data = self.upstream.recv(65536)
                with self.lock:
                    self.client.receive_data(data)
                continue
            self.app.sendall(out)

    def run(self, direction: str) -> None:
        try:
            (self.app_to_upstream if direction == "up" else self.upstream_to_app)()
        except ProtocolViolation as exc:
            self.errors.append(f"{direction}: {exc}")
        except OSError:
            pass
        finally:
            for sock in (self.app, self.upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class Relay:
    def __init__(self, pg: Any) -> None:
        self.pg = pg
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.errors: list[str] = []
        self.sessions: list[RelaySession] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                app, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.pg.host, self.pg.port))
            session = RelaySession(app, upstream, self.errors)
            self.sessions.append(session)
            for direction in ("up", "down"):
                threading.Thread(target=session.run, args=(direction,), daemon=True).start()

    def dsn(self, dbname: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}?sslmode=prefer"


@pytest.fixture
def relay(pg: Any) -> Iterator[Relay]:
    r = Relay(pg)
    yield r
    r.listener.close()
    assert r.errors == []


def test_psycopg_through_the_relay(relay: Relay, dbname: str) -> None:
    with psycopg.connect(relay.dsn(dbname), autocommit=True) as conn:
        conn.execute("create table t (id int primary key, v text)")
        with conn.cursor() as cur:
            cur.executemany("insert into t values (%s, %s)", [(i, f"v{i}") for i in range(50)])
            with cur.copy("copy t from stdin") as copy:
                for i in range(50, 60):
                    copy.write_row((i, f"c{i}"))
            cur.execute("select count(*) from t where id >= %s", (10,), prepare=True)
            assert cur.fetchone() == (50,)
            cur.execute("select count(*) from t where id >= %s", (20,), prepare=True)
            assert cur.fetchone() == (40,)
            with cur.copy("copy (select v from t order by id) to stdout") as copy:
                assert len(list(copy.rows())) == 60
        with pytest.raises(psycopg.errors.UniqueViolation), conn.pipeline():
            conn.execute("insert into t values (100, 'x')")
            conn.execute("insert into t values (1, 'dup')")
            conn.execute("select 1")
        with conn.pipeline():
            cur = conn.execute("select count(*) from t")
            conn.execute("select pg_sleep(0)")
        assert cur.fetchone() == (60,)  # one Sync: the failed batch rolled back
        with conn.transaction():
            conn.execute("update t set v = 'y' where id = 1")
            session = relay.sessions[-1]
            assert session.server.transaction_status == "T"
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("select 1/0")
        assert conn.execute("select v from t where id = 1").fetchone() == ("y",)
    session = relay.sessions[-1]
    assert session.server.state is State.IDLE


def test_asyncpg_through_the_relay(relay: Relay, dbname: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(relay.dsn(dbname), ssl=False)
        try:
            await conn.execute("create table a (id int, t text)")
            await conn.executemany(
                "insert into a values ($1, $2)", [(i, str(i)) for i in range(20)]
            )
            await conn.copy_records_to_table("a", records=[(100, "c")])
            assert await conn.fetchval("select count(*) from a where id < $1", 10) == 10
            stmt = await conn.prepare("select * from a where id = $1")
            assert (await stmt.fetchrow(100))["t"] == "c"
            async with conn.transaction():
                cur = await conn.cursor("select id from a order by id")
                assert len(await cur.fetch(5)) == 5
            with pytest.raises(asyncpg.UndefinedTableError):
                await conn.fetch("select * from missing")
        finally:
            await conn.close()

    asyncio.run(run())


def test_psql_copy_through_the_relay(relay: Relay, dbname: str, tmp_path: Any) -> None:
    import subprocess

    from proxy.localpg import find_bindir

    src = tmp_path / "rows.tsv"
    src.write_text("".join(f"{i}\tr{i}\n" for i in range(100)))
    script = (
        "create table p (id int, v text);\n"
        f"\\copy p from '{src}'\n"
        "select count(*), max(v) from p;\n"
        "\\copy (select * from p where id < 3) to stdout\n"
    )
    out = subprocess.run(
        [str(find_bindir() / "psql"), relay.dsn(dbname), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "100|r99" in out
    assert "0\tr0\n1\tr1\n2\tr2" in out
