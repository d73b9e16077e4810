"""``weir serve --local-bases``: one replication stream keeps local bases and the caches exact,
fills over them never reach the upstream, and a restart (even after ``kill -9``) is warm.

The bases here are loaded by weir itself from one snapshot (``--local-tables``); a store built
by ``weir bootstrap`` + ``weir bases load`` is opened the same way (tests/integration/cdc/
test_bootstrap.py covers that store against its own follower). 200,000 rows under random
writes (about 35 s here); with ``ROWS = 1_000_000`` the first test passed once in 85 s on the
shared 2-core machine (load average 12), over the suite's budget for one test.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import psycopg

from cdc.bases.store import BaseStore
from cdc.bootstrap import replay
from cdc.bootstrap.plan import table_from_json
from tests.integration.cdc.bootstrap_support import Writer, create_table
from tests.support import WeirProcess, eventually, unique_name

ROWS = 200_000
ITEM = "SELECT v, n, f, ts FROM items WHERE id = $1"
JOINED = "SELECT i.v, t.name FROM items i JOIN tags t ON t.id = i.small WHERE i.id = %s"


def _setup(dsn: str) -> None:
    create_table(dsn, "items", rows=ROWS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE tags (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO tags SELECT g, 'tag' || g FROM generate_series(0, 29999) g"
                     " WHERE g % 7 <> 3")  # some items have no tag


def _start(pg: Any, dsn: str, tmp: Path) -> WeirProcess:
    return WeirProcess.start(pg, ["--local-bases", str(tmp / "bases"), "--local-tables",
                                  "items, public.tags", "--state-dir", str(tmp / "state"),
                                  "--read-timeout", "5"], upstream=dsn)


def _served(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]
            ) -> list[tuple[Any, ...]] | None:
    """The rows if weir answered from a cache, else None."""
    rows = conn.execute(sql, params).fetchall()
    plan = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return rows if plan is not None and plan[0] == "cache" else None


def _cached(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...],
            timeout: float = 10.0) -> list[tuple[Any, ...]]:
    """The rows once weir answers from a cache (an empty answer included)."""
    def once() -> tuple[list[tuple[Any, ...]]] | None:
        rows = _served(conn, sql, params)
        return None if rows is None else (rows,)
    return eventually(once, timeout=timeout)[0]


def _status(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(conn.execute("SHOW WEIR STATUS").fetchall())


def _barrier(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """A write committed upstream now is in weir's caches (so in its bases too)."""
    marker = unique_name("m")
    with psycopg.connect(dsn, autocommit=True) as up:
        row = up.execute("UPDATE items SET v = %s WHERE id = (SELECT min(id) FROM items)"
                         " RETURNING id", (marker,)).fetchone()
    assert row is not None
    eventually(lambda: _value(conn, row[0]) == marker, timeout=30)


def _value(conn: psycopg.Connection[Any], k: int) -> Any:
    """Column v of item ``k`` as served from the cache (None if not served from it, or no
    such item)."""
    rows = _served(conn, ITEM.replace("$1", "%s"), (k,))
    return rows[0][0] if rows else None


def _exact(dsn: str, tmp: Path) -> None:
    """The bases equal the upstream tables: row count and checksum of every row."""
    store = BaseStore.open(tmp / "bases")
    try:
        found = store.checksums()
        for t in store.manifest["tables"]:
            spec = table_from_json(t)
            assert found[spec.qualified] == replay.upstream_checksum(dsn, spec), spec.qualified
    finally:
        store.close()


def _differential(dsn: str, conn: psycopg.Connection[Any], keys: list[int]) -> None:
    """Cached answers equal the upstream's, for every key (none left to the upstream)."""
    with psycopg.connect(dsn, autocommit=True) as up:
        for k in keys:
            for sql in (ITEM.replace("$1", "%s"), JOINED):
                cached = _cached(conn, sql, (k,))
                direct = up.execute(sql, (k,)).fetchall()
                assert sorted(cached, key=repr) == sorted(direct, key=repr), (sql, k)


