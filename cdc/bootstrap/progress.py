"""The progress line of a bootstrap: percentage, rows, rows/s and ETA.

Owns: the arithmetic and the text (sans-I/O: the caller passes times and counts; it prints).
The rate is measured over the run so far (rows this run / seconds this run), so a resumed run
reports its own speed and the ETA covers only what is left.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    rows_done: int  # rows read in this run so far (finished and running partitions)
    rows_expected: int  # estimate of the rows this run reads
    partitions_done: int
    partitions: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.rows_done / self.seconds if self.seconds > 0 else 0.0

    @property
    def fraction(self) -> float:
        if self.partitions and self.partitions_done == self.partitions:
            return 1.0
        if self.rows_expected <= 0:
            return self.partitions_done / self.partitions if self.partitions else 1.0
        return min(self.rows_done / self.rows_expected, 0.99)

    @property
    def eta(self) -> float | None:
        left = max(self.rows_expected - self.rows_done, 0)
        if self.partitions_done == self.partitions:
            return 0.0
        return left / self.rate if self.rate > 0 else None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def render(p: Progress, width: int = 24) -> str:
    filled = int(p.fraction * width)
    bar = "#" * filled + "." * (width - filled)
    return (f"[{bar}] {p.fraction * 100:5.1f}%  {p.rows_done:,}/~{p.rows_expected:,} rows  "
            f"{p.rate:,.0f} rows/s  ETA {_duration(p.eta)}  "
            f"({p.partitions_done}/{p.partitions} partitions)")
