"""``make bench``: weir against direct PostgreSQL, PgBouncer and pgpool-II's query cache.

One invocation, one throw-away PostgreSQL with the news site of ``make demo``, the same
client threads and operation sequences for every peer:

- pass-through: the site's reads with no cache anywhere (pgpool-II's cache off, weir with no
  caches): what each proxy costs;
- cached, cold then warm: the site's reads (Zipf keys) through pgpool-II's cache and weir's
  caches, each started empty, then run again on the warmed peer (another key sequence);
- writes: the site's mixed load (10 % writes, through each peer), each cache started empty,
  with freshness probes that write directly on PostgreSQL and wait until a read through the
  peer shows it (pgpool-II only learns of writes that pass through it, and then drops the
  whole table's cache entries).

Writes ``docs/benchmarks/comparison.md`` (machine, load, exact command, tables) and PNG plots
beside it, and prints the tables. A peer that cannot run is reported with the reason.

    .venv/bin/python bench/compare.py [--seconds 10] [--clients 4] [--small] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench import peers  # noqa: E402
from demo import dataset, report, workload  # noqa: E402
from demo.probe import ProbeThread  # noqa: E402
from demo.procs import Weir  # noqa: E402
from proxy import localpg  # noqa: E402


@dataclass(frozen=True, slots=True)
class Run:
    """One measured run (or the reason it did not run)."""

    workload: str
    summary: report.Summary
    samples: tuple[workload.Sample, ...] = ()


class Bench:
    def __init__(self, cluster: localpg.LocalCluster, size: dataset.Size, seconds: float,
                 clients: int) -> None:
        self.cluster, self.size, self.seconds, self.clients = cluster, size, seconds, clients
        self.stop = threading.Event()
        self.runs: list[Run] = []
        self.memory = "(not measured: weir's cached runs did not complete)"

    def measure(self, name: str, label: str, dsn: str, mix: workload.Mix, seed: int,
                probe: bool = False) -> tuple[report.Summary, workload.Outcome, Any]:
        tick = _ticker(f"{name}: {label}", self.seconds)
        if probe:
            hottest = workload.Zipf(self.size.stories, mix.zipf_s, random.Random(7))
            with ProbeThread(dsn, self.cluster.dsn(), [hottest() for _ in range(5)]) as p:
                out = workload.run(dsn, self.size, self.seconds, self.clients, mix, self.stop,
                                   seed, tick)
            probes: Any = p
        else:
            out = workload.run(dsn, self.size, self.seconds, self.clients, mix, self.stop, seed,
                               tick)
            probes = None
        summary = report.summarize(label, out.samples, out.elapsed)
        if out.errors:
            summary = replace(summary, note="; ".join(out.errors)[:300])
        if probes is not None:
            summary = report.with_freshness(summary, probes.result.lags, probes.result.missed)
        return summary, out, probes

    def record(self, name: str, summary: report.Summary, out: workload.Outcome) -> None:
        self.runs.append(Run(name, summary, tuple(out.samples)))

    def unavailable(self, name: str, label: str, why: str) -> None:
        print(f"  {name}: {label}: not run: {why}", flush=True)
        self.runs.append(Run(name, report.Summary(label, 0, 0.0, float("nan"), float("nan"),
                                                  note=f"not run: {why}")))


def _ticker(label: str, seconds: float) -> Callable[[float, int], None]:
    done: list[bool] = []

    def tick(elapsed: float, ops: int) -> None:
        if elapsed >= seconds and not done:
            done.append(True)
            print(f"  {label:<44} {ops:>9,} ops in {seconds:.0f} s", flush=True)
    return tick


def _peer(bench: Bench, kind: str, cached: bool
          ) -> AbstractContextManager[tuple[str, Any]]:
    if kind == "direct":
        return _direct(bench.cluster)
    if kind == "pgbouncer":
        return peers.bouncer(bench.cluster, bench.clients)
    if kind == "pgpool":
        return peers.pgpool(bench.cluster, bench.clients, cache=cached)
    if kind == "weir-ryw-off":
        return peers.weir(bench.cluster, cached, "--read-your-writes", "off")
    return peers.weir(bench.cluster, cached)


@contextmanager
def _direct(cluster: localpg.LocalCluster) -> Iterator[tuple[str, None]]:
    yield cluster.dsn(), None


LABELS = {"direct": "PostgreSQL directly", "pgbouncer": "PgBouncer (session)",
          "pgpool": "pgpool-II", "weir": "weir",
          "weir-ryw-off": "weir, read-your-writes off"}


def _counters(kind: str, dsn: str, handle: Any) -> tuple[int, int, dict[str, str]]:
    """(hits, lookups, raw) of a caching peer now."""
    if isinstance(handle, Weir):
        s = handle.status()
        return int(s["hits"]), int(s["hits"]) + int(s["misses"]), s
    s = peers.pgpool_cache_stats(dsn)
    return int(s.get("num_cache_hits", 0)), int(s.get("num_selects", 0)), s


def _cache_figures(kind: str, before: tuple[int, int, dict[str, str]],
                   after: tuple[int, int, dict[str, str]], handle: Any,
                   summary: report.Summary) -> report.Summary:
    hits, lookups = after[0] - before[0], after[1] - before[1]
    if kind == "pgpool":  # num_selects counts misses only: hits + selects = lookups
        lookups = hits + (after[1] - before[1])
    raw = after[2]
    if isinstance(handle, Weir):
        memory = (f"{report.mib(int(raw['memory_bytes']))} state, "
                  f"{report.mib(handle.rss_bytes())} RSS")
        fill: float | None = float(raw["fill_ms_avg"])
    else:
        memory = f"{report.mib(int(raw.get('used_cache_entries_size', 0)))} cache"
        fill = None
    return replace(summary, hit_rate=hits / lookups if lookups else None, fill_ms=fill,
                   memory=memory)


def run_all(bench: Bench) -> None:
    read_only, mixed = workload.READ_ONLY, workload.Mix()
    for kind in ("direct", "pgbouncer", "pgpool", "weir"):
        label = LABELS[kind] + (" (cache off)" if kind == "pgpool" else
                                " (no caches)" if kind == "weir" else "")
        try:
            with _peer(bench, kind, cached=False) as (dsn, _):
                s, out, _ = bench.measure("pass-through", label, dsn, read_only, seed=1)
                bench.record("pass-through", s, out)
        except peers.PeerUnavailable as exc:
            bench.unavailable("pass-through", label, str(exc))
    for kind in ("pgpool", "weir"):
        label = LABELS[kind]
        try:
            with _peer(bench, kind, cached=True) as (dsn, handle):
                read: list[workload.Sample] = []
                for phase, seed in (("cold", 1), ("warm", 2)):
                    before = _counters(kind, dsn, handle)
                    s, out, _ = bench.measure(f"cached, {phase}", label, dsn, read_only, seed)
                    s = _cache_figures(kind, before, _counters(kind, dsn, handle), handle, s)
                    bench.record(f"cached, {phase}", s, out)
                    read.extend(out.samples)
                if isinstance(handle, Weir):
                    bench.memory = memory_table(bench, dsn, read)
        except peers.PeerUnavailable as exc:
            for phase in ("cold", "warm"):
                bench.unavailable(f"cached, {phase}", label, str(exc))
    for kind in ("direct", "pgbouncer", "pgpool", "weir", "weir-ryw-off"):
        caching = kind not in ("direct", "pgbouncer")
        label = LABELS[kind] + (" (from cold)" if caching else "")
        try:
            with _peer(bench, kind, cached=True) as (dsn, handle):
                before = _counters(kind, dsn, handle) if caching else None
                s, out, _ = bench.measure("writes", label, dsn, mixed, seed=3, probe=caching)
                if before is not None:
                    s = _cache_figures(kind, before, _counters(kind, dsn, handle), handle, s)
                else:
                    s = replace(s, fresh_p50_ms=0.0, fresh_max_ms=0.0)
                bench.record("writes", s, out)
        except peers.PeerUnavailable as exc:
            bench.unavailable("writes", label, str(exc))


#: Each cache's full result for every key at once (what a full materialization would hold).
FULL = {
    "story_page": "SELECT s.id, s.title, s.score, count(v.user_id) FROM stories s "
                  "LEFT JOIN votes v ON v.story_id = s.id GROUP BY s.id, s.title, s.score",
    "front_page": "SELECT section, id, title, score FROM (SELECT section, id, title, score, "
                  "row_number() OVER (PARTITION BY section ORDER BY score DESC, id) AS r "
                  "FROM stories) t WHERE r <= 10",
    "user_profile": "SELECT u.id, u.name, u.karma, count(s.id) FROM users u "
                    "LEFT JOIN stories s ON s.author_id = u.id GROUP BY u.id, u.name, u.karma",
    "comment_thread": "SELECT story_id, id, body, name FROM (SELECT c.story_id, c.id, c.body, "
                      "u.name, row_number() OVER (PARTITION BY c.story_id ORDER BY c.id) AS r "
                      "FROM comments c JOIN users u ON u.id = c.author_id) t WHERE r <= 50",
}


def memory_table(bench: Bench, dsn: str, samples: list[workload.Sample]) -> str:
    """weir's partial state per cache after the cached runs, against a full materialization:
    extrapolated from weir's bytes per key held, and the full result's size in PostgreSQL."""
    domain = {"story": bench.size.stories, "section": dataset.SECTIONS,
              "user": bench.size.users}
    with psycopg.connect(dsn, autocommit=True) as conn:
        held_bytes = {str(r[0]): int(r[3]) for r in conn.execute("SHOW CACHES").fetchall()}
    lines = ["| cache | keys held / all keys | weir state (partial) | weir, all keys "
             "(extrapolated) | full result in PostgreSQL (rows, tuple bytes) |",
             "|---|---|---|---|---|"]
    with psycopg.connect(bench.cluster.dsn(), autocommit=True) as conn:
        for query in dataset.READS:
            keys = len({s.key for s in samples if s.op == query.name})
            total = domain[query.key]
            row = conn.execute(f"SELECT count(*), coalesce(sum(pg_column_size(f.*)), 0) "
                               f"FROM ({FULL[query.name]}) f").fetchone()
            assert row is not None
            state = held_bytes.get(query.name, 0)
            full = state / keys * total if keys else 0.0
            lines.append(f"| {query.name} | {keys:,} / {total:,} ({100 * keys / total:.0f}%) | "
                         f"{report.mib(state)} | {report.mib(full)} | "
                         f"{int(row[0]):,} rows, {report.mib(int(row[1]))} |")
    return "\n".join(lines)


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} CPU(s) visible, "
            f"{len(os.sched_getaffinity(0))} usable, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def write(bench: Bench, out: Path, command: str, load_before: tuple[float, ...],
          load_after: tuple[float, ...], pg_version: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for name in ("pass-through", "cached, cold", "cached, warm", "writes"):
        rows = _rows(bench, name)
        sections.append(f"### {name}\n\n{report.markdown_table(rows)}\n")
    verdict = "\n".join(_verdict(bench))
    plots = _plots(bench, out)
    body = "\n".join(sections)
    text = f"""# weir against PostgreSQL, PgBouncer and pgpool-II

