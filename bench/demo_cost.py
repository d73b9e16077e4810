"""CPU per operation of the demo's workload, directly and through weir (issue 24).

Owns: one measurement of where the demo's throughput goes. It starts a throw-away
PostgreSQL, loads the demo's news site (``demo.dataset``), runs the demo's mix
(``demo.workload``) directly, then through a fresh weir started cold (``demo.procs``), and
prints for each run the operations per second and the CPU time PostgreSQL and weir spent per
operation (from ``/proc``: weir's process with all its threads; PostgreSQL's postmaster, its
live children and the children it reaped), and the mean latency of each operation (and of the
operation that follows a client's write: ``after write``, which read-your-writes may park).
With ``--profile FILE`` weir runs under
``cProfile`` (event-loop thread only; the lanes are C threads) and the profile is written to
FILE when weir stops; ``--runs N`` runs weir N times in turn on the same cluster (a new weir
each time, caches created again, so each starts cold).

Usage: ``python -m bench.demo_cost --seconds 20 [--profile /tmp/weir.prof] [--small]``.
Figures are noisy on a shared machine: compare within one invocation only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import psycopg

from demo import dataset, workload
from demo.procs import Weir
from proxy import localpg

_TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent


def _cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of ``pid`` (all its threads), plus its reaped children's if asked."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICK


def threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` so far, by ``name/tid``."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        out[f"{name}/{task.name}"] = _task_cpu(pid, task.name)
    return out


def _task_cpu(pid: int, tid: str) -> float:
    try:
        fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def postgres_cpu(cluster: localpg.LocalCluster) -> float:
    """CPU seconds of the whole cluster so far: the postmaster, what it reaped, and the
    processes still running under it."""
    master = int((cluster.datadir / "postmaster.pid").read_text().split()[0])
    total = _cpu(master, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == master:
            total += _cpu(int(entry.name))
    return total


def _line(label: str, ops: int, seconds: float, pg: float, weir: float) -> str:
    per = 1000.0 / max(ops, 1)
    return (f"{label:<14} {ops / seconds:>8,.0f} ops/s  PostgreSQL {pg * per:.3f} ms/op  "
            f"weir {weir * per:.3f} ms/op  (load {os.getloadavg()[0]:.1f})")


def latencies(samples: Sequence[workload.Sample]) -> str:
    """Mean latency of each operation (ms), and of the reads right after a session's write
    (``after write``: the operation that follows a vote or comment on the same client, which
    read-your-writes may park), in one line."""
    by: dict[str, list[float]] = {}
    last: dict[int, str] = {}
    for s in samples:  # (in start order)
        by.setdefault(s.op, []).append(s.latency)
        if last.get(s.client) in ("vote", "comment") and s.op not in ("vote", "comment"):
            by.setdefault("after write", []).append(s.latency)
        last[s.client] = s.op
    parts = [f"{op} {1000 * sum(v) / len(v):.2f}" for op, v in sorted(by.items())]
    return "   mean ms: " + "  ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.demo_cost", description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--runs", type=int, default=1, help="weir runs in turn (each cold)")
    p.add_argument("--small", action="store_true")
    p.add_argument("--profile", default="", help="run weir under cProfile, write here")
    p.add_argument("--mix", choices=("demo", "writes", "reads"), default="demo",
                   help="the demo's mix, votes and comments (with 2%% story pages), or reads only")
    p.add_argument("--old", default="",
                   help="another source tree (built in place): its weir runs in turn with "
                        "this one's, each cold (new, old, new, old, ...; --runs pairs)")
    p.add_argument("--old-first", action="store_true",
                   help="with --old: old, new, old, new, ... (each run warms the cluster "
                        "for the next: swap the order to see that bias)")
    p.add_argument("--no-direct", action="store_true", help="skip the direct run")
    p.add_argument("--gc-log", default="",
                   help="time weir's garbage collections (gc.callbacks), summary written here")
    args = p.parse_args(argv)
    size = dataset.SMALL if args.small else dataset.Size()
    stop = threading.Event()
    mix = {"demo": workload.Mix(), "reads": workload.READ_ONLY,
           # (2% story pages: each session holds a cached statement, as the demo's do)
           "writes": workload.Mix(reads=(2.0, 0.0, 0.0, 0.0), vote=68.0, comment=30.0)}[args.mix]
    with localpg.start() as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            dataset.load(conn, size)
        if not args.no_direct:
            pg0 = postgres_cpu(cluster)
            out = workload.run(cluster.dsn(), size, args.seconds, args.clients, mix, stop)
            print(_line("direct", len(out.samples), out.elapsed, postgres_cpu(cluster) - pg0,
                        0.0), flush=True)
            print(latencies(out.samples), flush=True)
        builds = [("new", str(ROOT)), ("old", args.old)] if args.old else [("", str(ROOT))]
        if args.old_first:
            builds.reverse()
        for run in range(args.runs * len(builds)):
            label, tree = builds[run % len(builds)]
            profile = gclog = ""
            if args.profile:
                profile = f"{args.profile}.{run}" if args.runs * len(builds) > 1 else args.profile
            if args.gc_log:
                gclog = f"{args.gc_log}.{run}" if args.runs * len(builds) > 1 else args.gc_log
            weir = _started(cluster.dsn(), tree, profile, gclog)
            try:
                with psycopg.connect(weir.dsn(), autocommit=True) as conn:
                    dataset.create_caches(conn)
                pg0, w0 = postgres_cpu(cluster), _cpu(weir.proc.pid)
                t0 = threads_cpu(weir.proc.pid)
                out = workload.run(weir.dsn(), size, args.seconds, args.clients, mix, stop)
                pg, w = postgres_cpu(cluster) - pg0, _cpu(weir.proc.pid) - w0
                t1 = threads_cpu(weir.proc.pid)
                spent = sorted(((t1[k] - t0.get(k, 0.0), k) for k in t1), reverse=True)
                per = 1000.0 / max(len(out.samples), 1)
                print("   weir's threads, ms/op: " + "  ".join(
                    f"{k} {v * per:.3f}" for v, k in spent[:6] if v > 0), flush=True)
                status = weir.status()
                name = f"weir {label} {run + 1}".replace("  ", " ")
                print(_line(name, len(out.samples), out.elapsed, pg, w), flush=True)
                print(latencies(out.samples), flush=True)
                keys = ("hits", "misses", "lane_answers", "lane_left_statement", "lane_left_write",
                        "lane_left_unstamped", "fills", "fill_ms_avg")
                print("   " + "  ".join(f"{k} {status.get(k, '-')}" for k in keys), flush=True)
                keys = ("session_waits", "session_wait_ms_avg", "session_parks",
                        "session_parks_after_write", "session_park_ms_avg",
                        "session_waits_failed", "session_barriers", "session_probes",
                        "session_miss_positions", "session_miss_positions_passed",
                        "session_miss_positions_unflushed",
                        "session_write_positions", "session_write_positions_passed",
                        "session_covered_by_fills", "fills_not_admitted")
                print("   " + "  ".join(f"{k} {status.get(k, '-')}" for k in keys), flush=True)
                if out.errors:
                    print("   errors:", out.errors[:3])
            finally:
                weir.stop()
            if gclog and os.path.exists(gclog):
                print("   garbage collections: " + "; ".join(
                    Path(gclog).read_text().splitlines()), flush=True)
            if weir.proc.returncode not in (0, None):
                print(f"   weir exited {weir.proc.returncode}: {''.join(weir.log)[-500:]}")
    return 0


#: weir under cProfile with the event-loop thread's CPU time as the clock (wall time would
#: count the time the process waits for a CPU on a busy machine, inside its send calls)
PROFILED = """
import cProfile, runpy, sys, time
sys.path.insert(0, ".")
path = sys.argv[1]
sys.argv = ["proxy.cli", *sys.argv[2:]]
prof = cProfile.Profile(time.thread_time)
prof.enable()
try:
    runpy.run_module("proxy.cli", run_name="__main__")
