"""The protocol model test: weir answers every generated message sequence as PostgreSQL does.

A model of one client's prepared statements and portals (named and unnamed) generates
sequences of extended-protocol messages (Parse, Bind, Describe, Execute with and without a
row limit, Close, Sync, Flush) and simple Queries (reads, writes, BEGIN/COMMIT/ROLLBACK; only
between batches, as libpq's pipeline mode requires: PostgreSQL skips a Query inside an
unfinished batch or not depending on an error weir may not have seen yet), over statements
that caches serve, statements they do not, writes and statements that fail.
Each sequence is cut into round trips at random (after any Sync, Query or Flush, so that
several batches may be pipelined in one write and a Parse may travel alone with its Sync or
Flush) and sent twice: through weir, whose database has caches over the table, and directly
to PostgreSQL, to a database copied from the same template (so relation OIDs agree). Every
reply message must be byte-identical in both, and after every sequence both tables must hold
the same rows (every write reached PostgreSQL, once).

:data:`SEQUENCES` (300) sequences run (a client reconnects every :data:`PER_CONNECTION`),
seeded from :data:`SEED`; a failure names the sequence's seed and prints its round trips.
``MODEL_SEQUENCES`` and ``MODEL_SEED`` in the environment run more, or others.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from pgwire import frontend as fe
from pgwire.framing import Framer
from tests.support import InProcessWeir, unique_name

#: how many generated sequences the test runs, and how many share one connection
SEQUENCES = int(__import__("os").environ.get("MODEL_SEQUENCES", "300"))
PER_CONNECTION = 12
SEED = int(__import__("os").environ.get("MODEL_SEED", "20261125"))

SCHEMA = """
CREATE TABLE t (k int PRIMARY KEY, v int NOT NULL, g int NOT NULL);
INSERT INTO t SELECT i, i * 10, i % 4 FROM generate_series(1, 20) i;
"""
CACHES = (
    "SELECT v FROM t WHERE k = $1",
    "SELECT k, v FROM t WHERE g = $1 ORDER BY k",
)


@dataclass(frozen=True, slots=True)
class Text:
    """A statement text the model may prepare, with its number of parameters."""

    sql: str
    params: int


TEXTS = (
    Text("SELECT v FROM t WHERE k = $1", 1),  # cached
    Text("SELECT k, v FROM t WHERE g = $1 ORDER BY k", 1),  # cached, several rows
    Text("SELECT v FROM t WHERE k = 3", 0),  # cached (the literal is a key)
    Text("SELECT k * 100 AS x FROM t WHERE k = $1", 1),  # not cached
    Text("UPDATE t SET v = v + 1 WHERE k = $1 RETURNING v", 1),
    Text("INSERT INTO t VALUES ($1, 0, 1) ON CONFLICT (k) DO UPDATE SET v = t.v + 1000", 1),
    Text("DELETE FROM t WHERE k = $1", 1),
    Text("SELECT 10 / ($1::int - $1::int)", 1),  # fails at Execute
    Text("SELEC v FROM t", 0),  # fails at Parse
)
QUERIES = (
    "SELECT v FROM t WHERE k = 4",
    "SELECT k, v FROM t WHERE g = 2 ORDER BY k",
    "UPDATE t SET v = v + 1 WHERE k = 4",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SELECT 1/0",
)
STATEMENTS = ("", "", "s1", "s2")
PORTALS = ("", "", "p1")


@dataclass
class Model:
    """What the client believes its session holds (to generate mostly meaningful input)."""

    statements: dict[str, Text] = field(default_factory=dict)
    portals: set[str] = field(default_factory=set)
    batch: bool = False  # extended messages were sent since the last Sync

    def step(self, rng: random.Random) -> fe.Parse | fe.Bind | fe.Describe | fe.Execute \
            | fe.Close | fe.Sync | fe.Flush | fe.Query:
        kind = rng.choices(
            ("parse", "bind", "describe", "execute", "close", "sync", "flush", "query"),
            (5, 5, 2, 5, 1, 3, 1, 1))[0]
        if kind == "query" and self.batch:
            kind = "sync"  # a simple Query only between batches (libpq's pipeline rule)
        self.batch = kind not in ("sync", "query")
        if kind == "parse":
            name = rng.choice(STATEMENTS)
            text = rng.choice(TEXTS)
            if name and name in self.statements and rng.random() < 0.8:
                self.statements.pop(name)  # mostly close it first
                return fe.Close("S", name)
            self.statements[name] = text
            return fe.Parse(name, text.sql, (23,) * text.params if rng.random() < 0.3 else ())
        if kind == "bind" and (self.statements or rng.random() < 0.1):
            name = rng.choice(sorted(self.statements) or ["nowhere"])
            count = self.statements[name].params if name in self.statements else 1
            portal = rng.choice(PORTALS)
            self.portals.add(portal)
            binary = rng.random() < 0.3
            return fe.Bind(portal, name, (1,) if binary and count else (),
                           tuple(_param(rng.randint(1, 24), binary) for _ in range(count)),
                           (1,) if rng.random() < 0.3 else ())
        if kind == "describe":
            if rng.random() < 0.5 and self.statements:
                return fe.Describe("S", rng.choice(sorted(self.statements)))
            return fe.Describe("P", rng.choice(sorted(self.portals) or [""]))
        if kind == "execute" and self.portals:
            return fe.Execute(rng.choice(sorted(self.portals)), rng.choice((0, 0, 0, 1, 2)))
        if kind == "close":
            if self.statements and rng.random() < 0.6:
                name = rng.choice(sorted(self.statements))
                self.statements.pop(name)
                return fe.Close("S", name)
            portal = rng.choice(PORTALS)
            self.portals.discard(portal)
            return fe.Close("P", portal)
        if kind == "flush":
            return fe.Flush()
        if kind == "query":
            self.portals.clear()
            return fe.Query(rng.choice(QUERIES))
        self.portals.clear()
        return fe.Sync()


def _param(value: int, binary: bool) -> bytes:
    return value.to_bytes(4, "big", signed=True) if binary else str(value).encode()


def generate(rng: random.Random, model: Model) -> list[list[object]]:
    """One sequence of messages, cut into round trips (each ends with Sync, Query or Flush)."""
    messages = [model.step(rng) for _ in range(rng.randint(3, 18))]
    if not isinstance(messages[-1], fe.Sync | fe.Query):
        messages.append(fe.Sync())
        model.portals.clear()
        model.batch = False
    trips: list[list[object]] = [[]]
    for i, msg in enumerate(messages):
        trips[-1].append(msg)
        if isinstance(msg, fe.Sync | fe.Query | fe.Flush) and i < len(messages) - 1 \
                and rng.random() < 0.6:
            trips.append([])
    return trips


class Client:
    """A blocking connection that reads exactly the replies a round trip asks for."""

    def __init__(self, port: int, dbname: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.framer = Framer(1 << 30)
        self.failed = False
        self.sock.sendall(fe.StartupMessage({"user": "postgres", "database": dbname}).encode())
        while self._next()[0] != ord("Z"):
            pass

    def _next(self) -> tuple[int, bytes]:
        while True:
            item = self.framer.next()
            if item is not None:
                return item
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError("the server closed the connection")
            self.framer.feed(data)

    def round_trip(self, messages: list[object]) -> list[tuple[int, bytes]]:
        """Send the messages in one write; read the replies they are owed (a Flush makes
        the server send what it owes so far; an error skips the rest up to Sync)."""
        self.sock.sendall(b"".join(m.encode() for m in messages))  # type: ignore[attr-defined]
        replies: list[tuple[int, bytes]] = []
        failed = self.failed  # an error earlier in the batch: skipped up to Sync

        def take(*ends: int) -> int:
            while True:
                mtype, payload = self._next()
                replies.append((mtype, payload))
                if mtype in ends or mtype == ord("E"):
                    return mtype

        for msg in messages:
            if isinstance(msg, fe.Sync):
                take(ord("Z"))
                failed = False
                continue
            if failed or isinstance(msg, fe.Flush):
                continue  # (after an error the server skips everything up to Sync)
            if isinstance(msg, fe.Query):
                while take(ord("Z")) != ord("Z"):
                    pass
                continue
            ends = _ENDS[type(msg)]
            if isinstance(msg, fe.Describe) and msg.kind == "S":
                got = take(ord("t"))
                if got != ord("E"):
                    got = take(ord("T"), ord("n"))
            else:
                got = take(*ends)
            failed = got == ord("E")
        self.failed = failed
        return replies

    def close(self) -> None:
        self.sock.sendall(fe.Terminate().encode())
        self.sock.close()


_ENDS: dict[type, tuple[int, ...]] = {
    fe.Parse: (ord("1"),),
    fe.Bind: (ord("2"),),
    fe.Describe: (ord("T"), ord("n")),
    fe.Execute: (ord("C"), ord("s"), ord("I")),
    fe.Close: (ord("3"),),
}


def _show(trips: list[list[object]]) -> str:
    return "\n".join(" | ".join(repr(m) for m in trip) for trip in trips)


def _rows(pg: Any, dbname: str) -> str:
    return str(pg.psql("SELECT k, v, g FROM t ORDER BY k", dbname))


@pytest.fixture
def twins(pg: Any) -> Iterator[tuple[InProcessWeir, str, str]]:
    """weir over one copy of the template database with the caches; another copy direct."""
    template = unique_name("model_tpl")
    pg.psql(f"CREATE DATABASE {template}")
    pg.psql(SCHEMA, template)
    through, direct = unique_name("model_weir"), unique_name("model_pg")
    for name in (through, direct):
        pg.psql(f"CREATE DATABASE {name} TEMPLATE {template}")
    server = InProcessWeir.start(pg.dsn(dbname=through))
    try:
        with psycopg.connect(server.dsn(dbname=through), autocommit=True) as conn:
            for i, sql in enumerate(CACHES):
                conn.execute(f"CREATE CACHE model_{i} FROM {sql}")
        yield server, through, direct
    finally:
        server.stop()


def test_generated_sequences_answer_as_postgres(pg: Any, twins: Any) -> None:
    server, through, direct = twins
    clients: tuple[Client, Client] | None = None
    for n in range(SEQUENCES):
        if n % PER_CONNECTION == 0:
            if clients is not None:
                for c in clients:
                    c.close()
            clients = (Client(server.port, through), Client(pg.port, direct))
            model = Model()
        assert clients is not None
        seed = SEED + n
        rng = random.Random(seed)
        trips = generate(rng, model)
        for i, trip in enumerate(trips):
            want = clients[1].round_trip(trip)
            try:
                got = clients[0].round_trip(trip)
            except (AssertionError, OSError) as exc:
                raise AssertionError(f"sequence seed {seed}, round trip {i}: {exc!r}; "
                                     f"PostgreSQL answered\n{want}\n{_show(trips)}") from exc
            assert got == want, (
                f"sequence seed {seed}, round trip {i}: weir answered\n{got}\nPostgreSQL\n"
                f"{want}\nthe round trips:\n{_show(trips)}")
        assert _rows(pg, through) == _rows(pg, direct), (
            f"sequence seed {seed}: the tables differ after\n{_show(trips)}")
    assert clients is not None
    for c in clients:
        c.close()
    with psycopg.connect(server.dsn(dbname=through), autocommit=True) as conn:
        status = dict(conn.execute("SHOW WEIR STATUS").fetchall())
    assert int(status["hits"]) > 0, status  # the caches did answer some of it
