"""Cache behaviour against the real upstream: the F2 window, fills racing writes, auto mode,
persistence across restarts, and falling back to the upstream when replication is down."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.service import CacheService
from proxy.settings import Settings
from tests.support import InProcessWeir, eventually, eventually_async


def _kv(pg: Any, dbname: str, rows: int) -> None:
    """The table ``kv (k, v)`` with ``rows`` rows: k = 1..rows, v = 'v' || k."""
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text);"
            f"INSERT INTO kv SELECT g, 'v' || g FROM generate_series(1, {rows}) g", dbname)


def _last(conn: Any) -> tuple[str, str]:
    row = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
    return (row[0], row[1])


def test_f2_applied_but_invisible_transaction_is_patched_into_fills(pg: Any, dbname: str) -> None:
    """DESIGN §6 F2: with a synchronous standby that does not exist, a commit is streamed to
    weir while new snapshots do not see it. A fill taken then must include it exactly once."""
    pg.psql("CREATE TABLE counters (id serial PRIMARY KEY, grp int, v int);"
            "INSERT INTO counters (grp, v) SELECT g % 3, 1 FROM generate_series(1, 30) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    host_stream = None
    writer_error: list[BaseException] = []
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as through, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            through.execute("CREATE CACHE f2 FROM SELECT count(*), sum(v) FROM counters "
                            "WHERE grp = 0")
            host_stream = server.server.service.host.stream
            applied = host_stream.stats().transactions_applied
            pg.psql("ALTER SYSTEM SET synchronous_standby_names = 'weir_nobody'")
            pg.psql("SELECT pg_reload_conf()")
            eventually(lambda: direct.execute("SHOW synchronous_standby_names").fetchone()
                       == ("weir_nobody",))

            def write() -> None:
                try:
                    with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as w:
                        w.execute("SET application_name = 'weir_f2_writer'")
                        w.execute("INSERT INTO counters (grp, v) VALUES (0, 100)")
                except BaseException as exc:  # the cancel below ends the wait with a warning
                    writer_error.append(exc)

            writer = threading.Thread(target=write)
            writer.start()
            eventually(lambda: direct.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'weir_f2_writer'"
                " AND wait_event = 'SyncRep'").fetchone() == (1,))
            eventually(lambda: host_stream.stats().transactions_applied > applied)
            # upstream snapshots do not see the insert yet
            assert direct.execute("SELECT count(*), sum(v) FROM counters WHERE grp = 0"
                                  ).fetchone() == (10, 10)
            # weir fills now: its snapshot misses the insert, the log patch adds it once
            got = through.execute("SELECT count(*), sum(v) FROM counters WHERE grp = 0").fetchone()
            assert _last(through)[0] == "cache"
            assert got == (11, 110)
            direct.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                           "WHERE application_name = 'weir_f2_writer'")
            writer.join(30)
            assert direct.execute("SELECT count(*), sum(v) FROM counters WHERE grp = 0"
                                  ).fetchone() == (11, 110)
            assert through.execute("SELECT count(*), sum(v) FROM counters WHERE grp = 0"
                                   ).fetchone() == (11, 110)
    finally:
        pg.psql("ALTER SYSTEM RESET synchronous_standby_names")
        pg.psql("SELECT pg_reload_conf()")
        server.stop()
    assert writer_error == []  # the cancel only ends the wait; the insert had committed


def test_fills_racing_writes_on_the_same_key(pg: Any, dbname: str) -> None:
    """Inserts into one key while a tiny memory budget keeps evicting and refilling it: every
    count read through weir is a count the table really had (monotonic, never above the
    final), and after a barrier weir and the upstream agree."""
    pg.psql("CREATE TABLE events (id serial PRIMARY KEY, k int, note text);"
            "CREATE TABLE other (id int PRIMARY KEY, k int)", dbname)
    pg.psql("INSERT INTO other SELECT g, g % 50 FROM generate_series(1, 500) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), memory_budget=4_000)
    done = threading.Event()
    seen: list[int] = []
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as through:
            through.execute("CREATE CACHE ev FROM SELECT count(*) FROM events WHERE k = 1")
            through.execute("CREATE CACHE noise FROM SELECT id FROM other WHERE k = 1")

            def writer() -> None:
                with psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as w:
                    for i in range(200):
                        w.execute("INSERT INTO events (k, note) VALUES (1, %s)", (f"n{i}",))
                done.set()

            t = threading.Thread(target=writer)
            t.start()
            while not done.is_set() or len(seen) < 50:
                row = through.execute("SELECT count(*) FROM events WHERE k = 1").fetchone()
                seen.append(row[0])
                for k in range(10):  # evict the key under the budget
                    through.execute(f"SELECT id FROM other WHERE k = {k}").fetchall()
            t.join()
            server.call(server.server.service.host.barrier(10))
            final = through.execute("SELECT count(*) FROM events WHERE k = 1").fetchone()
        assert final == (200,)
        assert seen == sorted(seen) and max(seen) <= 200
        status = server.call(_status(server))
        assert int(status["evictions"]) > 0
    finally:
        server.stop()


async def _status(server: InProcessWeir) -> dict[str, str]:
    engine = server.server.service.host.engine
    return {"evictions": str(engine.stats.evictions)}


def test_auto_mode_caches_a_repeated_shape(pg: Any, dbname: str) -> None:
    _kv(pg, dbname, 20)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=3)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute("SHOW WEIR STATUS")  # starts the cache service
            for k in (1, 2, 3):
                assert conn.execute(f"SELECT v FROM kv WHERE k = {k}").fetchone() == (f"v{k}",)
            eventually(lambda: len(conn.execute("SHOW CACHES").fetchall()) == 1, timeout=30)
            assert conn.execute("SELECT v FROM kv WHERE k = 7").fetchone() == ("v7",)
            assert _last(conn)[0] == "cache"
            proxied = conn.execute("SHOW PROXIED QUERIES WITH LITERALS").fetchall()
            assert any(row[2] == "cached" for row in proxied)
    finally:
        server.stop()


def test_caches_survive_a_restart(pg: Any, dbname: str, tmp_path: Path) -> None:
    _kv(pg, dbname, 20)
    state = str(tmp_path / "state")
    server = InProcessWeir.start(pg.dsn(dbname=dbname), state_dir=state)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv_by_k FROM SELECT v FROM kv WHERE k = 1")
    finally:
        server.stop()
    server = InProcessWeir.start(pg.dsn(dbname=dbname), state_dir=state)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            assert [r[0] for r in conn.execute("SHOW CACHES").fetchall()] == ["kv_by_k"]
            assert conn.execute("SELECT v FROM kv WHERE k = 5").fetchone() == ("v5",)
            assert _last(conn) == ("cache", "served by cache kv_by_k")
            conn.execute("DROP CACHE kv_by_k")
            assert conn.execute("SHOW CACHES").fetchall() == []
    finally:
        server.stop()


def test_reads_go_upstream_while_replication_is_down(pg: Any, dbname: str) -> None:
    _kv(pg, dbname, 20)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=None) as conn:
            conn.execute("CREATE CACHE kv_by_k FROM SELECT v FROM kv WHERE k = 1")
            assert conn.execute("SELECT v FROM kv WHERE k = 2").fetchone() == ("v2",)
            assert _last(conn)[0] == "cache"
            server.call(server.server.service.host.stream.stop())
            assert conn.execute("SELECT v FROM kv WHERE k = 2").fetchone() == ("v2",)
            assert _last(conn) == ("upstream", "the replication stream is not connected")
    finally:
        server.stop()


def test_unsupported_queries_are_explained(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text)", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            row = conn.execute("EXPLAIN CREATE CACHE FROM SELECT v, now() FROM kv WHERE k = 1"
                               ).fetchone()
            assert row is not None and row[2].startswith("unsupported: ") and "now" in row[2]
            with pytest.raises(psycopg.Error, match="cannot be cached"):
                conn.execute("CREATE CACHE FROM SELECT v FROM kv WHERE k = 1 FOR UPDATE")
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = 1")
            conn.execute("SELECT v FROM kv WHERE k = 1 FOR UPDATE")
            conn.execute("SELECT v FROM kv WHERE k = 1 FOR UPDATE")
            assert _last(conn)[0] == "upstream"
            shown = conn.execute("SHOW PROXIED QUERIES WITH LITERALS")
            proxied = {r[1]: (r[2], r[3]) for r in shown}
            reason, count = proxied["SELECT v FROM kv WHERE k = 1 FOR UPDATE"]
            assert reason.startswith("unsupported: ") and count == "2"
    finally:
        server.stop()


def test_in_lists_and_parameter_pages(pg: Any, dbname: str) -> None:
    pg.psql("CREATE TABLE t (id int PRIMARY KEY, g int, v text);"
            "INSERT INTO t SELECT x, x % 7, 'v' || x FROM generate_series(1, 100) x", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.execute("CREATE CACHE inl FROM SELECT id, v FROM t WHERE g IN (1, 2, 3) "
                         "ORDER BY id LIMIT 5")
            conn.execute("CREATE CACHE page FROM SELECT id, v FROM t WHERE g = $1 ORDER BY id "
                         "LIMIT $2 OFFSET $3")
            cases: list[tuple[str, Any]] = [
                ("SELECT id, v FROM t WHERE g IN (4, 5, 6) ORDER BY id LIMIT 5", None),
                ("SELECT id, v FROM t WHERE g IN (6, 6, 0) ORDER BY id LIMIT 5", None),
                ("SELECT id, v FROM t WHERE g = %s ORDER BY id LIMIT %s OFFSET %s", (3, 4, 2)),
                ("SELECT id, v FROM t WHERE g = %s ORDER BY id LIMIT %s OFFSET %s", (5, 100, 0)),
            ]
            for sql, params in cases:
                assert conn.execute(sql, params).fetchall() == \
                    direct.execute(sql, params).fetchall()
                assert _last(conn)[0] == "cache"
            # a negative LIMIT is PostgreSQL's error to give
            with pytest.raises(psycopg.errors.InvalidRowCountInLimitClause):
                conn.execute("SELECT id, v FROM t WHERE g = %s ORDER BY id LIMIT %s OFFSET %s",
                             (1, -1, 0))
    finally:
        server.stop()


def test_cached_reads_after_pipelined_writes(pg: Any, dbname: str) -> None:
    """psycopg's executemany pipelines (Parse/Bind/Execute ... Sync, Flush): the batch
    bookkeeping must end at the Sync, so the next statement can be answered by weir."""
    pg.psql("CREATE TABLE kv (k int PRIMARY KEY, v text)", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            conn.cursor().executemany("INSERT INTO kv VALUES (%s, %s)",
                                      [(i, f"v{i}") for i in range(50)])
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (7,)).fetchone() == ("v7",)
            assert _last(conn) == ("cache", "served by cache kv1")
    finally:
        server.stop()


def test_caches_are_served_only_to_roles_that_may_read(pg: Any, dbname: str) -> None:
    role = f"reader_{dbname}"
    pg.psql("CREATE TABLE secret (k int PRIMARY KEY, v text);"
            "INSERT INTO secret SELECT g, 'v' || g FROM generate_series(1, 10) g", dbname)
    pg.psql(f"CREATE ROLE {role} LOGIN")
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute("CREATE CACHE secret_by_k FROM SELECT v FROM secret WHERE k = $1")
            assert owner.execute("SELECT v FROM secret WHERE k = %s", (3,)).fetchone() == ("v3",)
            assert _last(owner)[0] == "cache"
            with psycopg.connect(server.dsn(role, dbname), autocommit=True) as reader:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    reader.execute("SELECT v FROM secret WHERE k = %s", (3,))
                assert _last(reader)[0] == "upstream"
                owner.execute(f"GRANT SELECT ON secret TO {role}")  # through weir: re-checked
                # the read right after weir answered EXPLAIN LAST STATEMENT itself is served
                # even while weir's own Close of the unnamed statement (sent with that
                # answer) may still be running upstream: its answer is weir's to discard
                row = reader.execute("SELECT v FROM secret WHERE k = %s", (3,)).fetchone()
                assert row == ("v3",)
                assert _last(reader) == ("cache", "served by cache secret_by_k")
    finally:
        server.stop()


def test_role_defaults_are_followed(pg: Any, dbname: str) -> None:
    """ALTER ROLE ... SET is invisible on the wire: weir reads it. A role whose default
    extra_float_digits is 0 gets PostgreSQL's rounded floats from the cache, and a role with
    another search_path reads upstream."""
    floaty, pathy = f"floaty_{dbname}", f"pathy_{dbname}"
    pg.psql("CREATE TABLE m (k int PRIMARY KEY, x float8);"
            "INSERT INTO m VALUES (1, 0.1 + 0.2), (2, 1.0 / 3)", dbname)
    pg.psql(f"CREATE ROLE {floaty} LOGIN; CREATE ROLE {pathy} LOGIN")
    pg.psql(f"ALTER ROLE {floaty} SET extra_float_digits = 0")
    pg.psql(f"ALTER ROLE {pathy} SET search_path = elsewhere, public")
    pg.psql(f"GRANT SELECT ON m TO {floaty}, {pathy}", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as owner:
            owner.execute("CREATE CACHE m_by_k FROM SELECT x FROM m WHERE k = $1")
        for role in (floaty, pathy):
            with psycopg.connect(server.dsn(role, dbname), autocommit=True) as through, \
                    psycopg.connect(pg.dsn(role, dbname), autocommit=True) as direct:
                for k in (1, 2, 1):
                    sql = f"SELECT x::text, x FROM m WHERE k = {k}"  # text shows the digits
                    plain = f"SELECT x FROM m WHERE k = {k}"
                    got = through.execute(plain).fetchone()
                    assert got == direct.execute(plain).fetchone()
                    assert direct.execute(sql).fetchone() is not None
                route = _last(through)
                if role == floaty:
                    assert route[0] == "cache"
                    raw = through.execute("SELECT x FROM m WHERE k = 1", binary=False)
                    assert raw.fetchone() == (0.3,)  # rounded by extra_float_digits = 0
                else:
                    assert route == ("upstream", "the role's or database's search_path is "
                                                 "elsewhere, public")
    finally:
        server.stop()


def test_recent_transaction_log_is_pruned_without_fills(pg: Any, dbname: str) -> None:
    """Writes to a cached table with no reads (so no fills bring snapshots): the host's
    snapshot probes keep the engine's recent-transaction log from growing."""
    pg.psql("CREATE TABLE w (k int PRIMARY KEY, v int)", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.execute("CREATE CACHE w1 FROM SELECT v FROM w WHERE k = $1")
            conn.execute("SELECT v FROM w WHERE k = %s", (1,))
            for i in range(300):
                direct.execute("INSERT INTO w VALUES (%s, %s)", (i + 10, i))
            host = server.server.service.host
            server.call(host.barrier(10))
            eventually(lambda: len(host.engine.fills.log) < 10, timeout=20)
    finally:
        server.stop()


def test_a_failed_fill_sends_its_reads_upstream(pg: Any, dbname: str) -> None:
    """Fault injection at the host's fetch: the waiting read is answered from upstream, the
    engine forgets the fill, the table backs off (reads of it go upstream without a fill
    meanwhile), and a read after the back-off fills the key and is served."""
    _kv(pg, dbname, 5)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
            host = server.server.service.host
            real_fetch = host.fills._fetch

            async def broken(run: Any) -> Any:
                raise RuntimeError("injected fill failure")

            host.fills._fetch = broken
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (2,)).fetchone() == ("v2",)
            assert _last(conn) == ("upstream", "the cache could not evaluate the query for "
                                               "this key")
            host.fills._fetch = real_fetch
            assert host.fills.failures == 1 and host.fills.queue.backoff
            # (the table backs off after the failed fill: reads go upstream until it ends)
            eventually(lambda: conn.execute("SELECT v FROM kv WHERE k = %s", (2,)).fetchone()
                       == ("v2",) and _last(conn) == ("cache", "served by cache kv1"))
            assert not host.engine.fills.pending and not host.fills.queue.backoff
    finally:
        server.stop()


