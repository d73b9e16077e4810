"""``make demo``: weir in front of a throw-away PostgreSQL, with a small workload through it.

Starts a local cluster (the embedded default), starts ``weir serve`` in front of it as a
real subprocess, runs a workload with psycopg through weir (schema, COPY, inserts, joins and
aggregates, a prepared statement, a transaction that rolls back, LISTEN/NOTIFY, a cancelled
query), checks each answer against the same query run directly upstream, and prints what it
did. Exits non-zero if anything differs.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from proxy import localpg


def _start_weir(upstream: str) -> tuple[subprocess.Popen[str], int]:
    port = localpg.free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--upstream",
            upstream,
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "weir listening on" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, port
    raise RuntimeError(f"weir did not start (exit code {proc.wait()})")


def _step(title: str, action: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = action()
    print(f"  {title:<58} {1000 * (time.perf_counter() - started):7.1f} ms")
    return value


def workload(through: psycopg.Connection[Any], direct: psycopg.Connection[Any]) -> int:
    """Run the demo statements; return the number of answers that differ from upstream's."""
    through.execute(
        "CREATE TABLE stories (id int PRIMARY KEY, author text, title text);"
        "CREATE TABLE votes (story_id int REFERENCES stories, voter int)"
    )

    def copy_in() -> None:
        with through.cursor() as cur, cur.copy("COPY stories FROM STDIN") as copy:
            for i in range(1, 501):
                copy.write_row((i, f"author{i % 17}", f"Story number {i}"))

    _step("COPY 500 stories in", copy_in)
    _step(
        "insert 5,000 votes (executemany, extended protocol)",
        lambda: through.cursor().executemany(
            "INSERT INTO votes VALUES (%s, %s)", [((i * 7) % 500 + 1, i) for i in range(5000)]
        ),
    )
    queries = [
        (
            "story with vote count",
            "SELECT s.id, s.title, count(v.voter) FROM stories s LEFT JOIN votes v "
            "ON v.story_id = s.id WHERE s.id = 42 GROUP BY s.id, s.title",
        ),
        (
            "top 5 stories by votes",
            "SELECT story_id, count(*) AS n FROM votes GROUP BY story_id ORDER BY n DESC, story_id "
            "LIMIT 5",
        ),
        (
            "authors with most stories",
            "SELECT author, count(*) FROM stories GROUP BY author ORDER BY 2 DESC, 1 LIMIT 3",
        ),
    ]
    mismatches = 0
    for title, sql in queries:
        got = _step(f"{title} (through weir)", _fetch(through, sql))
        want = direct.execute(sql).fetchall()
        mismatches += got != want
        print(f"      -> {got[:3]}{' ...' if len(got) > 3 else ''}"
              f"{'' if got == want else '   MISMATCH with upstream'}")
    with through.transaction(force_rollback=True):
        through.execute("DELETE FROM votes")
    remaining = through.execute("SELECT count(*) FROM votes").fetchone()
    print(f"  a rolled-back DELETE left {remaining[0] if remaining else '?'} votes in place")
    mismatches += remaining != (5000,)
    return mismatches + caching(through, direct)


def _fetch(conn: psycopg.Connection[Any], sql: str, *params: Any) -> Callable[[], list[Any]]:
    return lambda: conn.execute(sql, params or None).fetchall()


def caching(through: psycopg.Connection[Any], direct: psycopg.Connection[Any]) -> int:
    """Make the story-with-votes query a cache and show hits, freshness and the reasons."""
    print("caching:")
    sql = ("SELECT s.id, s.title, count(v.voter) AS votes FROM stories s LEFT JOIN votes v "
           "ON v.story_id = s.id WHERE s.id = %s GROUP BY s.id, s.title")
    _step("CREATE CACHE story_votes FROM <that query>", lambda: through.execute(
        "CREATE CACHE story_votes FROM " + sql.replace("%s", "$1")))
    miss = _step("first read of story 42 (a miss: snapshot-consistent fill)",
                 _fetch(through, sql, 42))
    first_route = through.execute("EXPLAIN LAST STATEMENT").fetchone()
    print(f"      -> EXPLAIN LAST STATEMENT: {first_route}")
    hit = _step("second read of story 42 (a hit)", _fetch(through, sql, 42))
    _step("the same query directly upstream", _fetch(direct, sql, 42))
    route = through.execute("EXPLAIN LAST STATEMENT").fetchone()
    print(f"      -> {hit}   EXPLAIN LAST STATEMENT: {route}")
    direct.execute("INSERT INTO votes VALUES (42, 99999)")
    started = time.perf_counter()
    while _fetch(through, sql, 42)() == hit and time.perf_counter() - started < 5:
        pass
    fresh = _fetch(through, sql, 42)()
    print(f"  a vote inserted directly upstream is visible through weir after "
          f"{1000 * (time.perf_counter() - started):.1f} ms: {fresh}")
    status = dict(through.execute("SHOW WEIR STATUS").fetchall())
    print(f"  SHOW WEIR STATUS: hits={status['hits']} misses={status['misses']} "
          f"fills={status['fills']} memory_bytes={status['memory_bytes']}")
    reason = through.execute("EXPLAIN CREATE CACHE FROM SELECT now(), id FROM stories "
                             "WHERE id = 1").fetchone()
    print(f"  EXPLAIN CREATE CACHE of a query with now(): {reason[2] if reason else '?'}")
    want = direct.execute(sql, (42,)).fetchall()
    return int(miss != hit) + int(fresh != want)


def main() -> int:
    print("weir demo: starting a throw-away PostgreSQL ...")
    with localpg.running() as cluster:
        proc, port = _start_weir(cluster.dsn())
        print(f"weir serve on 127.0.0.1:{port} -> PostgreSQL on 127.0.0.1:{cluster.port}")
        try:
            dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
            with (
                psycopg.connect(dsn, autocommit=True) as through,
                psycopg.connect(cluster.dsn(), autocommit=True) as direct,
            ):
                version = through.info.parameter_status("server_version")
                print(f"connected through weir (server {version})")
                mismatches = workload(through, direct)
                through.execute("LISTEN demo")
                direct.execute("NOTIFY demo, 'hello through weir'")
                note = next(through.notifies(timeout=5, stop_after=1))
                print(f"  LISTEN/NOTIFY relayed: {note.channel} {note.payload!r}")
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        "every answer through weir matched upstream"
        if not mismatches
        else f"{mismatches} answers differed from upstream"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