Generated by `make bench` (bench/compare.py); the numbers below are from one run.

- Command: `{command}`
- Machine: {_machine()}; PostgreSQL {pg_version}
- Load average (1, 5, 15 min) before: {", ".join(f"{x:.2f}" for x in load_before)}; after:
  {", ".join(f"{x:.2f}" for x in load_after)}. The machine's 2 CPUs are shared with other
  engineers' builds and tests, and client threads, proxy and PostgreSQL all run on them, so
  absolute figures are low and noisy; compare rows of one table, not runs.
- Site: {bench.size.users:,} users, {bench.size.stories:,} stories, ~{bench.size.votes:,} votes,
  {bench.size.comments:,} comments. {bench.clients} client threads (psycopg, prepared
  statements), {bench.seconds:.0f} s per run, keys Zipf-distributed (s = 1.1).
- Reads: story page with vote count, front page top-10 of a section, user profile with story
  count, comment thread (40/20/15/15). Writes (table "writes" only): a vote that also bumps
  the story's score (7 %), a comment (3 %), through the peer.
- Hit rate: weir's hits / (hits + misses) from `SHOW WEIR STATUS`; pgpool-II's
  hits / (hits + selects) from `SHOW POOL_CACHE`, both over the run. Fill: weir's average fill
  time. Freshness: a vote written directly on PostgreSQL once a second, time until a read
  through the peer counts it (5 s limit). Memory: weir's cached state and process RSS;
  pgpool-II's used cache space.

