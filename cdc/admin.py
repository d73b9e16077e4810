"""Slot hygiene from the command line: list and drop weir's persistent replication slots.

    python -m cdc.admin list postgresql://user@host/db [--prefix weir_]
    python -m cdc.admin drop postgresql://user@host/db [--prefix weir_] [--include-active]

Owns nothing else: the work is :func:`cdc.slots.list_slots` / :func:`cdc.slots.drop_weir_slots`
(the proxy's CLI can expose the same two functions). Temporary slots are never dropped: they
vanish with their session.
"""

from __future__ import annotations

import argparse
import asyncio

from cdc import slots
from cdc.connection import ConnectParams, PgConnection
from cdc.pgoutput import format_lsn


async def _list(params: ConnectParams, prefix: str) -> list[str]:
    conn = await PgConnection.connect(params)
    try:
        found = await slots.list_slots(conn, prefix)
    finally:
        await conn.close()
    return [
        f"{s.name}\t{'temporary' if s.temporary else 'persistent'}\t"
        f"{'active' if s.active else 'inactive'}\t{s.database}\t"
        f"{format_lsn(s.confirmed_flush_lsn) if s.confirmed_flush_lsn is not None else '-'}\t"
        f"{s.wal_status or '-'}"
        for s in found
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cdc.admin", description=__doc__)
    parser.add_argument("command", choices=("list", "drop"))
    parser.add_argument("url", help="upstream URL (a role allowed to manage replication slots)")
    parser.add_argument("--prefix", default=slots.SLOT_PREFIX)
    parser.add_argument("--include-active", action="store_true")
    args = parser.parse_args(argv)
    params = ConnectParams.from_url(args.url)
    if args.command == "list":
        for line in asyncio.run(_list(params, args.prefix)):
            print(line)
    else:
        for name in asyncio.run(slots.drop_weir_slots(params, args.prefix, args.include_active)):
            print(f"dropped {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
