"""Pass-through benchmark: pgbench ``-S`` directly, through PgBouncer (session mode) and
through weir, in one invocation, same duration and client count.

Writes ``docs/benchmarks/passthrough.md`` (the table, the ratios weir/direct and
weir/PgBouncer, the CPU time the proxy process spent per transaction — user and system, from
``/proc/PID/stat`` around each run — and the command) and prints the same table. Starts a
throw-away PostgreSQL unless ``WEIR_BENCH_DSN`` names one (superuser URL).

    .venv/bin/python bench/passthrough.py [--seconds 10] [--clients 8] [--scale 10] [--floor]
        [--modes simple,extended,prepared] [--rounds 2] [--targets weir,python-relay]

``--floor`` adds a reference target, ``python-relay`` (``bench/floor_relay.py``): a uvloop
relay that only copies bytes, the floor for any Python proxy on this event loop.
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
from contextlib import ExitStack, contextmanager
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
    user_us: float | None = None  # proxy process CPU per transaction (None: direct)
    sys_us: float | None = None


def cpu_ticks(pid: int | None) -> tuple[int, int]:
    """(user, system) clock ticks used so far by process ``pid`` ((0, 0) for None)."""
    if pid is None:
        return 0, 0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def pgbench(bindir: Path, dsn: str, args: list[str]) -> str:
    proc = subprocess.run([str(bindir / "pgbench"), *args, dsn], capture_output=True, text=True,
                          env={**os.environ, "PGSSLMODE": "disable"}, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench failed against {dsn}: {proc.stderr.strip()}")
    return proc.stdout


def parse(out: str) -> tuple[float, float, int]:
    tps = re.search(r"tps = ([\d.]+)", out)
    lat = re.search(r"latency average = ([\d.]+) ms", out)
    count = re.search(r"actually processed: (\d+)", out)
    if not tps or not lat or not count:
        raise RuntimeError(f"unexpected pgbench output:\n{out}")
    return float(tps.group(1)), float(lat.group(1)), int(count.group(1))


@contextmanager
def pgbouncer(host: str, port: int, clients: int) -> Iterator[tuple[int, int]]:
    """PgBouncer in session mode in front of host:port; yields its port and process id."""
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
        yield listen, _wait_pid(workdir / "pgbouncer.pid")
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def weir(upstream: str) -> Iterator[tuple[int, int]]:
    with _listening([sys.executable, "-m", "proxy.cli", "serve", "--upstream", upstream,
                     "--listen", "127.0.0.1:{port}", "--log-level", "warning"]) as found:
        yield found


@contextmanager
def floor_relay(host: str, upstream_port: int) -> Iterator[tuple[int, int]]:
    with _listening([sys.executable, str(ROOT / "bench" / "floor_relay.py"), "{port}", host,
                     str(upstream_port)]) as found:
        yield found


@contextmanager
def _listening(argv: list[str]) -> Iterator[tuple[int, int]]:
    """Run ``argv`` (``{port}`` replaced by a free port) until it listens there; yield the
    port and the process id, and stop the process afterwards."""
    port = localpg.free_port()
    proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        yield port, proc.pid
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


def _wait_pid(pidfile: Path, timeout: float = 20.0) -> int:
    """The process id in ``pidfile``: PgBouncer may listen before it has written it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            time.sleep(0.05)
    raise RuntimeError(f"no process id in {pidfile}")