finally:
    prof.disable()
    prof.dump_stats(path)
"""


#: weir with its garbage collections timed: per generation, how many and how long (CPU of
#: the collecting thread), written as one line per generation when it exits
_GC_TIMED = """
import atexit, gc, runpy, sys, time
sys.path.insert(0, ".")
path = sys.argv[1]
sys.argv = ["proxy.cli", *sys.argv[2:]]
spent = [[0, 0.0], [0, 0.0], [0, 0.0]]
began = [0.0]
def timed(phase, info):
    if phase == "start":
        began[0] = time.thread_time()
    else:
        spent[info["generation"]][0] += 1
        spent[info["generation"]][1] += time.thread_time() - began[0]
gc.callbacks.append(timed)
def dump():
    with open(path, "w") as f:
        for gen, (n, s) in enumerate(spent):
            f.write(f"gen{gen} {n} collections {s:.3f} s\\n")
atexit.register(dump)
try:
    runpy.run_module("proxy.cli", run_name="__main__")
finally:
    dump()
"""


def _started(upstream: str, tree: str, profile: str, gclog: str = "") -> Weir:
    """A weir of the source tree ``tree`` (this interpreter, the tree's own modules and
    builds first on the path), under cProfile (``PROFILED``) writing ``profile`` when it
    exits if one is named, or with its garbage collections timed (``_GC_TIMED``) into
    ``gclog``."""
    weir = Weir.__new__(Weir)
    weir.port = localpg.free_port()
    weir.log = deque(maxlen=200)
    start = (["-c", PROFILED, profile] if profile else ["-c", _GC_TIMED, gclog] if gclog
             else ["-m", "proxy.cli"])
    weir.proc = subprocess.Popen(
        [sys.executable, *start, "serve", "--upstream", upstream,
         "--listen", f"127.0.0.1:{weir.port}", "--log-level", "warning"],
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
        cwd=tree, env={**os.environ, "PYTHONPATH": tree})
    weir._wait_listening()
    return weir


if __name__ == "__main__":
    sys.exit(main())
