"""``weir bases load|follow|checksum``: the local bases' command line.

Owns argument parsing and the follower's run loop (reconnect with backoff, stop on SIGINT or
SIGTERM); errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from cdc.bootstrap.errors import BootstrapError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("load", "follow", "checksum"))
    parser.add_argument("--store", required=True, help="LMDB directory of the local bases")
    parser.add_argument("--manifest", default=None, help="with load: a bootstrap's --out")
    parser.add_argument("--upstream", default=None, help="with follow: upstream URL "
                                                          "(env WEIR_UPSTREAM)")


async def _follow(store_path: str, url: str) -> None:
    from cdc.bases.store import BaseStore

    store = BaseStore.open(store_path)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"weir bases: following from {store.durable_lsn:X}", file=sys.stderr, flush=True)
    try:
        await _follow_loop(store, url, stop)
    finally:
        store.close()


async def _follow_loop(store: Any, url: str, stop: asyncio.Event) -> None:
    from cdc.bases.follow import BasesLost, follow
    from cdc.connection import ConnectParams

    delay = 0.1
    while not stop.is_set():
        task = asyncio.create_task(follow(store, ConnectParams.from_url(url)))
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            break
        stopper.cancel()
        exc = task.exception()
        if isinstance(exc, BasesLost):
            raise exc
        logging.getLogger("weir.bases").warning("stream ended: %s; reconnecting", exc)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


def run_args(args: argparse.Namespace) -> int:
    from cdc.bases.store import BaseStore

    try:
        if args.action == "load":
            if not args.manifest:
                raise BootstrapError("load needs --manifest DIR (a finished bootstrap)")
            store = BaseStore.create(args.store, args.manifest)
            counts = {k: v[0] for k, v in store.checksums().items()}
            print(f"weir bases: loaded {counts}", file=sys.stderr)
            store.close()
        elif args.action == "checksum":
            store = BaseStore.open(args.store)
            print(json.dumps({"lsn": store.durable_lsn, "tables": store.checksums()}))
            store.close()
        else:
            url = args.upstream or os.environ.get("WEIR_UPSTREAM")
            if not url:
                raise BootstrapError("follow needs --upstream URL or WEIR_UPSTREAM")
            asyncio.run(_follow(args.store, url))
    except BootstrapError as exc:
        print(f"weir bases: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="weir bases", description="Local replica bases.")
    add_arguments(parser)
    return run_args(parser.parse_args(argv))
