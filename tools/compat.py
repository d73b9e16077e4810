"""``make compat``: the drivers' own test suites, directly and through weir (issue 19).

Owns: fetching the suites' sources — the PyPI source distributions of the driver versions
installed in this environment, with ``pip download --no-binary`` — into a cache directory
(``.compat/`` by default), running each suite three ways against a throw-away cluster
(``proxy.localpg``) — directly, through ``weir serve --caching off`` and through
``--caching auto --auto-after 1`` —, and printing the failed counts per mode side by side,
with the tests that fail through weir but pass directly listed per suite.

Every (suite, mode) gets a fresh cluster, so no run sees another's leftovers. Counts come
from each run's JUnit XML (failures plus errors). The suites run with the installed
drivers (asyncpg's and psycopg2's tests are copied out of their source trees so the
uncompiled sources there do not shadow them); SQLAlchemy runs from its source tree with
``--dburi`` on psycopg 3, over the whole of ``test/dialect/postgresql`` and the
statement-running modules of ``test/sql`` (``SQLALCHEMY_TESTS``; ``--sqlalchemy-tests``
changes it). One mode at a time can run (``--modes``), some tests only (``--select``, a
pytest ``-k`` expression), each suite several times per mode (``--repeat``: each test's pass
count is printed), and ``--report`` prints the table of the runs kept under ``--cache``. A
run whose output stops for a minute leaves ``stall-<n>.txt`` beside its log: the cluster's
sessions, locks and who blocks whom, and weir's threads (py-spy, when installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import localpg  # noqa: E402

#: SQLAlchemy's tests that run: the whole PostgreSQL backend (test/dialect/postgresql, about
#: 10,200 tests, 5-8 minutes per mode on the project's loaded 2-CPU machine) and the
#: statement-running core of test/sql (the whole of test/sql takes far longer and mostly
#: compiles SQL only); ``--sqlalchemy-tests`` narrows or widens it
SQLALCHEMY_TESTS = ("test/dialect/postgresql",
                    "test/sql/test_query.py", "test/sql/test_resultset.py",
                    "test/sql/test_insert_exec.py", "test/sql/test_returning.py",
                    "test/sql/test_defaults.py")
MODES = ("direct", "off", "auto")
#: per-test time limit (pytest-timeout): a hang counts as one failure, not a stuck run
TEST_TIMEOUT = 120
#: seconds without output after which a run's state is dumped (``stall-<n>.txt``)
STALL = 60
STALL_QUERIES = (
    "SELECT pid, application_name, state, wait_event_type, wait_event, backend_xid,"
    " now() - query_start, left(query, 200) FROM pg_stat_activity"
    " WHERE backend_type = 'client backend' ORDER BY pid",
    "SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity"
    " WHERE cardinality(pg_blocking_pids(pid)) > 0",
    "SELECT pid, locktype, relation::regclass, mode, granted FROM pg_locks"
    " WHERE locktype IN ('relation', 'transactionid') AND relation IS DISTINCT FROM"
    " 'pg_locks'::regclass ORDER BY granted, pid",
)


@dataclass(frozen=True)
class Run:
    """Where one suite run connects: host, port and database."""

    host: str
    port: int
    dbname: str
    workdir: Path
    tests: tuple[str, ...]  # the test paths to run (only SQLAlchemy's are chosen)
    cluster_dsn: str = ""  # the cluster itself (the stall dumps read it)
    weir_pid: int | None = None


@dataclass(frozen=True)
class Suite:
    """A driver's test suite: its distribution, the database it wants, how to run it."""

    name: str
    dist: str  # the PyPI name (its installed version is the one fetched)
    dbname: str
    setup_sql: str  # run on the fresh cluster's database before the suite
    argv: Callable[[Path, Run], list[str]]  # pytest arguments, given the source tree
    env: Callable[[Run], dict[str, str]]
    copy_tests: bool  # run a copy of tests/ (the source tree's package would shadow)
    limit: int  # seconds for the whole run


def _asyncpg_argv(src: Path, run: Run) -> list[str]:
    return [str(run.workdir / "tests"), "--deselect", "tests/test__sourcecode.py"]


def _psycopg2_argv(src: Path, run: Run) -> list[str]:
    return [str(run.workdir / "tests")]


def _sqlalchemy_argv(src: Path, run: Run) -> list[str]:
    return [*run.tests,
            "--dburi", f"postgresql+psycopg://postgres@{run.host}:{run.port}/{run.dbname}",
            "--maxfail", "1000000", "-p", "no:randomly", "--tb", "line", "-q"]


