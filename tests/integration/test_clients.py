"""Real clients through ``weir serve``, unchanged: psycopg 3, psycopg2, asyncpg, SQLAlchemy
(psycopg2, psycopg and asyncpg drivers), psql (with ``\\copy``) and pgbench in its three
query modes. Every test talks to the real upstream cluster through the weir subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import psycopg2
import pytest
import sqlalchemy as sa

from tests.support import WeirProcess, eventually


def _bin(pg: Any, name: str) -> str:
    bindir = getattr(pg, "bindir", None)
    return str(Path(bindir) / name) if bindir else name


def test_psycopg3_simple_extended_pipeline_copy(weir: WeirProcess, dbname: str) -> None:
    with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric)")
        with conn.cursor() as cur, cur.copy("COPY items FROM STDIN") as copy:
            for i in range(1000):
                copy.write_row((i, f"item {i}", i * 1.5))
        assert conn.execute("SELECT count(*), sum(price) FROM items").fetchone() == (1000, 749250)
        # extended protocol with parameters, server-side prepared after a few executions
        for i in range(8):
            row = conn.execute(
                "SELECT name FROM items WHERE id = %s", (i,), prepare=True
            ).fetchone()
            assert row == (f"item {i}",)
        with conn.pipeline():
            curs = [conn.execute("SELECT %s::int * 2", (i,)) for i in range(20)]
        assert [c.fetchone()[0] for c in curs] == [i * 2 for i in range(20)]  # type: ignore[index]
        with (
            conn.cursor() as cur,
            cur.copy("COPY (SELECT id FROM items ORDER BY id) TO STDOUT") as copy,
        ):
            got = [int(row[0]) for row in copy.rows()]
        assert got == list(range(1000))


def test_psycopg3_errors_transactions_notices(weir: WeirProcess, dbname: str) -> None:
    with psycopg.connect(weir.dsn(dbname=dbname)) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("DO $$ BEGIN RAISE NOTICE 'hello from upstream'; END $$")
        assert notices == ["hello from upstream"]
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_table")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.rollback()
        conn.execute("CREATE TABLE t (a int)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.commit()
        assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
        assert conn.info.parameter_status("server_version") is not None


def test_listen_notify(weir: WeirProcess, dbname: str) -> None:
    with (
        psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as listener,
        psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as talker,
    ):
        listener.execute("LISTEN weir_channel")
        talker.execute("NOTIFY weir_channel, 'payload 1'")
        got = next(listener.notifies(timeout=10, stop_after=1))
        assert (got.channel, got.payload) == ("weir_channel", "payload 1")


def test_cancel_reaches_the_upstream(weir: WeirProcess, dbname: str) -> None:
    with (
        psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn,
        psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as watcher,
    ):
        pid = conn.info.backend_pid

        def sleeping() -> bool:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' "
                "AND state = 'active'"
            ).fetchone()
            return bool(row and row[0])

        import threading

        canceller = threading.Thread(target=lambda: (eventually(sleeping), conn.cancel()))
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(60)")
        canceller.join()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.backend_pid == pid


def test_backend_pid_is_the_upstreams(weir: WeirProcess, dbname: str) -> None:
    """The pid in BackendKeyData is the upstream backend's: pg_backend_pid() and a session's
    own notifications name it, and pg_terminate_backend() of it ends that session."""
    # (``conn`` is closed, not left by ``with``: after the terminate, leaving the block may
    # send a commit that meets the FATAL, as it may directly; the test is the error below)
    conn = psycopg.connect(weir.dsn(dbname=dbname), autocommit=True)
    with contextlib.closing(conn), \
            psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as other:
        pid = conn.info.backend_pid
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == (pid,)
        assert other.info.backend_pid != pid
        conn.execute("LISTEN mine")
        conn.execute("NOTIFY mine, 'self'")
        got = next(conn.notifies(timeout=10, stop_after=1))
        assert (got.pid, got.payload) == (pid, "self")
        assert other.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")


def test_cancel_is_delivered_before_the_cancel_connection_closes(
        weir: WeirProcess, dbname: str) -> None:
    """libpq waits for the cancel connection to close before it returns: through weir that
    close comes once the upstream took the cancel, so a cancel sent while the session is idle
    does not land on the next statement (as directly)."""
    with psycopg.connect(weir.dsn(dbname=dbname), autocommit=True) as conn:
        cancelled = 0
        for _ in range(10):
            conn.cancel()
            try:
                conn.execute("SELECT pg_sleep(0.05)")
            except psycopg.errors.QueryCanceled:
                cancelled += 1
        assert cancelled == 0


def test_psycopg2(weir: WeirProcess, dbname: str) -> None:
    import io

    conn = psycopg2.connect(weir.dsn(dbname=dbname))
    try:
        cur = conn.cursor()
        cur.execute("CREATE TABLE p2 (id int, label text)")
        cur.copy_expert("COPY p2 FROM STDIN", io.StringIO("1\tone\n2\ttwo\n"))
        cur.execute("SELECT label FROM p2 WHERE id = %s", (2,))
        assert cur.fetchall() == [("two",)]
        conn.commit()
        out = io.StringIO()
        cur.copy_expert("COPY p2 TO STDOUT", out)
        assert out.getvalue() == "1\tone\n2\ttwo\n"
        with pytest.raises(psycopg2.errors.DivisionByZero):
            cur.execute("SELECT 1/0")
        conn.rollback()
    finally:
        conn.close()


def test_asyncpg_binary_prepared_copy_cancel(weir: WeirProcess, dbname: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(weir.dsn(dbname=dbname))
        try:
            await conn.execute("CREATE TABLE a (id int PRIMARY KEY, v float8, t timestamptz)")
            await conn.copy_records_to_table("a", records=[(i, i / 3, None) for i in range(500)])
            stmt = await conn.prepare("SELECT v FROM a WHERE id = $1")
            assert await stmt.fetchval(3) == 1.0
            await conn.executemany(
                "INSERT INTO a VALUES ($1, $2, now())", [(1000 + i, float(i)) for i in range(50)]
            )
            assert await conn.fetchval("SELECT count(*) FROM a") == 550
            with pytest.raises(asyncio.TimeoutError):
                await conn.execute("SELECT pg_sleep(60)", timeout=0.5)
            assert await conn.fetchval("SELECT 41 + 1") == 42
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.mark.parametrize("driver", ["psycopg2", "psycopg", "asyncpg"])
def test_sqlalchemy(weir: WeirProcess, dbname: str, driver: str) -> None:
    url = weir.dsn(dbname=dbname).replace("postgresql://", f"postgresql+{driver}://")
    url = url.replace("?sslmode=disable", "" if driver == "asyncpg" else "?sslmode=disable")
    meta = sa.MetaData()
    users = sa.Table(
        "users",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(50)),
    )

    async def run_async() -> list[Any]:
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(meta.create_all)
            await conn.execute(users.insert(), [{"name": "ada"}, {"name": "bob"}])
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.select(users.c.name).order_by(users.c.id))).all()
        await engine.dispose()
        return list(rows)

    if driver == "asyncpg":
        rows = asyncio.run(run_async())
    else:
        engine = sa.create_engine(url)
        meta.create_all(engine)
        with engine.begin() as conn:
            conn.execute(users.insert(), [{"name": "ada"}, {"name": "bob"}])
        with engine.connect() as conn:
            rows = list(conn.execute(sa.select(users.c.name).order_by(users.c.id)).all())
        engine.dispose()
    assert [r[0] for r in rows] == ["ada", "bob"]


def test_psql_with_copy(weir: WeirProcess, pg: Any, dbname: str, tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("1,alpha\n2,beta\n3,gamma\n")
    out = tmp_path / "out.csv"
    script = (
        "CREATE TABLE words (id int, w text);\n"
        f"\\copy words FROM '{data}' WITH (FORMAT csv)\n"
        f"\\copy (SELECT * FROM words ORDER BY id) TO '{out}' WITH (FORMAT csv)\n"
        "SELECT string_agg(w, '-' ORDER BY id) FROM words;\n"
    )
    proc = subprocess.run(
        [_bin(pg, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", weir.dsn(dbname=dbname)],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "alpha-beta-gamma" in proc.stdout
    assert out.read_text() == data.read_text()


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_pgbench(weir: WeirProcess, pg: Any, dbname: str, mode: str) -> None:
    env = {**os.environ, "PGSSLMODE": "disable"}
    init = subprocess.run(
        [_bin(pg, "pgbench"), "-i", "-s", "1", "-q", weir.dsn(dbname=dbname)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    run = subprocess.run(
        [
            _bin(pg, "pgbench"),
            "-M",
            mode,
            "-c",
            "4",
            "-j",
            "2",
            "-t",
            "100",
            weir.dsn(dbname=dbname),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "number of transactions actually processed: 400/400" in run.stdout
    assert "number of failed transactions: 0" in run.stdout
