"""Instructions per pass-through transaction of the weir process, counted by valgrind's
callgrind: a measure of the proxy's own work that does not move with the machine's load
(timing on a shared 2-core machine does; hardware counters are not available there).

One invocation measures one build: ``--tree`` names the source tree whose ``proxy.cli``
runs (its own ``.venv/bin/python``; default: this tree), so the same script measures an old
build's worktree too. A throw-away PostgreSQL (``pgbench -i``), weir under callgrind
(``WEIR_IMPL=cython`` unless set), then for each mode: a warm-up run, and runs of ``N`` and
``2N`` pgbench ``-S`` transactions per client (``-c``, default one), each run's counts dumped apart with
``callgrind_control --dump``. ``Ir(2N) - Ir(N)`` over ``N`` times the clients is the instructions per
transaction with the connection's setup and teardown cancelled out. The dumps stay in
``--out`` for ``callgrind_annotate`` (``<mode>-n`` and ``<mode>-2n``).

    .venv/bin/python bench/instructions.py [--tree /work/wt-abold] [-t 2000]
        [-c 1] [--modes simple,extended] [--out /tmp/weir-callgrind]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import localpg  # noqa: E402


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port}")


def _pgbench(bindir: Path, dsn: str, args: list[str]) -> None:
    proc = subprocess.run([str(bindir / "pgbench"), *args, dsn], capture_output=True, text=True,
                          env={**os.environ, "PGSSLMODE": "disable"}, check=False)
    if proc.returncode != 0 or ("-i" not in args and "actually processed" not in proc.stdout):
        raise RuntimeError(f"pgbench failed: {proc.stderr.strip()}\n{proc.stdout}")


def _dump(pid: int, out: Path, name: str) -> int:
    """Dump callgrind's counts since the last dump as ``out/name``; their instruction count."""
    before = set(out.iterdir())
    subprocess.run(["callgrind_control", "--dump=" + name, str(pid)], check=True,
                   capture_output=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = [f for f in set(out.iterdir()) - before if f.stat().st_size > 0]
        if new:
            time.sleep(0.5)  # let the file be written out
            target = out / name
            new[0].rename(target)
            match = re.search(r"^(?:summary|totals): (\d+)", target.read_text(), re.M)
            if match:
                return int(match.group(1))
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def measure(tree: Path, transactions: int, modes: list[str], out: Path, clients: int = 1
            ) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        f.unlink()
    cluster = localpg.start(tls=False)
    proc = None
    try:
        bindir = localpg.find_bindir()
        upstream = cluster.dsn()
        _pgbench(bindir, upstream, ["-i", "-q", "-s", "10"])
        port = localpg.free_port()
        python = tree / ".venv" / "bin" / "python"
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
             f"--callgrind-out-file={out}/callgrind.out.%p",
             str(python), "-m", "proxy.cli", "serve", "--upstream", upstream,
             "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
            cwd=tree, env={**os.environ, "WEIR_IMPL": os.environ.get("WEIR_IMPL", "cython")},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(port, 600)
        via = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        per_tx: dict[str, float] = {}
        for mode in modes:
            args = ["-S", "-M", mode, "-c", str(clients), "-j", str(min(clients, 2)), "-n"]
            _pgbench(bindir, via, [*args, "-t", str(transactions)])  # warm-up
            _dump(proc.pid, out, f"{mode}-warm")
            _pgbench(bindir, via, [*args, "-t", str(transactions)])
            once = _dump(proc.pid, out, f"{mode}-n")
            _pgbench(bindir, via, [*args, "-t", str(2 * transactions)])
            twice = _dump(proc.pid, out, f"{mode}-2n")
            per_tx[mode] = (twice - once) / (transactions * clients)
            print(f"{mode:9} Ir(N)={once} Ir(2N)={twice} Ir/tx={per_tx[mode]:.0f}", flush=True)
        return per_tx
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(120)
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(ROOT))
    parser.add_argument("-t", "--transactions", type=int, default=2000)
    parser.add_argument("--modes", default="simple,extended")
    parser.add_argument("-c", "--clients", type=int, default=1,
                        help="pgbench clients (-t counts per client)")
    parser.add_argument("--out", default="/tmp/weir-callgrind")
    args = parser.parse_args()
    measure(Path(args.tree).resolve(), args.transactions, args.modes.split(","),
            Path(args.out).resolve(), args.clients)
    return 0


if __name__ == "__main__":
    sys.exit(main())