{body}
### memory: weir's partial state against a full materialization

After weir's cached cold and warm runs. weir holds only the keys that were read; the
extrapolation multiplies its bytes per key held by all keys (hot keys hold more rows than
average, so it overstates a little). PostgreSQL's tuple bytes are the smallest any copy of
the full results could be.

{bench.memory}

## Verdict of this run

{verdict}

## Reading the tables

- weir from a cold start: a read that misses is answered upstream at once, and its key is
  filled in the background from its second read on (`--admission second`), so the first reads
  of every key cost a trip through weir to PostgreSQL plus, later, a fill (issue 18 works on
  making both cheaper). The hit rate and the fill time show how far the caches got within
  the run. Where weir loses, the tables show it.
- pgpool-II's cache never sees writes made directly on PostgreSQL (or through another
  pgpool-II): with `memqcache_expire = 0` its answers stay stale ("never fresh" probes). Writes
  through it drop every cached result of the written table, which is what its hit rate in the
  "writes" table shows. weir updates only the keys a write touches, from the replication
  stream, whoever wrote.
- "weir, read-your-writes off" shows what the read-your-writes barrier costs: with it on
  (the default), a session's first cached read after its own write waits until replication
  has applied that write.

## Plots

{chr(10).join(f"![{p.stem}]({p.name})" for p in plots)}
"""
    (out / "comparison.md").write_text(text)
    return text


def _rows(bench: Bench, name: str) -> list[report.Summary]:
    """A table's rows; the cached tables start with direct PostgreSQL's pass-through run (the
    same reads, nothing cached) as the reference."""
    rows = [r.summary for r in bench.runs if r.workload == name]
    if name.startswith("cached"):
        direct = [r.summary for r in bench.runs
                  if r.workload == "pass-through" and r.summary.label == LABELS["direct"]]
        rows = [replace(d, label=f"{d.label} (reference)",
                        note="the pass-through run: the same reads, nothing cached")
                for d in direct] + rows
    return rows


def _verdict(bench: Bench) -> Iterator[str]:
    """One line per table: each caching peer's throughput against PostgreSQL directly."""
    for name in ("pass-through", "cached, cold", "cached, warm", "writes"):
        rows = _rows(bench, name)
        base = next((r.throughput for r in rows if r.label.startswith(LABELS["direct"])), 0.0)
        if not base:
            continue
        ratios = ", ".join(f"{r.label} {r.throughput / base:.2f}x" for r in rows
                           if not r.label.startswith(LABELS["direct"]) and r.ops)
        yield f"- {name}: throughput against PostgreSQL directly: {ratios}."


