"""PostgreSQL's datetime input for the textual forms it reads the same under every setting.

Owns: ``zoned_parts`` — the text of a timestamptz literal -> (wall-clock time, explicit UTC
offset in seconds or None, explicit zone name or None), for the ISO forms (``2026-11-27
10:00[:SS[.ffffff]][Z|+HH[:MM]|+HHMM]``) and the textual ones applications print: ``[weekday[,]]
Mon DD[,] YYYY``, ``DD Mon YYYY`` or ``YYYY-MM-DD``, then optionally ``H:MM[:SS[.ffffff]]`` (a
12-hour time with ``AM``/``PM``), then optionally a zone: a numeric offset (``-08``,
``+05:30``, ``-0830``, also attached to the time), ``Z``/``UTC``/``GMT``/``zulu``, or a full
zone name (``America/Los_Angeles``); and ``epoch``.

Refused (``LiteralError`` with the reason; the statement goes upstream): relative words
(``now``, ``today``, ``tomorrow``, ``yesterday``: the current time), all-numeric dates other
than ISO (``11/12/2026``, ``12.11.2026``: their field order is the DateStyle setting),
two-digit years, zone abbreviations (``PST``: their offsets are the ``timezone_abbreviations``
setting) and POSIX specs (``UTC+3``, ``EST5EDT``), fractions beyond microseconds (PostgreSQL
rounds them), ``24:00`` and leap seconds, BC and Julian dates, ``infinity``.

Invariant: when a value is returned, PostgreSQL reads the same text to the same fields under
every DateStyle and TimeZone (the month is a word, the year has four digits); a form without a
zone is a wall-clock time the caller reads in the session TimeZone (``literals``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from engine.dataflow import pgzones

MONTHS = {name: i + 1 for i, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
    ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
    ("oct", "october"), ("nov", "november"), ("dec", "december"))) for name in names}
WEEKDAYS = frozenset({"sun", "sunday", "mon", "monday", "tue", "tues", "tuesday", "wed",
                      "wednesday", "thu", "thur", "thurs", "thursday", "fri", "friday", "sat",
                      "saturday"})
RELATIVE = frozenset({"now", "today", "tomorrow", "yesterday"})
#: zone words PostgreSQL reads as UTC whatever its settings
UTC_WORDS = frozenset({"z", "zulu", "utc", "gmt"})
MAX_OFFSET = 15 * 3600 + 59 * 60 + 59  # PostgreSQL: time zone displacement out of range

_ISO_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?)?",
                       re.ASCII)
_ISO_OFFSET = re.compile(r"(.*?)(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)", re.ASCII)
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)
_TIME = re.compile(r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(\.\d{1,6})?)?"
                   r"([+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?", re.ASCII)
_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2})(?::?(\d{2}))?)?", re.ASCII)


class InputError(ValueError):
    """Not a form this module reads exactly (the message says why)."""


@dataclass(frozen=True, slots=True)
class Parts:
    local: datetime  # naive wall-clock time
    offset: int | None = None  # seconds east of UTC, when the text gives one
    zone: str | None = None  # a full zone name, when the text gives one


EPOCH = Parts(datetime(1970, 1, 1), 0)


def zoned_parts(text: str) -> Parts:
    """The fields of a timestamptz literal (see the module docstring); InputError else."""
    stripped = text.strip()
    iso = _iso(stripped)
    if iso is not None:
        return iso
    return _textual(stripped)


def _iso(text: str) -> Parts | None:
    match = _ISO_OFFSET.fullmatch(text)
    if match is not None and _ISO_TIME.fullmatch(match[1]) is not None and (
            match[2] is not None or " " in match[1] or "T" in match[1]):
        seconds = 0 if match[2] else _offset_seconds(match[3], match[4], match[5], None)
        return Parts(_iso_local(match[1]), seconds)
    if _ISO_TIME.fullmatch(text) is not None:
        return Parts(_iso_local(text))
    return None


def _iso_local(text: str) -> datetime:
    match = _ISO_TIME.fullmatch(text)
    assert match is not None
    frac = match[7] or ".0"
    try:
        return datetime(int(match[1]), int(match[2]), int(match[3]), int(match[4] or 0),
                        int(match[5] or 0), int(match[6] or 0), int(frac[1:].ljust(6, "0")))
    except ValueError as exc:
        raise InputError(str(exc)) from exc


def _offset_seconds(sign: str, hours: str, minutes: str | None, seconds: str | None) -> int:
    h, m, s = int(hours), int(minutes or 0), int(seconds or 0)
    value = h * 3600 + m * 60 + s
    if m >= 60 or s >= 60 or value > MAX_OFFSET:
        raise InputError("time zone displacement out of range")
    return -value if sign == "-" else value


def _textual(text: str) -> Parts:
    words = text.replace(",", " ").split()
    lowered = [w.lower() for w in words]
    if lowered == ["epoch"]:
        return EPOCH
    if any(w in RELATIVE for w in lowered):
        raise InputError("relative to the current time")
    if lowered and lowered[0] in WEEKDAYS:  # PostgreSQL ignores the weekday
        words, lowered = words[1:], lowered[1:]
    iso = _ISO_DATE.fullmatch(words[0]) if words else None
    if iso is not None:  # an ISO date, then a time or zone apart
        year, month, day, at = iso[1], int(iso[2]), iso[3], 1
    elif len(words) < 3:
        raise InputError("not a date weir reads under every DateStyle (a month name, a "
                         "day and a four-digit year)")
    elif lowered[0] in MONTHS:
        month, day, year, at = MONTHS[lowered[0]], words[1], words[2], 3
    elif lowered[1] in MONTHS:
        month, day, year, at = MONTHS[lowered[1]], words[0], words[2], 3
    else:
        raise InputError("a date without a month name (its field order is the DateStyle "
                         "setting)")
    if not (day.isascii() and day.isdigit() and len(day) <= 2 and year.isascii()
            and year.isdigit() and len(year) == 4):
        raise InputError("a date whose day or four-digit year weir cannot read")
    hour = minute = second = micro = 0
    rest, offset = words[at:], None
    match = _TIME.fullmatch(rest[0]) if rest else None
    if match is not None:
        hour, minute, second = int(match[1]), int(match[2]), int(match[3] or 0)
        micro = int((match[4] or ".0")[1:].ljust(6, "0"))
        if hour > 23 or minute > 59 or second > 59:
            raise InputError("24:00 or a leap second")
        if match[5]:
            offset = _parse_offset(match[5])
        rest = rest[1:]
    if rest and rest[0].lower() in ("am", "pm"):
        if hour > 12:
            raise InputError("AM/PM with an hour beyond 12")
        hour = hour % 12 + (12 if rest[0].lower() == "pm" else 0)
        rest = rest[1:]
    try:
        local = datetime(int(year), month, int(day), hour, minute, second, micro)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    if not rest:
        return Parts(local, offset)
    if offset is not None or len(rest) != 1:
        raise InputError(f"time zone {' '.join(rest)!r}")
    return _with_zone(local, rest[0])


def _parse_offset(word: str) -> int:
    match = _OFFSET.fullmatch(word)
    if match is None:
        raise InputError(f"time zone offset {word!r}")
    return _offset_seconds(match[1], match[2], match[3], match[4])


def _with_zone(local: datetime, word: str) -> Parts:
    if word[0] in "+-":
        return Parts(local, _parse_offset(word))
    if word.lower() in UTC_WORDS:
        return Parts(local, 0)
    if "/" in word and pgzones.zone_known(word):
        return Parts(local, None, word)
    raise InputError(f"time zone {word!r} (an abbreviation's offset is the "
                     "timezone_abbreviations setting; only numeric offsets, UTC and full "
                     "zone names such as 'America/Los_Angeles' are read)")
