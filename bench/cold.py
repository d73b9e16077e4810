"""Cold starts: throughput from the first second after ``CREATE CACHE``, no sweep, no warm-up,
against direct PostgreSQL in the same invocation (``python bench/hit.py --cold``).

Scenarios (DESIGN §11, issue 18): Zipf(1.1) keys over 10,000 and 100,000 for the point lookup,
the story with its vote count and an author's top 10; uniform keys over 100,000 (mostly
one-off reads); eviction churn (a memory budget a third of the working set); the Zipf point
lookup while 1,000 writes/s run upstream. Each weir run starts a fresh weir process (empty
caches), creates the scenario's cache and starts pgbench at once; pgbench's per-second
progress (``-P 1``) gives the timeline. Also measured: the transaction IDs and WAL that N
misses cost upstream (``fill_cost``). Writes a section of ``docs/benchmarks/hit.md`` between
its ``cold`` markers, and ``docs/benchmarks/hit-cold.png`` when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import hit  # noqa: E402
from bench.demo_cost import PROFILED  # noqa: E402
from proxy import localpg  # noqa: E402
from tools.splice import splice  # noqa: E402

BEGIN, END = "<!-- cold:begin -->", "<!-- cold:end -->"
COST_BEGIN, COST_END = "<!-- cold-cost:begin -->", "<!-- cold-cost:end -->"
POINT = "SELECT id, author, title FROM stories WHERE id = :id;\n"
VOTES = ("SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s LEFT JOIN votes v "
         "ON v.story_id = s.id WHERE s.id = :id GROUP BY s.id, s.title;\n")
TOP10 = ("SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s JOIN votes v "
         "ON v.story_id = s.id WHERE s.author = :id GROUP BY s.id, s.title "
         "ORDER BY votes DESC, s.id LIMIT 10;\n")
CACHE = {POINT: hit.CACHES[0], VOTES: hit.CACHES[1], TOP10: hit.CACHES[2]}


@dataclass(frozen=True)
class Scenario:
    name: str
    query: str
    keys: int
    zipf: bool = True
    churn: bool = False
    writes: bool = False
    #: what the writes do: insert votes (not read by the point lookup's cache) or update
    #: stories (the cached table: each write changes one cached key)
    write_sql: str = "INSERT INTO votes (story_id, user_id) VALUES (%s, 0)"
    admission: str = "auto"  # (the default; main before session 20: second)
    flags: tuple[str, ...] = ()  # more weir flags
    cached: bool = True  # False: no CREATE CACHE (weir's own pass-through speed)

    def script(self) -> str:
        dist = (f"random_zipfian(1, {self.keys}, 1.1)" if self.zipf
                else f"random(1, {self.keys})")
        return f"\\set id {dist}\n{self.query}"


SCENARIOS = [
    Scenario("(a) point lookup, Zipf over 10,000", POINT, 10_000),
    Scenario("(a) the same, --read-your-writes off (no seen(s) barriers)", POINT, 10_000,
             flags=("--read-your-writes", "off")),
    Scenario("(a) point lookup, Zipf over 100,000", POINT, 100_000),
    Scenario("(a) story with vote count, Zipf over 100,000", VOTES, 100_000),
    Scenario("(a) author top 10, Zipf over 10,000 authors", TOP10, 10_000),
    Scenario("(b) point lookup, uniform over 100,000", POINT, 100_000, zipf=False),
    Scenario("(b) the same, --admission always", POINT, 100_000, zipf=False,
             admission="always"),
    Scenario("(b) the same without a cache (weir's pass-through)", POINT, 100_000,
             zipf=False, cached=False),
    Scenario("(c) point lookup, Zipf over 100,000, budget 1/3", POINT, 100_000, churn=True),
    Scenario("(d) point lookup, Zipf over 10,000, 1,000 writes/s", POINT, 10_000,
             writes=True),
    Scenario("(d) the same, the writes update the cached stories", POINT, 10_000,
             writes=True,
             write_sql="UPDATE stories SET title = left(md5(random()::text), 12) WHERE id = %s"),
]


@dataclass(frozen=True)
class Timeline:
    tps: list[float]  # per second
    p99_ms: float
    total: int


def _sizes(sc: Scenario) -> bool:
    """Whether ``sc``'s run measures the working set scenario (c)'s budget is a third of."""
    return sc.query == POINT and sc.keys == 100_000 and sc.zipf and not sc.churn


def bench(bindir: Path, dsn: str, script: str, seconds: int, clients: int) -> Timeline:
    """One pgbench run with per-second progress (and the p99 of all its latencies)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.sql"
        path.write_text(script)
        proc = subprocess.run(
            [str(bindir / "pgbench"), "-n", "-M", "prepared", "-f", str(path), "-c",
             str(clients), "-j", "2", "-T", str(seconds), "-P", "1", "-l", "--log-prefix",
             str(Path(tmp) / "log"), dsn],
            capture_output=True, text=True, cwd=tmp, check=False,
            env={**os.environ, "PGSSLMODE": "disable"})
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
        tps = [float(line.split(", ")[1].split()[0]) for line in proc.stderr.splitlines()
               if line.startswith("progress:")]
        latencies = sorted(int(line.split()[2]) / 1000.0
                           for log in Path(tmp).glob("log*")
                           for line in log.read_text().splitlines() if len(line.split()) >= 3)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0
    return Timeline(tps, p99, len(latencies))


