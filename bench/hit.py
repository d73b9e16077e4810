"""Hit-path benchmark: the same pgbench scripts (``-M prepared``, Zipf-distributed keys)
directly against PostgreSQL and through weir with the queries cached, in one invocation.

Queries (the seeds' news-site shapes): a point lookup by primary key; a story with its vote
count (join + aggregate for one key); an author's top 10 stories by votes; the front page
(top 25 stories by vote count over all stories: expensive for PostgreSQL). Reports
throughput, p50/p99 latency, weir's hit rate and fill latency, and freshness lag (commit
upstream -> visible through weir) under a background write load. Writes
``docs/benchmarks/hit.md``.

    .venv/bin/python bench/hit.py [--seconds 10] [--clients 2,4,16] [--stories 10000]
    .venv/bin/python bench/hit.py --metrics-compare [--seconds 5] [--rounds 6]
    .venv/bin/python bench/hit.py --cold [--seconds 10] [--clients 8]   (bench/cold.py)

``--metrics-compare`` instead measures the cost of ``/metrics``: two weirs on the same
cluster, one with ``--metrics-listen`` (scraped every second meanwhile, more often than
Prometheus would) and one without, alternating runs of the point lookup through each; writes
``docs/benchmarks/metrics.md``.

Each client count is a separate set of rows: weir answers from one lane thread, so how
many connections wait on it at once changes what it costs per answer.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import localpg  # noqa: E402

QUERIES = {
    "point lookup": (
        "\\set id random_zipfian(1, {stories}, 1.1)\n"
        "SELECT id, author, title FROM stories WHERE id = :id;\n"),
    "story with vote count": (
        "\\set id random_zipfian(1, {stories}, 1.1)\n"
        "SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s "
        "LEFT JOIN votes v ON v.story_id = s.id WHERE s.id = :id GROUP BY s.id, s.title;\n"),
    "author top 10": (
        "\\set a random_zipfian(1, {authors}, 1.1)\n"
        "SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s "
        "JOIN votes v ON v.story_id = s.id WHERE s.author = :a GROUP BY s.id, s.title "
        "ORDER BY votes DESC, s.id LIMIT 10;\n"),
    "front page": (
        "SELECT v.story_id, count(*) AS votes FROM votes v GROUP BY v.story_id "
        "ORDER BY votes DESC, v.story_id LIMIT 25;\n"),
}
CACHES = [
    "SELECT id, author, title FROM stories WHERE id = $1",
    "SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s LEFT JOIN votes v "
    "ON v.story_id = s.id WHERE s.id = $1 GROUP BY s.id, s.title",
    "SELECT s.id, s.title, count(v.user_id) AS votes FROM stories s JOIN votes v "
    "ON v.story_id = s.id WHERE s.author = $1 GROUP BY s.id, s.title "
    "ORDER BY votes DESC, s.id LIMIT 10",
    "SELECT v.story_id, count(*) AS votes FROM votes v GROUP BY v.story_id "
    "ORDER BY votes DESC, v.story_id LIMIT 25",
]


@dataclass(frozen=True)
class Run:
    query: str
    target: str
    tps: float
    p50_ms: float
    p99_ms: float
    weir_us: float = 0.0  # CPU per transaction (user + system, microseconds): weir's process
    postgres_us: float = 0.0  # ... PostgreSQL's processes (backends, walsender, ...)
    client_us: float = 0.0  # ... pgbench
    idle: float = 0.0  # share of the machine's CPU time left idle during the run
    clients: int = 0  # pgbench clients


_HZ = os.sysconf("SC_CLK_TCK")


def _ticks(pid: int) -> tuple[int, int, int]:
    """(utime + stime, cutime + cstime, parent) of a process, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[1])


