"""Hit-path benchmark: the same pgbench scripts (``-M prepared``, Zipf-distributed keys)
directly against PostgreSQL and through weir with the queries cached, in one invocation.

Queries (the seeds' news-site shapes): a point lookup by primary key; a story with its vote
count (join + aggregate for one key); an author's top 10 stories by votes; the front page
(top 25 stories by vote count over all stories: expensive for PostgreSQL). Reports
throughput, p50/p99 latency, weir's hit rate and fill latency, and freshness lag (commit
upstream -> visible through weir) under a background write load. Writes
``docs/benchmarks/hit.md``.

    .venv/bin/python bench/hit.py [--seconds 10] [--clients 4] [--stories 10000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
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


def pgbench(bindir: Path, dsn: str, script: str, seconds: int, clients: int) -> Run:
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
    return Run("", "", tps, p50, p99)


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each (query, target), alternating; the means are reported")
    parser.add_argument("--stories", type=int, default=10_000)
    parser.add_argument("--votes", type=int, default=200_000)
    parser.add_argument("--write-rate", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=5,
                        help="seconds each script runs against each target before it is measured")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "hit.md"))
    args = parser.parse_args()
    authors = max(1, args.stories // 20)
    bindir = localpg.find_bindir()
    cluster = localpg.start(tls=False)
    port = localpg.free_port()
    weir = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--upstream", cluster.dsn(),
         "--listen", f"127.0.0.1:{port}", "--log-level", "warning"], cwd=ROOT)
    runs: list[Run] = []
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
        for rnd in range(args.rounds):
            for name, template in QUERIES.items():
                script = template.format(stories=args.stories, authors=authors)
                targets = [("direct", direct), ("weir", through)]
                if rnd % 2:  # alternate the order: drift of the host's speed cancels out
                    targets.reverse()
                for target, dsn in targets:
                    if rnd == 0:
                        sweep(bindir, dsn, script, args.clients)
                        if args.warmup:
                            pgbench(bindir, dsn, script, args.warmup, args.clients)
                    before = status(through)
                    run = pgbench(bindir, dsn, script, args.seconds, args.clients)
                    if target == "weir":
                        after = status(through)
                        for name_ in counted:
                            counted[name_] += int(after.get(name_, 0)) - int(before.get(name_, 0))
                    runs.append(Run(name, target, run.tps, run.p50_ms, run.p99_ms))
                    print(f"{name:24} {target:7} tps={run.tps:9.0f} p50={run.p50_ms:.3f} ms "
                          f"p99={run.p99_ms:.3f} ms", flush=True)
        fill_ms = status(through).get("fill_ms_avg", "?")
        lags = freshness(direct, through, min(10.0, args.seconds), args.write_rate, args.stories)
    finally:
        weir.terminate()
        weir.wait(10)
        cluster.stop()
    text = report(runs, counted, fill_ms, lags, args)
    Path(args.output).write_text(text)
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


def _mean(runs: list[Run]) -> Run:
    n = len(runs)
    return Run(runs[0].query, runs[0].target, sum(r.tps for r in runs) / n,
               sum(r.p50_ms for r in runs) / n, sum(r.p99_ms for r in runs) / n)


def report(runs: list[Run], counted: dict[str, int], fill_ms: str, lags: list[float],
           args: argparse.Namespace) -> str:
    hits, misses, fills = counted["hits"], counted["misses"], counted["fills"]
    lags.sort()
    lines = [
        "# Hit-path benchmark (cached queries)",
        "",
        f"pgbench `-M prepared`, {args.clients} clients, 2 threads, {args.seconds} s per run, "
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
        "| query | direct TPS | weir TPS | weir / direct | direct p50 / p99 (ms) | "
        "weir p50 / p99 (ms) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name in QUERIES:
        d, w = (_mean([r for r in runs if (r.query, r.target) == (name, t)])
                for t in ("direct", "weir"))
        lines.append(f"| {name} | {d.tps:.0f} | {w.tps:.0f} | {w.tps / d.tps:.2f} | "
                     f"{d.p50_ms:.3f} / {d.p99_ms:.3f} | {w.p50_ms:.3f} / {w.p99_ms:.3f} |")
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
