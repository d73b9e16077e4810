"""``weir bootstrap``'s arguments (also ``python -m cdc.bootstrap`` and ``spark-submit``).

Owns: parsing (every flag also as a ``WEIR_*`` environment variable where it makes sense),
turning :class:`~cdc.bootstrap.errors.BootstrapError` into one line on stderr and exit code 2,
and printing the manifest's summary.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cdc.bootstrap.errors import BootstrapError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upstream", default=None, help="upstream URL (env WEIR_UPSTREAM)")
    parser.add_argument("--table", dest="tables", action="append", required=True,
                        help="a table to load (repeatable; schema.table or table)")
    parser.add_argument("--out", required=True,
                        help="output directory (Parquet, _plan.json, _manifest.json); must be "
                             "shared by the driver and every executor")
    parser.add_argument("--master", default=None,
                        help="Spark master (default local[*], or what spark-submit set)")
    parser.add_argument("--slot", default=None,
                        help="name of the persistent slot to create (default weir_bootstrap_*)")
    parser.add_argument("--publication", default="weir_bootstrap",
                        help="publication streaming the tables' changes (created when absent)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="partitions per table (default: one per --rows-per-partition "
                             "rows, at least two per core)")
    parser.add_argument("--rows-per-partition", type=int, default=50_000)
    parser.add_argument("--max-rows-per-second", type=float, default=0.0,
                        help="throttle each task to protect a busy upstream (0: off)")
    parser.add_argument("--restart", action="store_true",
                        help="discard an unfinished bootstrap in --out (and drop its slot)")


def run_args(args: argparse.Namespace) -> int:
    from cdc.bootstrap.job import BootstrapConfig, run

    upstream = args.upstream or os.environ.get("WEIR_UPSTREAM")
    if not upstream:
        print("weir bootstrap: the upstream is required: --upstream URL or WEIR_UPSTREAM",
              file=sys.stderr)
        return 2
    if args.partitions is not None and args.partitions < 1:
        print("weir bootstrap: --partitions must be at least 1", file=sys.stderr)
        return 2
    cfg = BootstrapConfig(
        upstream=upstream, tables=tuple(args.tables), out=args.out, master=args.master,
        slot=args.slot, publication=args.publication, partitions=args.partitions,
        rows_per_partition=args.rows_per_partition,
        max_rows_per_second=args.max_rows_per_second, restart=args.restart)
    try:
        result = run(cfg)
    except BootstrapError as exc:
        print(f"weir bootstrap: {exc}", file=sys.stderr)
        return 2
    for t in result["tables"]:
        print(f"{t['qualified']}: {t['rows']} rows in {len(t['partitions'])} partitions",
              file=sys.stderr)
    print(f"weir bootstrap: done; slot {result['slot']} streams changes from LSN "
          f"{result['lsn']}; manifest {os.path.join(args.out, '_manifest.json')}",
          file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="weir bootstrap", description="Bulk-load tables under one snapshot with Spark.")
    add_arguments(parser)
    return run_args(parser.parse_args(argv))