def run(seconds: int, clients: int, scale: int, modes: list[str], rounds: int,
        floor: bool = False, only: list[str] | None = None) -> list[Result]:
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
        with ExitStack() as stack:
            bport, bpid = stack.enter_context(pgbouncer(host, port, clients))
            wport, wpid = stack.enter_context(weir(upstream))
            targets: dict[str, tuple[str, int | None]] = {
                "direct": (upstream, None),
                "pgbouncer": (f"postgresql://postgres@127.0.0.1:{bport}/postgres", bpid),
                "weir": (f"postgresql://postgres@127.0.0.1:{wport}/postgres", wpid),
            }
            if floor:
                fport, fpid = stack.enter_context(floor_relay(host, port))
                targets["python-relay"] = (f"postgresql://postgres@127.0.0.1:{fport}/postgres",
                                           fpid)
            if only:
                targets = {name: target for name, target in targets.items() if name in only}
            for mode in modes:
                samples: dict[str, list[tuple[float, ...]]] = {name: [] for name in targets}
                for r in range(rounds):  # alternate the order so drift hits every target alike
                    order = list(targets) if r % 2 == 0 else list(reversed(targets))
                    for name in order:
                        samples[name].append(_run_one(bindir, *targets[name], mode, clients,
                                                      seconds))
                        tps, lat, user, system = samples[name][-1]
                        print(f"{mode:9} {name:10} tps={tps:10.1f} latency={lat:.3f} ms "
                              f"proxy cpu/tx user={user:.1f} us sys={system:.1f} us", flush=True)
                for name, values in samples.items():
                    mean = [sum(v[i] for v in values) / len(values) for i in range(4)]
                    proxy = targets[name][1] is not None
                    results.append(Result(name, mode, mean[0], mean[1],
                                          mean[2] if proxy else None, mean[3] if proxy else None))
        return results
    finally:
        if cluster is not None:
            cluster.stop()


def _run_one(bindir: Path, dsn: str, pid: int | None, mode: str, clients: int,
             seconds: int) -> tuple[float, float, float, float]:
    """One pgbench run: TPS, latency (ms), and the proxy's user and system CPU per
    transaction (us)."""
    args = ["-S", "-M", mode, "-c", str(clients), "-j", "2", "-T", str(seconds), "-n"]
    before = cpu_ticks(pid)
    tps, lat, count = parse(pgbench(bindir, dsn, args))
    after = cpu_ticks(pid)
    per_tx = 1e6 / os.sysconf("SC_CLK_TCK") / max(count, 1)
    return tps, lat, (after[0] - before[0]) * per_tx, (after[1] - before[1]) * per_tx


def report(results: list[Result], seconds: int, clients: int, scale: int, command: str) -> str:
    lines = [
        "# Pass-through benchmark (uncached queries)",
        "",
        f"pgbench `-S` (select-only), {clients} clients, 2 threads, {seconds} s per run, "
        f"scale {scale}; direct PostgreSQL, PgBouncer (session mode) and weir (and, where "
        "listed, python-relay: a uvloop relay that only copies bytes, the floor for a Python "
        "proxy), one after the other in one invocation on the same machine, in alternating "
        "order over several rounds (figures are the means) "
        f"({platform.machine()}, {os.cpu_count()} cores; client, proxy and server share them).",
        "",
        f"Command: `{command}`",
        "",
        "Proxy CPU: user and system CPU time of the proxy process per transaction "
        "(microseconds; pgbench's connection setup included).",
        "",
        "| mode | target | TPS | avg latency (ms) | proxy CPU user/sys (us/tx) | / direct "
        "| / PgBouncer |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    by = {(r.mode, r.target): r for r in results}
    for r in results:
        ratio_d = ratio_b = ""
        direct, bouncer = by.get((r.mode, "direct")), by.get((r.mode, "pgbouncer"))
        if r.target in ("weir", "python-relay"):
            ratio_d = f"{r.tps / direct.tps:.2f}" if direct else ""
            ratio_b = f"{r.tps / bouncer.tps:.2f}" if bouncer else ""
        cpu = "" if r.user_us is None else f"{r.user_us:.1f} / {r.sys_us:.1f}"
        lines.append(f"| {r.mode} | {r.target} | {r.tps:.0f} | {r.latency_ms:.3f} | {cpu} | "
                     f"{ratio_d} | {ratio_b} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--modes", default="simple,extended,prepared")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--floor", action="store_true",
                        help="also measure python-relay (bench/floor_relay.py)")
    parser.add_argument("--targets", default="",
                        help="comma-separated subset of direct,pgbouncer,weir,python-relay "
                             "(default: all)")
    parser.add_argument("--output", default=str(ROOT / "docs" / "benchmarks" / "passthrough.md"))
    args = parser.parse_args()
    modes = args.modes.split(",")
    only = [t for t in args.targets.split(",") if t] or None
    results = run(args.seconds, args.clients, args.scale, modes, args.rounds, args.floor, only)
    command = ("python bench/passthrough.py " + " ".join(sys.argv[1:])).strip()
    text = report(results, args.seconds, args.clients, args.scale, command)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