def writer(dsn: str, rate: int, stories: int, stop: threading.Event, sql: str) -> None:
    import random

    rng = random.Random(7)
    with psycopg.connect(dsn, autocommit=True) as conn:
        next_at = time.perf_counter()
        while not stop.is_set():
            conn.execute(sql, (rng.randint(1, stories),))
            next_at += 1.0 / rate
            delay = next_at - time.perf_counter()
            if delay > 0:
                stop.wait(delay)


def weir_run(cluster: Any, bindir: Path, sc: Scenario, args: argparse.Namespace,
             extra: list[str]) -> tuple[Timeline, dict[str, str]]:
    """A fresh weir, the scenario's cache created, pgbench at once (under cProfile of the
    event loop's thread CPU time when ``--profile DIR`` is given)."""
    proc, through = (_profiled_weir(cluster, extra, Path(args.profile), sc) if args.profile
                     else hit._start_weir(cluster, extra))
    try:
        if sc.cached:
            with psycopg.connect(through, autocommit=True) as conn:
                conn.execute("CREATE CACHE FROM " + CACHE[sc.query])
        cpu0 = _loop_cpu(proc.pid)
        line = bench(bindir, through, sc.script(), args.seconds, args.clients)
        st = hit.status(through)
        st["loop_cpu_s"] = f"{_loop_cpu(proc.pid) - cpu0:.2f}"  # (work: the machine is shared)
        return line, st
    finally:
        proc.terminate()
        proc.wait(10)