def test_fills_waiting_for_a_slot_share_one_transaction(pg: Any, dbname: str) -> None:
    """A burst of misses beyond the fill slots: the fills that waited run together, one
    snapshot and one upstream transaction, and every read gets its own key's rows."""
    import asyncio

    import asyncpg

    _kv(pg, dbname, 100)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv1 FROM SELECT v FROM kv WHERE k = $1")
        host = server.server.service.host

        async def one_slot() -> None:
            host.fills._fill_slots = asyncio.Semaphore(1)

        server.call(one_slot())

        async def burst() -> list[Any]:
            conns = [await asyncpg.connect(server.dsn(dbname=dbname)) for _ in range(30)]
            try:
                return await asyncio.gather(*(c.fetchval("SELECT v FROM kv WHERE k = $1", k)
                                              for k, c in enumerate(conns, 1)))
            finally:
                await asyncio.gather(*(c.close() for c in conns))

        assert asyncio.run(burst()) == [f"v{k}" for k in range(1, 31)]
        assert host.fills.done == 30
        assert host.fills.transactions < 30
    finally:
        server.stop()


def test_writes_to_keys_not_cached_leave_cached_join_keys_alone(pg: Any, dbname: str) -> None:
    """Votes for stories the join does not hold make eviction rows whose unknown story still
    carries the join value, so the cached aggregate of another story stays present (it used
    to be evicted with every key, and every read replayed it)."""
    pg.psql("CREATE TABLE stories (id int PRIMARY KEY, title text);"
            "CREATE TABLE votes (id serial PRIMARY KEY, story_id int, user_id int);"
            "INSERT INTO stories SELECT g, 's' || g FROM generate_series(1, 50) g;"
            "INSERT INTO votes (story_id, user_id) SELECT 1 + g % 50, g "
            "FROM generate_series(1, 500) g", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    query = ("SELECT count(v.user_id) FROM stories s LEFT JOIN votes v ON v.story_id = s.id "
             "WHERE s.id = %s GROUP BY s.id, s.title")
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE n FROM " + query.replace("%s", "$1"))
            assert conn.execute(query, (1,)).fetchone() == (10,)
            engine = server.server.service.host.engine
            misses = engine.stats.misses
            pg.psql("INSERT INTO votes (story_id, user_id) SELECT 2 + g % 40, 0 "
                    "FROM generate_series(1, 40) g", dbname)
            server.call(server.server.service.host.barrier(10))
            assert conn.execute(query, (1,)).fetchone() == (10,)
            assert _last(conn)[0] == "cache"
            assert engine.stats.misses == misses  # answered without a refill
    finally:
        server.stop()


def test_auto_mode_caches_a_prepared_statement_from_boot(pg: Any, dbname: str) -> None:
    """Auto mode counts from the first query (no admin command needed to start it) and counts
    each run of a prepared statement (not its one Parse); once the cache exists, the
    session's statement is served by it."""
    _kv(pg, dbname, 20)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=3)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True,
                             prepare_threshold=0) as conn:
            for k in (1, 2, 3):
                assert conn.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone() \
                    == (f"v{k}",)

            def served() -> bool:
                conn.execute("SELECT v FROM kv WHERE k = %s", (7,)).fetchone()
                return _last(conn)[0] == "cache"

            eventually(served, timeout=30)
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (8,)).fetchone() == ("v8",)
    finally:
        server.stop()


