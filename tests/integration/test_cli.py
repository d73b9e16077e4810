"""The ``weir`` command line: flags, environment, clear errors, slot hygiene."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import psycopg

from tests.support import WeirProcess


def _weir(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})}, check=False)


def test_missing_or_bad_settings_are_clear_errors() -> None:
    proc = _weir("serve", env={"WEIR_UPSTREAM": ""})
    assert proc.returncode == 2 and "upstream is required" in proc.stderr
    proc = _weir("serve", "--upstream", "mysql://x", env={"WEIR_UPSTREAM": ""})
    assert proc.returncode == 2 and "postgresql://" in proc.stderr
    proc = _weir("serve", "--upstream", "postgresql://h/d", "--listen", "nowhere")
    assert proc.returncode == 2 and "HOST:PORT" in proc.stderr


def test_settings_from_environment(pg: Any) -> None:
    proc = WeirProcess.start(pg, env={"WEIR_LOG_LEVEL": "debug", "WEIR_CACHING": "off"})
    try:
        with psycopg.connect(proc.dsn(), autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        proc.stop()


def test_slots_list_and_drop(pg: Any, dbname: str) -> None:
    pg.psql("SELECT pg_create_logical_replication_slot('weir_cli_test', 'pgoutput')", dbname)
    url = pg.dsn(dbname=dbname)
    listed = _weir("slots", "list", "--upstream", url)
    assert listed.returncode == 0, listed.stderr
    assert "weir_cli_test" in listed.stdout
    dropped = _weir("slots", "drop", "--prefix", "weir_cli_", env={"WEIR_UPSTREAM": url})
    assert dropped.returncode == 0, dropped.stderr
    assert "weir_cli_test" not in _weir("slots", "list", "--upstream", url).stdout
