"""A throw-away local PostgreSQL cluster: the embedded default of ``make demo``, the tests and
the benchmarks.

Owns: finding the server binaries (``WEIR_PG_BINDIR`` or Debian's
``/usr/lib/postgresql/<major>/bin``), ``initdb`` into a temporary directory (as the
``postgres`` user when we are root, because initdb refuses root), a configuration fit for
weir (``wal_level=logical``, replication slots and senders, TLS with a self-signed
certificate, loopback only on a free port), the authentication rules the tests rely on, and
tearing it all down. Nothing here is used by ``weir serve`` against a real upstream.

Authentication rules (``pg_hba.conf``): members of ``weir_scram`` authenticate with
SCRAM-SHA-256 and members of ``weir_md5`` with md5 over TCP; everyone else is trusted.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SERVER_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "logical",
    "max_wal_senders": "20",
    "max_replication_slots": "20",
    "max_connections": "300",
    "fsync": "off",
    "full_page_writes": "off",
    "shared_buffers": "128MB",
    "logging_collector": "off",
    "log_min_messages": "warning",
    "password_encryption": "'scram-sha-256'",
}

HBA = """\
local all all trust
local replication all trust
host all +weir_scram 127.0.0.1/32 scram-sha-256
host all +weir_md5 127.0.0.1/32 md5
host all all 127.0.0.1/32 trust
host replication +weir_scram 127.0.0.1/32 scram-sha-256
host replication all 127.0.0.1/32 trust
"""


class LocalPgError(RuntimeError):
    """The local cluster could not be created or started (the message says why)."""


def find_bindir() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``."""
    env = os.environ.get("WEIR_PG_BINDIR")
    if env:
        return Path(env)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    if candidates:
        return Path(candidates[-1])
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise LocalPgError(
        "no PostgreSQL server binaries found: install Debian's postgresql package "
        "(`make install` does) or set WEIR_PG_BINDIR"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run_as_owner(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "postgres", "--", *argv]
    return subprocess.run(argv, check=False, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


@dataclass
class LocalCluster:
    """A running throw-away cluster. Use as a context manager or call :meth:`stop`."""

    root: Path
    port: int
    bindir: Path
    superuser: str = "postgres"
    _stopped: bool = field(default=False, repr=False)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    @property
    def logfile(self) -> Path:
        return self.root / "postgres.log"

    def dsn(
        self,
        user: str | None = None,
        dbname: str = "postgres",
        password: str | None = None,
        **params: str,
    ) -> str:
        """A libpq URL for this cluster over TCP."""
        auth = user or self.superuser
        if password is not None:
            auth += f":{password}"
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return f"postgresql://{auth}@{self.host}:{self.port}/{dbname}?sslmode=disable{extra}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL as the superuser over the Unix socket; return stdout (raises on error)."""
        proc = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                self.superuser,
                "-d",
                dbname,
                "-c",
                sql,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise LocalPgError(f"psql failed: {proc.stderr.strip()}")
        return proc.stdout

    def stop(self) -> None:
        """Stop the server (immediately) and remove its directory."""
        if self._stopped:
            return
        self._stopped = True
        _run_as_owner(
            [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"]
        )
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """Restart the server in place (same port and data): for fault tests."""
        proc = _run_as_owner(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-m",
                "fast",
                "-w",
                "-l",
                str(self.logfile),
                "restart",
            ]
        )
        if proc.returncode != 0:
            raise LocalPgError(f"pg_ctl restart failed: {proc.stderr.strip()}\n{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.logfile.read_text().splitlines()[-20:])
        except OSError:
            return ""

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _make_certificate(directory: Path) -> None:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "3",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(directory / "server.key"),
            "-out",
            str(directory / "server.crt"),
        ],
        check=True,
        capture_output=True,
    )
    os.chmod(directory / "server.key", 0o600)


def start(
    settings: dict[str, str] | None = None, tls: bool = True, attempts: int = 3
) -> LocalCluster:
    """initdb and start a cluster in a new temporary directory; raise LocalPgError on failure.
    Interrupted (Ctrl-C) or failing part-way, it stops what it started and removes the
    directory before the exception goes on."""
    bindir = find_bindir()
    root = Path(tempfile.mkdtemp(prefix="weir-pg-"))
    try:
        return _start_in(root, bindir, settings, tls, attempts)
    except BaseException:
        if (root / "data" / "postmaster.pid").exists():
            _run_as_owner([str(bindir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate",
                           "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
        raise


def _start_in(
    root: Path, bindir: Path, settings: dict[str, str] | None, tls: bool, attempts: int
) -> LocalCluster:
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
    datadir = root / "data"
    proc = _run_as_owner(
        [
            str(bindir / "initdb"),
            "-D",
            str(datadir),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]
    )
    if proc.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise LocalPgError(f"initdb failed: {proc.stderr.strip()}")
    conf = dict(SERVER_SETTINGS)
    conf["unix_socket_directories"] = f"'{root}'"
    if tls:
        _make_certificate(datadir)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for name in ("server.key", "server.crt"):
                os.chown(datadir / name, pw.pw_uid, pw.pw_gid)
        conf["ssl"] = "on"
    conf.update(settings or {})
    (datadir / "pg_hba.conf").write_text(HBA)
    last_error = ""
    for _ in range(attempts):
        port = free_port()
        body = "".join(f"{k} = {v}\n" for k, v in {**conf, "port": str(port)}.items())
        (datadir / "postgresql.auto.conf").write_text(body)
        cluster = LocalCluster(root=root, port=port, bindir=bindir)
        proc = _run_as_owner(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(datadir),
                "-w",
                "-t",
                "60",
                "-l",
                str(cluster.logfile),
                "start",
            ]
        )
        if proc.returncode == 0 and _accepts(cluster):
            cluster.psql("CREATE ROLE weir_scram NOLOGIN; CREATE ROLE weir_md5 NOLOGIN;")
            return cluster
        last_error = proc.stderr.strip() + "\n" + cluster._log_tail()
        _run_as_owner([str(bindir / "pg_ctl"), "-D", str(datadir), "-m", "immediate", "stop"])
    shutil.rmtree(root, ignore_errors=True)
    raise LocalPgError(f"could not start PostgreSQL: {last_error}")


def _accepts(cluster: LocalCluster, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection((cluster.host, cluster.port), 1),
        ):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def running(settings: dict[str, str] | None = None) -> Iterator[LocalCluster]:
    """Context manager form of :func:`start`."""
    cluster = start(settings)
    try:
        yield cluster
    finally:
        cluster.stop()
