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
``--dburi`` on psycopg 3, over the statement-running modules of ``test/dialect/postgresql``
and ``test/sql`` (``SQLALCHEMY_TESTS``: the whole of both is too slow for this machine).
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import localpg  # noqa: E402

#: SQLAlchemy's modules that run: the PostgreSQL dialect's statements and types, and the
#: statement-running core of test/sql (its whole test/sql and test/dialect/postgresql take
#: over an hour per mode on the project's 2-CPU machine; most of test/sql compiles SQL only)
SQLALCHEMY_TESTS = ("test/dialect/postgresql/test_query.py",
                    "test/dialect/postgresql/test_dialect.py",
                    "test/dialect/postgresql/test_on_conflict.py",
                    "test/dialect/postgresql/test_types.py",
                    "test/sql/test_query.py", "test/sql/test_resultset.py",
                    "test/sql/test_insert_exec.py", "test/sql/test_returning.py",
                    "test/sql/test_defaults.py")
MODES = ("direct", "off", "auto")
#: per-test time limit (pytest-timeout): a hang counts as one failure, not a stuck run
TEST_TIMEOUT = 120


@dataclass(frozen=True)
class Run:
    """Where one suite run connects: host, port and database."""

    host: str
    port: int
    dbname: str
    workdir: Path


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
    return [*SQLALCHEMY_TESTS,
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
        _sqlalchemy_argv, lambda r: {}, copy_tests=False, limit=900),
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


def run_suite(suite: Suite, mode: str, src: Path, out: Path) -> dict[str, str]:
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
        run = Run("127.0.0.1", port, suite.dbname, workdir)
        if suite.copy_tests:  # with an empty pytest configuration (not weir's)
            shutil.copytree(src / "tests", workdir / "tests")
            (workdir / "pytest.ini").write_text("[pytest]\n")
        xml = workdir / "junit.xml"
        argv = [sys.executable, "-m", "pytest", *suite.argv(src, run),
                f"--junitxml={xml}", "-p", "no:cacheprovider", "--timeout", str(TEST_TIMEOUT)]
        env = {**os.environ, **suite.env(run)}
        started = time.monotonic()
        with (workdir / "pytest.log").open("wb") as log:
            try:
                subprocess.run(argv, cwd=workdir if suite.copy_tests else src, env=env,
                               stdout=log, stderr=subprocess.STDOUT, timeout=suite.limit,
                               check=False)
            except subprocess.TimeoutExpired:
                log.write(f"\n[compat] run stopped after {suite.limit} s\n".encode())
        print(f"  {suite.name:<11} {mode:<6} {time.monotonic() - started:6.0f} s",
              flush=True)
        return outcomes(xml)
    finally:
        if weir is not None:
            weir.terminate()
            try:
                weir.wait(15)
            except subprocess.TimeoutExpired:
                weir.kill()
        cluster.stop()


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
    args = parser.parse_args(argv)
    suites = [SUITES[s] for s in args.suites.split(",") if s]
    modes = [m for m in MODES if m in args.modes.split(",")]
    results: dict[str, dict[str, dict[str, str]]] = {}
    started = time.monotonic()
    for suite in suites:
        src = source_tree(suite, args.cache)
        results[suite.name] = {m: run_suite(suite, m, src, args.cache / "runs")
                               for m in modes}
    report = table(results)
    print(f"\n{report}\ntotal {time.monotonic() - started:.0f} s")
    (args.cache / "table.md").write_text(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
