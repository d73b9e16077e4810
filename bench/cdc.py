"""CDC apply benchmark: pgbench TPC-B at full speed while weir streams and applies the changes.

    .venv/bin/python bench/cdc.py [--seconds 8] [--clients 4] [--scale 1] [--out FILE]

Starts a throw-away PostgreSQL (``proxy.localpg``) unless ``WEIR_BENCH_DSN`` names one, loads
pgbench, starts a ReplicationStream (temporary slot) whose sink counts the changes, runs
``pgbench -N``-less TPC-B for the given time, and probes freshness with barriers every 100 ms
(lag = time from emitting the marker to the applier passing it). Reports applied changes/s,
pgbench's TPS, and lag p50/p99/max in seconds and bytes; also the applier alone (decode +
convert, no network) on the captured stream, to show the headroom.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

import cython_ext
from cdc.applier import Applier
from cdc.connection import ConnectParams
from cdc.events import TableSchema, Transaction
from cdc.pgoutput import decode_message
from cdc.stream import ReplicationStream, StreamConfig
from proxy import localpg


class CountingSink:
    def __init__(self) -> None:
        self.changes = 0
        self.transactions = 0

    def table_schema(self, schema: TableSchema) -> None:
        pass

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        pass

    def reset_all(self, reason: str) -> None:
        pass

    def apply(self, txn: Transaction) -> None:
        self.transactions += 1
        self.changes += len(txn.changes)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _probe(stream: ReplicationStream, stop: asyncio.Event,
                 lags: list[float], lag_bytes: list[int]) -> None:
    while not stop.is_set():
        result = await stream.barrier(timeout=60)
        lags.append(result.lag_seconds)
        lag_bytes.append(result.lag_bytes)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


async def run_online(cluster: Any, args: argparse.Namespace) -> dict[str, float]:
    db = "bench_cdc"
    cluster.psql(f"DROP DATABASE IF EXISTS {db}")
    cluster.psql(f"CREATE DATABASE {db}")
    pgbench = str(localpg.find_bindir() / "pgbench")
    env = {**os.environ, "PGHOST": cluster.host, "PGPORT": str(cluster.port),
           "PGUSER": cluster.superuser}
    subprocess.run([pgbench, "-i", "-q", "-s", str(args.scale), db], check=True, env=env,
                   capture_output=True)
    sink = CountingSink()
    params = ConnectParams(cluster.host, cluster.port, cluster.superuser, db, sslmode="disable")
    stream = ReplicationStream(StreamConfig(params, publication="bench_pub"), sink)
    await stream.start()
    lags: list[float] = []
    lag_bytes: list[int] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(stream, stop, lags, lag_bytes))
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        pgbench, "-c", str(args.clients), "-j", str(min(args.clients, 2)), "-T",
        str(args.seconds), db, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    load_end = time.monotonic()
    stop.set()
    await probe
    final = await stream.barrier(timeout=120)
    caught_up = time.monotonic()
    await stream.stop()
    tps = next((float(line.split("=")[1].split()[0]) for line in out.decode().splitlines()
                if line.startswith("tps")), float("nan"))
    return {
        "tps": tps,
        "transactions": sink.transactions,
        "changes": sink.changes,
        "changes_per_s": sink.changes / (caught_up - started),
        "catch_up_s": caught_up - load_end,
        "final_lag_s": final.lag_seconds,
        "lag_p50": _pct(lags, 0.50),
        "lag_p99": _pct(lags, 0.99),
        "lag_max": max(lags, default=float("nan")),
        "lag_bytes_p50": _pct([float(b) for b in lag_bytes], 0.50),
        "lag_bytes_p99": _pct([float(b) for b in lag_bytes], 0.99),
        "probes": len(lags),
    }


def run_offline(repeat: int = 3000) -> dict[str, float]:
    """Applier alone: decode + convert the captured golden stream, in-process."""
    golden = Path(__file__).resolve().parents[1] / "tests/unit/cdc/golden.json"
    import json

    payloads = [bytes.fromhex(h) for h in json.loads(golden.read_text())["messages"]]
    sink = CountingSink()
    applier = Applier(sink)
    started = time.perf_counter()
    for _ in range(repeat):
        applier.applied_commit_lsn = 0
        for payload in payloads:
            applier.feed(decode_message(payload))
    elapsed = time.perf_counter() - started
    return {"changes_per_s": sink.changes / elapsed, "messages_per_s":
            repeat * len(payloads) / elapsed}


def _report(online: dict[str, float], offline: dict[str, float], args: argparse.Namespace,
            impl: str) -> str:
    return f"""# CDC apply benchmark

Command: `WEIR_IMPL={impl} .venv/bin/python bench/cdc.py --seconds {args.seconds} \
--clients {args.clients} --scale {args.scale}`

One run on the 2-core machine shared with other work; PostgreSQL 15 with fsync off on the
same machine; pgbench's default TPC-B script at full speed; weir streaming from a temporary
slot into a sink that only counts (the engine's apply cost is not included).

| metric | value |
|---|---|
| pgbench TPS (upstream, full speed) | {online['tps']:.0f} |
| transactions applied | {online['transactions']:.0f} |
| row changes applied | {online['changes']:.0f} |
| applied changes/s (start to caught up) | {online['changes_per_s']:.0f} |
| catch-up after the load stopped | {online['catch_up_s']:.3f} s |
| barrier lag p50 / p99 / max | {online['lag_p50'] * 1000:.1f} / {online['lag_p99'] * 1000:.1f} / \
{online['lag_max'] * 1000:.1f} ms |
| WAL bytes behind at barrier emission p50 / p99 | {online['lag_bytes_p50']:.0f} / \
{online['lag_bytes_p99']:.0f} |
| barrier probes | {online['probes']:.0f} |
| applier alone (decode + convert), changes/s | {offline['changes_per_s']:.0f} |
| applier alone, pgoutput messages/s | {offline['messages_per_s']:.0f} |

Lag is measured with barriers (DESIGN §6): the time from emitting
`pg_logical_emit_message(true, 'weir', id)` to the applier passing it, so it includes one
upstream round trip and the commit of the marker. "Never falls behind" holds when the lag
stays flat during the load and the catch-up after it is about one probe's lag.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--out", default="docs/benchmarks/cdc.md")
    args = parser.parse_args()
    impl = "cython" if cython_ext.load("pgoutput") is not None else "python"
    url = os.environ.get("WEIR_BENCH_DSN")
    if url:
        from tests.support import ExternalCluster

        online = asyncio.run(run_online(ExternalCluster(url), args))
    else:
        with localpg.running() as cluster:
            online = asyncio.run(run_online(cluster, args))
    offline = run_offline()
    text = _report(online, offline, args, impl)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
