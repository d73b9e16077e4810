"""Test helpers shared by every suite: the upstream cluster handle and ``eventually``.

``eventually`` is the only way tests wait for something asynchronous: it polls a predicate
until it holds or a deadline passes (then fails with the last value seen). It is not a sleep
standing in for synchronisation: the predicate is the condition the test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg

T = TypeVar("T")


def eventually(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.01) -> T:
    """Poll ``predicate`` until it returns a truthy value; return it or raise AssertionError."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s (last: {value!r})")
        time.sleep(interval)
        value = predicate()
    return value


async def eventually_async(
    predicate: Callable[[], Awaitable[T]], timeout: float = 10.0, interval: float = 0.01
) -> T:
    """Async form of :func:`eventually`."""
    deadline = time.monotonic() + timeout
    value = await predicate()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s (last: {value!r})")
        await asyncio.sleep(interval)
        value = await predicate()
    return value


@dataclass
class ExternalCluster:
    """A cluster named by ``WEIR_TEST_DSN`` (superuser DSN); same surface as LocalCluster."""

    url: str

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 5432

    @property
    def superuser(self) -> str:
        return urlsplit(self.url).username or "postgres"

    def dsn(
        self,
        user: str | None = None,
        dbname: str = "postgres",
        password: str | None = None,
        **params: str,
    ) -> str:
        parts = urlsplit(self.url)
        auth = user or self.superuser
        if password is not None:
            auth += f":{password}"
        query = "&".join(["sslmode=disable", *(f"{k}={v}" for k, v in params.items())])
        return urlunsplit(
            (parts.scheme, f"{auth}@{self.host}:{self.port}", f"/{dbname}", query, "")
        )

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        with psycopg.connect(self.dsn(dbname=dbname), autocommit=True) as conn:
            cur = conn.execute(sql)
            if cur.description is None:
                return ""
            return "".join(
                "|".join("" if v is None else str(v) for v in row) + "\n" for row in cur.fetchall()
            )


def unique_name(prefix: str) -> str:
    """A fresh identifier (database, role, table) for one test."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def create_database(cluster: Any, prefix: str = "t") -> str:
    name = unique_name(prefix)
    cluster.psql(f"CREATE DATABASE {name}")
    return name


class WeirEndpoint:
    """Where a weir under test listens; ``dsn()`` connects through it."""

    host = "127.0.0.1"
    port = 0

    def dsn(
        self,
        user: str = "postgres",
        dbname: str = "postgres",
        password: str | None = None,
        sslmode: str = "disable",
    ) -> str:
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{dbname}?sslmode={sslmode}"


#: Most integration tests check what a cached read answers right after its key's first read,
#: so weirs started by these helpers wait for fills (``--misses wait``) and fill every missed
#: key (``--admission always``) unless a test says otherwise; the defaults (a miss answered
#: upstream, admission on the second read) are tested by tests/integration/test_misses.py.
WAITING_FILLS = {"misses": "wait", "admission": "always"}


class WeirProcess(WeirEndpoint):
    """``python -m proxy.cli serve`` in a subprocess; ``dsn()`` connects through it."""

    def __init__(self, proc: Any, port: int) -> None:
        self.proc = proc
        self.port = port
        self.log: list[str] = []  # its stderr lines

    @classmethod
    def start(
        cls,
        pg: Any,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
        upstream: str | None = None,
    ) -> WeirProcess:
        import os
        import subprocess
        import sys

        from proxy.localpg import free_port

        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--upstream",
            upstream or pg.dsn(),
            "--listen",
            f"127.0.0.1:{port}",
            *(extra or []),
        ]
        for name, value in WAITING_FILLS.items():
            if f"--{name}" not in argv and f"WEIR_{name.upper()}" not in (env or {}):
                argv += [f"--{name}", value]
        proc = subprocess.Popen(
            argv, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
        )
        assert proc.stderr is not None
        early: list[str] = []
        for line in proc.stderr:
            early.append(line)
            if "weir listening on" in line:
                break
        else:
            raise RuntimeError(f"weir did not start (exit {proc.wait()})")
        import threading

        weir = cls(proc, port)
        weir.log.extend(early)
        threading.Thread(target=weir._drain, daemon=True).start()
        return weir

    def _drain(self) -> None:
        """Keep the log lines (``log``) so that the pipe never fills."""
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


class InProcessWeir(WeirEndpoint):
    """A Server on its own event loop in a daemon thread (for white-box tests)."""

    def __init__(self) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: Any = None

    @classmethod
    def start(cls, upstream: str, **settings: Any) -> InProcessWeir:
        from proxy.server import Server
        from proxy.settings import Settings

        self = cls()
        self.thread.start()
        settings = {**WAITING_FILLS, **settings}
        self.server = Server(Settings(upstream=upstream, listen="127.0.0.1:0", **settings))
        self.call(self.server.start())
        self.port = self.server.port
        return self

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.call(self.server.close())
        # what close() left running (its grace ran out on a loaded machine: the replication
        # stream's task, say) ends here, on the loop: a coroutine left pending would be
        # closed when the loop is collected, outside it ("Event loop is closed")
        self.call(_end_tasks())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


async def _end_tasks() -> None:
    """Cancel every other task of the running loop and wait until they ended."""
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=20)


def last_statement(conn: psycopg.Connection[Any]) -> tuple[str, str]:
    """``EXPLAIN LAST STATEMENT`` through weir: where the session's last statement was
    answered (``cache`` or ``upstream``) and why."""
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    assert row is not None
    return (row[0], row[1])


def weir_status(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """``SHOW WEIR STATUS`` through weir, as a dict."""
    return dict(conn.execute("SHOW WEIR STATUS").fetchall())


def memo_answers(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(answers given by the hit lanes, by the event loop's hit path) so far
    (``lane_answers`` is absent without lanes)."""
    status = weir_status(conn)
    return int(status.get("lane_answers", 0)), int(status["loop_memo_answers"])


