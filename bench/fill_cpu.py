"""Event-loop CPU of a miss's fill, counted (issue 18): the cold point lookup's per-fill Python.

What one fill of ``SELECT id, author, title FROM stories WHERE id = $1`` costs the event loop
besides the upstream round trip, in the steps ``proxy.fillrun`` runs for a batch: the miss that
starts it (``Engine.lookup`` missing, ``Engine.read`` issuing the ``RunFill``), the fetched text
rows decoded (``proxy.fillsql.decode_rows``, as ``fetch_all`` does for asyncpg's records), and
the install (``Engine.fill_response`` then ``Engine.position_reached``, with a memory
budget), startup's objects frozen out of the collector as ``weir serve`` freezes them
(``proxy.cli``): the collections the fills cause are part of the cost. ``--fills`` distinct keys, in
batches of ``--batch`` (the cold benchmark's batches hold about three fills), each phase
timed with ``time.process_time`` (CPU of this process: other load on the machine does not
move it much), the best of ``--rounds``.

A/B in one invocation: ``--tree DIR`` runs the same measurement in another source tree (an
old build's worktree, its own ``.venv/bin/python``) and this one, alternating, ``--rounds``
times each, and prints both::

    WEIR_IMPL=cython .venv/bin/python bench/fill_cpu.py --tree /tmp/fillcpu-base
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: run inside the measured tree (``sys.path[0]`` is that tree): prints one JSON line
_CHILD = r"""
import gc, json, sys, time
from engine.api import Engine
from engine.changes import Snapshot
from engine.dataflow.fills import RunFill
from engine.plan.queries import QueryPlanner
from engine.sql.catalog import Catalog, Column, Relation
from engine.values import oids as T
from proxy import fillsql

fills, batch = int(sys.argv[1]), int(sys.argv[2])
gc.collect()
gc.freeze()  # (as ``weir serve`` does before it serves)
STORIES = Relation(16400, "public", "stories", (
    Column("id", T.INT4, not_null=True), Column("author", T.INT4),
    Column("title", T.TEXT)), ("id",))
plan = QueryPlanner(Catalog((STORIES,))).classify(
    "SELECT id, author, title FROM stories WHERE id = $1").query.plan
engine = Engine(memory_budget=1 << 30)
engine.add_cache("c", plan.reader)
snap = Snapshot(10, 10)
decode = getattr(fillsql, "decode_rows", None) or fillsql._decode
miss = decode_t = install = 0.0
for start in range(1, fills + 1, batch):
    keys = range(start, min(fills + 1, start + batch))
    t0 = time.process_time()
    runs = []
    for k in keys:
        if engine.lookup("c", (k,)) is None:
            runs.extend(e for e in engine.read("c", (k,)).effects if isinstance(e, RunFill))
    t1 = time.process_time()
    records = [[(str(r.key[0]), str(r.key[0] % 997), f"story {r.key[0]}")]
               for run in runs for r in run.requests]
    t2 = time.process_time()
    rows = [decode(run.requests[0].table.columns, rec) for run, rec in zip(runs, records)]
    t3 = time.process_time()
    for run, r in zip(runs, rows):
        engine.fill_response(run.fill_id, snap, [r])
    for run in runs:
        engine.position_reached(run.fill_id)
    t4 = time.process_time()
    miss += t1 - t0
    decode_t += t3 - t2
    install += t4 - t3
assert engine.lookup("c", (fills,)) is not None
print(json.dumps({"miss_us": miss * 1e6 / fills, "decode_us": decode_t * 1e6 / fills,
                  "install_us": install * 1e6 / fills}))
"""


def measure(tree: Path, fills: int, batch: int) -> dict[str, float]:
    python = tree / ".venv" / "bin" / "python"
    out = subprocess.run(
        [str(python if python.exists() else sys.executable), "-c", _CHILD, str(fills),
         str(batch)], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fills", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", default="", metavar="DIR",
                        help="an old source tree to measure too, alternating with this one")
    args = parser.parse_args(argv)
    trees = ([("old", Path(args.tree))] if args.tree else []) + [("new", ROOT)]
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.rounds):
        for label, tree in trees:
            got = measure(tree, args.fills, args.batch)
            mine = best.setdefault(label, got)
            for k, v in got.items():
                mine[k] = min(mine[k], v)
    print(f"{args.fills} fills in batches of {args.batch}, best of {args.rounds} "
          f"(WEIR_IMPL={os.environ.get('WEIR_IMPL', 'default')}); CPU µs per fill:")
    print("| tree | miss (lookup + read) | decode rows | install | total |")
    print("|---|---:|---:|---:|---:|")
    for label, r in best.items():
        total = r["miss_us"] + r["decode_us"] + r["install_us"]
        print(f"| {label} | {r['miss_us']:.1f} | {r['decode_us']:.1f} | "
              f"{r['install_us']:.1f} | {total:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