def _loop_cpu(pid: int) -> float:
    """CPU seconds weir's main thread (the event loop: Python) has used so far, user and
    system, from ``/proc`` (0 where there is none): work counted, unlike throughput, is
    not moved much by other load on the machine. The lanes are threads of their own."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _profiled_weir(cluster: Any, extra: list[str], out: Path, sc: Scenario
                   ) -> tuple[subprocess.Popen[bytes], str]:
    """``hit._start_weir`` under cProfile, writing ``out``/<scenario>.prof when it exits."""
    out.mkdir(parents=True, exist_ok=True)
    name = "".join(c if c.isalnum() else "_" for c in sc.name)[:60] + ".prof"
    port = localpg.free_port()
    weir = subprocess.Popen(
        [sys.executable, "-c", PROFILED, str(out / name), "serve", "--upstream",
         cluster.dsn(), "--listen", f"127.0.0.1:{port}", "--log-level", "warning", *extra],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    through = f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
    hit._wait(through)
    return weir, through


def _xmax_and_lsn(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, "
                           "pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def fill_cost(cluster: Any, misses: int, extra: list[str]
              ) -> tuple[int, int, float, dict[str, str]]:
    """(transaction IDs, WAL bytes, seconds) upstream while one client reads ``misses``
    distinct keys once each through a fresh weir (every read a miss) and their fills land."""
    proc, through = hit._start_weir(cluster, ["--admission", "always", *extra])
    try:
        with psycopg.connect(through, autocommit=True) as conn:
            conn.execute("CREATE CACHE FROM " + CACHE[POINT])
            xid0, wal0 = _xmax_and_lsn(cluster.dsn())
            started = time.monotonic()
            for k in range(1, misses + 1):
                conn.execute("SELECT id, author, title FROM stories WHERE id = %s", (k,))
            deadline = time.monotonic() + 60
            while int(hit.status(through)["fills"]) < misses and time.monotonic() < deadline:
                time.sleep(0.05)
            took = time.monotonic() - started
            xid1, wal1 = _xmax_and_lsn(cluster.dsn())
            st = hit.status(through)
        return xid1 - xid0, wal1 - wal0, took, st
    finally:
        proc.terminate()
        proc.wait(10)


def _ratio(w: list[float], d: list[float], first: int | None = None) -> float:
    w, d = w[:first] if first else w, d[:first] if first else d
    return (sum(w) / max(1, len(w))) / max(1e-9, sum(d) / max(1, len(d)))


def measure_costs(cluster: Any, misses: int) -> list[tuple[str, int, int, float, dict[str, str]]]:
    costs = []
    for label, extra in (("--misses upstream (batched, background)", []),
                         ("--misses wait (one fill per read)", ["--misses", "wait"])):
        xids, wal, took, st = fill_cost(cluster, misses, extra)
        costs.append((label, xids, wal, took, st))
        print(f"{label}: {xids} xids, {wal} bytes WAL, {took:.1f} s", flush=True)
    return costs


def run_costs(args: argparse.Namespace) -> int:
    """Only the upstream cost of misses (a short run: no throughput figures)."""
    cluster = localpg.start(tls=False)
    try:
        hit.load(cluster.dsn(), args.stories, args.stories // 10, args.votes)
        costs = measure_costs(cluster, args.misses)
    finally:
        cluster.stop()
    doc = ROOT / "docs" / "benchmarks" / "hit.md"
    text = cost_report(costs, args)
    doc.write_text(splice(doc.read_text(), COST_BEGIN, COST_END, text, doc))
    print(text)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.only_cost:
        return run_costs(args)
    scenarios = [sc for sc in SCENARIOS if args.only is None or args.only in sc.name]
    bindir = localpg.find_bindir()
    cluster = localpg.start(tls=False)
    results: list[tuple[Scenario, Timeline, Timeline, dict[str, str]]] = []
    costs: list[tuple[str, int, int, float, dict[str, str]]] = []
    load_before = os.getloadavg()[0]
    try:
        direct = cluster.dsn()
        hit.load(direct, args.stories, args.stories // 10, args.votes)
        working_set = args.working_set
        if any(sc.churn for sc in scenarios) and not working_set and not any(
                _sizes(sc) for sc in scenarios):
            raise SystemExit("scenario (c) needs its working set: run it with the Zipf over "
                             "100,000 point lookup, or give --working-set BYTES")
        for sc in scenarios:
            stop = threading.Event()
            written = sc.keys if sc.write_sql.startswith("UPDATE") else args.stories
            bg = threading.Thread(target=writer,
                                  args=(direct, 1000, written, stop, sc.write_sql))
            if sc.writes:
                bg.start()
            try:
                d = bench(bindir, direct, sc.script(), args.seconds, args.clients)
                # (the caches get three quarters of a budget: the memos the rest)
                extra = ["--memory-budget", str(max(100_000, working_set * 4 // 9))] \
                    if sc.churn else []
                extra += ["--admission", sc.admission, *sc.flags,
                          *(w for flags in args.weir for w in flags.split())]
                w, st = weir_run(cluster, bindir, sc, args, extra)
            finally:
                stop.set()
                if sc.writes:
                    bg.join()
            if _sizes(sc):
                working_set = int(st.get("memory_bytes", "0"))
            results.append((sc, d, w, st))
            print(f"{sc.name}: direct {sum(d.tps) / max(1, len(d.tps)):.0f} tps, weir "
                  f"{sum(w.tps) / max(1, len(w.tps)):.0f} tps ({_ratio(w.tps, d.tps):.2f}x)",
                  flush=True)
            print("  " + ", ".join(f"{k} {v}" for k, v in st.items()
                                   if k.startswith(("lane_", "hits", "misses", "evictions",
                                                    "memory_bytes",
                                                    "loop_memo", "memo_from", "session_",
                                                    "loop_cpu",
                                                    "barrier_", "fill_", "fills_"))),
                  flush=True)
        if args.only is None:
            costs = measure_costs(cluster, args.misses)
    finally:
        cluster.stop()
    load_after = os.getloadavg()[0]
    text = report(results, costs, args, (load_before, load_after))
    if args.only is not None:  # a part of the run: printed, the document keeps the whole run
        print(text)
        return 0
    doc = ROOT / "docs" / "benchmarks" / "hit.md"
    current = doc.read_text()
    if BEGIN not in current:
        current += f"\n{BEGIN}\n{END}\n"
    doc.write_text(splice(current, BEGIN, END, text, doc))
    plot(results, ROOT / "docs" / "benchmarks" / "hit-cold.png")
    print(text)
    return 0


def _given() -> list[str]:
    """The options this run was given (through ``bench/hit.py --cold`` or directly)."""
    return sys.argv[2:] if sys.argv[1:2] == ["--cold"] else sys.argv[1:]


def _machine(load: tuple[float, float]) -> str:
    """What the load average before the run says about the machine (the run itself loads
    it: pgbench, the backends and weir on 2 cores)."""
    said = (f"load average {load[0]:.1f} before, {load[1]:.1f} after, the benchmark's own "
            "load included")
    if load[0] < 1.5:
        return (f"The machine had no other work ({said}); one short run each, so single "
                "figures can still be off by 10-20 percent.")
    return (f"**The machine was loaded** (2 cores shared with other engineers' builds and "
            f"tests; {said}): one short run each, so single figures can be off by tens of "
            "percent.")


def report(results: list[tuple[Scenario, Timeline, Timeline, dict[str, str]]],
           costs: list[tuple[str, int, int, float, dict[str, str]]],
           args: argparse.Namespace,
           load: tuple[float, float]) -> str:
    lines = [
        "## Cold starts (from CREATE CACHE, no sweep)",
        "",
        f"pgbench `-M prepared -c {args.clients} -j 2 -T {args.seconds} -P 1`, started right "
        f"after `CREATE CACHE` on a fresh weir (empty caches, default settings: misses "
        f"answered upstream, `--admission auto`: a key filled on its first read while the keys "
        f"read once come back, else on its second); direct PostgreSQL with the same "
        f"script in the same invocation; {args.stories} stories, {args.votes} votes. "
        + _machine(load),
        "",
        f"Command: `python bench/hit.py --cold {' '.join(_given())}`".rstrip(),
        "",
        "| scenario | direct TPS | weir TPS | weir / direct | first 5 s | direct p99 (ms) | "
        "weir p99 (ms) | hits / misses / fills | fill p50 (ms) | loop / lane answers | "
        "evictions | event loop CPU (s) | its µs per miss |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|",
    ]
    for sc, d, w, st in results:
        lines.append(
            f"| {sc.name} | {sum(d.tps) / max(1, len(d.tps)):.0f} | "
            f"{sum(w.tps) / max(1, len(w.tps)):.0f} | {_ratio(w.tps, d.tps):.2f} | "
            f"{_ratio(w.tps, d.tps, 5):.2f} | {d.p99_ms:.2f} | {w.p99_ms:.2f} | "
            f"{st.get('hits')} / {st.get('misses')} / {st.get('fills')} | "
            f"{st.get('fill_ms_p50')} | "
            f"{st.get('loop_memo_answers')} / {st.get('lane_answers', 0)} | "
            f"{st.get('evictions')} | {st.get('loop_cpu_s')} | {_per_miss(st)} |")
    lines += ["", "Per-second throughput, weir / direct (the timeline; "
              "`hit-cold.png` plots it):", "",
              "| scenario | " + " | ".join(f"{i + 1}s" for i in range(args.seconds)) + " |",
              "|---|" + "---:|" * args.seconds]
    for sc, d, w, _ in results:
        cells = [f"{a / b:.2f}" if b else "" for a, b in zip(w.tps, d.tps, strict=False)]
        lines.append(f"| {sc.name} | " + " | ".join(cells) + " |")
    lines += ["", COST_BEGIN, cost_report(costs, args), COST_END]
    return "\n".join(lines)


def _per_miss(st: dict[str, str]) -> str:
    """The event loop's CPU per miss of the run, in µs (its work is mostly misses' when the
    hits are answered in the lanes: the hand-back, the read, the relayed answer, the fill)."""
    misses = int(st.get("misses", "0") or 0)
    return f"{float(st.get('loop_cpu_s', '0')) * 1e6 / misses:.0f}" if misses else ""


def cost_report(costs: list[tuple[str, int, int, float, dict[str, str]]],
                args: argparse.Namespace) -> str:
    lines = [f"Upstream cost of {args.misses} misses (one client reading {args.misses} "
              "distinct keys once each through a fresh weir with `--admission always`, until "
              "every fill landed; transaction IDs and WAL include weir's heartbeat, 2 "
              "barriers/s):", "",
              "| misses | transaction IDs | WAL (kB) | seconds | fill transactions | "
              "fill ms: queue / transaction / position / install (mean per fill) |",
              "|---|---:|---:|---:|---:|---|"]
    for label, xids, wal, took, st in costs:
        phases = " / ".join(st.get(f"fill_{p}_ms_avg", "?")
                            for p in ("queue", "fetch", "position_wait", "install"))
        lines.append(f"| {label} | {xids} | {wal / 1024:.0f} | {took:.1f} | "
                     f"{st.get('fill_transactions')} | {phases} |")
    lines += ["", "Before this change (issue 18): 2,000 misses used 2,013 transaction IDs and "
              "313 kB of WAL."]
    return "\n".join(lines)


def plot(results: list[tuple[Scenario, Timeline, Timeline, dict[str, str]]],
         path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for sc, d, w, _ in results:
        ratios = [a / b if b else 0.0 for a, b in zip(w.tps, d.tps, strict=False)]
        ax.plot(range(1, len(ratios) + 1), ratios, marker="o", label=sc.name)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("seconds after CREATE CACHE")
    ax.set_ylabel("weir TPS / direct TPS")
    ax.set_title("Cold start: per-second throughput through weir relative to direct")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--votes", type=int, default=300_000)
    parser.add_argument("--misses", type=int, default=2000)
    parser.add_argument("--only-cost", action="store_true",
                        help="measure only the upstream cost of --misses misses")
    parser.add_argument("--only", default=None, metavar="TEXT",
                        help="run only the scenarios whose name contains TEXT (printed, "
                        "docs/benchmarks/hit.md left as it is)")
    parser.add_argument("--working-set", type=int, default=0, metavar="BYTES",
                        help="the working set whose third is scenario (c)'s budget, when the "
                        "run does not measure it first (--only without the Zipf over "
                        "100,000 point lookup); the bytes that run prints as memory_bytes")
    parser.add_argument("--weir", action="append", default=[], metavar="'FLAG VALUE'",
                        help="more weir flags for every weir run (repeatable; split at "
                        "spaces), for example --weir='--lane-misses on'")
    parser.add_argument("--profile", default="", metavar="DIR",
                        help="run each weir under cProfile (the event loop thread's CPU "
                        "time) and write DIR/<scenario>.prof")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
