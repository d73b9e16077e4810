"""``weir bootstrap`` against a real cluster with Spark ``local[2]`` (one session for the
module: Spark starts slowly): loads under concurrent writes that are exact once patched from the
slot, a killed run resumed, and a clear error for every bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest

from cdc.bootstrap import copytext, manifest, replay
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.job import BootstrapConfig, run, spark_session
from cdc.bootstrap.plan import table_from_json
from proxy.localpg import free_port
from tests.integration.cdc.bootstrap_support import Writer, assert_exact, create_table
from tests.support import eventually, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]")
    try:
        yield session
    finally:
        session.stop()


def _cfg(dsn: str, out: Path, *tables: str, **kw: Any) -> BootstrapConfig:
    return BootstrapConfig(upstream=dsn, tables=tables, out=str(out), master="local[2]",
                           slot=unique_name("weir_bootstrap"), **kw)


def _drop_slot(dsn: str, out: Path) -> None:
    """Drop the bootstrap's slot once no (killed or stopped) session holds it any more."""
    plan = manifest.load_plan(out)
    if plan is None:
        return

    def dropped() -> bool:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                         " WHERE slot_name = %s AND NOT active", (plan.slot,))
            return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                                (plan.slot,)).fetchone() is None

    eventually(dropped, timeout=20)


def test_load_under_writes_is_exact_after_patching(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "items")
    with psycopg.connect(dsn, autocommit=True) as conn:  # a text-led key: hash partitions
        conn.execute("CREATE TABLE tags (name text, n int, note text, PRIMARY KEY (name, n))")
        conn.execute("INSERT INTO tags SELECT 'tag ' || (g % 50) || E'\\\\\\t', g, 'x'"
                     " FROM generate_series(1, 5000) g")
    out = tmp_path / "load"
    writer = Writer(dsn, "items").start()
    try:
        eventually(lambda: writer.commits > 20)
        result = run(_cfg(dsn, out, "items", "tags", partitions=4), spark=spark)
        during = writer.commits
        eventually(lambda: writer.commits > during + 20)
    finally:
        commits = writer.stop()
    try:
        assert commits > 40 and result["resumed"] is False
        assert [t["qualified"] for t in result["tables"]] == ["public.items", "public.tags"]
        items, tags = result["tables"]
        assert items["partitioning"]["kind"] == "range" and tags["partitioning"]["kind"] == "hash"
        assert len(items["partitions"]) == 4 == len(tags["partitions"]) and tags["rows"] == 5000
        _check_files(out, result)
        replica = assert_exact(out, dsn)
        assert replica.applied > 0  # the writes after the consistent point were patched in
    finally:
        _drop_slot(dsn, out)


def _check_files(out: Path, result: dict[str, Any]) -> None:
    """Every partition's file holds its rows, its checksum, and only keys of its range."""
    for t in result["tables"]:
        spec = table_from_json(t)
        total = 0
        for p in t["partitions"]:
            cols = pq.read_table(out / spec.qualified / p["file"]).to_pydict()
            rows = list(zip(*(cols[c.name] for c in spec.columns), strict=True))
            texts = [tuple(replay._text(c.kind, v) for c, v in zip(spec.columns, r,
                                                                   strict=True)) for r in rows]
            assert len(texts) == p["rows"]
            assert copytext.checksum(map(copytext.row_hash, texts)) == p["checksum"]
            assert {spec.partition_of_row(r) for r in texts} <= {p["index"]}
            total += p["rows"]
        assert total == t["rows"]


