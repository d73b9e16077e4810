"""``--replication-slot``: a persistent slot and publication kept across reconnects and restarts.

With the default temporary slot, a lost replication connection resets every cache (the changes
committed while it was down are gone with the slot). A persistent slot keeps them: after a
reconnect the stream resumes where it applied, the caches keep their state and the write made
while the stream was down reaches them. Across a restart the slot and its publication stay
(inactive), and ``weir slots drop`` removes both.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.support import WeirProcess, eventually

SLOT = "weir_weir_0"  # what --replication-slot Weir-0 becomes
PUB = "weir_pub_weir_0"


def _cached(conn: psycopg.Connection[Any], k: int) -> str | None:
    """The value of key ``k`` if weir served it from the cache, else None."""
    row = conn.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()
    assert row is not None
    plan = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return str(row[0]) if plan is not None and plan[0] == "cache" else None


def _fills(conn: psycopg.Connection[Any]) -> int:
    return int(dict(conn.execute("SHOW WEIR STATUS").fetchall())["fills"])


def _slot(pg: Any, dbname: str) -> str:
    return pg.psql("SELECT temporary, active FROM pg_replication_slots "
                   f"WHERE slot_name = '{SLOT}'", dbname).strip()


def _publications(pg: Any, dbname: str) -> str:
    return pg.psql(f"SELECT pubname FROM pg_publication WHERE pubname = '{PUB}'",
                   dbname).strip()


def test_a_persistent_slot_keeps_caches_across_reconnects_and_stays_after_stop(
        pg: Any, dbname: str, tmp_path: Path) -> None:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            "INSERT INTO kv VALUES (1, 'a'), (2, 'b')", dbname)
    args = ["--replication-slot", "Weir-0", "--state-dir", str(tmp_path)]
    proc = WeirProcess.start(pg, args, upstream=pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute("CREATE CACHE kv_by_k FROM SELECT v FROM kv WHERE k = $1")
            eventually(lambda: _cached(conn, 1) == "a")
            assert _slot(pg, dbname) == "f|t"  # persistent, in use
            fills = _fills(conn)
            # the replication connection is cut and a write commits while it is down
            pg.psql(f"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                    f"WHERE slot_name = '{SLOT}'", dbname)
            pg.psql("UPDATE kv SET v = 'a2' WHERE k = 1", dbname)
            eventually(lambda: _cached(conn, 1) == "a2", timeout=20)
            # the key was patched by the resumed stream, not refilled after a reset
            assert _fills(conn) == fills
    finally:
        proc.stop()
    assert proc.proc.returncode == 0
    assert _slot(pg, dbname) == "f|f"  # kept, inactive
    assert _publications(pg, dbname) == PUB

    pg.psql("UPDATE kv SET v = 'a3' WHERE k = 1", dbname)  # while weir is down
    proc = WeirProcess.start(pg, args, upstream=pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(proc.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            eventually(lambda: _cached(conn, 1) == "a3", timeout=20)  # (the catalog kept it)
            assert _slot(pg, dbname) == "f|t"
    finally:
        proc.stop()

    done = subprocess.run([sys.executable, "-m", "proxy.cli", "slots", "drop",
                           "--upstream", pg.dsn(dbname=dbname)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert SLOT in done.stdout
    assert _slot(pg, dbname) == ""
    assert _publications(pg, dbname) == ""


def test_the_slot_name_is_normalized() -> None:
    from proxy.publication import persistent_names

    assert persistent_names("Weir-0") == (SLOT, PUB)
    assert persistent_names("db.replica 1") == ("weir_db_replica_1", "weir_pub_db_replica_1")
