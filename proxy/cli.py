"""The ``weir`` command line: ``weir serve``, ``weir config show``, ``weir slots``,
``weir bootstrap``, ``weir bases``.

Owns: argument parsing (every flag also as a ``WEIR_*`` environment variable and a key of the
``--config`` TOML file, see ``proxy.config``), logging set-up (JSON lines or text on stderr;
parameter values are never logged), choosing the event loop (uvloop when installed), the
metrics and health endpoint's lifetime, and signals: SIGTERM drains (``Server.drain``),
SIGINT too.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import MISSING, fields

from proxy import logparams
from proxy.config import CONFIG_ENV, load_file, resolve, show
from proxy.health import MetricsEndpoint
from proxy.server import Server
from proxy.settings import Settings, SettingsError

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
    _setting_flags(sub.add_parser("serve", help="run the proxy"))
    config = sub.add_parser("config", help="show the effective configuration (secrets masked)")
    config.add_argument("action", choices=("show",))
    _setting_flags(config)
    slots = sub.add_parser("slots", help="list or drop weir's persistent replication slots")
    slots.add_argument("action", choices=("list", "drop"))
    slots.add_argument("--upstream", default=None, help="upstream URL (env WEIR_UPSTREAM)")
    slots.add_argument("--prefix", default=None, help="slot name prefix (default weir_)")
    slots.add_argument("--include-active", action="store_true",
                       help="with drop: also drop slots a live session holds")
    from cdc import bases_cli, bootstrap_cli

    bootstrap_cli.add_arguments(sub.add_parser("bootstrap", help="bulk-load tables with Spark"))
    bases_cli.add_arguments(sub.add_parser("bases", help="load, follow, check local bases"))
    return parser


def _setting_flags(parser: argparse.ArgumentParser) -> None:
    """``--config`` and one flag per setting (None when not given: see ``proxy.config``)."""
    parser.add_argument("--config", default=None, metavar="FILE",
                        help=f"TOML file of settings (keys as the flags without --, "
                             f"e.g. hit_lanes = 2; env {CONFIG_ENV}); flags and WEIR_* "
                             f"variables override it")
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        default = None if f.default is MISSING else f.default
        help_text = f"{f.metadata.get('help', '')} (env WEIR_{f.name.upper()}"
        help_text += f"; default {default})" if default is not None else ")"
        parser.add_argument(flag, dest=f.name, default=None, help=help_text)


def _slots(args: argparse.Namespace) -> int:
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


def _configure_logging(level: str, fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def _serve(settings: Settings) -> None:
    server = Server(settings)
    await server.start()
    endpoint = None
    if settings.metrics_listen is not None:
        endpoint = MetricsEndpoint(server)
        await endpoint.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"weir listening on {settings.listen_address[0]}:{server.port}", file=sys.stderr, flush=True
    )
    await stop.wait()
    log = logging.getLogger("weir")
    log.info("draining: no new clients; sessions have %.0f s to finish their transaction "
             "(a second SIGTERM or SIGINT ends them now)", settings.drain_seconds)
    again = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, again.set)
    drain = asyncio.ensure_future(server.drain(settings.drain_seconds))
    hurry = asyncio.ensure_future(again.wait())
    await asyncio.wait((drain, hurry), return_when=asyncio.FIRST_COMPLETED)
    for task in (drain, hurry):
        task.cancel()
    await asyncio.gather(drain, hurry, return_exceptions=True)
    try:  # a stuck upstream or client must not keep weir from exiting
        await asyncio.wait_for(server.close(), 20)
    except TimeoutError:
        log.warning("shutdown did not finish within 20 s; exiting")
    if endpoint is not None:
        await endpoint.close()


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
        from cdc import bootstrap_cli

        return bootstrap_cli.run_args(args)
    if args.command == "bases":
        from cdc import bases_cli

        return bases_cli.run_args(args)
    try:
        path = args.config or os.environ.get(CONFIG_ENV) or None
        settings, sources = resolve(vars(args), os.environ, load_file(path) if path else {})
    except SettingsError as exc:
        print(f"weir: {exc}", file=sys.stderr)
        return 2
    if args.command == "config":
        print(show(settings, sources), end="")
        return 0
    _configure_logging(settings.log_level, settings.log_format)
    logparams.configure(settings.log_parameters == "on")
    # what is loaded by now (modules, sqlglot's tables: ~94,000 tracked objects) lives as
    # long as the process: out of the collector's full collections, which otherwise walk it
    # each time (about 50 ms each on the event loop during the demo's cold run)
    gc.collect()
    gc.freeze()
    _run(_serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
