"""The driver of ``weir bootstrap``: plan or resume, hold the snapshot, run the Spark job,
show progress, write the manifest.

Owns the run's order, which is what makes it safe to kill at any point:
1. check every input against the upstream (before Spark starts, so bad input fails fast);
2. first run: create the publication and the persistent slot (exporting its snapshot), plan
   the partitions inside that snapshot and write ``_plan.json``; a rerun instead reloads the
   plan, checks the slot still exists and has not moved, and exports a fresh snapshot;
3. run one Spark task per partition not yet read (``mapPartitions`` on executors, psycopg,
   ``SET TRANSACTION SNAPSHOT``; see :mod:`cdc.bootstrap.reader`) while printing progress;
4. close the snapshot's connection and write ``_manifest.json`` last, atomically.
Why the result is one consistent state after any number of resumes: docs/bootstrap.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cdc.bootstrap import catalog, manifest, snapshot
from cdc.bootstrap.errors import BootstrapError, explain
from cdc.bootstrap.plan import Plan, table_to_json
from cdc.bootstrap.progress import Progress, render
from cdc.bootstrap.reader import read_partition


@dataclass(frozen=True, slots=True)
class BootstrapConfig:
    upstream: str
    tables: tuple[str, ...]
    out: str
    master: str | None = None  # None: local[*], or the master spark-submit chose
    slot: str | None = None  # None: weir_bootstrap_<random>
    publication: str = "weir_bootstrap"
    partitions: int | None = None  # per table; None: from rows_per_partition
    rows_per_partition: int = 50_000
    max_rows_per_second: float = 0.0  # per task; 0: unthrottled
    restart: bool = False  # drop an unfinished bootstrap in ``out`` (and its slot) first
    progress_interval: float = 0.5


def spark_session(master: str | None, app_name: str = "weir-bootstrap") -> Any:
    """A SparkSession for the job (bound to loopback for local masters)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ and master is None
    if not under_submit:
        builder = builder.master(master or "local[*]")
    if (master or "local").startswith("local") and not under_submit:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1")
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.ui.showConsoleProgress", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _ship_code(sc: Any, folder: Path) -> None:
    """Give remote executors this package (they need psycopg and pyarrow installed)."""
    import cdc.bootstrap

    root = Path(cdc.bootstrap.__file__).parent
    path = folder / "weir-bootstrap-code.zip"
    with zipfile.ZipFile(path, "w") as z:
        # only the package marker: ``cdc``'s own __init__ is its public face, which imports
        # the whole package (and the engine) that executors neither have nor need
        z.writestr("cdc/__init__.py", '"""weir\'s cdc package, as Spark executors get it."""\n')
        for f in root.glob("*.py"):
            if f.name in ("__init__.py", "copytext.py", "errors.py", "plan.py", "reader.py"):
                z.write(f, f"cdc/bootstrap/{f.name}")
    sc.addPyFile(str(path))


def _first_run(cfg: BootstrapConfig, out: Path, conn: Any, found: list[catalog.Found],
               parallelism: int) -> tuple[Plan, snapshot.HeldSnapshot]:
    catalog.ensure_publication(conn, cfg.publication, found)
    slot = cfg.slot or f"weir_bootstrap_{uuid.uuid4().hex[:8]}"
    held = snapshot.create_slot(cfg.upstream, slot)
    try:
        ident = conn.execute("SELECT system_identifier::text FROM pg_control_system()"
                             ).fetchone()
        with catalog.connect(cfg.upstream) as plan_conn:
            plan_conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            plan_conn.execute(f"SET TRANSACTION SNAPSHOT '{held.name}'")
            snap = plan_conn.execute("SELECT pg_current_snapshot()::text, current_database()"
                                     ).fetchone()
            assert snap is not None and ident is not None
            specs = tuple(catalog.partition_table(
                plan_conn, f, cfg.rows_per_partition, 2 * parallelism,
                cfg.partitions) for f in found)
            plan_conn.execute("COMMIT")
        assert held.lsn is not None
        plan = Plan(str(ident[0]), str(snap[1]), slot, cfg.publication, held.lsn, held.name,
                    str(snap[0]), specs)
        out.mkdir(parents=True, exist_ok=True)
        manifest.write_json(out / manifest.PLAN, plan.to_json())
    except BaseException:
        held.close()
        snapshot.drop_slot(cfg.upstream, slot)
        raise
    return plan, held


