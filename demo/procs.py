"""Starting and stopping ``weir serve`` as a real subprocess, and reading its status.

Owns: the command line the demo and the benchmark give weir, waiting for its
``weir listening on`` line, draining its log, its own session (a Ctrl-C at the terminal
reaches only the demo, which then stops weir itself), stopping it, and ``SHOW WEIR STATUS``
plus the process's resident memory.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

import psycopg

from proxy import localpg


class Weir:
    """A running ``weir serve`` in front of ``upstream``."""

    def __init__(self, upstream: str, *extra: str) -> None:
        self.port = localpg.free_port()
        self.log: deque[str] = deque(maxlen=200)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--upstream", upstream,
             "--listen", f"127.0.0.1:{self.port}", "--log-level", "warning", *extra],
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True)
        try:
            self._wait_listening()
        except BaseException:  # it did not start, or Ctrl-C while it started: stop it
            self.stop()
            raise

    def _wait_listening(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if "weir listening on" in line:
                threading.Thread(target=self._drain, daemon=True).start()
                return
        code = self.proc.wait()
        raise RuntimeError(f"weir did not start (exit code {code}): {''.join(self.log)[-2000:]}")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}?sslmode=disable"

    def status(self) -> dict[str, str]:
        """``SHOW WEIR STATUS`` as a dict."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            return {str(k): str(v) for k, v in conn.execute("SHOW WEIR STATUS").fetchall()}

    def rss_bytes(self) -> int:
        """The weir process's resident memory (0 once it has exited)."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> Weir:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