def _plots(bench: Bench, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    names = ("pass-through", "cached, cold", "cached, warm", "writes")
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 11))
    for ax, name in zip(axes, names, strict=True):
        rows = _rows(bench, name)
        ax.barh([r.label for r in rows], [r.throughput for r in rows], color="tab:blue")
        ax.set_title(name)
        ax.set_xlabel("operations per second")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    path = out / "comparison-throughput.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    for name, stem in (("cached, cold", "comparison-cold"), ("writes", "comparison-writes")):
        runs = [(r.summary.label, r.samples, r.summary.seconds)
                for r in bench.runs if r.workload == name and r.samples]
        if runs:
            sub = out / f".{stem}"
            sub.mkdir(exist_ok=True)
            for p in report.plot_runs(runs, sub, name):
                target = out / f"{stem}-{p.name}"
                p.replace(target)
                written.append(target)
            sub.rmdir()
    return written


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/compare.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--small", action="store_true", help="the small site (quick check)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    args = p.parse_args()
    size = dataset.SMALL if args.small else dataset.Size()
    command = "make bench  # = .venv/bin/python bench/compare.py " + " ".join(sys.argv[1:])
    load_before = os.getloadavg()
    print("make bench: weir against PostgreSQL, PgBouncer and pgpool-II", flush=True)
    with localpg.running() as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            dataset.load(conn, size)
            pg_version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        bench = Bench(cluster, size, args.seconds, args.clients)
        try:
            run_all(bench)
        except KeyboardInterrupt:
            bench.stop.set()
            print("interrupted: nothing written", file=sys.stderr)
            return 130
    text = write(bench, Path(args.out), command.strip(), load_before, os.getloadavg(),
                 pg_version)
    print(text[text.index("### pass-through"):text.index("## Reading")])
    print(f"written to {Path(args.out) / 'comparison.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
