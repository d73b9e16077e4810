"""``make demo`` (``python -m demo``): a news site run directly on PostgreSQL, then through
weir starting cold, compared in a table and in plots.

Owns: the sequence (throw-away PostgreSQL, the dataset, the direct run, weir with the site's
caches, the same run through weir with freshness probes, a check that cached answers equal
PostgreSQL's), the progress bar, the output folder, and a clean stop on Ctrl-C: weir is
stopped, the cluster and its temporary directory removed, and nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psycopg

from demo import dataset, report, workload
from demo.probe import ProbeThread
from demo.procs import Weir
from demo.timeline import StatusTimeline
from proxy import localpg


def progress_bar(label: str, duration: float, stream: Any = sys.stderr
                 ) -> Callable[[float, int], None]:
    """A one-line progress bar: ``label [#####.....] 12s/30s  4,321 ops``."""
    def tick(elapsed: float, ops: int) -> None:
        done = min(1.0, elapsed / duration) if duration > 0 else 1.0
        bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
        end = "\n" if done >= 1.0 else ""
        stream.write(f"\r  {label:<22} [{bar}] {elapsed:4.0f}s/{duration:.0f}s "
                     f"{ops:>9,} ops{end}")
        stream.flush()
    return tick


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C waits until it has."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_answers(through: str, direct: str, size: dataset.Size, keys: int = 10) -> tuple[int, int]:
    """Read ``keys`` keys of each cached query through weir and directly; (equal, compared).
    A cached answer may lag by the staleness bound, so each key gets a few seconds to agree."""
    equal = compared = 0
    with (psycopg.connect(through, autocommit=True) as w,
          psycopg.connect(direct, autocommit=True) as d):
        for query in dataset.READS:
            top = dataset.SECTIONS if query.key == "section" else min(
                keys, size.users if query.key == "user" else size.stories)
            for key in range(min(keys, top)):
                k = key if query.key == "section" else key + 1
                compared += 1
                deadline = time.monotonic() + 5
                while True:
                    got = w.execute(query.sql, (k,)).fetchall()
                    want = d.execute(query.sql, (k,)).fetchall()
                    if got == want:
                        equal += 1
                        break
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)  # retry pacing while replication catches up
    return equal, compared


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    p.add_argument("--duration", type=float, default=30.0, help="seconds per run (default 30)")
    p.add_argument("--clients", type=int, default=4, help="client connections (default 4)")
    p.add_argument("--small", action="store_true", help="a small site (for tests)")
    p.add_argument("--out", default="demo-output", help="folder for the table and plots")
    p.add_argument("--seed", type=int, default=1)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    size = dataset.SMALL if args.small else dataset.Size()
    stop = threading.Event()
    weir: Weir | None = None
    cluster: localpg.LocalCluster | None = None
    try:
        t0 = time.perf_counter()
        print("weir demo: a news site, directly on PostgreSQL and then through weir (cold)")
        print("  starting a throw-away PostgreSQL ...", flush=True)
        cluster = localpg.start()
        direct = cluster.dsn()
        print(f"  PostgreSQL on 127.0.0.1:{cluster.port}, data in {cluster.root}", flush=True)
        with psycopg.connect(direct, autocommit=True) as conn:
            dataset.load(conn, size)
        print(f"  site loaded: {size.users:,} users, {size.stories:,} stories, "
              f"~{size.votes:,} votes, {size.comments:,} comments "
              f"({time.perf_counter() - t0:.1f} s)")
        mix = workload.Mix()
        print(f"  workload: {args.clients} clients, {args.duration:.0f} s each run, "
              f"Zipf keys (s={mix.zipf_s}), mix "
              + ", ".join(f"{n} {w:.0f}%" for n, w in zip(mix.names, mix.weights, strict=True)))

        direct_run = workload.run(direct, size, args.duration, args.clients, mix, stop,
                                  args.seed, progress_bar("directly", args.duration))

        weir = Weir(direct)
        with psycopg.connect(weir.dsn(), autocommit=True) as conn:
            names = dataset.create_caches(conn)
        print(f"  weir on 127.0.0.1:{weir.port}, caches: {', '.join(names)} (all empty)",
              flush=True)
        hottest = workload.Zipf(size.stories, mix.zipf_s, random.Random(7))
        hot = [hottest() for _ in range(5)]
        with ProbeThread(weir.dsn(), direct, hot) as probes, \
                StatusTimeline(weir.dsn()) as timeline:
            weir_run = workload.run(weir.dsn(), size, args.duration, args.clients, mix, stop,
                                    args.seed, progress_bar("through weir (cold)",
                                                            args.duration))
        status = weir.status()
        rss = weir.rss_bytes()
        equal, compared = check_answers(weir.dsn(), direct, size)
        weir.stop()
        weir = None
        rows = _rows(direct_run, weir_run, status, rss, probes, args.duration)
        _print(rows, direct_run, weir_run, equal, compared, probes.error)
        ops = report.per_operation(mix.names, direct_run.samples, weir_run.samples)
        print("  where the time goes, by operation (the same mix on both sides):")
        print(report.per_operation_text(ops))
        print(f"  {report.coverage_share(status, args.clients, weir_run.elapsed)}")
        _print_timeline(timeline, status)
        out = _write(Path(args.out), rows, direct_run, weir_run, args, size, status, timeline,
                     ops)
        print(f"  results and plots written to {out.resolve()}/ "
              f"(table.md, results.json, throughput.png, latency.png, cache.png) "
              f"in {time.perf_counter() - t0:.0f} s")
        errors = direct_run.errors + weir_run.errors
        return 1 if errors or equal != compared else 0
    except KeyboardInterrupt:
        stop.set()
        print("\n  interrupted: stopping weir and PostgreSQL, removing the temporary cluster",
              file=sys.stderr)
        return 130
    finally:
        stop.set()
        with _no_interrupts():
            if weir is not None:
                weir.stop()
            if cluster is not None:
                cluster.stop()