def test_each_client_read_counts_one_hit_or_one_miss(pg: Any, dbname: str) -> None:
    """A cold read tries without waiting, then waits for its fill: one miss, not two; an IN
    list whose second key is cold counts its first key's hit once."""
    _kv(pg, dbname, 20)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv_one FROM SELECT v FROM kv WHERE k = $1")
            conn.execute("CREATE CACHE kv_in FROM SELECT k, v FROM kv WHERE k IN ($1, $2)")
            stats = server.server.service.host.engine.stats

            def counts() -> tuple[int, int]:
                return stats.hits, stats.misses

            for prepare in (False, True):  # the simple and the extended protocol
                key = 3 if prepare else 4
                before = counts()
                sql = "SELECT v FROM kv WHERE k = %s" if prepare else \
                    f"SELECT v FROM kv WHERE k = {key}"
                cursor = conn if prepare else psycopg.ClientCursor(conn)
                args = (key,) if prepare else None
                assert cursor.execute(sql, args).fetchone() == (f"v{key}",)
                assert _last(conn)[0] == "cache"
                assert counts() == (before[0], before[1] + 1)
                before = counts()
                assert cursor.execute(sql, args).fetchone() == (f"v{key}",)
                assert counts() == (before[0] + 1, before[1])
            before = counts()  # 3 is cached (by kv_one, not kv_in: a miss there too)
            rows = conn.execute("SELECT k, v FROM kv WHERE k IN (%s, %s)", (5, 6)).fetchall()
            assert sorted(rows) == [(5, "v5"), (6, "v6")]
            assert counts() == (before[0], before[1] + 2)
            conn.execute("SELECT k, v FROM kv WHERE k IN (%s, %s)", (5, 6)).fetchall()
            before = counts()
            rows = conn.execute("SELECT k, v FROM kv WHERE k IN (%s, %s)", (5, 7)).fetchall()
            assert sorted(rows) == [(5, "v5"), (7, "v7")]
            assert counts() == (before[0] + 1, before[1] + 1)
    finally:
        server.stop()


