"""The ``weir`` command line: ``weir serve``, ``weir slots``, ``weir bootstrap``, ``weir bases``.

Owns: argument parsing (every flag also as a ``WEIR_*`` environment variable), logging set-up
(JSON lines on stderr; parameter values are never logged), choosing the event loop (uvloop
when installed), and signal handling for a clean shutdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import MISSING, fields

from proxy.settings import Settings, SettingsError


class JsonFormatter(logging.Formatter):
    """One JSON object per log line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="weir", description="A transparent caching proxy for PostgreSQL."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        default = None if f.default is MISSING else f.default
        help_text = f"{f.metadata.get('help', '')} (env WEIR_{f.name.upper()}"
        help_text += f"; default {default})" if default is not None else ")"
        serve.add_argument(flag, dest=f.name, default=None, help=help_text)
    slots = sub.add_parser("slots", help="list or drop weir's persistent replication slots")
    slots.add_argument("action", choices=("list", "drop"))
    slots.add_argument("--upstream", default=None, help="upstream URL (env WEIR_UPSTREAM)")
    slots.add_argument("--prefix", default=None, help="slot name prefix (default weir_)")
    slots.add_argument("--include-active", action="store_true",
                       help="with drop: also drop slots a live session holds")
    from cdc.bootstrap.cli import add_arguments

    add_arguments(sub.add_parser("bootstrap", help="bulk-load tables with Spark"))
    from cdc.bases.cli import add_arguments as add_bases_arguments

    add_bases_arguments(sub.add_parser("bases", help="load, follow, check local bases"))
    return parser


def _slots(args: argparse.Namespace) -> int:
    import os

    from cdc import admin

    url = args.upstream or os.environ.get("WEIR_UPSTREAM")
    if not url:
        print("weir: the upstream is required: --upstream URL or WEIR_UPSTREAM", file=sys.stderr)
        return 2
    argv = [args.action, url]
    if args.prefix:
        argv += ["--prefix", args.prefix]
    if args.include_active:
        argv.append("--include-active")
    return admin.main(argv)


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def _serve(settings: Settings) -> None:
    from proxy.server import Server

    server = Server(settings)
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"weir listening on {settings.listen_address[0]}:{server.port}", file=sys.stderr, flush=True
    )
    await stop.wait()
    try:  # a stuck upstream or client must not keep weir from exiting
        await asyncio.wait_for(server.close(), 20)
    except TimeoutError:
        logging.getLogger("weir").warning("shutdown did not finish within 20 s; exiting")


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, asyncio is the fallback
        asyncio.run(coro)  # type: ignore[arg-type]
        return
    uvloop.run(coro)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "slots":
        return _slots(args)
    if args.command == "bootstrap":
        from cdc.bootstrap.cli import run_args

        return run_args(args)
    if args.command == "bases":
        from cdc.bases.cli import run_args as run_bases

        return run_bases(args)
    try:
        settings = Settings.from_sources(vars(args))
    except SettingsError as exc:
        print(f"weir: {exc}", file=sys.stderr)
        return 2
    _configure_logging(settings.log_level)
    if args.command == "serve":
        _run(_serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