def _rows(direct_run: workload.Outcome, weir_run: workload.Outcome, status: dict[str, str],
          rss: int, probes: ProbeThread, duration: float) -> list[report.Summary]:
    hits, misses = int(status.get("hits", 0)), int(status.get("misses", 0))
    state = int(status.get("memory_bytes", 0))
    d = report.summarize("PostgreSQL directly", direct_run.samples, direct_run.elapsed)
    d = replace(d, fresh_p50_ms=0.0, fresh_max_ms=0.0, note="freshness 0: it is the source")
    w = report.summarize("weir, from cold", weir_run.samples, weir_run.elapsed)
    w = replace(w, hit_rate=hits / max(1, hits + misses), fill_ms=float(status["fill_ms_avg"]),
                memory=f"{report.mib(state)} state, {report.mib(rss)} RSS")
    w = report.with_freshness(w, probes.result.lags, probes.result.missed)
    last = (2 * duration / 3, duration)
    d3 = report.summarize("directly, last third", direct_run.samples, 0, last)
    w3 = report.summarize("weir, last third", weir_run.samples, 0, last)
    return [d, w, d3, w3]


def _print(rows: list[report.Summary], direct_run: workload.Outcome,
           weir_run: workload.Outcome, equal: int, compared: int, probe_error: str | None) -> None:
    print()
    print(report.text_table(rows))
    print()
    speedup = rows[1].throughput / max(rows[0].throughput, 1e-9)
    late = rows[3].throughput / max(rows[2].throughput, 1e-9)
    verdict = "faster" if speedup >= 1 else "SLOWER"
    print(f"  from a cold start weir was {verdict} than PostgreSQL directly: "
          f"{speedup:.2f}x the throughput over the whole run, {late:.2f}x in its last third.")
    if speedup < 1:
        print("  (a read that misses is answered upstream and its key filled in the background; "
              "hits are served from memory, by the hit lanes' threads or else by weir's one "
              "event loop, which also relays the misses and writes, runs the fills and applies "
              "the replication stream: the lines below say how the hit rate climbed and how "
              "many hits the lanes answered; issues 18 and 24)")
    print(f"  cached answers checked against PostgreSQL: {equal}/{compared} equal")
    for err in [*direct_run.errors, *weir_run.errors] + ([probe_error] if probe_error else []):
        print(f"  error: {err}")


def _print_timeline(timeline: StatusTimeline, status: dict[str, str]) -> None:
    """Where the cold run went: the hit rate as it climbed, the misses weir did not fill,
    and the share of hits the hit lanes answered outside the event loop."""
    hits, misses = int(status.get("hits", 0)), int(status.get("misses", 0))
    print(f"  weir's hit rate through the run (in sixths): "
          f"{report.hit_rate_line(timeline.seconds())}")
    print(f"  misses {misses:,}: {int(status.get('fills', 0)):,} keys filled, "
          f"{int(status.get('fills_not_admitted', 0)):,} not admitted (admission: a cold cache "
          f"fills a key at its first miss while keys come back, else at a later one); "
          f"hits answered by the hit lanes: "
          f"{int(status.get('lane_answers', 0)):,} of {hits:,}")
    load = os.getloadavg()
    print(f"  machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end "
          "(other processes' load slows the single weir process more than PostgreSQL's "
          "one backend per client)")
    if timeline.error:
        print(f"  (weir's status timeline stopped early: {timeline.error})")


def _write(out: Path, rows: list[report.Summary], direct_run: workload.Outcome,
           weir_run: workload.Outcome, args: argparse.Namespace, size: dataset.Size,
           status: dict[str, str], timeline: StatusTimeline,
           ops: list[report.OpRow]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(report.markdown_table(rows) + "\n")
    (out / "results.json").write_text(json.dumps({
        "args": vars(args), "size": asdict(size), "weir_status": status,
        "machine": {"cpus": os.cpu_count(), "load_average_at_end": os.getloadavg()},
        "weir_timeline": [{**asdict(s), "hit_rate": s.hit_rate} for s in timeline.seconds()],
        "rows": [{**asdict(r), "throughput": r.throughput} for r in rows],
        "operations": [asdict(r) for r in ops]}, indent=2) + "\n")
    report.plot_cache(timeline.seconds(), out, "news site")
    report.plot_runs([("PostgreSQL directly", direct_run.samples, direct_run.elapsed),
                      ("weir (cold start)", weir_run.samples, weir_run.elapsed)],
                     out, "news site")
    return out


if __name__ == "__main__":
    sys.exit(main())