def _resume(cfg: BootstrapConfig, plan: Plan, conn: Any) -> snapshot.HeldSnapshot:
    row = conn.execute(
        "SELECT (SELECT system_identifier::text FROM pg_control_system()), current_database(),"
        " (SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s)",
        (plan.slot,)).fetchone()
    if row[0] != plan.system_identifier or row[1] != plan.database:
        raise BootstrapError(f"{cfg.out} holds a bootstrap of another database "
                             f"({plan.database}); use another --out")
    if row[2] is None:
        raise BootstrapError(
            f"the bootstrap's replication slot {plan.slot} is gone, so the partitions read so "
            "far cannot be made consistent with new ones: rerun with --restart")
    from cdc.pgoutput import parse_lsn

    if parse_lsn(row[2]) > plan.lsn:
        raise BootstrapError(
            f"slot {plan.slot} was consumed past the bootstrap's consistent point (changes "
            "the load needs are gone): rerun with --restart")
    return snapshot.export_snapshot(cfg.upstream)


def _restart(cfg: BootstrapConfig, out: Path) -> None:
    old = manifest.load_plan(out) if out.exists() else None
    if old is not None:
        snapshot.drop_slot(cfg.upstream, old.slot)
    if out.exists():
        shutil.rmtree(out)


def run(cfg: BootstrapConfig, spark: Any = None, log: TextIO = sys.stderr) -> dict[str, Any]:
    """Run (or resume, or confirm) the bootstrap described by ``cfg``; returns the manifest."""
    out = Path(cfg.out)
    conn = catalog.connect(cfg.upstream)
    try:
        found = [catalog.inspect(conn, name) for name in cfg.tables]
        names = sorted(f"{f.schema}.{f.name}" for f in found)
        if cfg.restart:
            _restart(cfg, out)
        plan = manifest.load_plan(out) if out.exists() else None
        if plan is not None and sorted(t.qualified for t in plan.tables) != names:
            raise BootstrapError(f"{out} holds a bootstrap of other tables "
                                 f"({', '.join(t.qualified for t in plan.tables)}); use "
                                 "another --out, or --restart to replace it")
        done = manifest.load_manifest(out)
        if done is not None:
            print(f"weir bootstrap: {out} is already complete", file=log)
            return done
        if plan is None:
            catalog.check_replication(conn)
        own_session = spark is None
        session = spark if spark is not None else spark_session(cfg.master)
        try:
            if plan is None:
                plan, held = _first_run(cfg, out, conn, found,
                                        int(session.sparkContext.defaultParallelism))
            else:
                held = _resume(cfg, plan, conn)
            try:
                _load(cfg, out, plan, held.name, session, log)
            finally:
                held.close()
        finally:
            if own_session:
                session.stop()
        result = manifest.build(plan, manifest.done_results(out, plan))
        manifest.write_json(out / manifest.MANIFEST, result)
        return result
    finally:
        conn.close()


def _load(cfg: BootstrapConfig, out: Path, plan: Plan, snapshot_name: str, session: Any,
          log: TextIO) -> None:
    done = manifest.done_results(out, plan)
    todo = [t for t in plan.tasks() if t not in done]
    if not todo:
        return
    settings = catalog.SESSION_SETTINGS
    tasks = [{
        "dsn": cfg.upstream, "out": str(out.resolve()), "table": table_to_json(plan.table(t)),
        "index": i, "snapshot": snapshot_name, "settings": settings,
        "max_rows_per_second": cfg.max_rows_per_second,
    } for t, i in todo]
    sc = session.sparkContext
    if not str(sc.master).startswith("local"):
        _ship_code(sc, out)
    expected = sum(plan.table(t).estimated_rows // plan.table(t).partitioning.count
                   for t, _ in todo)
    failure: list[BaseException] = []

    def job() -> None:
        try:
            sc.parallelize(tasks, len(tasks)).map(read_partition).collect()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=job, name="weir-bootstrap-job", daemon=True)
    started = time.monotonic()
    thread.start()
    tty = log.isatty()
    try:
        while thread.is_alive():
            thread.join(cfg.progress_interval)
            _report(out, plan, todo, expected, started, log, tty)
    except KeyboardInterrupt:
        sc.cancelAllJobs()
        raise
    if tty:
        print(file=log)
    if failure:
        raise _job_error(failure[0])


def _report(out: Path, plan: Plan, todo: list[tuple[str, int]], expected: int,
            started: float, log: TextIO, tty: bool) -> None:
    results = manifest.done_results(out, plan)
    finished = [results[t] for t in todo if t in results]
    rows = sum(int(r["rows"]) for r in finished) + manifest.in_flight_rows(out, plan)
    line = render(Progress(rows, max(expected, rows), len(finished), len(todo),
                           time.monotonic() - started))
    print(("\r" if tty else "") + line, end="" if tty else "\n", file=log, flush=True)


def _job_error(exc: BaseException) -> BootstrapError:
    """The executor's BootstrapError message out of Spark's wrapping, or a summary."""
    text = str(exc)
    found = re.search(r"BootstrapError: (.+)", text)
    if found:
        return BootstrapError(found.group(1).strip())
    with contextlib.suppress(Exception):
        return explain(exc, "running the Spark job")
    return BootstrapError(f"the Spark job failed: {text.splitlines()[0] if text else exc!r}")
