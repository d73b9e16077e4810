"""Timestamptz literals in the textual forms applications print (``Nov 27 2026 10:00 -08``,
``Fri, 27 Nov 2026 10:00:00 GMT``, ``November 27, 2026 10:00 PM America/Los_Angeles``)
against real PostgreSQL, under several DateStyles and TimeZones: every text weir reads
(``literals.literal_value_in_zone``, ``engine.plan.datetime_input``) is the instant
PostgreSQL reads, in every session; the forms whose meaning is a setting or the clock (zone
abbreviations, all-numeric dates, relative words) are refused with their reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg

from engine.plan.literals import LiteralError, literal_value_in_zone
from engine.plan.queries import QueryPlanner
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import CATALOG_QUERY, Catalog
from engine.values import oids as T

STYLES = ["ISO, MDY", "ISO, DMY", "SQL, DMY", "German, DMY", "Postgres, YMD", "SQL, MDY"]
SESSION_ZONES = ["UTC", "America/New_York", "Australia/Sydney", "Asia/Kolkata"]
#: wall-clock times around DST transitions (New York, Paris, Sydney), a leap day, month ends
LOCALS = [datetime(2026, 3, 8, 1, 59), datetime(2026, 3, 8, 2, 30), datetime(2026, 3, 8, 3, 0),
          datetime(2026, 11, 1, 1, 30), datetime(2026, 3, 29, 2, 30),
          datetime(2026, 10, 25, 2, 30), datetime(2026, 4, 5, 2, 30),
          datetime(2028, 2, 29, 12, 0, 5, 250000), datetime(2026, 12, 31, 23, 59, 59),
          datetime(2026, 11, 27, 0, 0), datetime(2026, 11, 27, 12, 0),
          datetime(1999, 1, 8, 4, 5, 6, 789)]
ZONE_WORDS = ["", " -08", " +05:30", " -0830", " +15:59", " Z", " UTC", " gmt", " zulu",
              " America/Los_Angeles", " Europe/Paris", " Australia/Sydney", " Asia/Kolkata",
              " Etc/GMT+3"]
REFUSED = {
    "Nov 27 2026 10:00 PST": "abbreviation", "Nov 27 2026 10:00 CET": "abbreviation",
    "11/12/2026 10:00": "DateStyle", "12.11.2026": "DateStyle", "now": "current time",
    "today": "current time", "yesterday": "current time", "tomorrow 10:00": "current time",
    "Nov 27 2026 10:00 UTC+3": "abbreviation", "Nov 27 2026 10:00 EST5EDT": "abbreviation",
    "Nov 27 26": "four-digit", "Nov 27 2026 24:00": "24:00",
    "Nov 27 2026 10:00:59.1234567": "time", "2026-11-27 10:00+16": "out of range",
    "Nov 27 2026 10:00 +16": "out of range", "infinity": "month name",
}


def _forms(local: datetime) -> list[str]:
    """``local`` written the ways PostgreSQL reads under every DateStyle."""
    mon, month = local.strftime("%b"), local.strftime("%B")
    hm = f"{local.hour}:{local.minute:02d}"
    hms = f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}" + (
        f".{local.microsecond:06d}".rstrip("0") if local.microsecond else "")
    twelve = f"{(local.hour % 12) or 12}:{local.minute:02d}:{local.second:02d}"
    ampm = "PM" if local.hour >= 12 else "am"
    return [f"{mon} {local.day} {local.year} {hms}", f"{local.day} {month} {local.year} {hm}",
            f"{local.strftime('%a')}, {local.day:02d} {mon} {local.year} {hms}",
            f"{month.upper()} {local.day}, {local.year} {twelve} {ampm}",
            f"{local:%Y-%m-%d} {hms}", f"{mon} {local.day} {local.year}"]


def _texts() -> list[str]:
    out: list[str] = []
    for local in LOCALS:
        for form in _forms(local):
            out.extend(form + zone for zone in ZONE_WORDS)
    return [*out, "Nov 27 2026 10:00-0830", "epoch", "Sat Nov 27 2026 10:00"]


def _epoch(value: datetime) -> Decimal:
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds
    return Decimal(micros) / 10**6


def test_textual_timestamptz_literals_match_postgres(pg: Any) -> None:
    texts = _texts()
    checked = 0
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        for style in STYLES:
            for zone in SESSION_ZONES:
                conn.execute(f"SET DateStyle = '{style}'")
                conn.execute(f"SET TimeZone = '{zone}'")
                for text in [*texts, *REFUSED]:
                    try:
                        ours = literal_value_in_zone(T.TIMESTAMPTZ, text, zone)
                    except LiteralError as exc:
                        assert text in REFUSED, (text, str(exc))
                        assert REFUSED[text] in str(exc), (text, str(exc))
                        continue
                    assert text not in REFUSED, text
                    row = conn.execute("SELECT extract(epoch FROM %s::timestamptz)",
                                       (text,)).fetchone()
                    assert row is not None
                    assert _epoch(ours) == row[0], (style, zone, text, ours)
                    checked += 1
    assert checked == len(texts) * len(STYLES) * len(SESSION_ZONES)


def test_textual_literals_plan_in_the_right_identity(pg: Any) -> None:
    """A literal with its own offset or zone plans once for every session (no TimeZone in
    the identity); one without is the session's wall-clock time (the zone joins it); a zone
    abbreviation goes upstream with its reason."""
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS tl")
        conn.execute("CREATE TABLE tl (id int PRIMARY KEY, at timestamptz)")
        conn.execute("INSERT INTO tl SELECT g, timestamptz '2026-11-27 00:00+00' + "
                     "g * interval '37 minutes' FROM generate_series(1, 100) g")
        catalog = Catalog.from_rows(conn.execute(CATALOG_QUERY).fetchall())
        planner = QueryPlanner(catalog)
        cases = {
            "SELECT id FROM tl WHERE at < 'Nov 27 2026 10:00 America/Los_Angeles'": None,
            "SELECT id FROM tl WHERE at >= 'Fri, 27 Nov 2026 10:00:00 GMT'": None,
            "SELECT id FROM tl WHERE at > 'November 27, 2026 9:15 PM'": "Europe/Paris",
        }
        for sql, identity_zone in cases.items():
            answer = planner.classify(sql, ("public",), "Europe/Paris")
            assert not isinstance(answer.query, Unsupported), (sql, answer.query.reason)
            assert answer.query.identity.timezone == identity_zone, sql
        refused = planner.classify("SELECT id FROM tl WHERE at < 'Nov 27 2026 10:00 PST'",
                                   ("public",), "Europe/Paris").query
        assert isinstance(refused, Unsupported)
        assert "timezone_abbreviations" in refused.reason


def test_session_offsets_are_read_by_postgres_rules(pg: Any) -> None:
    """A wall-clock time inside a DST gap or overlap, without a zone, in each session zone:
    weir's instant is PostgreSQL's."""
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        for zone in ["America/New_York", "Europe/Paris", "Australia/Sydney"]:
            conn.execute(f"SET TimeZone = '{zone}'")
            for local in LOCALS:
                for minutes in (0, 15, 45):
                    text = (local + timedelta(minutes=minutes)).strftime("%b %d %Y %H:%M")
                    row = conn.execute("SELECT extract(epoch FROM %s::timestamptz)",
                                       (text,)).fetchone()
                    assert row is not None
                    assert _epoch(literal_value_in_zone(T.TIMESTAMPTZ, text, zone)) == row[0]


def test_textual_timestamp_literals_match_postgres(pg: Any) -> None:
    """The same texts as timestamps without time zone: PostgreSQL ignores a zone or offset
    in them, and so does weir (``literals._timestamp``); the value is the wall-clock time
    PostgreSQL reads under every DateStyle and TimeZone. The refused forms stay refused."""
    texts = _texts()
    checked = 0
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        for style in STYLES:
            for zone in SESSION_ZONES[:2]:
                conn.execute(f"SET DateStyle = '{style}'")
                conn.execute(f"SET TimeZone = '{zone}'")
                for text in [*texts, *REFUSED, "2026-11-27 10:00+05", "2026-11-27T10:00Z"]:
                    try:
                        ours = literal_value_in_zone(T.TIMESTAMP, text, zone)
                    except LiteralError as exc:
                        assert text in REFUSED, (text, str(exc))
                        continue
                    assert text not in REFUSED, text
                    row = conn.execute("SELECT extract(epoch FROM %s::timestamp)",
                                       (text,)).fetchone()
                    assert row is not None
                    assert _epoch(ours.replace(tzinfo=UTC)) == row[0], (style, zone, text)
                    checked += 1
    assert checked == (len(texts) + 2) * len(STYLES) * 2