def test_an_in_list_read_is_one_state_when_a_key_fills_late(pg: Any, dbname: str) -> None:
    """The keys of an IN list come from one state of the cache: a transaction that changes
    two keys while the read waits for the second one's fill is seen in both or in neither
    (the first key's rows, read before the wait, are not combined with the fill's)."""
    _kv(pg, dbname, 10)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), read_timeout=30.0)
    got: list[Any] = []
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as through, \
                psycopg.connect(pg.dsn(dbname=dbname)) as locker:
            through.execute("CREATE CACHE kv_in FROM SELECT k, v FROM kv WHERE k IN ($1, $2)")
            query = "SELECT k, v FROM kv WHERE k IN (%s, %s)"
            assert sorted(through.execute(query, (1, 3)).fetchall()) == [(1, "v1"), (3, "v3")]
            assert _last(through)[0] == "cache"
            # key 1 is cached; key 2's fill will wait behind this lock, holding a snapshot
            # taken before the update below commits
            locker.execute("LOCK TABLE kv IN ACCESS EXCLUSIVE MODE")

            def read() -> None:
                with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as reader:
                    got.append(sorted(reader.execute(query, (1, 2)).fetchall()))
                    got.append(_last(reader)[0])

            reader = threading.Thread(target=read)
            reader.start()
            eventually(lambda: pg.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'weir-fill' "
                "AND wait_event_type = 'Lock'", dbname).strip() == "1", timeout=30)
            locker.execute("UPDATE kv SET v = v || '-new' WHERE k IN (1, 2)")
            locker.commit()
            reader.join(60)
            assert not reader.is_alive()
    finally:
        server.stop()
    assert got == [[(1, "v1-new"), (2, "v2-new")], "cache"]


