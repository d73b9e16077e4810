"""AT TIME ZONE against real PostgreSQL: wall-clock times around DST transitions (gaps and
overlaps, both hemispheres, a zone whose offset changed without DST) read in a zone, and
instants shown in a zone, must equal PostgreSQL's, whatever the session TimeZone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from engine.dataflow import pgzones
from engine.values import oids as T

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Australia/Sydney", "Europe/Moscow",
         "Asia/Kolkata", "America/St_Johns", "Etc/GMT+5"]
#: Wall-clock times: transition days (every 20 minutes), ordinary days, far past and future.
LOCAL = [datetime(2024, 3, 10, 0, 0) + timedelta(minutes=20 * i) for i in range(20)] + \
    [datetime(2024, 3, 31, 1, 0) + timedelta(minutes=20 * i) for i in range(12)] + \
    [datetime(2024, 10, 27, 1, 0) + timedelta(minutes=20 * i) for i in range(12)] + \
    [datetime(2024, 11, 3, 0, 0) + timedelta(minutes=20 * i) for i in range(12)] + \
    [datetime(2024, 4, 7, 1, 0) + timedelta(minutes=20 * i) for i in range(12)] + \
    [datetime(2014, 10, 26, 0, 30), datetime(2014, 10, 26, 1, 30), datetime(1890, 1, 1, 12),
     datetime(2077, 7, 4, 2, 30, 0, 123456), datetime(1, 1, 2), datetime(2024, 2, 29, 23, 59)]


@pytest.mark.parametrize("session_zone", ["UTC", "Asia/Tokyo"])
def test_at_time_zone_matches_postgres(pg: Any, session_zone: str) -> None:
    wrong = []
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute(f"SET TimeZone = '{session_zone}'")
        for zone in ZONES:
            assert pgzones.zone_known(zone)
            for local in LOCAL:
                row = conn.execute("SELECT %s::timestamp AT TIME ZONE %s", (local, zone))
                want = row.fetchone()[0]  # type: ignore[index]
                got = pgzones.timezone((zone, local), (T.TEXT, T.TIMESTAMP))
                if got != want:
                    wrong.append(("timestamp", zone, local, got, want))
                instant = local.replace(tzinfo=UTC)
                row = conn.execute("SELECT %s::timestamptz AT TIME ZONE %s", (instant, zone))
                want = row.fetchone()[0]  # type: ignore[index]
                got = pgzones.timezone((zone, instant), (T.TEXT, T.TIMESTAMPTZ))
                if got != want:
                    wrong.append(("timestamptz", zone, instant, got, want))
    assert wrong == []


@pytest.mark.parametrize("name", ["EST", "CET", "+02", "utc", "europe/paris", "/etc/passwd",
                                  "Europe/../UTC", "Nowhere/City", ""])
def test_other_names_are_not_planned(name: str) -> None:
    assert not pgzones.zone_known(name)


UNITS = ["microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month",
         "quarter", "year", "decade", "century", "millennium"]


def test_date_trunc_in_a_zone_matches_postgres(pg: Any) -> None:
    """date_trunc(unit, timestamptz, zone) around transitions (the truncated wall-clock time
    may fall in a gap or an overlap; smaller units keep the instant's offset)."""
    wrong = []
    instants = [(local + timedelta(seconds=17, microseconds=345678)).replace(tzinfo=UTC)
                for local in LOCAL if local.year > 1]
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        for zone in ZONES:
            for at in instants:
                rows = conn.execute(
                    "SELECT " + ", ".join(f"date_trunc('{u}', %s::timestamptz, %s)"
                                          for u in UNITS), [at, zone] * len(UNITS)).fetchone()
                assert rows is not None
                for unit, want in zip(UNITS, rows, strict=True):
                    got = pgzones.date_trunc_zone((unit, zone, at), ())
                    if got != want:
                        wrong.append((unit, zone, at, got, want))
    assert not wrong, wrong[:10]
