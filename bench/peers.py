"""The peers ``make bench`` compares weir with, each started in front of one PostgreSQL.

Owns: starting and stopping PgBouncer (session mode, from bench/passthrough.py), pgpool-II
(raw mode, one backend, with or without its in-memory query cache) and weir (with or without
the news site's caches), each as a context manager yielding a client URL and the process id;
reading pgpool-II's cache statistics; and the reason a peer cannot run (``PeerUnavailable``),
which the report prints instead of dropping the peer.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.passthrough import _wait_port, pgbouncer  # noqa: E402
from demo import dataset  # noqa: E402
from demo.procs import Weir  # noqa: E402
from proxy import localpg  # noqa: E402


class PeerUnavailable(RuntimeError):
    """A peer cannot run here; the message says why."""


def url(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"


@contextmanager
def bouncer(cluster: localpg.LocalCluster, clients: int) -> Iterator[tuple[str, int | None]]:
    if not (shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists()):
        raise PeerUnavailable("pgbouncer is not installed (make install installs it)")
    with contextlib.ExitStack() as stack:
        try:
            port, pid = stack.enter_context(pgbouncer("127.0.0.1", cluster.port, clients))
        except RuntimeError as exc:
            raise PeerUnavailable(f"PgBouncer did not start: {exc}") from None
        yield url(port), pid


PGPOOL_CONF = """\
listen_addresses = '127.0.0.1'
port = {port}
socket_dir = '{work}'
pcp_listen_addresses = ''
pcp_port = {pcp_port}
pcp_socket_dir = '{work}'
wd_ipc_socket_dir = '{work}'
backend_clustering_mode = 'raw'
backend_hostname0 = '127.0.0.1'
backend_port0 = {backend_port}
backend_weight0 = 1
backend_flag0 = 'DISALLOW_TO_FAILOVER'
enable_pool_hba = off
pool_passwd = ''
num_init_children = {children}
max_pool = 1
connection_cache = on
load_balance_mode = off
health_check_period = 0
sr_check_period = 0
failover_on_backend_error = off
log_destination = 'stderr'
logdir = '{work}'
pid_file_name = '{work}/pgpool.pid'
memory_cache_enabled = {cache}
memqcache_method = 'shmem'
memqcache_total_size = 64MB
memqcache_max_num_cache = 200000
memqcache_expire = 0
memqcache_auto_cache_invalidation = on
memqcache_maxcache = 400kB
memqcache_cache_block_size = 1MB
memqcache_oiddir = '{work}/oiddir'
"""


@contextmanager
def pgpool(cluster: localpg.LocalCluster, clients: int, cache: bool
           ) -> Iterator[tuple[str, int | None]]:
    """pgpool-II in raw mode in front of the cluster; ``cache``: its in-memory query cache
    (shared memory, no expiry, invalidated per table by writes that pass through it)."""
    exe = shutil.which("pgpool") or "/usr/sbin/pgpool"
    if not Path(exe).exists():
        raise PeerUnavailable("pgpool-II is not installed (Debian package pgpool2; "
                              "make install installs it)")
    work = Path(tempfile.mkdtemp(prefix="weir-pgpool-"))
    port = localpg.free_port()
    conf = work / "pgpool.conf"
    conf.write_text(PGPOOL_CONF.format(
        port=port, pcp_port=localpg.free_port(), work=work, backend_port=cluster.port,
        children=clients + 4, cache="on" if cache else "off"))
    (work / "pcp.conf").write_text("")
    (work / "oiddir").mkdir()
    argv = [exe, "-n", "-f", str(conf), "-F", str(work / "pcp.conf")]
    if os.geteuid() == 0:  # run as the cluster's owner, like PostgreSQL itself
        pw = pwd.getpwnam("postgres")
        for path in (work, work / "oiddir", conf, work / "pcp.conf"):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        argv = ["runuser", "-u", "postgres", "--", *argv]
    log = open(work / "stderr.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            _wait_port(port, 20)
        except RuntimeError:
            tail = (work / "stderr.log").read_text()[-800:]
            raise PeerUnavailable(f"pgpool-II did not start: {tail.strip()}") from None
        yield url(port), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(5)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def pgpool_cache_stats(dsn: str) -> dict[str, str]:
    """``SHOW POOL_CACHE`` (hits, selects, hit ratio, ...), or {} when it fails."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute("SHOW POOL_CACHE")
            names = [d.name for d in cur.description or ()]
            row = cur.fetchone()
            return dict(zip(names, map(str, row), strict=True)) if row else {}
    except psycopg.Error:
        return {}


@contextmanager
def weir(cluster: localpg.LocalCluster, cached: bool, *extra: str
         ) -> Iterator[tuple[str, Weir]]:
    """weir in front of the cluster (``extra``: more flags); ``cached``: with the news site's
    caches (empty)."""
    try:
        started = Weir(cluster.dsn(), *extra)
    except RuntimeError as exc:
        raise PeerUnavailable(str(exc)[:800]) from None
    with started as proc:
        if cached:
            with psycopg.connect(proc.dsn(), autocommit=True) as conn:
                dataset.create_caches(conn)
        yield proc.dsn(), proc
