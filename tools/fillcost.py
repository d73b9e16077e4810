"""What fills cost upstream and how long they take on an idle machine (issue 18, item 4).

Starts a throw-away cluster (``proxy.localpg``) and an in-process weir (``--misses upstream``,
``--admission always``, no lanes), caches ``SELECT v FROM kv WHERE k = $1`` and misses
``--fills`` distinct keys one after the other, each read once its predecessor's fill was
installed (so every fill runs alone, on an otherwise idle weir). Prints the transaction IDs
and WAL bytes used upstream over the run, the barriers weir itself emitted meanwhile (its
heartbeat, 2 a second, and any fill fallback: each one a transaction), and the fill figures
of ``SHOW WEIR STATUS`` (``fill_ms_p50`` and the phases). Usage::

    .venv/bin/python -m tools.fillcost --fills 500
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg

from proxy import localpg
from tests.support import InProcessWeir


def _upstream(cluster: Any) -> tuple[int, int]:
    """(the next transaction ID, the WAL insert position), neither using an ID nor WAL."""
    row = cluster.psql("SELECT pg_snapshot_xmax(pg_current_snapshot()), "
                       "pg_current_wal_insert_lsn() - '0/0'").strip().split("|")
    return int(row[0]), int(row[1])


async def _installed(host: Any, k: int) -> bool:
    return host.engine.lookup("kv1", (k,)) is not None


async def _miss(host: Any, k: int) -> Any:
    return host.read_or_fill("kv1", (k,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fills", type=int, default=500)
    args = parser.parse_args()
    with localpg.running() as cluster:
        cluster.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
                     "INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, 100000) g")
        cluster.psql("VACUUM ANALYZE kv")
        server = InProcessWeir.start(cluster.dsn(), misses="upstream", admission="always",
                                     hit_lanes=0)
        try:
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host
            barriers = host.stream.barriers
            before, sent_before = _upstream(cluster), barriers.sent
            started = time.monotonic()
            for k in range(1, args.fills + 1):
                assert server.call(_miss(host, k)) is None
                while not server.call(_installed(host, k)):
                    time.sleep(0.0002)
            took = time.monotonic() - started
            after, sent = _upstream(cluster), barriers.sent - sent_before
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                status: dict[str, str] = dict(conn.execute("SHOW WEIR STATUS").fetchall())
        finally:
            server.stop()
    print(f"{args.fills} fills in {took:.2f} s: {after[0] - before[0]} transaction IDs, "
          f"{after[1] - before[1]} bytes of WAL; weir emitted {sent} barriers meanwhile")
    for name in ("fill_transactions", "fill_ms_p50", "fill_ms_avg", "fill_queue_ms_avg",
                 "fill_fetch_ms_avg", "fill_position_wait_ms_avg", "fill_install_ms_avg",
                 "fill_barriers", "fill_positions_unflushed"):
        print(f"  {name} = {status.get(name, '-')}")


if __name__ == "__main__":
    main()
