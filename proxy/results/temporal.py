"""Calendar arithmetic for result encoding: canonical temporal values -> broken-down fields.

Owns: turning the canonical date/time values of :mod:`engine.values` (Python ``date``,
``time``, ``datetime``, :class:`~engine.values.Interval`, ``timedelta``, and the
:class:`~engine.values.TextValue` specials Python cannot hold: ``infinity``, BC dates, years
after 9999, ``24:00:00``) into the fields PostgreSQL's output functions work from, in
PostgreSQL's own conventions (astronomical years: 1 BC is year 0; Julian day numbers as
``date2j``; microseconds since 2000-01-01), and rotating an instant into a session time zone.

Invariants: pure functions, no wall clock. Years are astronomical. A value that cannot be
represented exactly raises :class:`Unencodable` (the caller forwards the query upstream);
nothing here guesses. Instants outside Python's datetime range are rotated by shifting whole
400-year Gregorian cycles (146097 days, an exact number of weeks), within which both
PostgreSQL's and Python's time zone code repeat their rules; before the first transition of
a zone both use its earliest offset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from engine import Interval, TextValue, oids

USECS_PER_SEC = 1_000_000
USECS_PER_MINUTE = 60 * USECS_PER_SEC
USECS_PER_HOUR = 60 * USECS_PER_MINUTE
USECS_PER_DAY = 24 * USECS_PER_HOUR
POSTGRES_EPOCH_JDATE = 2451545  # date2j(2000, 1, 1)
_ORDINAL_2000 = date(2000, 1, 1).toordinal()
_CYCLE_DAYS = 146097  # days in 400 Gregorian years
_CYCLE_USECS = _CYCLE_DAYS * USECS_PER_DAY
_INFINITE = {"infinity": 1, "-infinity": -1}


class Unencodable(ValueError):
    """A value weir cannot reproduce byte-exactly (the query must be answered upstream)."""


@dataclass(frozen=True, slots=True)
class Stamp:
    """A broken-down date and time of day (astronomical year) with an optional UTC offset."""

    year: int
    month: int
    day: int
    usec: int = 0  # microseconds since midnight
    offset: int | None = None  # seconds east of UTC (None: no zone printed)
    abbrev: str | None = None  # the zone abbreviation at that instant


def date2j(year: int, month: int, day: int) -> int:
    """PostgreSQL's Julian day number of a proleptic Gregorian date (astronomical year)."""
    if month > 2:
        month += 1
        year += 4800
    else:
        month += 13
        year += 4799
    century = year // 100
    julian = year * 365 - 32167 + year // 4 - century + century // 4
    return julian + 7834 * month // 256 + day


def j2date(jd: int) -> tuple[int, int, int]:
    """Inverse of :func:`date2j` (PostgreSQL's j2date, valid for jd >= 0)."""
    julian = jd + 32044
    quad = julian // 146097
    extra = (julian - quad * 146097) * 4 + 3
    julian += 60 + quad * 3 + extra // 146097
    quad = julian // 1461
    julian -= quad * 1461
    y = julian * 4 // 1461
    julian = (julian + 305) % 365 if y != 0 else (julian + 306) % 366
    julian += 123
    y += quad * 4
    year = y - 4800
    quad = julian * 2141 // 65536
    day = julian - 7834 * quad // 256
    month = (quad + 10) % 12 + 1
    return year, month, day


def weekday(year: int, month: int, day: int) -> int:
    """Day of week, 0 = Sunday (PostgreSQL's j2day)."""
    return (date2j(year, month, day) + 1) % 7


_STAMP_TEXT = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d)"
    r"(?: (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?)?"
    r"(?:([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?)?"
    r"( BC)?"
)


def parse_special(text: str) -> Stamp:
    """Fields of ISO-style text PostgreSQL printed (BC and 5+ digit years included)."""
    m = _STAMP_TEXT.fullmatch(text)
    if m is None:
        raise Unencodable(f"unrecognised date/time text {text!r}")
    year = int(m.group(1))
    if m.group(12):
        year = 1 - year
    usec = 0
    if m.group(4):
        frac = int((m.group(7) or "").ljust(6, "0"))
        usec = (int(m.group(4)) * 3600 + int(m.group(5)) * 60 + int(m.group(6))) * USECS_PER_SEC
        usec += frac
    offset = None
    if m.group(8):
        offset = int(m.group(9)) * 3600 + int(m.group(10) or 0) * 60 + int(m.group(11) or 0)
        offset = -offset if m.group(8) == "-" else offset
    return Stamp(year, int(m.group(2)), int(m.group(3)), usec, offset)


