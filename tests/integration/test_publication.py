"""weir's publication harms nobody (issue: the publication broke other clients' writes).

weir once published ``FOR ALL TABLES``: from then on every UPDATE and DELETE on a table
without a replica identity failed, for clients connected directly to PostgreSQL too, and the
publication outlived weir. Now weir publishes only the tables its caches read, refuses caches
over tables it cannot follow (the queries go upstream, with the reason in SHOW PROXIED
QUERIES), drops its publication when it stops, and ``weir slots drop`` removes publications
left by a weir that was killed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import asyncpg
import psycopg
import pytest

from cdc import slots
from cdc.connection import ConnectParams, PgConnection
from proxy import publication, registry
from tests.support import InProcessWeir, eventually

SCHEMA = """
CREATE TABLE kv (k int PRIMARY KEY, v text);
CREATE TABLE other (k int PRIMARY KEY, v text);
CREATE TABLE nopk (k int, v text);
CREATE TABLE noident (k int PRIMARY KEY, v text);
ALTER TABLE noident REPLICA IDENTITY NOTHING;
INSERT INTO kv VALUES (1, 'a'), (2, 'b');
INSERT INTO other VALUES (1, 'x');
INSERT INTO nopk VALUES (1, 'n');
INSERT INTO noident VALUES (1, 'i');
"""


def _create_kv_v(conn: psycopg.Connection[Any]) -> str:
    """Run ``CREATE CACHE kv_v`` on ``conn``: "created", or the error's text."""
    try:
        conn.execute("CREATE CACHE kv_v FROM SELECT v FROM kv WHERE k = $1")
    except psycopg.Error as exc:
        return str(exc)
    return "created"


def _publications(pg: Any, dbname: str) -> dict[str, set[str]]:
    out = pg.psql("SELECT p.pubname, coalesce(string_agg(t.tablename, ',' ORDER BY t.tablename),"
                  " '') FROM pg_publication p LEFT JOIN pg_publication_tables t"
                  " ON t.pubname = p.pubname WHERE p.pubname LIKE 'weir%'"
                  " GROUP BY p.pubname", dbname)
    found = {}
    for line in str(out).splitlines():
        if line.strip():
            name, _, tables = line.partition("|")
            found[name] = {t for t in tables.split(",") if t}
    return found


def test_only_cached_tables_are_published_and_others_writes_succeed(pg: Any,
                                                                     dbname: str) -> None:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with (
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn,
            psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct,
        ):
            conn.execute("CREATE CACHE kv_v FROM SELECT v FROM kv WHERE k = $1")
            assert list(_publications(pg, dbname).values()) == [{"kv"}]
            # writes on tables without a replica identity work, directly and through weir
            for c in (direct, conn):
                c.execute("UPDATE nopk SET v = 'm' WHERE k = 1")
                c.execute("DELETE FROM noident WHERE k = 2")
            # the cached table stays fresh
            direct.execute("UPDATE kv SET v = 'a2' WHERE k = 1")
            eventually(lambda: conn.execute("SELECT v FROM kv WHERE k = %s", (1,)).fetchone()
                       == ("a2",), timeout=10)
            # a cache over a second table publishes it too, and follows it
            conn.execute("CREATE CACHE other_v FROM SELECT v FROM other WHERE k = $1")
            assert list(_publications(pg, dbname).values()) == [{"kv", "other"}]
            assert conn.execute("SELECT v FROM other WHERE k = %s", (1,)).fetchone() == ("x",)
            direct.execute("UPDATE other SET v = 'y' WHERE k = 1")
            eventually(lambda: conn.execute("SELECT v FROM other WHERE k = %s", (1,))
                       .fetchone() == ("y",), timeout=10)
            assert conn.execute("EXPLAIN LAST STATEMENT").fetchone()[0] == "cache"
            # a dropped cache's table leaves the publication
            conn.execute("DROP CACHE other_v")
            eventually(lambda: list(_publications(pg, dbname).values()) == [{"kv"}],
                       timeout=10)
    finally:
        server.stop()
    assert _publications(pg, dbname) == {}  # dropped when weir stopped


@pytest.mark.parametrize(("table", "why"), [
    ("nopk", "has no primary key"),
    ("noident", "REPLICA IDENTITY NOTHING"),
])
def test_a_table_weir_cannot_follow_is_refused_with_the_reason(
        pg: Any, dbname: str, table: str, why: str) -> None:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    query = f"SELECT v FROM {table} WHERE k = $1"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv_v FROM SELECT v FROM kv WHERE k = $1")
            with pytest.raises(psycopg.Error, match=why):
                conn.execute(f"CREATE CACHE bad FROM {query}")
            assert list(_publications(pg, dbname).values()) == [{"kv"}]
            assert conn.execute(f"SELECT v FROM {table} WHERE k = 1").fetchone() is not None
            explained = conn.execute(f"EXPLAIN CREATE CACHE FROM {query}").fetchone()
            assert explained is not None and why in explained[2], explained
            conn.execute(f"UPDATE {table} SET v = 'z' WHERE k = 1")  # still succeeds
    finally:
        server.stop()


