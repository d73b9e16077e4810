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
            timeout: float = 30.0) -> list[tuple[Any, ...]]:
    """The rows once weir answers from a cache (an empty answer included). The wait is
    generous: while the writer runs, a loaded machine can keep weir's stream behind the
    staleness bound for a while (answers go upstream then, correctly); on failure the last
    answer's EXPLAIN and weir's lag figures say why."""
    def once() -> tuple[list[tuple[Any, ...]]] | None:
        rows = _served(conn, sql, params)
        return None if rows is None else (rows,)
    try:
        return eventually(once, timeout=timeout)[0]
    except AssertionError as exc:
        conn.execute(sql, params).fetchall()
        plan = conn.execute("EXPLAIN LAST STATEMENT").fetchall()
        status = {k: v for k, v in conn.execute("SHOW WEIR STATUS").fetchall()
                  if "lag" in k or "stale" in k or k in ("fills", "local_fills", "misses")}
        raise AssertionError(f"{exc}; last answer: {plan}; status: {status}") from None


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
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            # (how soon depends on the machine's load: what makes the restart warm is checked
            # below — the bases were followed from where they were, not loaded again)
            _cached(conn, ITEM.replace("$1", "%s"), (keys[0],), timeout=60)
            writer.stop()
            _barrier(dsn, conn)
            _differential(dsn, conn, keys[:20] + [rng.randint(1, ROWS) for _ in range(20)])
            status = _status(conn)
            assert status["fills"] == "0", status  # nothing refilled from the upstream
            assert int(status["local_fills"]) >= 40, status
        _exact(dsn, tmp_path)  # no change lost or applied twice across the kill
        assert not any("local bases lost" in line for line in proc.log)
        store = BaseStore.open(tmp_path / "bases")
        try:  # the same store and slot: the bases were not loaded again from a snapshot
            assert str(store.manifest["slot"]) == slot
        finally:
            store.close()
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


def test_a_column_type_changed_under_the_same_name_is_detected_and_the_bases_reloaded(
        pg: Any, dbname: str, tmp_path: Path) -> None:
    """ALTER ... TYPE rewrites every row's text upstream, and the stream carries none of it
    (only a Relation message with the table's next change, which never comes here): the
    heartbeat's catalog check must see it, or local fills serve the old types' texts."""
    dsn = pg.dsn(dbname=dbname)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text, n numeric, f float8,"
                     " ts timestamptz, small int)")
        conn.execute("INSERT INTO items SELECT g, 'v' || g, g, g / 3.0, now(), g % 10"
                     " FROM generate_series(1, 1000) g")
        conn.execute("CREATE TABLE tags (id int PRIMARY KEY, name text)")
    proc = _start(pg, dsn, tmp_path)
    sql = ITEM.replace("$1", "%s")
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn, \
                psycopg.connect(dsn, autocommit=True) as up:
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")
            assert [str(v) for v in _cached(conn, sql, (5,))[0][1:3]] == ["5", "1.6666666666666667"]
            # the same column names, other types: n's text gets a scale, f becomes a real
            # (numeric -> numeric(12,3) keeps the type oid: only the catalog's text shows it)
            up.execute("ALTER TABLE items ALTER COLUMN n TYPE numeric(12,3),"
                       " ALTER COLUMN f TYPE real")

            def served_new() -> bool:
                rows = _served(conn, sql, (5,))
                return bool(rows) and str(rows[0][1]) == "5.000"
            eventually(served_new, timeout=30)
            eventually(lambda: _status(conn)["local_bases_loads"] == "2", timeout=30)
            before = int(_status(conn)["local_fills"])
            for k in (5, 6, 500, 999):  # every value as the upstream has it now, texts too
                direct = up.execute(sql, (k,)).fetchall()
                cached = _cached(conn, sql, (k,))
                assert [tuple(map(str, r)) for r in cached] == \
                    [tuple(map(str, r)) for r in direct], (k, "".join(proc.log[-60:]))
            assert int(_status(conn)["local_fills"]) >= before + 3  # from the new bases
            assert any("columns of public.items changed" in line and "numeric(12,3)" in line
                       for line in proc.log), proc.log
        _exact(dsn, tmp_path)  # the store was reloaded with the new types' texts
        store = BaseStore.open(tmp_path / "bases")
        try:
            items = next(t for t in store.manifest["tables"] if t["name"] == "items")
            assert [c["type"] for c in items["columns"]][2:4] == ["numeric(12,3)", "real"]
        finally:
            store.close()
    finally:
        proc.stop()
        _drop_bases_slot(pg, dbname, wait=False)


