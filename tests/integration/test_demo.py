"""``make demo`` in a shortened form: a small site and short runs, as a real subprocess.

It must print the comparison table, write the plots and the results, check that every cached
answer it compared equals PostgreSQL's, and exit 0. Interrupted with SIGINT (Ctrl-C) it must
exit 130, leaving neither weir, PostgreSQL nor the cluster's temporary directory behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from demo.procs import Weir
from proxy import localpg
from tests.support import eventually

ROOT = Path(__file__).resolve().parents[2]


def _demo(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "demo", "--small", "--clients", "2", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


def test_short_demo_prints_the_table_and_writes_the_plots(tmp_path: Path) -> None:
    proc = _demo("--duration", "4", "--out", str(tmp_path / "out"))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    for column in ("ops/s", "p50 ms", "p99 ms", "hit rate", "fill ms", "fresh p50/max ms",
                   "memory"):
        assert column in out
    assert re.search(r"^PostgreSQL directly\s+[\d,]+\s", out, re.MULTILINE), out
    assert re.search(r"^weir, from cold\s+[\d,]+\s.*%", out, re.MULTILINE), out
    assert re.search(r"cached answers checked against PostgreSQL: (\d+)/\1 equal", out), out
    assert re.search(r"hit rate through the run \(in sixths\): (\d+% ){2,}", out + " "), out
    for op in ("story_page", "front_page", "user_profile", "comment_thread", "vote", "comment"):
        assert re.search(rf"^  {op}\s+[\d,]+\s+[\d,]+\s+[\d.]+\s+[\d.]+", out, re.MULTILINE), out
    assert re.search(r"[\d,]+ coverage waits of [\d.]+ ms on average \(at most \d+% of",
                     out), out
    for name in ("throughput.png", "latency.png", "cache.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    weir = results["rows"][1]
    assert weir["ops"] > 0 and 0 < weir["hit_rate"] <= 1 and weir["fill_ms"] > 0
    ops = {r["op"]: r for r in results["operations"]}  # where the time goes, by operation
    assert set(ops) == {"story_page", "front_page", "user_profile", "comment_thread", "vote",
                        "comment"}
    assert all(r["direct_ops"] > 0 and r["weir_ops"] > 0 and r["weir_mean_ms"] > 0
               for r in ops.values())
    timeline = results["weir_timeline"]  # weir's counters second by second, from cold
    assert len(timeline) >= 2 and sum(s["hits"] for s in timeline) > 0
    assert sum(s["misses"] for s in timeline) <= int(results["weir_status"]["misses"])


def test_ctrl_c_leaves_no_process_or_temporary_directory(tmp_path: Path) -> None:
    proc = _demo("--duration", "8", "--out", str(tmp_path / "out"))
    assert proc.stdout is not None
    datadir = port = None
    for line in proc.stdout:
        if m := re.search(r"data in (\S+)", line):
            datadir = m.group(1)
        if m := re.search(r"weir on 127\.0\.0\.1:(\d+)", line):
            port = m.group(1)
            break
    assert datadir is not None and port is not None
    weir_listen = f"127.0.0.1:{port}"
    assert _processes_mentioning(weir_listen) and Path(datadir).exists()
    proc.send_signal(signal.SIGINT)  # what the terminal sends the foreground process on Ctrl-C
    assert proc.wait(60) == 130
    eventually(lambda: not _processes_mentioning(weir_listen), timeout=10)
    eventually(lambda: not _processes_mentioning(datadir), timeout=10)
    assert not Path(datadir).exists()
    assert not (tmp_path / "out").exists()


def test_ctrl_c_while_postgres_starts_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupt lands right after ``pg_ctl start`` returned: the demo has no cluster
    object yet, so ``localpg.start`` itself must stop the server and remove its directory."""
    real_run, real_mkdtemp = localpg._run_as_owner, tempfile.mkdtemp
    roots: list[str] = []

    def mkdtemp(**kwargs: Any) -> str:
        roots.append(real_mkdtemp(**kwargs))
        return roots[-1]

    def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        done = real_run(argv, **kwargs)
        if argv[-1] == "start":
            raise KeyboardInterrupt
        return done

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(localpg, "_run_as_owner", run)
    with pytest.raises(KeyboardInterrupt):
        localpg.start()
    assert len(roots) == 1 and not Path(roots[0]).exists()
    eventually(lambda: not _processes_mentioning(roots[0]), timeout=10)


def test_ctrl_c_while_weir_starts_stops_it(pg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """weir runs in its own session (the terminal's Ctrl-C reaches only the demo), so an
    interrupt before it listened must stop it from the demo."""
    started: list[Weir] = []

    def interrupted(self: Weir) -> None:
        started.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Weir, "_wait_listening", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Weir(pg.dsn())
    assert len(started) == 1 and started[0].proc.poll() is not None