def test_auto_mode_leaves_tables_it_cannot_follow_upstream(pg: Any, dbname: str) -> None:
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname), caching="auto", auto_after=1)
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            for _ in range(3):
                conn.execute("SELECT v FROM nopk WHERE k = %s", (1,))
                conn.execute("SELECT v FROM kv WHERE k = %s", (1,))

            def caches() -> list[str]:
                return [r[2] for r in conn.execute("SHOW CACHES WITH LITERALS").fetchall()]

            eventually(lambda: any("kv" in q for q in caches()), timeout=10)
            assert not any("nopk" in q for q in caches())

            def reason() -> str:
                rows = conn.execute("SHOW PROXIED QUERIES WITH LITERALS").fetchall()
                return " ".join(str(r[2]) for r in rows if "nopk" in r[1])

            eventually(lambda: "has no primary key" in reason(), timeout=10)
            conn.execute("UPDATE nopk SET v = 'z' WHERE k = 1")
    finally:
        server.stop()


def test_slots_drop_removes_publications_left_by_a_killed_weir(pg: Any, dbname: str) -> None:
    pg.psql("CREATE PUBLICATION weir_pub_0123456789ab", dbname)
    params = ConnectParams.from_url(pg.dsn(dbname=dbname))

    async def drop() -> list[str]:
        return await slots.drop_weir_slots(params)

    assert "publication weir_pub_0123456789ab" in asyncio.run(drop())
    assert _publications(pg, dbname) == {}

    async def live_weir_keeps_them() -> list[str]:
        conn = await PgConnection.connect(params, replication=True)
        try:
            await slots.create_slot(conn, "weir_test_live", temporary=True)
            return await slots.drop_orphan_publications(conn)
        finally:
            await conn.close()

    pg.psql("CREATE PUBLICATION weir_pub_0123456789ac", dbname)
    assert asyncio.run(live_weir_keeps_them()) == []


def test_concurrent_creations_of_one_query_make_one_cache(pg: Any, dbname: str) -> None:
    """Auto mode and an admin command (or two auto triggers) creating the same query's cache
    at once make one cache; neither fails."""
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn:
            conn.execute("CREATE CACHE kv_v FROM SELECT v FROM kv WHERE k = $1")
            registry = server.server.service.registry
            text = "SELECT v FROM other WHERE k = $1"

            async def both() -> list[Any]:
                return await asyncio.gather(registry.create(text, ("public",)),
                                            registry.create(text, ("public",)))

            first, second = server.call(both())
            assert first is second
            shown = conn.execute("SHOW CACHES WITH LITERALS").fetchall()
            assert [r for r in shown if "other" in r[2]]
            assert len(registry.caches) == 2
    finally:
        server.stop()



def _lock_waiters(pg: Any, dbname: str, holder_pid: int) -> str:
    """The backends waiting for a lock ``holder_pid`` holds."""
    return str(pg.psql("SELECT pid FROM pg_stat_activity "
                       f"WHERE {holder_pid} = ANY(pg_blocking_pids(pid))", dbname)).strip()