SUITES = {
    "asyncpg": Suite(
        "asyncpg", "asyncpg", "postgres", "", _asyncpg_argv,
        lambda r: {"PGHOST": r.host, "PGPORT": str(r.port), "PGUSER": "postgres",
                   "PGDATABASE": r.dbname},
        copy_tests=True, limit=900),
    "psycopg2": Suite(
        "psycopg2", "psycopg2-binary", "psycopg2_test", "", _psycopg2_argv,
        lambda r: {"PSYCOPG2_TESTDB": r.dbname, "PSYCOPG2_TESTDB_HOST": r.host,
                   "PSYCOPG2_TESTDB_PORT": str(r.port), "PSYCOPG2_TESTDB_USER": "postgres"},
        copy_tests=True, limit=900),
    "sqlalchemy": Suite(
        "sqlalchemy", "SQLAlchemy", "test",
        "CREATE SCHEMA test_schema; CREATE SCHEMA test_schema_2; "
        "CREATE EXTENSION hstore; CREATE EXTENSION citext;",
        _sqlalchemy_argv, lambda r: {}, copy_tests=False, limit=2400),
}


# -- sources ------------------------------------------------------------------------------


def source_tree(suite: Suite, cache: Path) -> Path:
    """The suite's source distribution, downloaded and unpacked under ``cache`` once."""
    dist = suite.dist.removesuffix("-binary")
    version = metadata.version(suite.dist)
    unpacked = cache / "src" / f"{dist.lower()}-{version}"
    if unpacked.is_dir():
        return unpacked
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    found = _sdist(sdists, dist, version)
    if found is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
             ":all:", "--no-build-isolation", "-d", str(sdists), f"{dist}=={version}"],
            check=True)
        found = _sdist(sdists, dist, version)
    if found is None:
        raise SystemExit(f"no source distribution of {dist} {version} was downloaded")
    tmp = cache / "src" / ".unpacking"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(found) as tar:
        tar.extractall(tmp, filter="data")
    (inner,) = list(tmp.iterdir())
    inner.rename(unpacked)
    tmp.rmdir()
    return unpacked


def _sdist(directory: Path, dist: str, version: str) -> Path | None:
    for path in directory.iterdir():
        if path.name.lower() == f"{dist.lower()}-{version}.tar.gz":
            return path
    return None


# -- one run --------------------------------------------------------------------------------


