"""``make bench`` in a shortened form: the small site and short runs, as a real subprocess.

It must write ``comparison.md`` with its four tables and the memory table, and every peer
must appear in each table it belongs to: with figures when it ran, or with the reason it did
not. PgBouncer and pgpool-II are installed by ``make install`` (the Makefile's system
packages), so here they must actually run; a missing one fails this test with its reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: each table and the rows it must have (bench/compare.py's labels)
TABLES = {
    "pass-through": ("PostgreSQL directly", "PgBouncer (session)", "pgpool-II (cache off)",
                     "weir (no caches)"),
    "cached, cold": ("PostgreSQL directly (reference)", "pgpool-II", "weir"),
    "cached, warm": ("PostgreSQL directly (reference)", "pgpool-II", "weir"),
    "writes": ("PostgreSQL directly", "PgBouncer (session)", "pgpool-II (from cold)",
               "weir (from cold)", "weir, read-your-writes off (from cold)"),
}


def _table(text: str, name: str) -> dict[str, list[str]]:
    """The rows of one markdown table by their first cell."""
    section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] != "run":
            rows[cells[0]] = cells[1:]
    return rows


def test_short_bench_has_every_peer_in_every_table(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "bench/compare.py", "--small", "--seconds", "2", "--clients", "2",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = (out / "comparison.md").read_text()
    assert "- Command: `make bench" in text and "- Machine: " in text
    for name, labels in TABLES.items():
        rows = _table(text, name)
        assert list(rows) == list(labels), (name, list(rows))
        for label in labels:
            ops = int(rows[label][0].replace(",", ""))
            reason = re.search(rf"^- {re.escape(label)}: not run: (.+)$", text, re.MULTILINE)
            assert ops > 0, f"{name}: {label} did not run: {reason and reason.group(1)}"
    for name in ("cached, cold", "cached, warm"):  # both caches counted their hits
        rows = _table(text, name)
        for label in ("pgpool-II", "weir"):
            assert rows[label][3].endswith("%"), (name, label, rows[label])
    assert "| story_page |" in text and "## Verdict of this run" in text
    for png in ("comparison-throughput.png", "comparison-cold-throughput.png",
                "comparison-writes-latency.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG")