def _postgres_ticks(postmaster: int) -> tuple[int, int]:
    """PostgreSQL's CPU so far (the postmaster, its reaped children, its living children)
    and the number of living children."""
    own, reaped, _ = _ticks(postmaster)
    total, children = own + reaped, 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ticks, _, parent = _ticks(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
            if parent == postmaster:
                total += ticks
                children += 1
    return total, children


def _machine() -> tuple[int, int]:
    """(idle, total) clock ticks of the machine so far."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return values[3] + values[4], sum(values)


class CpuMeter:
    """CPU time per transaction of weir, PostgreSQL and pgbench around one pgbench run."""

    def __init__(self, postmaster: int, weir: int) -> None:
        self.postmaster, self.weir = postmaster, weir

    def __enter__(self) -> CpuMeter:
        self.before = (_ticks(self.weir)[0], _postgres_ticks(self.postmaster),
                       resource.getrusage(resource.RUSAGE_CHILDREN), _machine())
        return self

    def __exit__(self, *exc: object) -> None:
        weir0, (pg0, children0), client0, machine0 = self.before
        # the run's backends exit with pgbench: wait until the postmaster has reaped them
        deadline = time.monotonic() + 10
        while _postgres_ticks(self.postmaster)[1] > children0 and time.monotonic() < deadline:
            time.sleep(0.05)
        client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        machine1 = _machine()
        self.weir_ticks = _ticks(self.weir)[0] - weir0
        self.postgres_ticks = _postgres_ticks(self.postmaster)[0] - pg0
        self.client_s = (client1.ru_utime + client1.ru_stime
                         - client0.ru_utime - client0.ru_stime)
        self.idle = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1])

    def per_tx(self, run: Run, transactions: int) -> Run:
        us = 1e6 / max(1, transactions)
        return Run(run.query, run.target, run.tps, run.p50_ms, run.p99_ms,
                   self.weir_ticks / _HZ * us, self.postgres_ticks / _HZ * us,
                   self.client_s * us, self.idle)


def load(dsn: str, stories: int, authors: int, votes: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS votes, stories")
        conn.execute("CREATE TABLE stories (id int PRIMARY KEY, author int NOT NULL, "
                     "title text NOT NULL)")
        conn.execute("CREATE TABLE votes (id bigserial PRIMARY KEY, story_id int NOT NULL, "
                     "user_id int NOT NULL)")
        conn.execute(f"INSERT INTO stories SELECT g, 1 + (g * 7919) % {authors}, "
                     f"'Story ' || g FROM generate_series(1, {stories}) g")
        conn.execute(f"INSERT INTO votes (story_id, user_id) SELECT "
                     f"1 + floor({stories} * power(random(), 3))::int, g "
                     f"FROM generate_series(1, {votes}) g")
        conn.execute("CREATE INDEX ON votes (story_id)")
        conn.execute("CREATE INDEX ON stories (author)")
        conn.execute("ANALYZE")


def sweep(bindir: Path, dsn: str, script: str, clients: int) -> None:
    """Read every key of a script once (its Zipf key set uniformly, split over the clients):
    the steady state the hit path is measured in, where every key is cached."""
    for var in ("id", "a"):
        head = f"\\set {var} random_zipfian(1, "
        if script.startswith(head):
            total = int(script[len(head):].split(",")[0])
            swept = (f"\\set i :i + 1\n\\set {var} 1 + ((:i - 1) * {clients} + :client_id) "
                     f"% {total}\n" + script.split("\n", 1)[1])
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "sweep.sql"
                path.write_text(swept)
                subprocess.run(
                    [str(bindir / "pgbench"), "-n", "-M", "prepared", "-f", str(path), "-c",
                     str(clients), "-j", "2", "-t", str(-(-total // clients)), "-D", "i=0", dsn],
                    capture_output=True, text=True, cwd=tmp, check=True,
                    env={**os.environ, "PGSSLMODE": "disable"})
            return


def pgbench(bindir: Path, dsn: str, script: str, seconds: int, clients: int
            ) -> tuple[Run, int]:
    """One run: its figures and the number of transactions it made."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.sql"
        path.write_text(script)
        proc = subprocess.run(
            [str(bindir / "pgbench"), "-n", "-M", "prepared", "-f", str(path), "-c", str(clients),
             "-j", "2", "-T", str(seconds), "-l", "--log-prefix", str(Path(tmp) / "log"), dsn],
            capture_output=True, text=True, cwd=tmp, env={**os.environ, "PGSSLMODE": "disable"},
            check=False)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
        latencies = []
        for log in Path(tmp).glob("log*"):
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) >= 3:
                    latencies.append(int(parts[2]) / 1000.0)
        tps = float(proc.stdout.split("tps = ")[1].split()[0])
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Run("", "", tps, p50, p99), len(latencies)