def test_a_cache_over_a_table_a_client_holds_locked_never_waits_for_the_client(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's open transaction holds a lock on a table (DDL: SQLAlchemy's teardown drops
    its tables in one) while weir creates a cache over it (auto mode; here its other
    connection's CREATE CACHE). weir describing the query waits for the lock; that wait must
    neither freeze weir (it once waited inside libpq holding the GIL: the client's own session
    got no answer, so it never ended the transaction) nor last longer than weir's lock
    timeout (the client may be waiting for the creation's answer)."""
    monkeypatch.setattr(registry, "DESCRIBE_LOCK_TIMEOUT", "5s")  # (time to look at the wait)
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with (
            psycopg.connect(server.dsn(dbname=dbname)) as holder,
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn,
            concurrent.futures.ThreadPoolExecutor(1) as pool,
        ):
            conn.execute("CREATE CACHE other_v FROM SELECT v FROM other WHERE k = $1")
            pid = holder.info.backend_pid  # (weir gives clients the upstream's pid)
            holder.execute("ALTER TABLE kv ADD COLUMN w int")  # open: holds ACCESS EXCLUSIVE

            answer = pool.submit(_create_kv_v, conn)
            try:
                eventually(lambda: _lock_waiters(pg, dbname, pid) != "", timeout=10)
                # weir answers the lock holder while its own describe still waits
                assert holder.execute("SELECT v FROM kv WHERE k = 1").fetchone() == ("a",)
                assert _lock_waiters(pg, dbname, pid) != ""
                # and the creation gives up while the holder waits for its answer
                outcome = answer.result(timeout=20)
            finally:
                holder.rollback()  # (lets a waiting weir go on, so the test ends either way)
            assert "lock timeout" in outcome
            assert "kv_v" not in server.server.service.registry.caches
            # the lock gone, the same cache is created and serves reads
            conn.execute("CREATE CACHE kv_v FROM SELECT v FROM kv WHERE k = $1")
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (1,)).fetchone() == ("a",)
    finally:
        server.stop()


def test_describing_a_query_waits_for_a_lock_without_freezing_weir(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock of the SQLAlchemy hang: taken between the describe's parse and its describe
    (a client's DROP TABLE in an open transaction), libpq's blocking describe waited for it
    holding the GIL, so no other thread of weir — the event loop serving the lock holder's
    session — ran until the wait ended. Here the main thread must see the wait while it
    lasts."""
    monkeypatch.setattr(registry, "DESCRIBE_LOCK_TIMEOUT", "30s")  # (time to look at the wait)
    pg.psql(SCHEMA, dbname)
    with (
        psycopg.connect(pg.dsn(dbname=dbname)) as holder,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        pid = holder.info.backend_pid

        def lock() -> None:
            holder.execute("ALTER TABLE kv ADD COLUMN w int")

        described = pool.submit(registry._describe, pg.dsn(dbname=dbname),
                                "SELECT v FROM kv WHERE k = $1", ("public",), lock)
        try:
            eventually(lambda: _lock_waiters(pg, dbname, pid) != "", timeout=10)
        finally:
            holder.rollback()
        assert [f.name for f in described.result(timeout=20)] == ["v"]


def test_a_first_cache_while_a_client_holds_a_written_transaction_open_answers(
        pg: Any, dbname: str) -> None:
    """Starting caching creates the replication slot, which PostgreSQL makes wait for every
    open transaction that has written: a client's CREATE CACHE (the first one) while its
    other connection holds such a transaction gets an answer, not a wait for itself."""
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with (
            psycopg.connect(server.dsn(dbname=dbname)) as holder,
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn,
            concurrent.futures.ThreadPoolExecutor(1) as pool,
        ):
            holder.execute("UPDATE other SET v = 'z' WHERE k = 1")  # open, with an xid

            answer = pool.submit(_create_kv_v, conn)
            try:
                outcome = answer.result(timeout=30)
            finally:
                holder.rollback()
            assert "caching is starting" in outcome
            # the transaction over, the start completes and the command succeeds
            eventually(lambda: _create_kv_v(conn) == "created", timeout=30)
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (1,)).fetchone() == ("a",)
    finally:
        server.stop()


def test_the_tables_check_takes_no_table_lock(pg: Any, dbname: str) -> None:
    """The check before a table is published reads the catalog only: it once locked each
    table (pg_partition_tree), so it waited behind a client's open DROP TABLE and, holding
    one table while waiting for another, could make the client a deadlock victim."""
    pg.psql(SCHEMA + "CREATE TABLE parted (k int PRIMARY KEY) PARTITION BY RANGE (k);"
            "CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10);", dbname)

    async def check(oids: list[int]) -> list[str]:
        conn = await asyncpg.connect(pg.dsn(dbname=dbname),
                                     server_settings={"lock_timeout": "100ms"})
        try:
            return sorted(r[1] for r in await conn.fetch(publication._TABLES_QUERY, oids))
        finally:
            await conn.close()

    with psycopg.connect(pg.dsn(dbname=dbname)) as holder:
        oids = [r[0] for r in holder.execute(
            "SELECT oid::int8 FROM pg_class WHERE relname IN ('kv', 'parted')")]
        holder.execute("LOCK TABLE kv, parted IN ACCESS EXCLUSIVE MODE")
        try:
            assert asyncio.run(check(oids)) == ["public.kv", "public.parted",
                                                "public.parted_1"]
        finally:
            holder.rollback()


def test_publishing_a_table_a_client_holds_locked_retries_in_short_waits(
        pg: Any, dbname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a table to the publication waits for its lock in short attempts (each below
    PostgreSQL's 1 s deadlock check, so in a lock cycle with a client weir gives up first):
    while a client's open transaction holds the table in SHARE mode (the describe's reads
    pass, ALTER PUBLICATION waits), weir's wait ends and starts again, and the cache is
    created once the client's transaction ends."""
    monkeypatch.setattr(publication, "LOCK_ATTEMPTS", 100)  # (time to see two on a busy machine)
    pg.psql(SCHEMA, dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    try:
        with (
            psycopg.connect(pg.dsn(dbname=dbname)) as holder,
            psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn,
            concurrent.futures.ThreadPoolExecutor(1) as pool,
        ):
            conn.execute("CREATE CACHE other_v FROM SELECT v FROM other WHERE k = $1")
            pid = holder.info.backend_pid
            holder.execute("LOCK TABLE kv IN SHARE MODE")
            answer = pool.submit(_create_kv_v, conn)
            waits: set[str] = set()

            def waited_again() -> bool:  # (a waiting attempt's backend and start time)
                waits.update(str(pg.psql(
                    "SELECT pid || '@' || extract(epoch FROM query_start) FROM pg_stat_activity "
                    f"WHERE query LIKE 'ALTER PUBLICATION%' AND {pid} = ANY(pg_blocking_pids(pid))",
                    dbname)).split())
                return len(waits) >= 2

            try:
                eventually(waited_again, timeout=20)
            finally:
                holder.rollback()
            assert answer.result(timeout=20) == "created"
            assert conn.execute("SELECT v FROM kv WHERE k = %s", (1,)).fetchone() == ("a",)
    finally:
        server.stop()
