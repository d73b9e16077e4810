"""``weir bootstrap`` through ``spark-submit`` on a real Spark standalone cluster (a master and
a worker started by this module from pyspark's own ``spark-class``, bound to 127.0.0.1), while
writes run upstream; the result is exact once patched from the slot."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import cdc.bootstrap.__main__ as entry
from cdc.bootstrap import manifest
from proxy.localpg import free_port
from tests.integration.cdc.bootstrap_support import Writer, assert_exact, create_table
from tests.support import eventually, unique_name

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
       "PYSPARK_DRIVER_PYTHON": sys.executable}


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):  # not listening yet, or answering before it is ready
        return 0


def _daemon(log: Path, *argv: str) -> subprocess.Popen[bytes]:
    with open(log, "w") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([str(BIN / "spark-class"), *argv], env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (2 cores); yields the master URL."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(_daemon(logs / "master.log", "org.apache.spark.deploy.master.Master",
                             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)))
        procs.append(_daemon(logs / "worker.log", "org.apache.spark.deploy.worker.Worker",
                             master_url, "--host", "127.0.0.1", "--cores", "2",
                             "--memory", "1g", "--webui-port", str(worker_ui),
                             "--work-dir", str(logs / "work")))
        eventually(lambda: _alive_workers(ui) >= 1, timeout=90, interval=0.2)
        yield master_url
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def test_spark_submit_on_a_standalone_cluster_is_exact(
        pg: Any, dbname: str, cluster: str, tmp_path: Path) -> None:
    assert shutil.which("java"), "the JRE comes from the Makefile's system packages"
    dsn = pg.dsn(dbname=dbname)
    create_table(dsn, "items")
    out = tmp_path / "cluster"
    slot = unique_name("weir_bootstrap")
    writer = Writer(dsn, "items", seed=3).start()
    try:
        eventually(lambda: writer.commits > 20)
        proc = subprocess.run(
            [str(BIN / "spark-submit"), "--master", cluster,
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
             entry.__file__, "--upstream", dsn, "--table", "items", "--out", str(out),
             "--slot", slot, "--partitions", "6"],
            env=ENV, capture_output=True, text=True, timeout=240)
        during = writer.commits
        eventually(lambda: writer.commits > during + 20)
    finally:
        writer.stop()
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        said = proc.stdout + proc.stderr  # spark-submit merges the driver's stderr into stdout
        assert "rows/s" in said and "(6/6 partitions)" in said, said[-4000:]
        result = manifest.load_manifest(out)
        assert result is not None and result["slot"] == slot
        parts = result["tables"][0]["partitions"]
        assert len(parts) == 6 and min(p["rows"] for p in parts) > 10_000  # quantile bounds
        assert (out / "weir-bootstrap-code.zip").exists()  # the code shipped to executors
        assert_exact(out, dsn)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
