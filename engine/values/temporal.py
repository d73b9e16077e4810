"""Date, time and interval text codecs (DateStyle ISO, IntervalStyle postgres).

Owns: parsing PostgreSQL's text output for date, time, timetz, timestamp, timestamptz and
interval into canonical values, and formatting them back exactly as PostgreSQL prints them
with ``DateStyle=ISO`` and ``IntervalStyle=postgres`` (the settings weir's replication and
fill connections use).

Canonical values: ``date``; naive ``time``; ``time`` with a fixed-offset tzinfo for timetz;
naive ``datetime`` for timestamp; UTC-aware ``datetime`` for timestamptz (the instant, so the
session time zone does not matter); :class:`Interval`. Values Python cannot hold
(``infinity``, BC dates, years after 9999, ``24:00:00``) stay :class:`TextValue`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, timezone

from engine.values import oids
from engine.values.types import Interval, TextValue

_USECS_PER_HOUR = 3_600_000_000
_USECS_PER_MINUTE = 60_000_000
_USECS_PER_SECOND = 1_000_000


def _special(oid: int, text: str) -> TextValue:
    return TextValue(oid, text)


def parse_date(text: str) -> date | TextValue:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return _special(oids.DATE, text)


def parse_time(text: str) -> time | TextValue:
    try:
        return time.fromisoformat(text)
    except ValueError:
        return _special(oids.TIME, text)


def parse_timetz(text: str) -> time | TextValue:
    try:
        return time.fromisoformat(text)
    except ValueError:
        return _special(oids.TIMETZ, text)


def parse_timestamp(text: str) -> datetime | TextValue:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return _special(oids.TIMESTAMP, text)


def parse_timestamptz(text: str) -> datetime | TextValue:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return _special(oids.TIMESTAMPTZ, text)
    if value.tzinfo is None:
        return _special(oids.TIMESTAMPTZ, text)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return _special(oids.TIMESTAMPTZ, text)


def _fraction(usec: int) -> str:
    return f".{usec:06d}".rstrip("0") if usec else ""


def _offset(delta: timedelta | None) -> str:
    if delta is None:
        return ""
    total = int(delta.total_seconds())
    sign = "-" if total < 0 else "+"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    out = f"{sign}{hours:02d}"
    if minutes or seconds:
        out += f":{minutes:02d}"
    if seconds:
        out += f":{seconds:02d}"
    return out


def format_date(value: date) -> str:
    return value.isoformat()


def format_time(value: time) -> str:
    body = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}{_fraction(value.microsecond)}"
    return body + (_offset(value.utcoffset()) if value.tzinfo is not None else "")


def format_timestamp(value: datetime) -> str:
    return f"{value.date().isoformat()} {format_time(value.timetz())}"


def format_timestamptz(value: datetime, tz: timezone = UTC) -> str:
    """Text of an instant as PostgreSQL prints it in a session whose TimeZone is ``tz``."""
    return format_timestamp(value.astimezone(tz))


_INTERVAL_PART = re.compile(r"\s*([+-]?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"\s*([+-])?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?\s*$")


def parse_interval(text: str) -> Interval | TextValue:
    """Parse IntervalStyle 'postgres' output: ``1 year 2 mons -3 days +04:05:06.5``."""
    months = days = usecs = 0
    pos = 0
    while (m := _INTERVAL_PART.match(text, pos)) is not None:
        n = int(m.group(1))
        unit = m.group(2)
        if unit == "year":
            months += 12 * n
        elif unit == "mon":
            months += n
        else:
            days += n
        pos = m.end()
    rest = text[pos:]
    if rest.strip():
        t = _INTERVAL_TIME.match(rest)
        if t is None:
            return _special(oids.INTERVAL, text)
        frac = int((t.group(5) or "").ljust(6, "0"))
        usecs = (int(t.group(2)) * _USECS_PER_HOUR + int(t.group(3)) * _USECS_PER_MINUTE
                 + int(t.group(4)) * _USECS_PER_SECOND + frac)
        if t.group(1) == "-":
            usecs = -usecs
    elif pos == 0:
        return _special(oids.INTERVAL, text)
    return Interval(months, days, usecs)


def _trunc_divmod(a: int, b: int) -> tuple[int, int]:
    """C-style division (truncation toward zero), as PostgreSQL's EncodeInterval uses."""
    q = abs(a) // b
    q = -q if a < 0 else q
    return q, a - q * b


def format_interval(value: Interval) -> str:
    """Text exactly as PostgreSQL prints it with IntervalStyle 'postgres'."""
    year, mon = _trunc_divmod(value.months, 12)
    parts: list[str] = []
    is_before = False
    is_zero = True
    for n, unit in ((year, "year"), (mon, "mon"), (value.days, "day")):
        if n == 0:
            continue
        plus = "+" if (not is_zero and is_before and n > 0) else ""
        parts.append(f"{plus}{n} {unit}{'' if n == 1 else 's'}")
        is_before = n < 0
        is_zero = False
    hour, rest = _trunc_divmod(value.microseconds, _USECS_PER_HOUR)
    minute, rest = _trunc_divmod(rest, _USECS_PER_MINUTE)
    sec, fsec = _trunc_divmod(rest, _USECS_PER_SECOND)
    if is_zero or hour or minute or sec or fsec:
        minus = hour < 0 or minute < 0 or sec < 0 or fsec < 0
        sign = "-" if minus else ("+" if is_before else "")
        parts.append(f"{sign}{abs(hour):02d}:{abs(minute):02d}:{abs(sec):02d}{_fraction(abs(fsec))}")
    return " ".join(parts)