def test_writes_behind_read_only_tags_count_for_read_your_writes(pg: Any, dbname: str) -> None:
    """A statement whose CommandComplete says SELECT (or EXPLAIN) may still write: a call of a
    volatile function, a data-modifying WITH, EXPLAIN ANALYZE of a write. Running one counts
    as a write, whatever the protocol, so the session's next cached read waits for a
    barrier and sees it (so does a read forwarded upstream, since DESIGN §12: any upstream
    answer moves seen(s))."""
    _kv(pg, dbname, 5)
    pg.psql("CREATE FUNCTION bump(t text) RETURNS int LANGUAGE sql AS "
            "$$ UPDATE kv SET v = t WHERE k = 1 RETURNING 1 $$", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    service = server.server.service
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv_one FROM SELECT v FROM kv WHERE k = $1")
            session = next(s for s in server.server.sessions if s.ctx is not None)
            simple = psycopg.ClientCursor(conn)
            read = "SELECT v FROM kv WHERE k = %s"
            writes = [
                (simple, "SELECT bump('{v}')"),
                (conn, "SELECT bump(%s)"),  # extended, unnamed, then prepared (5th run on)
                (simple, "WITH u AS (UPDATE kv SET v = '{v}' WHERE k = 1 RETURNING 1) "
                         "SELECT count(*) FROM u"),
                (conn, "/* hi */ WITH u AS (UPDATE kv SET v = %s WHERE k = 1 RETURNING 1) "
                       "SELECT count(*) FROM u"),
                (simple, "EXPLAIN (ANALYZE, COSTS OFF) UPDATE kv SET v = '{v}' WHERE k = 1"),
                # a WITH whose own statement writes: its tag (UPDATE 0 here) tells, as a
                # plain UPDATE's does (rules.with_writes: its Bind hides nothing)
                (conn, "WITH u AS (UPDATE kv SET v = %s WHERE k = 1 RETURNING 1) "
                       "UPDATE kv SET v = v WHERE false"),
                (conn, "WITH u AS (SELECT %s::text AS t) UPDATE kv SET v = u.t FROM u "
                       "WHERE k = 1"),
            ]
            for i in range(56):
                cursor, sql = writes[i % len(writes)]
                value = f"w{i}"
                before = time.monotonic()
                if cursor is simple:
                    cursor.execute(sql.format(v=value))
                else:
                    cursor.execute(sql, (value,))
                assert _moved(session.ctx.seen, before), sql
                assert conn.execute(read, (1,)).fetchone() == (value,), sql
                assert _last(conn)[0] == "cache"
            for cursor, sql in ((simple, "SELECT count(*) AS updated_at FROM kv"),
                                (conn, "SELECT v FROM kv WHERE k = 2")):
                before = time.monotonic()
                cursor.execute(sql)  # forwarded reads move seen(s) too (monotonic reads)
                assert _moved(session.ctx.seen, before), sql
            # a function created upstream, not through weir, is known within a heartbeat
            pg.psql("CREATE FUNCTION bump2(t text) RETURNS int LANGUAGE sql AS "
                    "$$ UPDATE kv SET v = t WHERE k = 1 RETURNING 1 $$", dbname)
            eventually(lambda: "bump2" in service.routing.writers, timeout=30)
            for i in range(3):
                before = time.monotonic()
                simple.execute(f"SELECT bump2('x{i}')")
                assert _moved(session.ctx.seen, before)
                assert conn.execute(read, (1,)).fetchone() == (f"x{i}",)
    finally:
        server.stop()


def _moved(seen: Any, before: float) -> bool:
    """Whether seen(s) counts what the session sent upstream after ``before``: still pending,
    or already settled after it (a write's or a miss's answer settles it as soon as it has been
    relayed, ``proxy.router.wrote``)."""
    return bool(seen.pending or seen.at >= before)


def test_stopping_while_caching_starts_leaves_no_stream_behind(pg: Any, dbname: str) -> None:
    """weir stopping while its caches are still starting (here: the replication stream cannot
    start, the upstream role may not replicate) stops the half-started host too: no stream
    task keeps reconnecting after the service is gone."""
    role = f"norepl_{dbname}"
    pg.psql(f"CREATE ROLE {role} LOGIN NOREPLICATION")
    service = CacheService(Settings(upstream=pg.dsn(role, dbname)))

    def streams() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if "ReplicationStream._run" in repr(t.get_coro())]

    async def started() -> bool:
        return bool(streams())

    async def scenario() -> None:
        starting = asyncio.create_task(service.ensure())
        await eventually_async(started, timeout=20)
        stream = streams()[0]
        await service.stop()
        assert stream.done()
        with pytest.raises((asyncio.CancelledError, TimeoutError)):
            await starting
        assert not streams()

    asyncio.run(scenario())