def start_weir(upstream: str, mode: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``weir serve`` for ``mode`` ("off" or "auto"); returns the process and its port."""
    port = localpg.free_port()
    argv = [sys.executable, "-m", "proxy.cli", "serve", "--upstream", upstream,
            "--listen", f"127.0.0.1:{port}", "--log-format", "text", "--log-level", "warning"]
    argv += ["--caching", "off"] if mode == "off" else ["--caching", "auto", "--auto-after", "1"]
    out = log.open("wb")
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"weir exited at start (see {log})")
        if b"weir listening on" in log.read_bytes():
            return proc, port
        time.sleep(0.1)  # a subprocess's log: polled, nothing to wait on
    proc.kill()
    raise SystemExit(f"weir did not start within 60 s (see {log})")


@dataclass(frozen=True)
class Scope:
    """What one invocation runs: SQLAlchemy's test paths and the per-run time limit."""

    sqlalchemy_tests: tuple[str, ...] = SQLALCHEMY_TESTS
    limit: int | None = None  # seconds per (suite, mode); None: the suite's own
    select: str | None = None  # a pytest -k expression choosing the tests that run
    repeat: int = 1  # runs of the suite per mode, on the same cluster and weir


def run_suite(suite: Suite, mode: str, src: Path, out: Path, scope: Scope) -> dict[str, str]:
    """Run ``suite`` in ``mode`` on a fresh cluster; returns {test id: outcome}."""
    cluster = localpg.start()
    weir: subprocess.Popen[bytes] | None = None
    workdir = out / f"{suite.name}-{mode}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    try:
        if suite.dbname != "postgres":
            cluster.psql(f"CREATE DATABASE {suite.dbname}")
        if suite.setup_sql:
            cluster.psql(suite.setup_sql, suite.dbname)
        port = cluster.port
        if mode != "direct":
            weir, port = start_weir(cluster.dsn(dbname=suite.dbname), mode,
                                    workdir / "weir.log")
        run = Run("127.0.0.1", port, suite.dbname, workdir, scope.sqlalchemy_tests,
                  cluster.dsn(dbname=suite.dbname), None if weir is None else weir.pid)
        if suite.copy_tests:  # with an empty pytest configuration (not weir's)
            shutil.copytree(src / "tests", workdir / "tests")
            (workdir / "pytest.ini").write_text("[pytest]\n")
        started = time.monotonic()
        runs = [_pytest(suite, src, run, scope, i) for i in range(scope.repeat)]
        # (--caching off relays weir's own commands upstream)
        figures = weir_figures(run) if mode == "auto" else ""
        (workdir / "weir-figures.txt").write_text(figures + "\n")
        print(f"  {suite.name:<11} {mode:<6} {time.monotonic() - started:6.0f} s  {figures}",
              flush=True)
        if scope.repeat > 1:
            for test, passed in sorted(pass_counts(runs).items()):
                print(f"    {test}: passed {passed} of {scope.repeat}", flush=True)
        return merged(runs)
    finally:
        if weir is not None:
            weir.terminate()
            try:
                weir.wait(15)
            except subprocess.TimeoutExpired:
                weir.kill()
        if cluster.logfile.exists():  # (a deadlock's queries are only there)
            shutil.copy(cluster.logfile, workdir / "postgres.log")
        cluster.stop()


def _pytest(suite: Suite, src: Path, run: Run, scope: Scope, index: int) -> dict[str, str]:
    """One run of ``suite``'s pytest (the ``index``-th of ``scope.repeat``); its outcomes."""
    name = "junit.xml" if index == 0 else f"junit-{index}.xml"
    xml = run.workdir / name
    argv = [sys.executable, "-m", "pytest", *suite.argv(src, run),
            f"--junitxml={xml}", "-p", "no:cacheprovider", "--timeout", str(TEST_TIMEOUT)]
    if scope.select:
        argv += ["-k", scope.select]
    env = {**os.environ, **suite.env(run)}
    limit = scope.limit or suite.limit
    with (run.workdir / name.replace("junit", "pytest").replace(".xml", ".log")).open("wb") as log:
        proc = subprocess.Popen(argv, cwd=run.workdir if suite.copy_tests else src, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        if not _watch(proc, Path(log.name), run, time.monotonic() + limit):
            proc.kill()
            proc.wait()
            log.write(f"\n[compat] run stopped after {limit} s\n".encode())
    return outcomes(xml)


def _watch(proc: subprocess.Popen[bytes], log: Path, run: Run, deadline: float) -> bool:
    """Wait for ``proc`` until ``deadline`` (False if it is still running then). Whenever
    its log has not grown for :data:`STALL` seconds, the cluster's sessions and locks (and
    weir's threads, with py-spy when installed) go to ``stall-<n>.txt`` beside it."""
    size, since, stalls = -1, time.monotonic(), 0
    while time.monotonic() < deadline:
        try:
            proc.wait(5)
            return True
        except subprocess.TimeoutExpired:
            pass
        now, grown = time.monotonic(), log.stat().st_size
        if grown != size:
            size, since = grown, now
        elif now - since >= STALL:
            stalls, since = stalls + 1, now
            (log.parent / f"stall-{stalls}.txt").write_text(_stall_dump(run))
            print(f"  no progress for {STALL} s: {log.parent}/stall-{stalls}.txt", flush=True)
    return False


def _stall_dump(run: Run) -> str:
    """pg_stat_activity, pg_locks and who blocks whom on the cluster; weir's threads."""
    out = [time.strftime("%H:%M:%S")]
    try:
        with psycopg.connect(run.cluster_dsn, autocommit=True, connect_timeout=10) as conn:
            for query in STALL_QUERIES:
                out.append(f"\n== {query}")
                out += [repr(row) for row in conn.execute(query).fetchall()]
    except psycopg.Error as exc:
        out.append(f"the cluster did not answer: {exc}")
    spy = shutil.which("py-spy")
    if run.weir_pid is not None and spy is not None:
        done = subprocess.run([spy, "dump", "--pid", str(run.weir_pid)], capture_output=True,
                              text=True, timeout=60, check=False)
        out += ["\n== py-spy dump of weir", done.stdout, done.stderr]
    return "\n".join(out) + "\n"


def pass_counts(runs: list[dict[str, str]]) -> dict[str, int]:
    """For each test that ran: in how many of ``runs`` it passed."""
    return {test: sum(r.get(test) == "passed" for r in runs)
            for test in {t for r in runs for t, o in r.items() if o != "skipped"}}


def merged(runs: list[dict[str, str]]) -> dict[str, str]:
    """One outcome per test over repeated runs: failed if it failed in any."""
    result: dict[str, str] = {}
    for run in runs:
        for test, outcome in run.items():
            if outcome == "failed" or test not in result:
                result[test] = outcome
    return result


#: the figures of ``SHOW WEIR STATUS`` a run reports (how much the caches answered)
FIGURES = ("caches", "hits", "misses", "fills", "memoized_answers")


def weir_figures(run: Run) -> str:
    """What weir did for the run, from ``SHOW WEIR STATUS`` (empty if weir does not answer)."""
    try:
        with psycopg.connect(host=run.host, port=run.port, user="postgres", dbname=run.dbname,
                             autocommit=True, connect_timeout=10) as conn:
            rows: dict[str, str] = dict(conn.execute("SHOW WEIR STATUS").fetchall())
    except psycopg.Error as exc:
        return f"(SHOW WEIR STATUS failed: {exc})"
    return ", ".join(f"{name} {rows.get(name, '')}" for name in FIGURES)


def outcomes(xml: Path) -> dict[str, str]:
    """Each test case of a JUnit XML file: "passed", "failed" or "skipped"."""
    if not xml.exists():
        return {}
    result = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            result[name] = "failed"
        elif case.find("skipped") is not None:
            result.setdefault(name, "skipped")
        else:
            result.setdefault(name, "passed")
    return result


# -- the table ------------------------------------------------------------------------------


def table(results: dict[str, dict[str, dict[str, str]]]) -> str:
    """The failed counts per suite and mode, and the tests failing only through weir."""
    lines = ["| suite | tests | direct failed | off failed | auto failed |",
             "|---|---:|---:|---:|---:|"]
    notes = []
    for name, by_mode in results.items():
        version = metadata.version(SUITES[name].dist)
        total = max((len(r) for r in by_mode.values()), default=0)
        cells = [str(sum(o == "failed" for o in by_mode[m].values())) if m in by_mode else "-"
                 for m in MODES]
        lines.append(f"| {name} {version} | {total} | " + " | ".join(cells) + " |")
        direct = by_mode.get("direct", {})
        for mode in MODES[1:]:
            only = sorted(t for t, o in by_mode.get(mode, {}).items()
                          if o == "failed" and direct.get(t) == "passed")
            if only:
                notes.append(f"{name}, {mode}: {len(only)} fail through weir only:")
                notes.extend(f"  {t}" for t in only[:40])
                if len(only) > 40:
                    notes.append(f"  ... and {len(only) - 40} more")
    return "\n".join([*lines, "", *notes])


def main(argv: list[str] | None = None) -> int:
    # a stopped run still stops its weir and its cluster (``finally`` blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=ROOT / ".compat",
                        help="where sources and run logs are kept")
    parser.add_argument("--suites", default=",".join(SUITES),
                        help=f"comma-separated, of {', '.join(SUITES)}")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--sqlalchemy-tests", default=",".join(SQLALCHEMY_TESTS),
                        help="comma-separated test paths of SQLAlchemy's source tree")
    parser.add_argument("--limit", type=int, default=None,
                        help="seconds per (suite, mode) run (default: the suite's own)")
    parser.add_argument("--select", default=None,
                        help="a pytest -k expression: only the tests it matches run")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each suite per mode on the same cluster and weir; "
                             "prints each test's pass count (with --select, say)")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: the table of the runs kept under --cache/runs "
                             "(one mode at a time runs, then one table)")
    args = parser.parse_args(argv)
    suites = [SUITES[s] for s in args.suites.split(",") if s]
    modes = [m for m in MODES if m in args.modes.split(",")]
    scope = Scope(tuple(t for t in args.sqlalchemy_tests.split(",") if t), args.limit,
                  args.select, max(1, args.repeat))
    runs = args.cache / "runs"
    results: dict[str, dict[str, dict[str, str]]] = {}
    started = time.monotonic()
    for suite in suites:
        if args.report:
            xmls = {m: runs / f"{suite.name}-{m}" / "junit.xml" for m in modes}
            results[suite.name] = {m: outcomes(x) for m, x in xmls.items() if x.exists()}
            continue
        src = source_tree(suite, args.cache)
        results[suite.name] = {m: run_suite(suite, m, src, runs, scope) for m in modes}
    report = table(results)
    print(f"\n{report}\ntotal {time.monotonic() - started:.0f} s")
    (args.cache / "table.md").write_text(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