def test_local_bases_in_memory_are_loaded_at_every_start_and_leave_nothing_behind(
        pg: Any, dbname: str) -> None:
    dsn = pg.dsn(dbname=dbname)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text, n numeric, f float8,"
                     " ts timestamptz, small int)")
        conn.execute("INSERT INTO items SELECT g, 'v' || g, g, g / 3.0, now(), g % 10"
                     " FROM generate_series(1, 1000) g")
        conn.execute("CREATE TABLE tags (id int PRIMARY KEY, name text)")
    args = ["--local-bases", "memory", "--local-tables", "items, tags", "--read-timeout", "5"]
    sql = ITEM.replace("$1", "%s")
    slots = ("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'weir_bases_mem_%'"
             f" AND database = '{dbname}'")

    proc = WeirProcess.start(pg, args, upstream=dsn)
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            folder = Path(_status(conn)["local_bases_path"])
            assert folder.parent == Path("/dev/shm") and (folder / "data.mdb").exists()
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")
            eventually(lambda: _value(conn, 5) == "v5")
            pg.psql("UPDATE items SET v = 'new' WHERE id = 7", dbname)
            eventually(lambda: _value(conn, 7) == "new")
            assert _status(conn)["fills"] == "0" and int(_status(conn)["local_fills"]) >= 2
        proc.proc.kill()  # no close: the directory and the slot stay behind...
        proc.proc.wait(10)
        pg.psql("UPDATE items SET v = 'while down' WHERE id = 8", dbname)
        proc = WeirProcess.start(pg, args, upstream=dsn)  # ...and the next start replaces them
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")
            eventually(lambda: _value(conn, 8) == "while down")
            for k in (7, 9):
                assert _cached(conn, sql, (k,)) == pg_rows(dsn, sql, k)
            assert _status(conn)["fills"] == "0"
            assert _status(conn)["local_bases_path"] == str(folder)  # reused, not another
        assert pg.psql(slots, dbname).strip() == "1"  # the killed weir's slot was reused
        proc.stop()
        assert proc.proc.returncode == 0
        assert not folder.exists()  # a clean stop removes the bases and drops the slot
        assert pg.psql(slots, dbname).strip() == "0"
    finally:
        proc.stop()


def test_lookups_on_other_columns_of_a_large_local_table_get_a_secondary_index(
        pg: Any, dbname: str, tmp_path: Path) -> None:
    """A cache keyed on a non-key column of a table over SCAN_ROWS: the first miss goes
    upstream and asks for an index, built a slice a heartbeat while writes keep it; then
    misses are local and exact, across a restart too (the index is in the store)."""
    dsn = pg.dsn(dbname=dbname)
    rows = 30_000
    create_table(dsn, "items", rows=rows)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE tags (id int PRIMARY KEY, name text)")
    by_small = "SELECT id, v, n FROM items WHERE small = %s"
    writer = Writer(dsn, "items", rows=rows, seed=21).start()
    proc = _start(pg, dsn, tmp_path)
    procs = [proc]
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute(f"CREATE CACHE items_by_id FROM {ITEM}")  # (for the barriers)
            conn.execute(f"CREATE CACHE items_by_small FROM {by_small.replace('%s', '$1')}")
            _cached(conn, by_small, (1,))
            assert _status(conn)["fills"] == "1"  # no index yet: upstream
            eventually(lambda: _status(conn)["local_indexes"] == "public.items(small):done",
                       timeout=60)
            eventually(lambda: writer.commits > 100, timeout=60)
            writer.stop()
            _barrier(dsn, conn)
            with psycopg.connect(dsn, autocommit=True) as up:
                for k in (1, 2, 3, 4, 29999):
                    direct = sorted(up.execute(by_small, (k,)).fetchall())
                    assert sorted(_cached(conn, by_small, (k,))) == direct, k
            status = _status(conn)
            assert status["fills"] == "1" and int(status["local_fills"]) >= 4, status
        _exact(dsn, tmp_path)
        proc.stop()
        pg.psql("UPDATE items SET small = 5 WHERE id = 6", dbname)
        proc = _start(pg, dsn, tmp_path)
        procs.append(proc)
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn, \
                psycopg.connect(dsn, autocommit=True) as up:
            _barrier(dsn, conn)
            assert sorted(_cached(conn, by_small, (5,))) == sorted(
                up.execute(by_small, (5,)).fetchall())
            assert _status(conn)["fills"] == "0"
    finally:
        writer.done.set()
        for p in procs:
            p.stop()
        _drop_bases_slot(pg, dbname, wait=False)


def pg_rows(dsn: str, sql: str, k: int) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as up:
        return up.execute(sql, (k,)).fetchall()


def _drop_bases_slot(pg: Any, dbname: str, wait: bool = True) -> str:
    """Drop the bases' slot (and return its name) once no weir holds it (``wait``: until
    there is one to drop)."""
    def drop() -> str:
        out = pg.psql("SELECT slot_name, pg_drop_replication_slot(slot_name)"
                      " FROM pg_replication_slots WHERE slot_name LIKE 'weir_bases_%'"
                      " AND NOT active", dbname).strip()
        return out.split("|")[0]
    return eventually(drop, timeout=20) if wait else drop()