def kv_table(rows: int) -> str:
    """SQL for the table ``kv (k int PRIMARY KEY, v text)`` holding (g, 'v' || g) for g in
    1..``rows``: the lanes' and misses' tests read it by key (:func:`kv_read`)."""
    return ("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            f"INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, {rows}) g")


def kv_read(conn: psycopg.Connection[Any], k: int) -> Any:
    """``SELECT v FROM kv WHERE k = k`` (:func:`kv_table`): the value, or None."""
    row = conn.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()
    return None if row is None else row[0]


@contextlib.contextmanager
def weir_over(pg: Any, dbname: str, setup_sql: str, **settings: Any) -> Iterator[InProcessWeir]:
    """``setup_sql`` run directly in ``dbname`` (tables and rows), then an in-process weir in
    front of it for the ``with`` block, stopped after."""
    pg.psql(setup_sql, dbname)
    weir = InProcessWeir.start(pg.dsn(dbname=dbname), **settings)
    try:
        yield weir
    finally:
        weir.stop()


#: a random write to a differential test's tables: (connection, random, next id per table)
Write = Callable[[psycopg.Connection[Any], random.Random, dict[str, int]], None]


@dataclass(frozen=True)
class SideTable:
    """A generated table beside a differential test's schema — ``id``, ``grp`` (0..45) and
    generated ``columns`` — and the random writes that change it."""

    name: str
    columns: str  # the generated columns' definitions, e.g. "doc jsonb"
    seed: int  # of the rows' generator
    literals: Callable[[random.Random], str]  # one row's generated columns as SQL literals
    values: Callable[[random.Random], tuple[Any, ...]]  # an inserted row's generated columns
    update: str  # UPDATE ... SET (the generated columns) ... WHERE id = %s
    changes: Callable[[random.Random], tuple[Any, ...]]  # the update's values before the id
    elsewhere: float  # the share of writes that go to the other tables instead

    def schema(self, base: str, rows: int = 300) -> str:
        """``base`` and this table with ``rows`` generated rows (the same every time)."""
        rng = random.Random(self.seed)
        body = ", ".join(f"({i}, {i % 46}, {self.literals(rng)})" for i in range(1, rows + 1))
        return (base + f"CREATE TABLE {self.name} (id int PRIMARY KEY, grp int, "
                f"{self.columns});\nINSERT INTO {self.name} VALUES {body};\n")

    def writes(self, other: Write) -> Write:
        """A random write: ``other`` (to the other tables) for a share ``elsewhere``, else an
        insert into this table or an update of one of its rows, one to one."""
        def write(conn: psycopg.Connection[Any], rng: random.Random,
                  next_id: dict[str, int]) -> None:
            if rng.random() < self.elsewhere:
                other(conn, rng, next_id)
            elif rng.random() < 0.5:
                next_id[self.name] += 1
                row = (next_id[self.name], rng.randint(0, 45), *self.values(rng))
                conn.execute(f"INSERT INTO {self.name} VALUES "
                             f"({', '.join(['%s'] * len(row))})", row)
            else:
                conn.execute(self.update, (*self.changes(rng), rng.randint(1, next_id[self.name])))
        return write


@dataclass
class HeldApplier:
    """The applier of an in-process weir (``server``: an ``InProcessWeir``) held by a test:
    while held, what the replication stream delivers is kept, not applied (the cache lags),
    keepalives included (their position would pass the sessions' probes); released, it is
    applied in order."""

    server: Any
    kept: list[Any] = field(default_factory=list)

    def hold(self) -> None:
        self.server.call(self._hold())

    def release(self) -> None:
        self.server.call(self._release())

    def _applier(self) -> Any:
        return self.server.server.service.host.stream.applier

    async def _hold(self) -> None:
        self._applier().feed = self.kept.append
        # the stream's keepalives too: their position must not run ahead of what is applied
        stream = self.server.server.service.host.stream

        def keep(conn: Any, msg: Any) -> None:
            self.kept.append((conn, msg))
            if msg.reply_requested:
                stream._send_status(conn)

        stream._keepalive = keep

    async def _release(self) -> None:
        applier = self._applier()
        del applier.feed  # (the instance attribute: the applier's own feed again)
        stream = self.server.server.service.host.stream
        del stream._keepalive
        for msg in self.kept:
            if isinstance(msg, tuple):
                conn, keepalive = msg
                stream._keepalive(conn, keepalive)
            else:
                applier.feed(msg)
                if applier.applied_end_lsn >= stream.barriers.probe_floor:
                    stream.barriers.reached(stream.position())
