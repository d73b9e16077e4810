"""Fills over a local base against fills from the upstream (``bench/bootstrap.py --fills``).

In this process, on one event loop: an ``EngineHost`` with ``--local-bases`` (the table loaded
by weir from one snapshot; the load's rows/s is reported) and one without (every fill an
upstream REPEATABLE READ transaction plus the marker wait), each with the same cache
``SELECT v, n, f, ts FROM bench_items WHERE id = $1``. Measured per host:
- miss latency: ``await host.read(cache, key)`` for distinct keys, one at a time (a miss is the
  engine's read, the fill, the install and the wake-up; no client protocol), p50 and p99;
- cold-start throughput: distinct-key reads (all misses) with 1 and 16 concurrent readers,
  reads per second, as after a restart with empty caches;
- the hit latency of the same keys afterwards (reference).
A background writer (``--writes`` single-row updates per second) keeps the stream busy.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from engine import CATALOG_QUERY, CachedQuery, Catalog, QueryPlanner
from proxy.caching import EngineHost

SQL = "SELECT v, n, f, ts FROM bench_items WHERE id = $1"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _writer(dsn: str, rows: int, per_second: int, stop: threading.Event) -> None:
    rng = random.Random(1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            started = time.monotonic()
            conn.execute("UPDATE bench_items SET f = f + 1 WHERE id = %s",
                         (rng.randint(1, rows),))
            pause = 1.0 / per_second - (time.monotonic() - started)
            if pause > 0:
                stop.wait(pause)


async def _cache(host: EngineHost) -> None:
    rows = await host.pool.fetch(CATALOG_QUERY)
    planner = QueryPlanner(Catalog.from_rows([tuple(r) for r in rows]))
    query = planner.classify(SQL, ("public",)).query
    assert isinstance(query, CachedQuery), query
    await host.add_cache("items", query.plan.reader, query.plan.relations)


async def _misses(host: EngineHost, keys: list[int], readers: int) -> tuple[list[float], float]:
    """Latency of each read and reads per second, ``readers`` at once over ``keys``."""
    latencies: list[float] = []
    todo = iter(keys)

    async def reader() -> None:
        for k in todo:
            started = time.perf_counter()
            served = await host.read("items", (k,))
            latencies.append(time.perf_counter() - started)
            assert served.rows is not None, served.reason
    started = time.perf_counter()
    await asyncio.gather(*(reader() for _ in range(readers)))
    return latencies, len(keys) / (time.perf_counter() - started)


async def _measure(host: EngineHost, rows: int, keys: int) -> dict[str, Any]:
    await _cache(host)
    rng = random.Random(7)
    pool = rng.sample(range(1, rows + 1), 3 * keys)
    single, rate1 = await _misses(host, pool[:keys], 1)
    _, rate16 = await _misses(host, pool[keys:3 * keys], 16)
    hits, _ = await _misses(host, pool[:keys], 1)
    return {
        "miss_p50_ms": round(1000 * statistics.median(single), 3),
        "miss_p99_ms": round(1000 * _pct(single, 0.99), 3),
        "cold_reads_per_s_1": round(rate1), "cold_reads_per_s_16": round(rate16),
        "hit_p50_ms": round(1000 * statistics.median(hits), 4),
        "upstream_fills": host.fills_done,
    }


async def _run(dsn: str, rows: int, keys: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="weir-bench-bases-"))
    out: dict[str, Any] = {}
    try:
        local = EngineHost(dsn, read_timeout=30.0, local_bases=str(folder / "bases"),
                           local_tables=("bench_items",))
        started = time.perf_counter()
        await local.start()
        out["local_start_s"] = round(time.perf_counter() - started, 2)
        out["local_load_rows_per_s"] = round(rows / out["local_start_s"])
        try:
            out["local"] = await _measure(local, rows, keys)
        finally:
            slot = local.local.slot if local.local is not None else ""
            await local.stop()
        upstream = EngineHost(dsn, read_timeout=30.0)
        await upstream.start()
        try:
            out["upstream"] = await _measure(upstream, rows, keys)
        finally:
            await upstream.stop()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def run_fills(dsn: str, rows: int, keys: int, writes: int) -> dict[str, Any]:
    stop = threading.Event()
    writer = threading.Thread(target=_writer, args=(dsn, rows, writes, stop), daemon=True)
    if writes:
        writer.start()
    try:
        return asyncio.run(_run(dsn, rows, keys))
    finally:
        stop.set()
        if writes:
            writer.join(10)
