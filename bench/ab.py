"""A/B of two weir builds in one invocation: the issue-17 timing check.

Both builds run at once, each from its own source tree and virtualenv (``--old`` and
``--new``), against one throw-away PostgreSQL, each with a database of its own initialised
alike (``pgbench -i``), so the server, its configuration and its cache are shared. pgbench
then runs short rounds against the two in turn, each side first in every other round, so
that the machine's drift (other work, thermal, the server's own state) falls on both alike;
many short pairs instead of a few long runs make the per-pair ratio's spread measurable.

Workloads (``--modes``): pgbench ``-S`` pass-through in ``simple``, ``extended`` and
``prepared`` protocol, all rounds of them before any cache exists; then ``hit``: a point
lookup over 2,000 accounts, made a cache in both builds and read once over every key before
its rounds (``-M prepared``): the warmed hit path, the best case. Its text differs from
``-S``'s, which stays a pass-through query.

Prints a Markdown table: each side's mean TPS, the mean of the per-pair ratios new/old with
its standard error, and the median pair; with ``--output`` it also writes it there.

    .venv/bin/python bench/ab.py --old /work/wt-abold [--new .] [--rounds 20] [--seconds 3]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.passthrough import _wait_port, parse, pgbench  # noqa: E402
from proxy import localpg  # noqa: E402

HIT_KEYS = 2000
HIT_SQL = "SELECT aid, abalance FROM pgbench_accounts WHERE aid = $1"
HIT_SCRIPT = (f"\\set aid random(1, {HIT_KEYS})\n"
              "SELECT aid, abalance FROM pgbench_accounts WHERE aid = :aid;\n")


@contextmanager
def _serve(tree: Path, upstream: str, dbname: str) -> Iterator[str]:
    """Run ``tree``'s weir (its own virtualenv, its own working directory, so its own
    modules) in front of ``upstream`` until it listens; yield its URL."""
    port = localpg.free_port()
    argv = [str(tree / ".venv" / "bin" / "python"), "-m", "proxy.cli", "serve", "--upstream",
            upstream, "--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
    proc = subprocess.Popen(argv, cwd=tree, stderr=subprocess.DEVNULL,
                            env={**os.environ, "WEIR_IMPL": os.environ.get("WEIR_IMPL", "cython")})
    try:
        _wait_port(port)
        yield f"postgresql://postgres@127.0.0.1:{port}/{dbname}"
    finally:
        proc.terminate()
        proc.wait(10)


def _psql(bindir: Path, dsn: str, sql: str) -> None:
    subprocess.run([str(bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, dsn],
                   check=True, capture_output=True, env={**os.environ, "PGSSLMODE": "disable"})


def _run(bindir: Path, dsn: str, mode: str, clients: int, seconds: int, script: Path) -> float:
    args = ["-M", "prepared", "-f", str(script)] if mode == "hit" else ["-S", "-M", mode]
    args += ["-c", str(clients), "-j", "2", "-T", str(seconds), "-n"]
    return parse(pgbench(bindir, dsn, args))[0]


def summary(old: list[float], new: list[float]) -> tuple[float, float, float]:
    """Mean per-pair ratio new/old - 1, its standard error, and the median pair - 1."""
    ratios = [n / o for o, n in zip(old, new, strict=True)]
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    err = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("nan")
    return math.exp(mean) - 1, err, statistics.median(ratios) - 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="source tree of the old build")
    parser.add_argument("--new", default=str(ROOT), help="source tree of the new build")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--modes", default="simple,extended,prepared,hit")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    modes = args.modes.split(",")
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    bindir = localpg.find_bindir()
    samples: dict[tuple[str, str], list[float]] = {(m, s): [] for m in modes for s in trees}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the cluster and weirs too
    cluster = localpg.start(tls=False)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        stack.callback(cluster.stop)
        script = Path(tmp) / "hit.sql"
        script.write_text(HIT_SCRIPT)
        urls = {}
        for side, tree in trees.items():
            _psql(bindir, cluster.dsn(), f"CREATE DATABASE ab_{side}")
            upstream = cluster.dsn(dbname=f"ab_{side}")
            pgbench(bindir, upstream, ["-i", "-q", "-s", str(args.scale)])
            urls[side] = stack.enter_context(_serve(tree, upstream, f"ab_{side}"))
        # pass-through first, with no cache in either build (a cache makes every query text
        # be looked at against it), then the hit path after the cache is made and filled
        for phase in ([m for m in modes if m != "hit"], [m for m in modes if m == "hit"]):
            if phase == ["hit"]:
                for url in urls.values():
                    _psql(bindir, url, f"CREATE CACHE FROM {HIT_SQL}")
                    _run(bindir, url, "hit", args.clients, 3, script)  # fill every key
            for r in range(args.rounds if phase else 0):
                for mode in phase:
                    first = (r + modes.index(mode)) % 2 == 0
                    for side in ["old", "new"] if first else ["new", "old"]:
                        tps = _run(bindir, urls[side], mode, args.clients, args.seconds, script)
                        samples[(mode, side)].append(tps)
                    print(f"round {r + 1:2} {mode:9} old={samples[(mode, 'old')][-1]:9.0f} "
                          f"new={samples[(mode, 'new')][-1]:9.0f}", flush=True)
        load = os.getloadavg()
    lines = [
        f"{args.rounds} alternating pairs of {args.seconds} s, {args.clients} clients, "
        f"scale {args.scale} ({platform.machine()}, {os.cpu_count()} cores, load at the end "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}); old `{trees['old']}`, new `{trees['new']}`",
        "",
        "| mode | old mean TPS | new mean TPS | new/old (mean of pairs) | std. error "
        "| median pair |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode in modes:
        old, new = samples[(mode, "old")], samples[(mode, "new")]
        ratio, err, median = summary(old, new)
        lines.append(f"| {mode} | {statistics.fmean(old):.0f} | {statistics.fmean(new):.0f} | "
                     f"{ratio:+.1%} | {err:.1%} | {median:+.1%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
