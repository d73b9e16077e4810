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
import json
import os
import subprocess
import sys
import tempfile
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
    cluster.psql("SELECT pg_create_logical_replication_slot('bench_backlog', 'pgoutput')", db)
    params = ConnectParams(cluster.host, cluster.port, cluster.superuser, db, sslmode="disable")
    result = await _under_load(params, pgbench, env, db, args)
    rows = cluster.psql(
        "SELECT encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('bench_backlog',"
        " NULL, 40000, 'proto_version', '1', 'publication_names', 'bench_pub')", db)
    CAPTURED[:] = [bytes.fromhex(line) for line in rows.split()]
    result.update(await _drain_backlog(params))
    cluster.psql("SELECT pg_drop_replication_slot('bench_backlog')", db)
    return result


async def _under_load(params: ConnectParams, pgbench: str, env: dict[str, str], db: str,
                      args: argparse.Namespace) -> dict[str, float]:
    """pgbench at full speed while a stream applies it and barriers probe the lag."""
    sink = CountingSink()
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
    await stream.barrier(timeout=120)
    caught_up = time.monotonic()
    await stream.stop()
    tps = next((float(line.split("=")[1].split()[0]) for line in out.decode().splitlines()
                if line.startswith("tps")), float("nan"))
    return {
        "tps": tps, "transactions": sink.transactions, "changes": sink.changes,
        "changes_per_s": sink.changes / (caught_up - started),
        "catch_up_s": caught_up - load_end,
        "lag_p50": _pct(lags, 0.50), "lag_p99": _pct(lags, 0.99),
        "lag_max": max(lags, default=float("nan")),
        "lag_bytes_p50": _pct([float(b) for b in lag_bytes], 0.50),
        "lag_bytes_p99": _pct([float(b) for b in lag_bytes], 0.99),
        "probes": len(lags),
    }


async def _drain_backlog(params: ConnectParams) -> dict[str, float]:
    """Stream the whole load again from a slot created before it: weir's ceiling over the
    network (the upstream decodes the backlog as fast as weir takes it)."""
    sink = CountingSink()
    config = StreamConfig(params, publication="bench_pub", slot="bench_backlog",
                          temporary=False, create_publication=False)
    stream = ReplicationStream(config, sink)
    started = time.monotonic()
    await stream.start()
    await stream.barrier(timeout=300)
    elapsed = time.monotonic() - started
    await stream.stop()
    return {"backlog_changes": sink.changes, "backlog_changes_per_s": sink.changes / elapsed,
            "backlog_tx_per_s": sink.transactions / elapsed}


#: pgoutput payloads of the pgbench load, captured by run_online through a second slot.
CAPTURED: list[bytes] = []


def run_offline(payloads: list[bytes], repeat: int = 5) -> dict[str, float]:
    """Applier alone: decode + convert the captured pgbench stream, in-process, no network.
    The best of ``repeat`` passes (the machine is shared: the best pass is the least disturbed)."""
    best = float("inf")
    changes = 0
    for _ in range(repeat):
        sink = CountingSink()
        applier = Applier(sink)
        started = time.perf_counter()
        for payload in payloads:
            applier.feed(decode_message(payload))
        best = min(best, time.perf_counter() - started)
        changes = sink.changes
    return {"changes_per_s": changes / best, "messages_per_s": len(payloads) / best}


def offline_both(payloads: list[bytes]) -> dict[str, dict[str, float]]:
    """run_offline under WEIR_IMPL=python and =cython, each in a fresh interpreter."""
    results = {}
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        f.write("\n".join(p.hex() for p in payloads))
    try:
        for impl in ("python", "cython"):
            proc = subprocess.run([sys.executable, __file__, "--offline", f.name],
                                  env={**os.environ, "WEIR_IMPL": impl}, check=True,
                                  capture_output=True, text=True)
            results[impl] = json.loads(proc.stdout)
    finally:
        os.unlink(f.name)
    return results


def _report(online: dict[str, float], offline: dict[str, dict[str, float]],
            args: argparse.Namespace, impl: str, captured: int) -> str:
    py, cy = offline["python"], offline["cython"]
    return f"""# CDC apply benchmark

Command: `WEIR_IMPL={impl} .venv/bin/python bench/cdc.py --seconds {args.seconds} \
--clients {args.clients} --scale {args.scale}`

One run on the 2-core machine shared with other work (load average {os.getloadavg()[0]:.1f}
when the report was written); PostgreSQL 15 with fsync off on the
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
| backlog drain over the network (whole load replayed from a slot), changes/s | \
{online['backlog_changes_per_s']:.0f} ({online['backlog_tx_per_s']:.0f} transactions/s) |
| applier alone, WEIR_IMPL=python: changes/s (messages/s) | {py['changes_per_s']:.0f} \
({py['messages_per_s']:.0f}) |
| applier alone, WEIR_IMPL=cython: changes/s (messages/s) | {cy['changes_per_s']:.0f} \
({cy['messages_per_s']:.0f}) |

"Applier alone" replays the first {captured} pgoutput messages of the same pgbench load
(captured through a second slot) through decode + value conversion in one process, without
network, best of five passes: the ceiling of the CDC side on this machine.

Lag is measured with barriers (DESIGN §6): the time from emitting
`pg_logical_emit_message(true, 'weir', id)` to the applier passing it, so it includes one
upstream round trip and the commit of the marker. "Never falls behind" holds when the lag
stays flat during the load and the catch-up after it is about one probe's lag.

"Backlog drain" re-streams the whole load ({online['backlog_changes']:.0f} changes) from a
slot created before it, with the same client: the rate at which weir takes changes from the
upstream (pgoutput decoding in the walsender included) when it is not waiting for commits.

Reading: the upstream sustained {online['tps']:.0f} TPC-B transactions/s on this machine and
weir applied their {online['changes_per_s']:.0f} changes/s as they committed (caught up
{online['catch_up_s'] * 1000:.0f} ms after the load stopped); the applier alone is
{py['changes_per_s'] / online['changes_per_s']:.0f}x (Python) and \
{cy['changes_per_s'] / online['changes_per_s']:.0f}x (Cython twin)
faster than that load, which leaves the headroom to the engine's own apply work. The Cython
twin covers only TupleData decoding; on pgbench's narrow rows (2-4 short columns) the
per-message Python work (dataclasses, dispatch, value conversion) dominates, so the gap
between the two is small and varies from run to run on this shared machine; wide rows gain
more from the twin.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--out", default="docs/benchmarks/cdc.md")
    parser.add_argument("--offline", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.offline:
        payloads = [bytes.fromhex(h) for h in Path(args.offline).read_text().split()]
        print(json.dumps(run_offline(payloads)))
        return
    impl = "cython" if cython_ext.load("pgoutput") is not None else "python"
    url = os.environ.get("WEIR_BENCH_DSN")
    if url:
        from tests.support import ExternalCluster

        online = asyncio.run(run_online(ExternalCluster(url), args))
    else:
        with localpg.running() as cluster:
            online = asyncio.run(run_online(cluster, args))
    offline = offline_both(CAPTURED)
    text = _report(online, offline, args, impl, len(CAPTURED))
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
