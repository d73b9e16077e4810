"""``make bench`` never drops a peer silently: one that cannot start is a row saying why."""

from __future__ import annotations

from typing import Any

import pytest

from bench import compare, peers
from demo import report


def test_a_missing_pgpool_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/nonexistent/{name}")
    with pytest.raises(peers.PeerUnavailable, match="pgpool2"), \
            peers.pgpool(None, 2, cache=True):  # type: ignore[arg-type]
        pass


def test_an_unavailable_peer_is_reported_in_its_table() -> None:
    bench: Any = compare.Bench.__new__(compare.Bench)
    bench.runs = []
    bench.unavailable("writes", "pgpool-II (from cold)", "pgpool-II did not start: port busy")
    rows = [r.summary for r in bench.runs if r.workload == "writes"]
    table = report.markdown_table(rows)
    assert "| pgpool-II (from cold) | 0 | - | - |" in table
    assert "not run: pgpool-II did not start: port busy" in table


def test_a_weir_that_does_not_start_is_a_reason() -> None:
    with pytest.raises(peers.PeerUnavailable, match="weir did not start"), \
            peers.weir(_Cluster(), False, "--caching", "sometimes"):  # type: ignore[arg-type]
        pass


class _Cluster:
    """Only the URL weir is given (it exits on the bad flag before connecting)."""

    def dsn(self) -> str:
        return "postgresql://postgres@127.0.0.1:1/postgres"