def freshness(direct: str, through: str, seconds: float, rate: int, stories: int
              ) -> list[float]:
    """Commit-to-visible lags (ms) of single-row commits while a writer adds ``rate`` votes/s
    to random stories."""
    stop = threading.Event()

    def background() -> None:
        import random

        rng = random.Random(1)
        with psycopg.connect(direct, autocommit=True) as conn:
            interval = 1.0 / rate
            next_at = time.perf_counter()
            while not stop.is_set():
                conn.execute("INSERT INTO votes (story_id, user_id) VALUES (%s, 0)",
                             (rng.randint(2, stories),))
                next_at += interval
                delay = next_at - time.perf_counter()
                if delay > 0:
                    stop.wait(delay)

    writer = threading.Thread(target=background)
    writer.start()
    lags: list[float] = []
    try:
        with psycopg.connect(direct, autocommit=True) as w, \
                psycopg.connect(through, autocommit=True) as r:
            query = "SELECT count(v.user_id) FROM stories s LEFT JOIN votes v ON v.story_id = " \
                    "s.id WHERE s.id = %s GROUP BY s.id, s.title"
            r.execute("CREATE CACHE fresh FROM SELECT count(v.user_id) FROM stories s LEFT JOIN "
                      "votes v ON v.story_id = s.id WHERE s.id = $1 GROUP BY s.id, s.title")
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                before = r.execute(query, (1,)).fetchone()
                w.execute("INSERT INTO votes (story_id, user_id) VALUES (1, -1)")
                committed = time.perf_counter()
                while r.execute(query, (1,)).fetchone() == before:
                    if time.perf_counter() - committed > 30:
                        raise RuntimeError("a write was not visible through weir within 30 s")
                lags.append((time.perf_counter() - committed) * 1000)
    finally:
        stop.set()
        writer.join()
    return lags


def status(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(conn.execute("SHOW WEIR STATUS").fetchall())


def main() -> int:
    if sys.argv[1:2] == ["--cold"]:  # cold starts: bench/cold.py (its own options)
        from bench import cold

        return cold.main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=_counts, default=[2, 4, 16],
                        help="pgbench clients (2 threads), a comma-separated list: each count "
                             "is measured in its own rounds")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each (query, target), alternating; the means are reported")
    parser.add_argument("--stories", type=int, default=10_000)
    parser.add_argument("--votes", type=int, default=200_000)
    parser.add_argument("--write-rate", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=5,
                        help="seconds each script runs against each target before it is measured")
    parser.add_argument("--output", default=None)
    parser.add_argument("--metrics-compare", action="store_true",
                        help="hit-path throughput with /metrics on vs off (see above)")
    args = parser.parse_args()
    if args.metrics_compare:
        return metrics_compare(args)
    args.output = args.output or str(ROOT / "docs" / "benchmarks" / "hit.md")
    authors = max(1, args.stories // 20)
    bindir = localpg.find_bindir()
    cluster = localpg.start(tls=False)
    port = localpg.free_port()
    weir = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--upstream", cluster.dsn(),
         "--listen", f"127.0.0.1:{port}", "--log-level", "warning"], cwd=ROOT)
    runs: list[Run] = []
    postmaster = int((cluster.datadir / "postmaster.pid").read_text().split()[0])
    try:
        direct = cluster.dsn()
        through = f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
        load(direct, args.stories, authors, args.votes)
        _wait(through)
        with psycopg.connect(through, autocommit=True) as conn:
            for sql in CACHES:
                conn.execute("CREATE CACHE FROM " + sql)
        counted = {"hits": 0, "misses": 0, "fills": 0, "memoized_answers": 0,
                   "lane_answers": 0}
        for clients, rnd in [(c, r) for c in args.clients for r in range(args.rounds)]:
            first = (clients, rnd) == (args.clients[0], 0)
            for name, template in QUERIES.items():
                script = template.format(stories=args.stories, authors=authors)
                targets = [("direct", direct), ("weir", through)]
                if rnd % 2:  # alternate the order: drift of the host's speed cancels out
                    targets.reverse()
                for target, dsn in targets:
                    if first:
                        sweep(bindir, dsn, script, clients)
                        if args.warmup:
                            pgbench(bindir, dsn, script, args.warmup, clients)
                    before = status(through)
                    with CpuMeter(postmaster, weir.pid) as meter:
                        run, transactions = pgbench(bindir, dsn, script, args.seconds, clients)
                    run = meter.per_tx(run, transactions)
                    if target == "weir":
                        after = status(through)
                        for name_ in counted:
                            counted[name_] += int(after.get(name_, 0)) - int(before.get(name_, 0))
                    runs.append(replace(run, query=name, target=target, clients=clients))
                    print(f"{clients:3} {name:24} {target:7} tps={run.tps:9.0f} "
                          f"p50={run.p50_ms:.3f} ms "
                          f"p99={run.p99_ms:.3f} ms cpu/tx weir={run.weir_us:.1f} "
                          f"postgres={run.postgres_us:.1f} pgbench={run.client_us:.1f} us "
                          f"idle={run.idle:.1%}", flush=True)
        fill_ms = status(through).get("fill_ms_avg", "?")
        lags = freshness(direct, through, min(10.0, args.seconds), args.write_rate, args.stories)
    finally:
        weir.terminate()
        weir.wait(10)
        cluster.stop()
    text = report(runs, counted, fill_ms, lags, args)
    out = Path(args.output)
    old = out.read_text() if out.exists() else ""
    if "<!-- cold:begin -->" in old:  # the cold starts' section (bench/cold.py) stays
        text += "\n" + old[old.index("<!-- cold:begin -->"):]
    out.write_text(text)
    print(text)
    return 0


