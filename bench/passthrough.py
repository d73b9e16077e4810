"""Pass-through benchmark: pgbench ``-S`` directly, through PgBouncer (session mode) and
through weir, in one invocation, same duration and client count.

Writes ``docs/benchmarks/passthrough.md`` (the table, the ratios weir/direct and
weir/PgBouncer, and the command) and prints the same table. Starts a throw-away PostgreSQL
unless ``WEIR_BENCH_DSN`` names one (superuser URL).

    .venv/bin/python bench/passthrough.py [--seconds 10] [--clients 8] [--scale 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import localpg  # noqa: E402


@dataclass(frozen=True)
class Result:
    target: str
    mode: str
    tps: float
    latency_ms: float


def pgbench(bindir: Path, dsn: str, args: list[str]) -> str:
    proc = subprocess.run([str(bindir / "pgbench"), *args, dsn], capture_output=True, text=True,
                          env={**os.environ, "PGSSLMODE": "disable"}, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed against {dsn}: {proc.stderr.strip()}")
    return proc.stdout


def parse(out: str) -> tuple[float, float]:
    tps = re.search(r"tps = ([\d.]+)", out)
    lat = re.search(r"latency average = ([\d.]+) ms", out)
    if not tps or not lat:
        raise RuntimeError(f"unexpected pgbench output:\n{out}")
    return float(tps.group(1)), float(lat.group(1))


@contextmanager
def pgbouncer(host: str, port: int, clients: int) -> Iterator[int]:
    """PgBouncer in session mode in front of host:port; yields its port."""
    exe = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    workdir = Path(tempfile.mkdtemp(prefix="weir-bouncer-"))
    listen = localpg.free_port()
    (workdir / "userlist.txt").write_text('"postgres" ""\n')
    (workdir / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\n"
        f"unix_socket_dir = {workdir}\n"
        "auth_type = trust\n"
        f"auth_file = {workdir}/userlist.txt\n"
        "pool_mode = session\n"
        f"max_client_conn = {clients * 4}\ndefault_pool_size = {clients * 2}\n"
        f"logfile = {workdir}/pgbouncer.log\npidfile = {workdir}/pgbouncer.pid\n"
        "ignore_startup_parameters = extra_float_digits\n"
    )
    argv = [exe, str(workdir / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        pw = pwd.getpwnam("postgres")
        os.chown(workdir, pw.pw_uid, pw.pw_gid)
        for f in workdir.iterdir():
            os.chown(f, pw.pw_uid, pw.pw_gid)
        argv = ["runuser", "-u", "postgres", "--", *argv]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_port(listen)
        yield listen
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def weir(upstream: str) -> Iterator[int]:
    port = localpg.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--upstream", upstream,
         "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _wait_port(port: int, timeout: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def run(seconds: int, clients: int, scale: int, modes: list[str], rounds: int) -> list[Result]:
    external = os.environ.get("WEIR_BENCH_DSN")
    cluster = None if external else localpg.start(tls=False)
    try:
        upstream = external or cluster.dsn()  # type: ignore[union-attr]
        bindir = localpg.find_bindir()
        from urllib.parse import urlsplit

        parts = urlsplit(upstream)
        host, port = parts.hostname or "127.0.0.1", parts.port or 5432
        pgbench(bindir, upstream, ["-i", "-q", "-s", str(scale)])
        results: list[Result] = []
        with pgbouncer(host, port, clients) as bport, weir(upstream) as wport:
            targets = {
                "direct": upstream,
                "pgbouncer": f"postgresql://postgres@127.0.0.1:{bport}/postgres",
                "weir": f"postgresql://postgres@127.0.0.1:{wport}/postgres",
            }
            for mode in modes:
                samples: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
                for r in range(rounds):  # alternate the order so drift hits every target alike
                    order = list(targets) if r % 2 == 0 else list(reversed(targets))
                    for name in order:
                        args = ["-S", "-M", mode, "-c", str(clients), "-j", "2", "-T",
                                str(seconds), "-n"]
                        tps, lat = parse(pgbench(bindir, targets[name], args))
                        samples[name].append((tps, lat))
                        print(f"{mode:9} {name:10} tps={tps:10.1f} latency={lat:.3f} ms",
                              flush=True)
                for name, values in samples.items():
                    results.append(Result(name, mode, sum(v[0] for v in values) / len(values),
                                          sum(v[1] for v in values) / len(values)))
        return results
    finally:
        if cluster is not None:
            cluster.stop()


def report(results: list[Result], seconds: int, clients: int, scale: int, command: str) -> str:
    lines = [
        "# Pass-through benchmark (uncached queries)",
        "",
        f"pgbench `-S` (select-only), {clients} clients, 2 threads, {seconds} s per run, "
        f"scale {scale}; direct PostgreSQL, PgBouncer (session mode) and weir, one after the "
        "other in one invocation on the same machine, in alternating order over several "
        "rounds (figures are the means) "
        f"({platform.machine()}, {os.cpu_count()} cores; client, proxy and server share them).",
        "",
        f"Command: `{command}`",
        "",
        "| mode | target | TPS | avg latency (ms) | weir / direct | weir / PgBouncer |",
        "|---|---|---:|---:|---:|---:|",
    ]
    by = {(r.mode, r.target): r for r in results}
    for r in results:
        ratio_d = ratio_b = ""
        if r.target == "weir":
            ratio_d = f"{r.tps / by[(r.mode, 'direct')].tps:.2f}"
            ratio_b = f"{r.tps / by[(r.mode, 'pgbouncer')].tps:.2f}"
        lines.append(f"| {r.mode} | {r.target} | {r.tps:.0f} | {r.latency_ms:.3f} | {ratio_d} | "
                     f"{ratio_b} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--modes", default="simple,extended,prepared")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "passthrough.md"))
    args = parser.parse_args()
    modes = args.modes.split(",")
    results = run(args.seconds, args.clients, args.scale, modes, args.rounds)
    command = ("python bench/passthrough.py " + " ".join(sys.argv[1:])).strip()
    text = report(results, args.seconds, args.clients, args.scale, command)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