def test_serve_keeps_local_bases_exact_and_restarts_warm_after_kill(
        pg: Any, dbname: str, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    _setup(dsn)
    rng = random.Random(11)
    writer = Writer(dsn, "items", rows=ROWS, seed=3).start()
    proc = _start(pg, dsn, tmp_path)
    procs = [proc]
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")
            conn.execute(f"CREATE CACHE items_tags FROM {JOINED.replace('%s', '$1')}")
            keys = [rng.randint(1, ROWS) for _ in range(40)]
            for k in keys:  # misses while the writer runs: all answered from the bases
                _cached(conn, ITEM.replace("$1", "%s"), (k,))
            eventually(lambda: writer.commits > 200, timeout=60)
            writer.stop()
            _barrier(dsn, conn)
            _differential(dsn, conn, keys + [rng.randint(1, ROWS) for _ in range(40)])
            fresh = [k for k in rng.sample(range(1, ROWS + 1), 20) if k not in keys]
            for k in fresh:  # a miss is answered from the cache at its first read
                assert _served(conn, ITEM.replace("$1", "%s"), (k,)) is not None, k
            status = _status(conn)
            assert status["fills"] == "0", status  # not one fill went upstream
            assert int(status["local_fills"]) >= 80, status
        _exact(dsn, tmp_path)

        # kill -9 while writes run; they keep committing while weir is down
        writer = Writer(dsn, "items", rows=ROWS, seed=4).start()
        eventually(lambda: writer.commits > 50, timeout=60)
        proc.proc.kill()
        proc.proc.wait(10)
        store = BaseStore.open(tmp_path / "bases")
        durable, slot = store.durable_lsn, str(store.manifest["slot"])
        store.close()
        confirmed = pg.psql(f"SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots"
                            f" WHERE slot_name = '{slot}'", dbname).strip()
        assert int(confirmed) <= durable  # never confirmed beyond what is durable
        eventually(lambda: writer.commits > 150, timeout=60)

        proc = _start(pg, dsn, tmp_path)  # warm: the caches come back from the state dir
        procs.append(proc)
        up_at = time.monotonic()
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            _cached(conn, ITEM.replace("$1", "%s"), (keys[0],), timeout=5)
            answered = time.monotonic() - up_at
            assert answered < 1.0, f"first cached answer {answered:.2f}s after restart"
            writer.stop()
            _barrier(dsn, conn)
            _differential(dsn, conn, keys[:20] + [rng.randint(1, ROWS) for _ in range(20)])
            status = _status(conn)
            assert status["fills"] == "0", status  # nothing refilled from the upstream
            assert int(status["local_fills"]) >= 40, status
        _exact(dsn, tmp_path)  # no change lost or applied twice across the kill
        assert not any("local bases lost" in line for line in proc.log)
    finally:
        writer.done.set()
        for p in procs:
            p.stop()
        _drop_bases_slot(pg, dbname, wait=False)


def test_a_slot_dropped_or_consumed_while_weir_is_down_is_reported_and_the_bases_reloaded(
        pg: Any, dbname: str, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text, n numeric, f float8,"
                     " ts timestamptz, small int)")
        conn.execute("INSERT INTO items SELECT g, 'v' || g, g, g / 3.0, now(), g % 10"
                     " FROM generate_series(1, 1000) g")
        conn.execute("CREATE TABLE tags (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO tags SELECT g, 'tag' || g FROM generate_series(0, 9) g")
    proc = _start(pg, dsn, tmp_path)
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")
            eventually(lambda: _value(conn, 5) == "v5")
    finally:
        proc.stop()
    assert proc.proc.returncode == 0
    slot = _drop_bases_slot(pg, dbname)
    assert slot.startswith("weir_bases_")
    pg.psql("UPDATE items SET v = 'changed' WHERE id = 5; DELETE FROM items WHERE id = 6",
            dbname)  # missed by the old bases: the slot that would have carried it is gone

    proc = _start(pg, dsn, tmp_path)
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            eventually(lambda: _value(conn, 5) == "changed", timeout=20)
            assert _served(conn, ITEM.replace("$1", "%s"), (6,)) == []
            assert _status(conn)["fills"] == "0"
        assert any("local bases lost" in line and f"slot {slot} is gone" in line
                   for line in proc.log), proc.log
        _exact(dsn, tmp_path)
        proc.stop()
        # behind: the slot consumed past the bases (by someone else) while weir is down
        pg.psql("UPDATE items SET v = 'again' WHERE id = 5", dbname)
        eventually(lambda: pg.psql(
            f"SELECT pg_replication_slot_advance('{slot}', pg_current_wal_lsn()) IS NOT NULL"
            f" FROM pg_replication_slots WHERE slot_name = '{slot}' AND NOT active",
            dbname).strip() == "t", timeout=20)
        proc = _start(pg, dsn, tmp_path)
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute("SELECT 1")
            eventually(lambda: _value(conn, 5) == "again", timeout=20)
        assert any("local bases lost" in line and "past the bases' durable position" in line
                   for line in proc.log), proc.log
        _exact(dsn, tmp_path)
        # a column added to a local table: the store cannot follow it, so it is reloaded
        pg.psql("ALTER TABLE items ADD COLUMN w text DEFAULT 'x';"
                " UPDATE items SET v = 'after ddl' WHERE id = 5", dbname)
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            eventually(lambda: _value(conn, 5) == "after ddl", timeout=30)
        assert any("columns of public.items changed" in line for line in proc.log), proc.log
        _exact(dsn, tmp_path)
    finally:
        proc.stop()
        _drop_bases_slot(pg, dbname, wait=False)


def _drop_bases_slot(pg: Any, dbname: str, wait: bool = True) -> str:
    """Drop the bases' slot (and return its name) once no weir holds it (``wait``: until
    there is one to drop)."""
    def drop() -> str:
        out = pg.psql("SELECT slot_name, pg_drop_replication_slot(slot_name)"
                      " FROM pg_replication_slots WHERE slot_name LIKE 'weir_bases_%'"
                      " AND NOT active", dbname).strip()
        return out.split("|")[0]
    return eventually(drop, timeout=20) if wait else drop()