def _start_weir(cluster: localpg.LocalCluster, extra: list[str]
                ) -> tuple[subprocess.Popen[bytes], str]:
    port = localpg.free_port()
    weir = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--upstream", cluster.dsn(),
         "--listen", f"127.0.0.1:{port}", "--log-level", "warning", *extra], cwd=ROOT)
    through = f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
    _wait(through)
    return weir, through


def metrics_compare(args: argparse.Namespace) -> int:
    """Point-lookup throughput through a weir with /metrics (scraped every second) and one
    without, in alternating runs; the means and each run's figures go to the report."""
    import urllib.request

    authors = max(1, args.stories // 20)
    bindir = localpg.find_bindir()
    cluster = localpg.start(tls=False)
    mport = localpg.free_port()
    weirs: list[subprocess.Popen[bytes]] = []
    scraping = threading.Event()
    scrapes: list[float] = []

    def scrape() -> None:
        while not scraping.wait(1.0):
            started = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
                r.read()
            scrapes.append(time.monotonic() - started)

    tps: dict[str, list[float]] = {"metrics off": [], "metrics on": []}
    script = QUERIES["point lookup"].format(stories=args.stories, authors=authors)
    clients = args.clients[0]
    try:
        load(cluster.dsn(), args.stories, authors, args.votes)
        off, off_dsn = _start_weir(cluster, [])
        weirs.append(off)
        on, on_dsn = _start_weir(cluster, ["--metrics-listen", f"127.0.0.1:{mport}"])
        weirs.append(on)
        targets = [("metrics off", off_dsn), ("metrics on", on_dsn)]
        for _, dsn in targets:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE CACHE FROM " + CACHES[0])
            sweep(bindir, dsn, script, clients)
            if args.warmup:
                pgbench(bindir, dsn, script, args.warmup, clients)
        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        load_before = os.getloadavg()[0]
        for rnd in range(args.rounds):
            for target, dsn in (targets if rnd % 2 == 0 else targets[::-1]):
                run, _ = pgbench(bindir, dsn, script, args.seconds, clients)
                tps[target].append(run.tps)
                print(f"round {rnd} {target:12} tps={run.tps:9.0f} p50={run.p50_ms:.3f} ms",
                      flush=True)
        scraping.set()
        scraper.join(10)
        load_after = os.getloadavg()[0]
    finally:
        for weir in weirs:
            weir.terminate()
            weir.wait(10)
        cluster.stop()
    mean = {k: statistics.mean(v) for k, v in tps.items()}
    ratio = mean["metrics on"] / mean["metrics off"]
    lines = [
        "# Hit path with /metrics on vs off",
        "",
        f"Point lookups (`-M prepared`, Zipf(1.1) keys over {args.stories} stories, every key "
        f"cached and swept first), {clients} pgbench clients, {args.seconds} s per run, "
        f"{args.rounds} rounds alternating which weir goes first. Two weir processes on one "
        "cluster: one with `--metrics-listen`, scraped every second during the runs "
        f"({len(scrapes)} scrapes, mean {1000 * statistics.mean(scrapes or [0]):.1f} ms "
        "each), one without.",
        "",
        f"Command: `python bench/hit.py {' '.join(sys.argv[1:])}`",
        "",
        "| weir | mean TPS | runs (TPS) |",
        "|---|---:|---|",
        *(f"| {k} | {mean[k]:.0f} | {', '.join(f'{t:.0f}' for t in v)} |"
          for k, v in tps.items()),
        "",
        f"metrics on / metrics off: **{ratio:.3f}** ({100 * (ratio - 1):+.1f}%); per round "
        "(on / off): " + ", ".join(f"{a / b:.3f}" for a, b in zip(tps["metrics on"],
                                                                    tps["metrics off"],
                                                                    strict=True)) + ".",
        "",
        f"Machine load average (1 min) before and after the measured runs: {load_before:.1f}, "
        f"{load_after:.1f} on {os.cpu_count()} cores shared with other work: when it exceeds "
        "the core count, single runs drift by more than the effect measured.",
    ]
    text = "\n".join(lines) + "\n"
    Path(args.output or ROOT / "docs" / "benchmarks" / "metrics.md").write_text(text)
    print(text)
    return 0


def _wait(dsn: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            psycopg.connect(dsn).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("client counts are positive integers, e.g. 4,16")
    return counts


def _mean(runs: list[Run]) -> Run:
    n = len(runs)
    return replace(Run(runs[0].query, runs[0].target,
                       *(sum(getattr(r, f) for r in runs) / n
                         for f in ("tps", "p50_ms", "p99_ms", "weir_us", "postgres_us",
                                   "client_us", "idle"))), clients=runs[0].clients)


def report(runs: list[Run], counted: dict[str, int], fill_ms: str, lags: list[float],
           args: argparse.Namespace) -> str:
    hits, misses, fills = counted["hits"], counted["misses"], counted["fills"]
    lags.sort()
    lines = [
        "# Hit-path benchmark (cached queries)",
        "",
        f"pgbench `-M prepared`, {' and '.join(map(str, args.clients))} clients, 2 threads, "
        f"{args.seconds} s per run, "
        f"{args.rounds} rounds alternating direct and weir (the means are shown), "
        f"after every key of the script was read once (a sweep) and a {args.warmup} s "
        "warm-up run of the same script against the same target (the steady state: every "
        "key cached; fills and their latency are reported below); "
        f"{args.stories} stories, {args.votes} votes, Zipf(1.1) keys; direct PostgreSQL and "
        "weir (all four queries cached) one after the other in one invocation on the same "
        f"machine ({platform.machine()}, {os.cpu_count()} cores shared by pgbench, weir and "
        "PostgreSQL).",
        "",
        f"Command: `python bench/hit.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        "| clients | query | direct TPS | weir TPS | weir / direct | direct p50 / p99 (ms) | "
        "weir p50 / p99 (ms) |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    means = {(c, name): tuple(_mean([r for r in runs
                                     if (r.clients, r.query, r.target) == (c, name, t)])
                               for t in ("direct", "weir"))
             for c in args.clients for name in QUERIES}
    for (c, name), (d, w) in means.items():
        lines.append(f"| {c} | {name} | {d.tps:.0f} | {w.tps:.0f} | {w.tps / d.tps:.2f} | "
                     f"{d.p50_ms:.3f} / {d.p99_ms:.3f} | {w.p50_ms:.3f} / {w.p99_ms:.3f} |")
    lines += [
        "",
        "CPU time per transaction (user + system, microseconds; from `/proc` around each "
        "run: weir's process, PostgreSQL's processes including the backends reaped after "
        "the run, pgbench) and the machine's idle share. *Serving cost* is what answering "
        "costs the server side: PostgreSQL's CPU per query directly, weir's plus "
        "PostgreSQL's through weir.",
        "",
        "| clients | query | direct: PostgreSQL | direct: pgbench | direct idle | weir: weir | "
        "weir: PostgreSQL | weir: pgbench | weir idle | serving cost weir / direct |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (c, name), (d, w) in means.items():
        serving = (w.weir_us + w.postgres_us) / max(1e-9, d.postgres_us + d.weir_us)
        lines.append(f"| {c} | {name} | {d.postgres_us:.1f} | {d.client_us:.1f} | {d.idle:.0%} | "
                     f"{w.weir_us:.1f} | {w.postgres_us:.1f} | {w.client_us:.1f} | "
                     f"{w.idle:.0%} | {serving:.2f} |")
    lines += [
        "",
        f"Hit rate during the measured weir runs: {hits / max(1, hits + misses):.4f} "
        f"({hits} hits, {misses} misses, {fills} fills; "
        f"{counted['memoized_answers']} answers from the hit path's memo, "
        f"{counted['lane_answers']} of them by a hit lane; mean fill latency "
        f"over the whole invocation {fill_ms} ms).",
        "",
        f"Freshness (upstream commit -> visible through weir, {len(lags)} samples under "
        f"{args.write_rate} writes/s): p50 {statistics.median(lags):.2f} ms, "
        f"p99 {lags[min(len(lags) - 1, int(len(lags) * 0.99))]:.2f} ms.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
