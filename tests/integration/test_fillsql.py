"""A fill batch's upstream statements (``proxy.fillsql.fetch_all``) against the real upstream:
the one-statement form (snapshot, position and rows together, integer keys) and the
transaction form give every request exactly the rows its own statement returns; and what a
fill fetches, as ``SHOW WEIR STATUS`` ``fill_rows`` counts it."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from engine import FillRequest
from engine.dataflow.state.intervals import Span
from engine.plan.ir import Column, TableRef
from proxy.fillsql import fetch_all, fetch_rows, one_shape


def _table(pg: Any, dbname: str) -> TableRef:
    pg.psql("CREATE TABLE t (k int PRIMARY KEY, g int, v text, b bool);"
            "INSERT INTO t SELECT i, i % 7, 'v' || i, i % 2 = 0 "
            "FROM generate_series(1, 200) i", dbname)
    oid = int(pg.psql("SELECT 't'::regclass::oid", dbname).strip())
    return TableRef(oid, "public", "t", (Column("k", 23), Column("g", 23), Column("v", 25),
                                         Column("b", 16)), (0,))


def _batch(pg: Any, dbname: str, fills: list[list[FillRequest]]
           ) -> tuple[str, list[list[list[Any]]], list[list[list[Any]]]]:
    async def run() -> tuple[str, Any, Any]:
        conn = await asyncpg.connect(pg.dsn(dbname=dbname))
        try:
            text, position, flushed, rows = await fetch_all(conn, fills)
            assert position > 0 and flushed > 0
            own = [[await fetch_rows(conn, r) for r in reqs] for reqs in fills]
            return text, rows, own
        finally:
            await conn.close()

    return asyncio.run(run())


def _sorted(rows: list[list[list[Any]]]) -> list[list[list[Any]]]:
    return [[sorted(r) for r in per_fill] for per_fill in rows]


def test_one_statement_fill_equals_each_requests_own_statement(pg: Any, dbname: str) -> None:
    t = _table(pg, dbname)
    fills = [[FillRequest(t, (1,), (g,))] for g in (1, 3, 3, 6)] + [[FillRequest(t, (1,), (99,))]]
    assert one_shape(fills) is not None
    text, rows, own = _batch(pg, dbname, fills)
    assert ":" in text  # a snapshot's text form, xmin:xmax:xip
    assert _sorted(rows) == _sorted(own)
    assert [len(per_fill[0]) for per_fill in rows] == [29, 29, 29, 28, 0]
    assert rows[0][0][0][3] in (True, False)  # (bool decoded from its output form)


def test_other_shapes_take_the_transaction(pg: Any, dbname: str) -> None:
    t = _table(pg, dbname)
    text_keyed = [[FillRequest(t, (2,), ("v5",))], [FillRequest(t, (2,), ("v6",))]]
    mixed = [[FillRequest(t, (0,), (5,))], [FillRequest(t, (1,), (2,))]]
    for fills in (text_keyed, mixed):
        assert one_shape(fills) is None
        text, rows, own = _batch(pg, dbname, fills)
        assert ":" in text
        assert _sorted(rows) == _sorted(own)


def test_a_top_k_fill_fetches_its_whole_group(pg: Any, dbname: str) -> None:
    """``fill_rows`` counts the base rows fills fetched: a top-k cache's fill is its group's
    base key, so a LIMIT 3 read of a 40-row group fetches all 40 (the answer is exact)."""
    import psycopg

    from tests.support import InProcessWeir

    pg.psql("CREATE TABLE tk (id int PRIMARY KEY, g int, score int);"
            "INSERT INTO tk SELECT i, i % 2, i % 5 FROM generate_series(1, 80) i", dbname)
    server = InProcessWeir.start(pg.dsn(dbname=dbname))
    sql = "SELECT id, score FROM tk WHERE g = %s ORDER BY score DESC, id LIMIT 3"
    try:
        with psycopg.connect(server.dsn(dbname=dbname), autocommit=True) as conn, \
                psycopg.connect(pg.dsn(dbname=dbname), autocommit=True) as direct:
            conn.execute("CREATE CACHE FROM " + sql.replace("%s", "$1"))
            def fill_rows() -> int:
                status: dict[str, str] = dict(conn.execute("SHOW WEIR STATUS").fetchall())
                return int(status["fill_rows"])

            before = fill_rows()
            got = conn.execute(sql, (1,)).fetchall()
            last = conn.execute("EXPLAIN LAST STATEMENT").fetchone()
            assert last is not None and last[0] == "cache"
            assert got == direct.execute(sql, (1,)).fetchall()
            after = fill_rows()
            assert after - before == 40
    finally:
        server.stop()


def test_interval_fills_fetch_their_stretch_with_ties(pg: Any, dbname: str) -> None:
    """An interval fill (range-partial state) fetches exactly the rows of its span, and with
    ``first = k`` only up to the k-th value from its end (ascending, or from the top), with
    every tie of that value; under the transaction form (never merged into ``= ANY``)."""
    t = _table(pg, dbname)  # g = k % 7: every value of g has 28 or 29 rows
    spans = [Span(1, 23, lo=2, lo_incl=False, hi=5, hi_incl=True),
             Span(1, 23, lo=2, lo_incl=True, first=30),
             Span(1, 23, hi=4, hi_incl=False, first=30, from_top=True),
             Span(1, 23, lo=5, first=1000), Span(0, 23, lo=195, first=3),
             Span(1, 23, lo=None, hi=None)]
    fills = [[FillRequest(t, (s.column,), (s,))] for s in spans]
    assert one_shape(fills) is None
    _, rows, own = _batch(pg, dbname, fills)
    assert _sorted(rows) == _sorted(own)
    got = [sorted({r[s.column] for r in per_fill[0]})
           for s, per_fill in zip(spans, rows, strict=True)]
    assert got == [[3, 4, 5], [2, 3], [2, 3], [6], [196, 197, 198], list(range(7))]
    assert [len(per_fill[0]) for per_fill in rows][:3] == [86, 58, 58]


def test_interval_fills_per_equality_key(pg: Any, dbname: str) -> None:
    """An interval fill of per-key range-partial state (key ``(g value, Span on k)``)
    fetches only the key's rows of the span; with ``first = k`` the page's stretch counts the
    key's rows only (ascending and from the top)."""
    t = _table(pg, dbname)  # g = k % 7
    keys = [(3, Span(0, 23, lo=10, lo_incl=False, hi=60, hi_incl=True)),
            (3, Span(0, 23, lo=10, first=4)),
            (5, Span(0, 23, hi=100, first=3, from_top=True)),
            (6, Span(0, 23, lo=None, hi=None)),
            (2, Span(0, 23, lo=300))]
    fills = [[FillRequest(t, (1, 0), key)] for key in keys]
    assert one_shape(fills) is None
    _, rows, own = _batch(pg, dbname, fills)
    assert _sorted(rows) == _sorted(own)
    got = [sorted(r[0] for r in per_fill[0]) for per_fill in rows]
    assert got == [[17, 24, 31, 38, 45, 52, 59], [17, 24, 31, 38], [82, 89, 96],
                   list(range(6, 201, 7)), []]


