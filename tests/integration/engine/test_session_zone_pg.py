"""Date/time forms that read the session TimeZone against real PostgreSQL: each statement is
planned for a session in one zone (``QueryPlanner.classify(..., timezone=...)``), evaluated
by the reference evaluator over the table's rows, and compared with what PostgreSQL answers
in a session of that TimeZone — instants around DST transitions in both hemispheres, a
zone with a half-hour offset, month ends and leap days."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import Any

import psycopg
import pytest

from engine.plan.evaluate import evaluate_reader
from engine.plan.queries import QueryPlanner
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import CATALOG_QUERY, Catalog

ZONES = ["Europe/Paris", "America/New_York", "Australia/Sydney", "Asia/Kolkata",
         "America/St_Johns", "UTC"]
#: instants (UTC) around the 2024 transitions of these zones, month ends, a leap day
INSTANTS = [datetime(2024, 3, 10, 5, 0, tzinfo=UTC) + timedelta(minutes=25 * i)
            for i in range(12)] + \
    [datetime(2024, 3, 30, 23, 0, tzinfo=UTC) + timedelta(minutes=25 * i) for i in range(12)] + \
    [datetime(2024, 10, 26, 23, 0, tzinfo=UTC) + timedelta(minutes=25 * i) for i in range(12)] + \
    [datetime(2024, 4, 6, 14, 0, tzinfo=UTC) + timedelta(minutes=25 * i) for i in range(12)] + \
    [datetime(2024, 10, 5, 14, 0, tzinfo=UTC) + timedelta(minutes=25 * i) for i in range(12)] + \
    [datetime(2024, 1, 31, 22, 30, 17, 123456, tzinfo=UTC),
     datetime(2024, 2, 29, 12, 0, tzinfo=UTC), datetime(2023, 12, 31, 23, 59, 59, tzinfo=UTC),
     datetime(1999, 12, 31, 20, 0, tzinfo=UTC), datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC)]
DATES = [date(2024, 3, 10), date(2024, 3, 31), date(2024, 10, 27), date(2024, 4, 7),
         date(2024, 1, 31), date(2024, 2, 29)]

EXPRS = [
    *(f"date_trunc('{u}', at)" for u in ("hour", "day", "week", "month", "quarter", "year")),
    *(f"extract({f} FROM at)" for f in ("hour", "minute", "second", "day", "dow", "isodow",
                                         "doy", "week", "month", "year", "isoyear",
                                         "quarter", "epoch")),
    "date_trunc('day', d)", "date_trunc('month', d)",
    "at + interval '1 day'", "at - interval '1 day'", "at + interval '1 month'",
    "at + interval '1 month 1 day 2 hours'", "at - interval '2 months 3 days 30 minutes'",
    "interval '7 days' + at", "at + interval '1 year'",
    "at::date", "at::timestamp", "d::timestamptz", "(at::timestamp)::timestamptz",
    "date_trunc('day', at)::date", "(at + interval '1 day')::date - at::date",
]


def _planned(planner: QueryPlanner, sql: str, zone: str) -> Any:
    answer = planner.classify(sql, ("public",), zone)
    assert not isinstance(answer.query, Unsupported), (sql, answer.query.reason)
    assert answer.query.identity.timezone == (None if "epoch" in sql else zone), sql
    return answer.query.plan


@pytest.mark.parametrize("zone", ZONES)
def test_session_zone_forms_match_postgres(pg: Any, zone: str) -> None:
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS zt")
        conn.execute("CREATE TABLE zt (id int PRIMARY KEY, at timestamptz, d date)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO zt VALUES (%s, %s, %s)",
                            [(i, at, DATES[i % len(DATES)] if i % 7 else None)
                             for i, at in enumerate(INSTANTS)])
            cur.execute("INSERT INTO zt VALUES (-1, NULL, NULL)")
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        relation = next(r for r in catalog.relations if r.name == "zt")
        rows = [(i, None if at is None else at.astimezone(UTC), d)
                for i, at, d in conn.execute("SELECT id, at, d FROM zt").fetchall()]
        planner = QueryPlanner(catalog)
        conn.execute(f"SET TimeZone = '{zone}'")
        wrong = []
        for expr in EXPRS:
            sql = f"SELECT id, {expr} FROM zt"
            plan = _planned(planner, sql, zone)
            ours = sorted(evaluate_reader(plan.reader, {relation.oid: rows}, ()),
                          key=lambda r: r[0])
            theirs = sorted(conn.execute(sql + " ORDER BY id").fetchall(), key=lambda r: r[0])
            for mine, want in zip(ours, theirs, strict=True):
                got = mine[1]
                if isinstance(want[1], datetime) and want[1].tzinfo is not None:
                    want = (want[0], want[1].astimezone(UTC))
                if got != want[1] or type(got) is not type(want[1]):
                    wrong.append((expr, want[0], got, want[1]))
        wrong += _literals(conn, planner, relation.oid, rows, zone)
        conn.execute("DROP TABLE zt")
    assert not wrong, wrong[:10]


#: wall-clock times as literals without an offset: DST gaps and overlaps (Paris, New York,
#: Sydney), ordinary times, a date alone
LITERALS = ["2024-03-31 02:30:00", "2024-10-27 02:30", "2024-03-10 02:30:00",
            "2024-11-03 01:30:00", "2024-04-07 02:30:00", "2024-10-06 02:30:00",
            "2024-03-10 12:00:00", "2024-02-29", "2024-01-31 23:30:17.123456"]


def _literals(conn: psycopg.Connection[Any], planner: QueryPlanner, oid: int,
              rows: list[tuple[Any, ...]], zone: str) -> list[Any]:
    """Pinned range literals and lifted key literals, read in the session TimeZone."""
    wrong = []
    for lo, hi in pairwise(LITERALS):
        sql = f"SELECT id FROM zt WHERE at >= '{lo}' AND at < timestamptz '{hi}'"
        plan = _planned(planner, sql, zone)
        ours = sorted(r[0] for r in evaluate_reader(plan.reader, {oid: rows}, ()))
        theirs = sorted(r[0] for r in conn.execute(sql).fetchall())
        if ours != theirs:
            wrong.append((sql, ours, theirs))
    for literal in LITERALS:
        want = conn.execute("SELECT %s::timestamptz", (literal,)).fetchone()
        assert want is not None
        key_rows = [(*row[:1], want[0].astimezone(UTC), row[2]) for row in rows[:3]]
        sql = f"SELECT id FROM zt WHERE at = '{literal}'"
        answer = planner.classify(sql, ("public",), zone)
        assert not isinstance(answer.query, Unsupported)
        assert answer.query.identity.timezone == zone
        keys = answer.keys()
        assert keys is not None and len(keys) == 1, (literal, keys)
        got = sorted(r[0] for r in evaluate_reader(answer.query.plan.reader, {oid: key_rows},
                                                   keys[0]))
        if got != [row[0] for row in rows[:3]]:
            wrong.append((sql, keys, want))
    return wrong


def test_other_session_zones_are_refused(pg: Any) -> None:
    """Without a TimeZone, or one weir does not compute in, the forms stay upstream."""
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS zt2 (id int PRIMARY KEY, at timestamptz)")
        planner = QueryPlanner(Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall()))
        conn.execute("DROP TABLE zt2")
    for zone in (None, "EST", "<+02>-02", "europe/paris"):
        answer = planner.classify("SELECT date_trunc('day', at) FROM zt2", ("public",), zone)
        assert isinstance(answer.query, Unsupported), zone
        assert "session TimeZone" in answer.query.reason
