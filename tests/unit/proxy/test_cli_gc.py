"""``weir serve`` freezes what startup loaded out of the garbage collector before it serves
(``proxy/cli.py``; issue 24: full collections walked ~94,000 startup objects each time, tens
of milliseconds on the event loop)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from proxy import cli


def test_serve_freezes_startup_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def run(coro: Any) -> None:  # instead of the event loop: what was frozen by then
        seen.append(gc.get_freeze_count())
        coro.close()

    monkeypatch.setattr(cli, "_run", run)
    monkeypatch.setattr(cli, "_configure_logging", lambda *a: None)  # (the process's logging)
    monkeypatch.setattr(cli.logparams, "configure", lambda on: None)
    gc.unfreeze()
    try:
        assert cli.main(["serve", "--upstream", "postgresql://u@127.0.0.1:9/db"]) == 0
    finally:
        gc.unfreeze()
    assert len(seen) == 1 and seen[0] > 10_000