def test_prefetches_of_one_shape_share_one_statement(pg: Any, dbname: str) -> None:
    """Semi-join prefetches (``via``) of one shape across a batch are fetched by one
    ``LATERAL`` statement per shape; each gets exactly the rows of its own statement: a key
    with no via rows, a join value matching no row (author 3's j = 8), a repeated key; a
    prefetch alone in its shape keeps its own statement."""
    from engine.dataflow.fills import SemiJoin
    from proxy import fillsql

    t = _table(pg, dbname)  # t.g = k % 7
    pg.psql("CREATE TABLE src (id int PRIMARY KEY, author int, j int);"
            "INSERT INTO src SELECT i, i % 5, i % 9 FROM generate_series(1, 30) i", dbname)
    oid = int(pg.psql("SELECT 'src'::regclass::oid", dbname).strip())
    src = TableRef(oid, "public", "src", (Column("id", 23), Column("author", 23),
                                          Column("j", 23)), (0,))
    fills = [[FillRequest(src, (1,), (a,)),
              FillRequest(t, (1,), (), SemiJoin(src, (1,), (a,), (2,)))] for a in (0, 3, 3, 77)]
    fills.append([FillRequest(t, (0,), (), SemiJoin(src, (1,), (4,), (0,)))])
    exact = [list(reqs) for reqs in fills]
    fills.append([FillRequest(t, (2,), ("v5",))])  # a text key: the transaction form
    assert fillsql.mixed_parts(fills) is None
    statements: list[str] = []
    real = fillsql.via_any_sql

    def counted(req: FillRequest) -> str:
        statements.append(real(req))
        return real(req)

    fillsql.via_any_sql = counted  # type: ignore[assignment]
    try:
        _, rows, own = _batch(pg, dbname, fills)
    finally:
        fillsql.via_any_sql = real  # type: ignore[assignment]
    assert len(statements) == 1 and "LATERAL" in statements[0]  # (the last fill: alone)
    assert _sorted(rows) == _sorted(own)
    assert [len(per_fill[-1]) for per_fill in rows] == [143, 143, 143, 0, 6, 1]
    # every request exact (integer keys): snapshot, position and both shapes' rows in one
    # statement (fillsql.mixed_sql), the same rows
    parts = fillsql.mixed_parts(exact)
    assert parts is not None and len(parts) == 3 and fillsql.one_shape(exact) is None
    text, mixed, own = _batch(pg, dbname, exact)
    assert ":" in text and _sorted(mixed) == _sorted(own) == _sorted(rows[:-1])
