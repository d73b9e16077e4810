"""Bootstrap load benchmark: the Spark job at local[1] and local[2] against one COPY.

    .venv/bin/python bench/bootstrap.py [--rows 1000000] [--repeat 3] [--partitions 8]

Starts a throw-away PostgreSQL (``proxy.localpg``) unless ``WEIR_BENCH_DSN`` names one, creates
a table of mixed column types (bigint key, text, numeric, float8, bool, timestamptz, int2,
jsonb), then measures, best of ``--repeat``:
- one ``COPY t TO STDOUT`` read by psycopg with the bytes discarded (the baseline);
- two raw COPYs of the two halves at once in two processes (the ceiling of any parallel
  loader on this machine: PostgreSQL's own output cost is most of a COPY);
- one partition task in this process (COPY + Arrow conversion + row hashes + Parquet, no
  Spark): the per-core cost of the job's work;
- ``weir bootstrap`` with Spark ``local[1]`` and ``local[2]``, each in a fresh process (its
  own JVM) after one warm-up load; the figure is the load itself (slot + plan + tasks +
  manifest), Spark's start-up is reported separately.
Prints one JSON object (rows/s of each, and the ratio local[2] / COPY).

    .venv/bin/python bench/bootstrap.py --fills [--rows 200000] [--keys 2000] [--writes 200]

measures instead fill latency and cold-start throughput with a local base against upstream
fills (``bench/bootstrap_fills.py``), no Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from cdc.bootstrap import catalog
from cdc.bootstrap.job import BootstrapConfig, run, spark_session
from cdc.bootstrap.plan import table_to_json
from cdc.bootstrap.reader import read_partition
from proxy import localpg


def _create(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_items")
        conn.execute(
            "CREATE TABLE bench_items (id bigint PRIMARY KEY, v text, n numeric, f float8,"
            " b bool, ts timestamptz, small int2, j jsonb)")
        conn.execute(
            "INSERT INTO bench_items SELECT g, 'value ' || g, g * 1.25, g / 3.0, g % 2 = 0,"
            " timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',"
            f" (g % 30000)::int2, jsonb_build_object('g', g) FROM generate_series(1, {rows}) g")
        conn.execute("VACUUM ANALYZE bench_items")


def _copy_once(dsn: str) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        started = time.perf_counter()
        with cur.copy("COPY bench_items TO STDOUT") as copy:
            for _ in copy:
                pass
        return time.perf_counter() - started


def _copy_range(dsn: str, low: int, high: int) -> float:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        started = time.perf_counter()
        with cur.copy(f"COPY (SELECT * FROM bench_items WHERE id >= {low} AND id < {high})"
                      " TO STDOUT") as copy:
            for _ in copy:
                pass
        return time.perf_counter() - started


def _two_copies_once(dsn: str, rows: int) -> float:
    """Two raw COPYs of the two halves in two processes at once (bytes discarded): the
    ceiling of any parallel loader on this machine."""
    from concurrent.futures import ProcessPoolExecutor

    half = rows // 2 + 1
    with ProcessPoolExecutor(2) as pool:
        pool.submit(_copy_range, dsn, 0, 1).result()  # both workers started
        started = time.perf_counter()
        list(pool.map(_copy_range, [dsn, dsn], [0, half], [half, rows + 1]))
        return time.perf_counter() - started


def _task_once(dsn: str, out: Path) -> float:
    with catalog.connect(dsn) as conn:
        found = catalog.inspect(conn, "bench_items")
        spec = catalog.partition_table(conn, found, 10**12, 1, 1)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        name = conn.execute("SELECT pg_export_snapshot()").fetchone()
        assert name is not None
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        read_partition({"dsn": dsn, "out": str(out), "table": table_to_json(spec), "index": 0,
                        "snapshot": name[0], "settings": catalog.SESSION_SETTINGS})
        return time.perf_counter() - started


def _spark_once(dsn: str, spark: Any, master: str, out: Path, partitions: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    slot = f"weir_bench_{os.getpid()}"
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        run(BootstrapConfig(upstream=dsn, tables=("bench_items",), out=str(out), master=master,
                            slot=slot, partitions=partitions), spark=spark, log=quiet)
    took = time.perf_counter() - started
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    return took


def _spark(dsn: str, cores: int, repeat: int, partitions: int) -> dict[str, Any]:
    """In a fresh process (a fresh JVM): start Spark, one warm-up load, best of ``repeat``."""
    master = f"local[{cores}]"
    work = Path(tempfile.mkdtemp(prefix="weir-bench-spark-"))
    started = time.perf_counter()
    spark = spark_session(master)
    start = time.perf_counter() - started
    try:
        parallelism = spark.sparkContext.defaultParallelism
        _spark_once(dsn, spark, master, work / "warm", partitions)
        best = min(_spark_once(dsn, spark, master, work / f"run{i}", partitions)
                   for i in range(repeat))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {f"spark_start_s_{cores}": round(start, 2), f"parallelism_{cores}": parallelism,
            f"local{cores}_seconds": round(best, 3)}


def _spark_child(dsn: str, cores: int, args: argparse.Namespace) -> dict[str, Any]:
    import subprocess

    out = subprocess.run(
        [sys.executable, __file__, "--child", str(cores), "--dsn", dsn, "--repeat",
         str(args.repeat), "--partitions", str(args.partitions)],
        check=True, capture_output=True, text=True).stdout
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    found[f"local{cores}_rows_per_s"] = round(args.rows / found[f"local{cores}_seconds"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--fills", action="store_true",
                        help="fills over a local base against upstream fills (no Spark)")
    parser.add_argument("--keys", type=int, default=2000, help="with --fills: keys per run")
    parser.add_argument("--writes", type=int, default=200,
                        help="with --fills: background updates per second")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_spark(args.dsn, args.child, args.repeat, args.partitions)))
        return
    cluster = None
    dsn = os.environ.get("WEIR_BENCH_DSN")
    if not dsn:
        cluster = localpg.start()
        dsn = cluster.dsn()
    work = Path(tempfile.mkdtemp(prefix="weir-bench-bootstrap-"))
    try:
        _create(dsn, args.rows)
        if args.fills:
            from bench.bootstrap_fills import run_fills

            fills = {"rows": args.rows, "keys": args.keys, "writes_per_s": args.writes,
                     "load_average": os.getloadavg()[0],
                     **run_fills(dsn, args.rows, args.keys, args.writes)}
            print(json.dumps(fills, indent=1))
            return
        result: dict[str, Any] = {"rows": args.rows, "partitions": args.partitions,
                                  "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
        copy = min(_copy_once(dsn) for _ in range(args.repeat))
        task = min(_task_once(dsn, work / "task") for _ in range(args.repeat))
        result["copy_rows_per_s"] = round(args.rows / copy)
        two = min(_two_copies_once(dsn, args.rows) for _ in range(args.repeat))
        result["two_parallel_copies_rows_per_s"] = round(args.rows / two)
        result["one_task_rows_per_s"] = round(args.rows / task)
        for cores in (1, 2):
            result.update(_spark_child(dsn, cores, args))
        result["local2_over_copy"] = round(result["local2_rows_per_s"] / result["copy_rows_per_s"],
                                           2)
        result["local2_over_local1"] = round(
            result["local2_rows_per_s"] / result["local1_rows_per_s"], 2)
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