def infinite(value: Any, oid: int) -> int:
    """+1 / -1 for the ``infinity`` / ``-infinity`` TextValues of type ``oid``, 0 otherwise."""
    if isinstance(value, TextValue) and value.oid == oid:
        return _INFINITE.get(value.text, 0)
    return 0


def _expect(value: Any, kind: type, oid: int, aware: bool | None = None) -> None:
    """Refuse values of the wrong Python type (a datetime is not a date; timestamp values are
    naive, timestamptz values aware; a TextValue must be of the column's type) instead of
    guessing."""
    if isinstance(value, TextValue):
        if value.oid != oid:
            raise Unencodable(f"text of type oid {value.oid} in a column of type oid {oid}")
        return
    if type(value) is not kind:
        raise Unencodable(f"expected {kind.__name__}, got {type(value).__name__}")
    if aware is not None and (getattr(value, "tzinfo", None) is not None) != aware:
        raise Unencodable(f"expected a{'n aware' if aware else ' naive'} {kind.__name__}")


def date_fields(value: date | TextValue) -> Stamp:
    _expect(value, date, oids.DATE)
    if isinstance(value, TextValue):
        return parse_special(value.text)
    return Stamp(value.year, value.month, value.day)


def date_days(value: date | TextValue) -> int:
    """Days since 2000-01-01 (PostgreSQL's DateADT)."""
    _expect(value, date, oids.DATE)
    if isinstance(value, date):
        return value.toordinal() - _ORDINAL_2000
    f = parse_special(value.text)
    return date2j(f.year, f.month, f.day) - POSTGRES_EPOCH_JDATE


def _time_usec(value: time) -> int:
    return (value.hour * 3600 + value.minute * 60 + value.second) * USECS_PER_SEC + (
        value.microsecond
    )


def stamp_fields(value: datetime | TextValue) -> Stamp:
    """Fields of a timestamp without time zone."""
    _expect(value, datetime, oids.TIMESTAMP, aware=False)
    if isinstance(value, TextValue):
        return parse_special(value.text)
    return Stamp(value.year, value.month, value.day, _time_usec(value.time()))


def stamp_usecs(stamp: Stamp) -> int:
    """Microseconds since 2000-01-01 00:00 of ``stamp`` read as UTC minus its offset."""
    days = date2j(stamp.year, stamp.month, stamp.day) - POSTGRES_EPOCH_JDATE
    return days * USECS_PER_DAY + stamp.usec - (stamp.offset or 0) * USECS_PER_SEC


_USEC = timedelta(microseconds=1)
_NAIVE_2000 = datetime(2000, 1, 1)
_AWARE_2000 = datetime(2000, 1, 1, tzinfo=UTC)


def timestamp_usecs(value: datetime | TextValue) -> int:
    """PostgreSQL's Timestamp (and TimestampTz, for aware values) of a canonical value
    (callers check which of the two the column wants)."""
    if isinstance(value, datetime):
        epoch = _NAIVE_2000 if value.tzinfo is None else _AWARE_2000
        return (value - epoch) // _USEC
    return stamp_usecs(parse_special(value.text))


def naive_usecs(value: datetime | TextValue) -> int:
    """PostgreSQL's Timestamp of a timestamp-without-time-zone value (a naive datetime)."""
    _expect(value, datetime, oids.TIMESTAMP, aware=False)
    return timestamp_usecs(value)


def instant_usecs(value: datetime | TextValue) -> int:
    """Microseconds since 2000-01-01 UTC of a timestamptz (an aware datetime)."""
    _expect(value, datetime, oids.TIMESTAMPTZ, aware=True)
    if isinstance(value, TextValue):
        f = parse_special(value.text)
        if f.offset is None:
            raise Unencodable(f"timestamptz text without an offset: {value.text!r}")
        return stamp_usecs(f)
    return timestamp_usecs(value)