def test_killed_run_resumes_and_stays_exact(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "items")
    out = tmp_path / "resume"
    slot = unique_name("weir_bootstrap")
    writer = Writer(dsn, "items", seed=11).start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc.bootstrap", "--upstream", dsn, "--table", "items",
         "--out", str(out), "--master", "local[2]", "--slot", slot, "--partitions", "8",
         "--max-rows-per-second", "15000"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        first = eventually(lambda: sorted((out / "public.items").glob("part-*.json"))
                           if (out / "public.items").is_dir() else [], timeout=120)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert not (out / manifest.MANIFEST).exists()
        with pytest.raises(BootstrapError, match="no manifest"):
            replay.Replica.load(out)
        kept = {p.name: p.stat().st_mtime_ns for p in first}
        assert 0 < len(kept) < 8
        result = run(BootstrapConfig(upstream=dsn, tables=("items",), out=str(out),
                                     master="local[2]"), spark=spark)
        during = writer.commits
        eventually(lambda: writer.commits > during + 20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        writer.stop()
    try:
        assert result["slot"] == slot and result["resumed"] is True
        items = result["tables"][0]
        assert sum(p["rows"] for p in items["partitions"]) == items["rows"]
        assert len({p["snapshot"] for p in items["partitions"]}) == 2
        for name, mtime in kept.items():  # partitions read before the kill were not re-read
            assert (out / "public.items" / name).stat().st_mtime_ns == mtime
        assert_exact(out, dsn)
        # a finished bootstrap is not redone
        again = run(BootstrapConfig(upstream=dsn, tables=("items",), out=str(out)))
        assert again == json.loads((out / manifest.MANIFEST).read_text())
    finally:
        _drop_slot(dsn, out)


def test_weir_bootstrap_command_reports_bad_input_in_one_line(
        pg: Any, dbname: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli import main

    args = ["bootstrap", "--table", "missing", "--out", str(tmp_path / "x")]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "weir bootstrap: the upstream is required: --upstream URL or WEIR_UPSTREAM")
    assert main([*args, "--upstream", pg.dsn(dbname=dbname)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("weir bootstrap: unknown table 'missing'") and "\n" not in err


def _error(dsn: str, tmp_path: Path, *tables: str, spark: Any = None) -> str:
    with pytest.raises(BootstrapError) as info:
        run(_cfg(dsn, tmp_path / unique_name("err"), *tables), spark=spark)
    return str(info.value)


def test_bad_inputs_fail_clearly_and_leave_no_slot(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    pg.psql("CREATE TABLE nokey (a int); CREATE TABLE ok (id int PRIMARY KEY);"
            "CREATE VIEW v AS SELECT 1 AS x", dbname)
    role, reader = unique_name("nosel"), unique_name("norepl")
    pg.psql(f"CREATE ROLE {role} LOGIN REPLICATION; CREATE ROLE {reader} LOGIN;"
            f"GRANT SELECT ON ok TO {reader}", dbname)
    assert "unknown table 'missing'" in _error(dsn, tmp_path, "missing")
    assert "no primary key" in _error(dsn, tmp_path, "nokey")
    assert "not a plain table" in _error(dsn, tmp_path, "v")
    assert "cannot SELECT" in _error(pg.dsn(user=role, dbname=dbname), tmp_path, "ok")
    assert "cannot create replication slots" in _error(
        pg.dsn(user=reader, dbname=dbname), tmp_path, "ok")
    gone = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?sslmode=disable"
    assert "upstream is gone or unreachable" in _error(gone, tmp_path, "ok")
    used = int(pg.psql("SELECT current_setting('max_replication_slots')::int"
                       " - (SELECT count(*) FROM pg_replication_slots)").strip())
    fillers = [unique_name("weir_fill") for _ in range(used)]
    try:
        for name in fillers:
            pg.psql(f"SELECT pg_create_physical_replication_slot('{name}')")
        assert "slot limit reached" in _error(dsn, tmp_path, "ok", spark=spark)
    finally:
        for name in fillers:
            pg.psql(f"SELECT pg_drop_replication_slot('{name}')")
    assert pg.psql("SELECT count(*) FROM pg_replication_slots"
                   " WHERE slot_name LIKE 'weir_bootstrap%'", dbname).strip() == "0"
    assert list(tmp_path.glob("*/_manifest.json")) == []


def test_resume_refuses_when_the_slot_is_gone(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    pg.psql("CREATE TABLE ok (id int PRIMARY KEY); INSERT INTO ok SELECT generate_series(1, 10)",
            dbname)
    out = tmp_path / "gone"
    run(_cfg(dsn, out, "ok"), spark=spark)
    (out / manifest.MANIFEST).unlink()  # as if killed before the manifest was written
    _drop_slot(dsn, out)
    with pytest.raises(BootstrapError, match=r"slot .* is gone"):
        run(_cfg(dsn, out, "ok"), spark=spark)
    result = run(_cfg(dsn, out, "ok", restart=True), spark=spark)
    try:
        assert result["tables"][0]["rows"] == 10
        assert_exact(out, dsn)
    finally:
        _drop_slot(dsn, out)


def test_upstream_gone_mid_job_is_reported_and_the_rerun_finishes(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "items", rows=60_000)
    out = tmp_path / "cut"
    failure: list[BaseException] = []

    def job() -> None:
        try:
            run(_cfg(dsn, out, "items", partitions=4, max_rows_per_second=4000), spark=spark)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        eventually(lambda: list(out.glob("public.items/*.progress")) if out.is_dir() else [],
                   timeout=120)
        pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query LIKE 'COPY (SELECT%'", dbname)
        thread.join(120)
        assert not thread.is_alive()
        assert len(failure) == 1 and isinstance(failure[0], BootstrapError), failure
        assert "upstream" in str(failure[0]) and "reading partition" in str(failure[0])
        assert not (out / manifest.MANIFEST).exists()
        result = run(_cfg(dsn, out, "items"), spark=spark)
        assert result["tables"][0]["rows"] == 60_000
        assert_exact(out, dsn)
    finally:
        _drop_slot(dsn, out)


def _follower(dsn: str, store: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc.bases", "follow", "--store", str(store), "--upstream", dsn],
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    assert "following from" in proc.stderr.readline()
    return proc


def test_local_bases_follow_the_slot_and_restart_warm_after_kill(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    from cdc.bases.store import BaseStore

    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "items", rows=50_000)
    out, path = tmp_path / "load", tmp_path / "bases"
    writer = Writer(dsn, "items", rows=50_000, seed=5).start()
    procs: list[subprocess.Popen[str]] = []
    try:
        result = run(_cfg(dsn, out, "items", partitions=4), spark=spark)
        BaseStore.create(path, out).close()
        store = BaseStore.open(path)
        start = store.durable_lsn
        assert store.checksums()["public.items"][0] == result["tables"][0]["rows"]
        procs.append(_follower(dsn, path))
        moved = eventually(lambda: store.durable_lsn > start and store.durable_lsn, timeout=60)
        os.killpg(procs[0].pid, signal.SIGKILL)
        procs[0].wait(10)
        confirmed = pg.psql(f"SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots"
                            f" WHERE slot_name = '{result['slot']}'", dbname).strip()
        assert int(confirmed) <= store.durable_lsn  # never confirmed beyond what is durable
        procs.append(_follower(dsn, path))  # warm restart: from the durable position
        eventually(lambda: store.durable_lsn > moved, timeout=60)
        writer.stop()
        marker = unique_name("barrier")
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("UPDATE items SET v = %s WHERE id = (SELECT min(id) FROM items)"
                               " RETURNING id::text", (marker,)).fetchone()
        assert row is not None

        def has_marker() -> bool:
            replica = store.replica()
            with store.read():
                found = replica.tables["public.items"].rows.get((row[0],))
            return found is not None and found[1] == marker

        eventually(has_marker, timeout=60)
        spec = table_from_json(result["tables"][0])
        assert store.checksums()["public.items"] == replay.upstream_checksum(dsn, spec)
        store.close()
        os.killpg(procs[1].pid, signal.SIGTERM)
        assert procs[1].wait(20) == 0
        _drop_slot(dsn, out)  # a slot gone: reported, and no retrying forever
        gone = subprocess.run(
            [sys.executable, "-m", "cdc.bases", "follow", "--store", str(path), "--upstream",
             dsn], capture_output=True, text=True, timeout=60)
        assert gone.returncode == 2 and f"slot {result['slot']} is gone" in gone.stderr
    finally:
        writer.done.set()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(20)
        _drop_slot(dsn, out)


#: rows of the large-table test: sized so that it proves the property on CI's 2 cores in well
#: under a minute; by hand, the issue's few million rows (docs/bootstrap.md, "Tests"):
#:     WEIR_BOOTSTRAP_ROWS=3000000 .venv/bin/python -m pytest -q \
#:         tests/integration/cdc/test_bootstrap.py -k large_table
LARGE_ROWS = int(os.environ.get("WEIR_BOOTSTRAP_ROWS", "200000"))


def test_large_table_bootstrapped_under_writes_then_served_exactly_and_restarted_warm(
        pg: Any, dbname: str, spark: Any, tmp_path: Path) -> None:
    """``weir bootstrap`` of a large table while writes run, ``weir bases load``, then
    ``weir serve --local-bases`` follows the bootstrap's slot with its one stream: cached
    reads are filled from the store (none upstream) and equal the upstream's; ``kill -9``
    while writes run, restart: warm (the caches answer within the wait, nothing refilled),
    and after a barrier the store equals the upstream table, row checksum for row checksum."""
    from cdc.bases.store import BaseStore
    from tests.support import WeirProcess

    rows = LARGE_ROWS
    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "served", rows=rows)
    out, path = tmp_path / "load", tmp_path / "bases"
    writer = Writer(dsn, "served", rows=rows, seed=9).start()
    procs: list[WeirProcess] = []
    sql = "SELECT v, n, f, b, ts, small, j FROM served WHERE id = %s"
    keys = list(range(1, rows + 1, max(1, rows // 40)))

    def start() -> WeirProcess:
        procs.append(WeirProcess.start(pg, ["--local-bases", str(path), "--state-dir",
                                            str(tmp_path / "state")], upstream=dsn))
        return procs[-1]

    def create(conn: psycopg.Connection[Any]) -> bool:
        try:
            conn.execute(f"CREATE CACHE served_by_id FROM {sql.replace('%s', '$1')}")
        except psycopg.errors.ObjectNotInPrerequisiteState as exc:
            assert "caching is starting" in str(exc), exc
            return False
        return True

    def cached(conn: psycopg.Connection[Any], k: int) -> tuple[list[Any]] | None:
        found = conn.execute(sql, (k,)).fetchall()
        plan = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
        return (found,) if plan is not None and plan[0] == "cache" else None

    def barrier(conn: psycopg.Connection[Any], up: psycopg.Connection[Any]) -> None:
        marker = unique_name("m")
        up.execute("INSERT INTO served (id, v) VALUES (7, %s) ON CONFLICT (id) DO UPDATE"
                   " SET v = excluded.v", (marker,))

        def seen() -> bool:  # the writer deletes rows: key 7 may be cached as absent meanwhile
            found = cached(conn, 7)
            return bool(found and found[0] and found[0][0][0] == marker)

        eventually(seen, timeout=30)

    def exact(conn: psycopg.Connection[Any], up: psycopg.Connection[Any]) -> dict[str, str]:
        for k in keys:
            got = eventually(lambda k=k: cached(conn, k), timeout=30)[0]
            assert got == up.execute(sql, (k,)).fetchall(), k
        return dict(conn.execute("SHOW WEIR STATUS").fetchall())

    try:
        eventually(lambda: writer.commits > 20, timeout=60)
        result = run(_cfg(dsn, out, "served"), spark=spark)
        assert len(result["tables"][0]["partitions"]) >= 4  # read in parallel partitions
        BaseStore.create(path, out).close()
        proc = start()
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn, \
                psycopg.connect(dsn, autocommit=True) as up:
            # (weir first catches up the WAL the writer wrote since the load: on a loaded
            # machine CREATE CACHE may meet "caching is starting", and answers go upstream
            # until the lag is within the staleness bound; neither is what this test checks)
            eventually(lambda: create(conn), timeout=60)
            for k in keys:  # misses while the writer runs: answered from the store
                eventually(lambda k=k: cached(conn, k), timeout=30)
            during = writer.commits
            eventually(lambda: writer.commits > during + 50, timeout=60)
            proc.proc.kill()  # kill -9 while writes run
            proc.proc.wait(10)
        store = BaseStore.open(path)
        durable = store.durable_lsn
        store.close()
        confirmed = pg.psql(f"SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots"
                            f" WHERE slot_name = '{result['slot']}'", dbname).strip()
        assert int(confirmed) <= durable  # never confirmed beyond what is durable
        during = writer.commits
        eventually(lambda: writer.commits > during + 50, timeout=60)
        proc = start()
        up_at = time.monotonic()
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn, \
                psycopg.connect(dsn, autocommit=True) as up:
            # warm: cached answers (no timed bound: a CI run on a quiet machine once took
            # 1.50 s, one beside another CI run more than 5 s) and nothing refilled from the
            # upstream (``fills`` 0 below: the answers came from the store, not by filling)
            eventually(lambda: cached(conn, keys[1]), timeout=60)
            print(f"first cached answer {time.monotonic() - up_at:.2f}s after restart")
            writer.stop()
            barrier(conn, up)
            status = exact(conn, up)
            assert status["fills"] == "0" and int(status["local_fills"]) >= 1, status
        procs[-1].stop()
        store = BaseStore.open(path)
        try:
            spec = table_from_json(result["tables"][0])
            assert store.checksums()["public.served"] == replay.upstream_checksum(dsn, spec)
        finally:
            store.close()
    finally:
        writer.done.set()
        for p in procs:
            p.stop()
        _drop_slot(dsn, out)
