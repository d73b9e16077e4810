"""The comparison table and the PNG plots.

Owns: summarizing a run's samples (throughput, p50/p99 latency, over the whole run or a
window of it), the figures that come from elsewhere (hit rate, fill latency, freshness lag,
memory), formatting them as a text table and a Markdown table, the per-second series, and
drawing the plots with matplotlib (Agg backend, no display needed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from demo.timeline import Second
from demo.workload import Sample


@dataclass(frozen=True, slots=True)
class Summary:
    """One row of the table. Figures that do not apply are None (shown as ``-``)."""

    label: str
    ops: int
    seconds: float
    p50_ms: float
    p99_ms: float
    hit_rate: float | None = None
    fill_ms: float | None = None
    fresh_p50_ms: float | None = None
    fresh_max_ms: float | None = None
    memory: str | None = None
    note: str = ""

    @property
    def throughput(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def summarize(label: str, samples: Sequence[Sample], seconds: float,
              window: tuple[float, float] | None = None) -> Summary:
    """Throughput and latency of ``samples`` (those starting inside ``window``, if given)."""
    if window is not None:
        samples = [s for s in samples if window[0] <= s.start < window[1]]
        seconds = window[1] - window[0]
    latencies = [s.latency * 1000 for s in samples]
    return Summary(label, len(samples), seconds, percentile(latencies, 50),
                   percentile(latencies, 99))


def with_freshness(summary: Summary, lags: Sequence[float], missed: int) -> Summary:
    note = f"{missed} probe(s) never fresh within 5 s" if missed else summary.note
    if not lags:
        return replace(summary, note=note)
    return replace(summary, fresh_p50_ms=percentile(lags, 50) * 1000,
                   fresh_max_ms=max(lags) * 1000, note=note)


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


COLUMNS = ("run", "ops/s", "p50 ms", "p99 ms", "hit rate", "fill ms", "fresh p50/max ms",
           "memory")


def _cells(s: Summary) -> tuple[str, ...]:
    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    fresh = ("-" if s.fresh_p50_ms is None
             else f"{s.fresh_p50_ms:.0f} / {num(s.fresh_max_ms, '.0f')}")
    hit = "-" if s.hit_rate is None else f"{100 * s.hit_rate:.1f}%"
    return (s.label, f"{s.throughput:,.0f}", num(s.p50_ms, ".2f"), num(s.p99_ms, ".2f"), hit,
            num(s.fill_ms, ".1f"), fresh, s.memory or "-")


def text_table(rows: Sequence[Summary]) -> str:
    cells = [COLUMNS, *(_cells(r) for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c[i].ljust(widths[i]) if i == 0 else c[i].rjust(widths[i])
                       for i in range(len(COLUMNS))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {r.label}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + notes)


def markdown_table(rows: Sequence[Summary]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    notes = [f"- {r.label}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["", *notes] if notes else []))


def per_second(samples: Sequence[Sample], seconds: float
               ) -> tuple[list[float], list[float], list[float], list[float]]:
    """(second, ops/s, p50 ms, p99 ms) for each whole second of a run."""
    buckets: list[list[float]] = [[] for _ in range(max(1, int(seconds)))]
    for s in samples:
        i = int(s.start)
        if i < len(buckets):
            buckets[i].append(s.latency * 1000)
    xs = [i + 0.5 for i in range(len(buckets))]
    return (xs, [float(len(b)) for b in buckets], [percentile(b, 50) for b in buckets],
            [percentile(b, 99) for b in buckets])


def plot_runs(runs: Sequence[tuple[str, Sequence[Sample], float]], out: Path,
              title: str) -> list[Path]:
    """Throughput and latency over time, one line per run; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, samples, seconds in runs:
        xs, ops, _, _ = per_second(samples, seconds)
        ax.plot(xs, ops, label=label)
    ax.set(xlabel="seconds into the run", ylabel="operations per second",
           title=f"{title}: throughput over time")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / "throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, samples, seconds in runs:
        xs, _, p50, p99 = per_second(samples, seconds)
        line = ax.plot(xs, p50, label=f"{label} p50")[0]
        ax.plot(xs, p99, linestyle="--", color=line.get_color(), label=f"{label} p99")
    ax.set_yscale("log")
    ax.set(xlabel="seconds into the run", ylabel="latency (ms, log scale)",
           title=f"{title}: latency over time")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / "latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def plot_cache(seconds: Sequence[Second], out: Path, title: str) -> Path:
    """weir's hits, misses, fills and lane answers per second, and its hit rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = [s.at for s in seconds]
    for name in ("hits", "misses", "fills", "fills_not_admitted", "lane_answers"):
        ax.plot(xs, [getattr(s, name) for s in seconds], label=name.replace("_", " "))
    ax.set(xlabel="seconds into the run", ylabel="per second",
           title=f"{title}: weir's cache from a cold start")
    ax.grid(alpha=0.3)
    rate = ax.twinx()
    rate.plot(xs, [100 * s.hit_rate for s in seconds], color="black", linestyle=":",
              label="hit rate")
    rate.set(ylabel="hit rate (%)", ylim=(0, 100))
    lines = ax.get_legend_handles_labels()
    more = rate.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize="small")
    fig.tight_layout()
    path = out / "cache.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def hit_rate_line(seconds: Sequence[Second], parts: int = 6) -> str:
    """The hit rate in ``parts`` equal slices of the run, e.g. ``31% 62% 70% 74% 76% 77%``."""
    if not seconds:
        return "-"
    size = max(1, math.ceil(len(seconds) / parts))
    slices = [seconds[i:i + size] for i in range(0, len(seconds), size)]
    rates = (sum(s.hits for s in sl) / max(1, sum(s.hits + s.misses for s in sl))
             for sl in slices)
    return " ".join(f"{100 * r:.0f}%" for r in rates)


@dataclass(frozen=True, slots=True)
class OpRow:
    """One operation type in both runs: how many, mean and p50 latency (ms)."""

    op: str
    direct_ops: int
    weir_ops: int
    direct_mean_ms: float
    weir_mean_ms: float
    direct_p50_ms: float
    weir_p50_ms: float


def per_operation(names: Sequence[str], direct: Sequence[Sample], weir: Sequence[Sample]
                  ) -> list[OpRow]:
    """Where the time goes, operation by operation (in ``names`` order): the same mix runs
    on both sides, so a type whose mean is higher through weir is where weir loses."""
    def stats(samples: Sequence[Sample], op: str) -> tuple[int, float, float]:
        ms = [s.latency * 1000 for s in samples if s.op == op]
        return len(ms), (sum(ms) / len(ms) if ms else math.nan), percentile(ms, 50)

    rows = []
    for op in names:
        dn, dmean, dp50 = stats(direct, op)
        wn, wmean, wp50 = stats(weir, op)
        rows.append(OpRow(op, dn, wn, dmean, wmean, dp50, wp50))
    return rows


def per_operation_text(rows: Sequence[OpRow]) -> str:
    """``per_operation`` as aligned lines: ops and mean/p50 latency, directly and through weir."""
    head = ("operation", "ops direct", "ops weir", "mean ms direct", "mean ms weir",
            "p50 direct", "p50 weir")
    cells = [head, *((r.op, f"{r.direct_ops:,}", f"{r.weir_ops:,}", f"{r.direct_mean_ms:.2f}",
                      f"{r.weir_mean_ms:.2f}", f"{r.direct_p50_ms:.2f}", f"{r.weir_p50_ms:.2f}")
                     for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return "\n".join("  " + "  ".join(c[i].ljust(widths[i]) if i == 0 else c[i].rjust(widths[i])
                                      for i in range(len(head))) for c in cells)


def coverage_share(status: dict[str, str], clients: int, seconds: float) -> str:
    """The part of the clients' time weir spent waiting for coverage (read-your-writes and
    monotonic reads after a write or a miss went upstream), from ``SHOW WEIR STATUS``."""
    waits = int(status.get("session_waits", 0))
    ms = float(status.get("session_wait_ms_avg", 0.0))
    share = waits * ms / 1000 / max(1e-9, clients * seconds)
    return (f"{waits:,} coverage waits of {ms:.2f} ms on average (at most {100 * share:.0f}% "
            f"of the clients' time: a wait follows each write and each miss that went upstream, "
            f"counted from its answer and again at a read that parks for it)")
