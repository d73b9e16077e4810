"""Operations against a real cluster: ``/metrics`` moving with a workload, ``/healthz`` and
``/readyz``, and the drain on SIGTERM of a real ``weir serve`` process."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.localpg import free_port
from tests.support import WeirProcess, eventually


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = _get(port, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(port: int, name: str, **labels: str) -> float:
    return _samples(port).get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def served(pg: Any, dbname: str) -> Any:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            "INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, 50) g", dbname)
    mport = free_port()
    proc = WeirProcess.start(pg, ["--metrics-listen", f"127.0.0.1:{mport}"],
                             upstream=pg.dsn(dbname=dbname))
    try:
        yield proc, mport
    finally:
        proc.stop()


def test_metrics_move_with_the_workload(pg: Any, dbname: str, served: Any) -> None:
    proc, mport = served
    assert _get(mport, "/healthz")[0] == 200
    status, body = _get(mport, "/readyz")
    assert status == 200 and '"ready"' in body
    assert _get(mport, "/nothing")[0] == 404
    with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                         prepare_threshold=None) as conn:
        assert _value(mport, "weir_client_connections") == 1
        admin = _value(mport, "weir_queries_total", destination="admin")
        conn.execute("CREATE CACHE kv_by_k FROM SELECT v FROM kv WHERE k = 1")
        assert _value(mport, "weir_queries_total", destination="admin") == admin + 1
        # a miss: its fill lands in the fill-latency histogram
        fills = _value(mport, "weir_cache_fill_seconds_count")
        assert conn.execute("SELECT v FROM kv WHERE k = 7").fetchone() == ("v7",)
        assert conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0] == "cache"
        after = _samples(mport)
        assert after[("weir_cache_fill_seconds_count", ())] == fills + 1
        assert after[("weir_cache_fill_seconds_bucket", (("le", "+Inf"),))] == fills + 1
        assert after[("weir_cache_fill_seconds_sum", ())] > 0
        assert after[("weir_cache_fills_total", ())] >= 1
        # a hit adds a hit
        hits = after[("weir_cache_hits_total", ())]
        assert conn.execute("SELECT v FROM kv WHERE k = 7").fetchone() == ("v7",)
        assert _value(mport, "weir_cache_hits_total") > hits
        assert _value(mport, "weir_queries_total", destination="cache") > hits
        hits = _value(mport, "weir_cache_hits_total")
        conn.execute("SELECT count(*) FROM kv")  # (no cache: no hit)
        assert _value(mport, "weir_cache_hits_total") == hits
        assert _value(mport, "weir_cache_memory_bytes", cache="kv_by_k") > 0
        # a write moves the applied LSN
        lsn = _value(mport, "weir_replication_applied_lsn")
        conn.execute("INSERT INTO kv VALUES (100, 'v100')")
        eventually(lambda: _value(mport, "weir_replication_applied_lsn") > lsn)
        assert _value(mport, "weir_replication_connected") == 1
        # a forward counts its reason
        inside = _value(mport, "weir_upstream_forwards_total", reason="transaction")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")  # (READ COMMITTED is served)
        conn.execute("SELECT v FROM kv WHERE k = 7")
        conn.execute("COMMIT")
        assert _value(mport, "weir_upstream_forwards_total", reason="transaction") == inside + 1
        # an upstream error counts its SQLSTATE class
        errors = _value(mport, "weir_upstream_errors_total", sqlstate_class="42")
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_table")
        assert _value(mport, "weir_upstream_errors_total", sqlstate_class="42") == errors + 1
        assert _value(mport, "weir_upstream_connect_seconds_count") >= 1
        # an error weir raises itself counts its SQLSTATE class (apart from the upstream's)
        own = _value(mport, "weir_errors_total", sqlstate_class="42")
        upstream = _value(mport, "weir_upstream_errors_total", sqlstate_class="42")
        with pytest.raises(psycopg.Error, match="cannot be cached"):
            conn.execute("CREATE CACHE FROM SELECT no_such_column FROM kv WHERE k = 1")
        assert _value(mport, "weir_errors_total", sqlstate_class="42") == own + 1
        assert _value(mport, "weir_upstream_errors_total", sqlstate_class="42") == upstream

    # every answer counts for its cache, and every statement relayed upstream is timed,
    # whether the event loop or a lane (WEIR_IMPL=cython) handles the session
    with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True, prepare_threshold=0) as conn:
        conn.execute("SELECT v FROM kv WHERE k = %s", (7,)).fetchone()  # (filled, if not yet)
        eventually(lambda: _cached(conn, 7))
        per_cache = _value(mport, "weir_cache_queries_total", cache="kv_by_k")
        for _ in range(50):
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (7,)).fetchone() == ("v7",)
        assert _value(mport, "weir_cache_queries_total", cache="kv_by_k") >= per_cache + 50
        timed = _value(mport, "weir_upstream_statement_seconds_count")
        for _ in range(50):  # (the same Bind each time: a pass lane may relay them)
            assert conn.execute("SELECT count(*) FROM kv WHERE k < %s", (9,)).fetchone()
        after = _samples(mport)
        assert after[("weir_upstream_statement_seconds_count", ())] >= timed + 50
        assert after[("weir_upstream_statement_seconds_sum", ())] > 0


def _cached(conn: psycopg.Connection[Any], k: int) -> bool:
    conn.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return row is not None and row[0] == "cache"


def test_readyz_fails_when_the_upstream_is_unreachable(pg: Any) -> None:
    mport = free_port()
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?sslmode=disable"
    proc = WeirProcess.start(pg, ["--metrics-listen", f"127.0.0.1:{mport}",
                                  "--caching", "off"], upstream=dead)
    try:
        assert _get(mport, "/healthz")[0] == 200
        status, body = _get(mport, "/readyz")
        assert status == 503 and "upstream unreachable" in body
    finally:
        proc.stop()


def test_sigterm_drains_a_long_query_then_exits_zero(pg: Any) -> None:
    mport = free_port()
    proc = WeirProcess.start(pg, ["--metrics-listen", f"127.0.0.1:{mport}",
                                  "--drain-seconds", "20"])
    result: list[Any] = []
    busy = psycopg.connect(proc.dsn(), autocommit=True)
    idle = psycopg.connect(proc.dsn(), autocommit=True)
    try:
        def sleep() -> None:
            try:
                result.append(busy.execute("SELECT pg_sleep(2), 'done'").fetchone())
            except BaseException as exc:
                result.append(exc)

        runner = threading.Thread(target=sleep)
        runner.start()
        eventually(lambda: pg.psql("SELECT count(*) FROM pg_stat_activity "
                                   "WHERE query LIKE 'SELECT pg_sleep(2)%'").strip() == "1")
        sent = time.monotonic()
        proc.proc.send_signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                psycopg.connect(proc.dsn(), connect_timeout=2).close()
            except psycopg.OperationalError:
                return True
            return False

        eventually(refused)
        assert runner.is_alive(), "the long query should still be running while weir drains"
        runner.join(30)
        assert result == [("", "done")]
        assert proc.proc.wait(20) == 0
        assert time.monotonic() - sent < 20
        with pytest.raises(psycopg.OperationalError):  # the idle session was ended
            idle.execute("SELECT 1")
    finally:
        busy.close()
        idle.close()
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(10)


def test_sigterm_cuts_an_open_transaction_after_the_grace_period(pg: Any) -> None:
    proc = WeirProcess.start(pg, ["--drain-seconds", "1"])
    conn = psycopg.connect(proc.dsn())
    try:
        conn.execute("SELECT 1")  # (psycopg opened a transaction block: not quiet)
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(20) == 0
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(10)


def test_a_second_sigterm_ends_the_drain_at_once(pg: Any) -> None:
    mport = free_port()
    proc = WeirProcess.start(pg, ["--drain-seconds", "600", "--metrics-listen",
                                  f"127.0.0.1:{mport}"])
    conn = psycopg.connect(proc.dsn())
    try:
        conn.execute("SELECT 1")  # (a transaction block stays open: the drain would wait)
        proc.proc.send_signal(signal.SIGTERM)
        eventually(lambda: _value(mport, "weir_draining") == 1)
        status, body = _get(mport, "/readyz")
        assert status == 503 and "draining" in body
        assert _get(mport, "/healthz")[0] == 200
        assert proc.proc.poll() is None
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(30) == 0
    finally:
        conn.close()
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(10)


def test_config_show_masks_the_password(tmp_path: Any) -> None:
    import sys

    config = tmp_path / "weir.toml"
    config.write_text('upstream = "postgresql://weir@db:5432/app"\nhit_lanes = 0\n'
                      'log-format = "text"\n')
    secret = tmp_path / "password"
    secret.write_text("s3cr:t\n")
    shown = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "config", "show", "--config", str(config),
         "--upstream-password-file", str(secret), "--listen", "0.0.0.0:6432"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "WEIR_DRAIN_SECONDS": "7"})
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "s3cr" not in out
    assert 'upstream = "postgresql://weir:****@db:5432/app"  # config file' in out
    assert 'listen = "0.0.0.0:6432"  # flag' in out
    assert "drain_seconds = 7.0  # env WEIR_DRAIN_SECONDS" in out
    assert "hit_lanes = 0  # config file" in out
    config.write_text('upstream = "postgresql://weir@db/app"\nhit_lane = 2\n')
    bad = subprocess.run([sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "unknown key 'hit_lane'" in bad.stderr