def _from_usecs(usecs: int) -> tuple[int, int, int, int]:
    days, tod = divmod(usecs, USECS_PER_DAY)
    y, m, d = j2date(days + POSTGRES_EPOCH_JDATE)
    return y, m, d, tod


_SAFE_LOW = (date(2, 1, 1).toordinal() - _ORDINAL_2000) * USECS_PER_DAY
_SAFE_HIGH = (date(9998, 12, 31).toordinal() - _ORDINAL_2000) * USECS_PER_DAY
_SECOND = timedelta(seconds=1)




def local_fields(usecs: int, zone: tzinfo) -> Stamp:
    """The fields of the instant ``usecs`` (since 2000-01-01 UTC) as seen in ``zone``."""
    shift = 0
    if not _SAFE_LOW <= usecs < _SAFE_HIGH:
        # whole 400-year cycles into the middle of Python's range, same weekday and rules
        target = (date(1200 if usecs < 0 else 9000, 1, 1).toordinal() - _ORDINAL_2000)
        cycles = (usecs // USECS_PER_DAY - target) // _CYCLE_DAYS
        shift = cycles * _CYCLE_USECS
    local = (_AWARE_2000 + timedelta(microseconds=usecs - shift)).astimezone(zone)
    offset = local.utcoffset()
    if offset is None:
        raise Unencodable("time zone without an offset")
    off = offset // _SECOND
    if offset != timedelta(seconds=off):
        raise Unencodable("time zone offset with fractional seconds")
    y, m, d, tod = _from_usecs(usecs + off * USECS_PER_SEC)
    return Stamp(y, m, d, tod, off, local.tzname())


def zoned_fields(value: datetime | TextValue, zone: tzinfo) -> Stamp:
    """The fields of a timestamptz value as seen in ``zone`` (fast path for datetimes that
    stay inside Python's range; everything else via :func:`local_fields`)."""
    if type(value) is datetime and value.tzinfo is not None:
        try:
            local = value.astimezone(zone)
        except OverflowError:
            return local_fields(instant_usecs(value), zone)
        offset = local.utcoffset()
        if offset is None or offset.microseconds:
            raise Unencodable("time zone offset with fractional seconds")
        usec = ((local.hour * 60 + local.minute) * 60 + local.second) * USECS_PER_SEC
        return Stamp(local.year, local.month, local.day, usec + local.microsecond,
                     offset // _SECOND, local.tzname())
    return local_fields(instant_usecs(value), zone)


def time_fields(value: time | TextValue, zoned: bool) -> tuple[int, int | None]:
    """(microseconds since midnight, offset seconds east or None) of a time or timetz."""
    _expect(value, time, oids.TIMETZ if zoned else oids.TIME)
    if isinstance(value, TextValue):
        m = re.fullmatch(r"24:00:00([+-]\d\d(?::\d\d){0,2})?", value.text)
        if m is None or (m.group(1) is not None) != zoned:
            raise Unencodable(f"unrecognised time text {value.text!r}")
        tz = m.group(1)
        return USECS_PER_DAY, (None if tz is None else parse_offset(tz))
    offset = value.utcoffset()
    if (offset is not None) != zoned:
        raise Unencodable(f"time value {value!r} {'lacks' if zoned else 'has'} a zone")
    if offset is None:
        return _time_usec(value), None
    off = offset // timedelta(seconds=1)
    if offset != timedelta(seconds=off):
        raise Unencodable("timetz offset with fractional seconds")
    return _time_usec(value), off


def parse_offset(text: str) -> int:
    sign = -1 if text[0] == "-" else 1
    parts = [int(p) for p in text[1:].split(":")] + [0, 0]
    return sign * (parts[0] * 3600 + parts[1] * 60 + parts[2])


def interval_parts(value: Interval | timedelta | Any) -> Interval:
    """An Interval; a ``timedelta`` becomes days and time with one sign (as timestamp - timestamp
    gives in PostgreSQL, whose result is justified by ``interval_justify_hours``)."""
    if isinstance(value, Interval):
        return value
    if isinstance(value, timedelta):
        total = value // timedelta(microseconds=1)
        days = abs(total) // USECS_PER_DAY
        days = -days if total < 0 else days
        return Interval(0, days, total - days * USECS_PER_DAY)
    raise Unencodable(f"not an interval value: {type(value).__name__}")
