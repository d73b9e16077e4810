"""Result encoding benchmark: DataRows encoded per second (pure Python vs the Cython twin).

    .venv/bin/python bench/results.py [--rows 20000] [--repeat 5] [--out docs/benchmarks/results.md]

A typical cached row: (int8, text, numeric, timestamptz), encoded in text (TimeZone UTC and
America/New_York) and in binary, plus an all-fast-path row (int8, text, int4, bool) where the
Cython twin inlines every column. Best of ``--repeat`` runs; no database needed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cython_ext
from engine.values import oids
from proxy import results
from proxy.results import ColumnEncoder, OutputSettings, column_encoder

ROOT = Path(__file__).resolve().parents[1]


def typical_rows(n: int) -> list[tuple[Any, ...]]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [(i * 7919, f"story title number {i}", Decimal(i) / 100,
             start + timedelta(seconds=i * 37, microseconds=i)) for i in range(n)]


def fast_rows(n: int) -> list[tuple[Any, ...]]:
    return [(i * 7919, f"user{i}", i % 1000, i % 2 == 0) for i in range(n)]


def rate(fn: Callable[..., bytes], rows: Sequence[Any], encoders: list[ColumnEncoder],
         repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(rows, encoders)
        best = min(best, time.perf_counter() - t0)
    return len(rows) / best


def cases(n: int) -> list[tuple[str, list[tuple[Any, ...]], list[ColumnEncoder]]]:
    utc = OutputSettings.from_parameters({"TimeZone": "UTC"})
    ny = OutputSettings.from_parameters({"TimeZone": "America/New_York"})
    typical = (oids.INT8, oids.TEXT, oids.NUMERIC, oids.TIMESTAMPTZ)
    fast = (oids.INT8, oids.TEXT, oids.INT4, oids.BOOL)
    rows, frows = typical_rows(n), fast_rows(n)
    return [
        ("int8, text, numeric, timestamptz - text, UTC", rows,
         [column_encoder(t, -1, 0, utc) for t in typical]),
        ("int8, text, numeric, timestamptz - text, America/New_York", rows,
         [column_encoder(t, -1, 0, ny) for t in typical]),
        ("int8, text, numeric, timestamptz - binary", rows,
         [column_encoder(t, -1, 1, utc) for t in typical]),
        ("int8, text, int4, bool - text", frows, [column_encoder(t, -1, 0, utc) for t in fast]),
        ("int8, text, int4, bool - binary", frows,
         [column_encoder(t, -1, 1, utc) for t in (oids.INT8, oids.TEXT, oids.INT4)]
         + [column_encoder(oids.BOOL, -1, 1, utc)]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/results.md"))
    args = ap.parse_args()
    twin = cython_ext.load_pair("results")
    lines = [
        "# Result encoding benchmark", "",
        f"Command: `.venv/bin/python bench/results.py --rows {args.rows} --repeat {args.repeat}`"
        " (best of the repeats, one run on the shared 2-core machine; no database).", "",
        "Rows encoded into complete DataRow messages per second by `proxy.results.encode_rows`"
        " (pure Python) and its Cython twin `cython_ext/results.pyx`. Numeric and timestamptz"
        " values are converted by Python encoders in both cases; the twin inlines int, text,"
        " bool and float8.", "",
        "| row / format | pure Python rows/s | Cython rows/s | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for name, rows, encoders in cases(args.rows):
        py = rate(results.encode_rows_python, rows, encoders, args.repeat)
        cy = rate(twin.encode_rows, rows, encoders, args.repeat) if twin else float("nan")
        lines.append(f"| {name} | {py:,.0f} | {cy:,.0f} | {cy / py:.1f}x |")
        print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
