"""Instructions per pass-through transaction of the weir process, counted by valgrind's
callgrind: a measure of the proxy's own work that does not move with the machine's load
(timing on a shared 2-core machine does; hardware counters are not available there).

One invocation measures one build: ``--tree`` names the source tree whose ``proxy.cli``
runs (its own ``.venv/bin/python``; default: this tree), so the same script measures an old
build's worktree too. A throw-away PostgreSQL (``pgbench -i``), weir under callgrind
(``WEIR_IMPL=cython`` unless set), then for each mode: a warm-up run, and runs of ``N`` and
``2N`` pgbench ``-S`` transactions per client (``-c``, default one), each run's counts
dumped apart with ``callgrind_control --dump``. ``Ir(2N) - Ir(N)`` over ``N`` times the
clients is the instructions per transaction with the connection's setup and teardown
cancelled out. The dumps stay in
``--out`` (``<mode>-n`` and ``<mode>-2n``); ``--compare OLD_OUT NEW_OUT`` differences
them per transaction by function and by Cython source line (the generated C's lines mapped
back through Cython's comments), which is where two builds' costs part.

    .venv/bin/python bench/instructions.py [--tree /work/wt-abold] [-t 2000]
        [-c 1] [--modes simple,extended] [--out /tmp/weir-callgrind]
    .venv/bin/python bench/instructions.py --compare /tmp/old-out /tmp/new-out [-t 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.passthrough import _wait_port  # noqa: E402
from proxy import localpg  # noqa: E402


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


def self_costs(dump: Path) -> tuple[Counter[str], Counter[tuple[str, int]]]:
    """The self instruction counts of a callgrind dump (written with uncompressed names): by
    function (``object:function``) and by source line (``(file, line)``, inlined code under
    its own file)."""
    functions: Counter[str] = Counter()
    lines: Counter[tuple[str, int]] = Counter()
    obj = fn = source = outer = ""
    call = False
    for line in dump.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "ob":
            obj = value.rsplit("/", 1)[-1]
        elif key == "fl":
            source = outer = value
        elif key in ("fi", "fe"):
            source = value
        elif key == "fn":
            fn, source = f"{obj}:{value}", outer
        elif key == "calls":
            call = True  # the next cost line is the call's inclusive cost
        elif line[:1].isdigit():
            fields = line.split()
            if call:
                call = False
            elif len(fields) >= 2:
                functions[fn] += int(fields[1])
                lines[(source, int(fields[0]))] += int(fields[1])
    return functions, lines


def cython_line(source: str, line: int, cache: dict[str, list[str]]) -> str:
    """The ``.pyx``/``.pxd``/``.pxi`` line a line of Cython's generated C comes from
    (Cython's ``/* "file":N`` comments), or ``source:line`` for other sources."""
    if source not in cache:
        try:
            cache[source] = Path(source).read_text(errors="replace").splitlines()
        except OSError:
            cache[source] = []
    text = cache[source]
    for i in range(min(line, len(text)) - 1, -1, -1):
        match = re.match(r'\s*/\* "([^"]+)":(\d+)', text[i])
        if match:
            return f"{match.group(1)}:{match.group(2)}"
    return f"{source.rsplit('/', 1)[-1]}:{line if text else 0}"


def per_transaction(out: Path, mode: str, transactions: int
                    ) -> tuple[dict[str, float], dict[str, float]]:
    """Instructions per transaction (the ``2N`` dump less the ``N`` one) by function and by
    Cython source line (C sources of other libraries by file)."""
    (f2, l2), (f1, l1) = self_costs(out / f"{mode}-2n"), self_costs(out / f"{mode}-n")
    f2.subtract(f1)
    l2.subtract(l1)
    cache: dict[str, list[str]] = {}
    by_line: Counter[str] = Counter()
    for (source, line), count in l2.items():
        by_line[cython_line(source, line, cache)] += count
    return ({k: v / transactions for k, v in f2.items()},
            {k: v / transactions for k, v in by_line.items()})


def compare(old: Path, new: Path, mode: str, transactions: int, top: int) -> None:
    """Print the functions and source lines whose instructions per transaction differ most
    between two ``--out`` directories (a line is named by its file and number in each tree:
    read both when they moved)."""
    for index, title in ((0, "function"), (1, "source line")):
        a, b = per_transaction(old, mode, transactions)[index], \
            per_transaction(new, mode, transactions)[index]
        print(f"{mode}: Ir/tx old {sum(a.values()):.0f}, new {sum(b.values()):.0f}; "
              f"by {title} (old, new, new - old):")
        keys = sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))
        for key in keys[:top]:
            print(f"  {a.get(key, 0):9.1f} {b.get(key, 0):9.1f} "
                  f"{b.get(key, 0) - a.get(key, 0):+9.1f}  {key[:110]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(ROOT))
    parser.add_argument("-t", "--transactions", type=int, default=2000)
    parser.add_argument("--modes", default="simple,extended")
    parser.add_argument("-c", "--clients", type=int, default=1,
                        help="pgbench clients (-t counts per client)")
    parser.add_argument("--out", default="/tmp/weir-callgrind")
    parser.add_argument("--compare", nargs=2, metavar=("OLD_OUT", "NEW_OUT"),
                        help="measure nothing: compare two --out directories' dumps "
                             "(-t and --modes as they were measured with)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if args.compare:
        for mode in args.modes.split(","):
            compare(Path(args.compare[0]), Path(args.compare[1]), mode,
                    args.transactions * args.clients, args.top)
        return 0
    measure(Path(args.tree).resolve(), args.transactions, args.modes.split(","),
            Path(args.out).resolve(), args.clients)
    return 0


if __name__ == "__main__":
    sys.exit(main())
