"""Typing of SQL literals: PostgreSQL input text -> canonical Python value of a given type.

Owns: ``literal_value(type_oid, text)`` — the value a quoted literal (or a text-format
parameter) denotes once coerced to ``type_oid``, for the types and input forms whose
PostgreSQL meaning is unambiguous and independent of session settings. Anything else raises
``LiteralError`` (the planner turns that into Unsupported; the host may forward upstream).
``literal_value_in_zone`` also reads a timestamptz without an offset, in a given TimeZone;
timestamp and timestamptz texts are split into fields by ``datetime_input`` (ISO and the
textual forms read the same under every DateStyle).

Invariant: when this returns a value, PostgreSQL's input function for that type accepts the
same text and produces an equal value (stricter than PostgreSQL, never looser or different).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from engine.dataflow import pgzones
from engine.dataflow.pgjson import canonical_jsonb
from engine.dataflow.pgmath import EvalError
from engine.plan.datetime_input import InputError, Parts, zoned_parts
from engine.plan.pgtypes import type_name
from engine.values import Interval
from engine.values import oids as T
from engine.values.arrays import parse_array


class LiteralError(ValueError):
    """The text is not a literal of that type this module can type exactly."""


_INT = re.compile(r"\s*([+-]?\d+)\s*", re.ASCII)
_NUMERIC = re.compile(r"\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)\s*", re.ASCII)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?)?", re.ASCII)
_UUID = re.compile(r"\{?[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}\}?", re.ASCII)
_BOOL = {"t": True, "tr": True, "tru": True, "true": True, "y": True, "ye": True, "yes": True,
         "on": True, "1": True, "f": False, "fa": False, "fal": False, "fals": False,
         "false": False, "n": False, "no": False, "of": None, "off": False, "0": False}
_INT_RANGE = {T.INT2: 2**15, T.INT4: 2**31, T.INT8: 2**63}


def _int(type_oid: int, text: str) -> int:
    match = _INT.fullmatch(text)
    if match is None:
        raise LiteralError(f"invalid integer literal {text!r}")
    value = int(match.group(1))
    bound = _INT_RANGE[type_oid]
    if not -bound <= value < bound:
        raise LiteralError(f"integer literal {text!r} out of range")
    return value


def _numeric(_type_oid: int, text: str) -> Decimal:
    match = _NUMERIC.fullmatch(text)
    if match is None:
        raise LiteralError(f"invalid numeric literal {text!r}")
    return Decimal(match.group(1))


def _bool(_type_oid: int, text: str) -> bool:
    value = _BOOL.get(text.strip().lower())
    if value is None:
        raise LiteralError(f"invalid boolean literal {text!r}")
    return value


def _date(_type_oid: int, text: str) -> date:
    match = _DATE.fullmatch(text.strip())
    if match is None:
        raise LiteralError(f"date literal {text!r} (only YYYY-MM-DD is typed)")
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError as exc:
        raise LiteralError(str(exc)) from exc


def _timestamp(_type_oid: int, text: str) -> datetime:
    """ISO, or a textual form read the same under every DateStyle (``datetime_input``); a
    zone or offset in the text is ignored, as PostgreSQL ignores it for a timestamp without
    time zone (the forms whose zone needs a setting to read, abbreviations, are refused)."""
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None:
        try:
            return zoned_parts(text).local
        except InputError as exc:
            raise LiteralError(f"timestamp literal {text!r}: {exc}") from exc
    frac = match[7] or ".0"
    try:
        return datetime(int(match[1]), int(match[2]), int(match[3]), int(match[4] or 0),
                        int(match[5] or 0), int(match[6] or 0),
                        int(frac[1:].ljust(6, "0")))
    except ValueError as exc:
        raise LiteralError(str(exc)) from exc


def _timestamptz(_type_oid: int, text: str) -> datetime:
    """A timestamp with an explicit offset or zone name (ISO or a textual form read the same
    under every DateStyle, ``datetime_input``): an instant whatever the session TimeZone.
    Without either it depends on the TimeZone: refused (``literal_value_in_zone`` reads it)."""
    parts = _parts(text)
    if parts.zone is not None:
        return _in_zone(text, parts.local, parts.zone)
    if parts.offset is None:
        raise LiteralError(f"timestamptz literal {text!r} without an explicit UTC offset "
                           "(its value depends on the session TimeZone)")
    try:
        return (parts.local - timedelta(seconds=parts.offset)).replace(tzinfo=UTC)
    except OverflowError as exc:
        raise LiteralError(str(exc)) from exc


def _parts(text: str) -> Parts:
    try:
        return zoned_parts(text)
    except InputError as exc:
        raise LiteralError(f"timestamptz literal {text!r}: {exc}") from exc


def _in_zone(text: str, local: datetime, zone: str) -> datetime:
    try:
        return pgzones.timezone((zone, local), (T.TEXT, T.TIMESTAMP))  # type: ignore[no-any-return]
    except EvalError as exc:  # outside the years weir computes
        raise LiteralError(f"timestamptz literal {text!r} ({exc})") from exc


_INTERVAL_UNITS = {
    "year": (12, 0, 0), "years": (12, 0, 0), "mon": (1, 0, 0), "mons": (1, 0, 0),
    "month": (1, 0, 0), "months": (1, 0, 0), "week": (0, 7, 0), "weeks": (0, 7, 0),
    "day": (0, 1, 0), "days": (0, 1, 0), "hour": (0, 0, 3_600_000_000),
    "hours": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000),
    "minutes": (0, 0, 60_000_000), "min": (0, 0, 60_000_000), "mins": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000), "seconds": (0, 0, 1_000_000), "sec": (0, 0, 1_000_000),
    "secs": (0, 0, 1_000_000),
    **{u: (0, 0, 1000) for u in ("millisecond", "milliseconds", "ms", "msec", "msecs",
                                 "msecond", "mseconds")},
    **{u: (0, 0, 1) for u in ("microsecond", "microseconds", "us", "usec", "usecs", "usecond",
                              "useconds")},
}
_INTERVAL_PART = re.compile(r"\s*([+-]?\d{1,9})\s+([a-z]+)", re.ASCII)


def _interval(_type_oid: int, text: str) -> Interval:
    """``'<integer> <unit> ...'`` (years, months, weeks, days, hours, minutes, seconds):
    the common interval literals, without fractions, ``ago``, ISO or time-of-day forms."""
    months = days = micros = 0
    rest = text.strip().lower()
    if not rest:
        raise LiteralError("empty interval literal")
    pos = 0
    while pos < len(rest):
        match = _INTERVAL_PART.match(rest, pos)
        if match is None or match[2] not in _INTERVAL_UNITS:
            raise LiteralError(f"interval literal {text!r} (only '<integer> <unit> ...')")
        n = int(match[1])
        m, d, us = _INTERVAL_UNITS[match[2]]
        months, days, micros = months + n * m, days + n * d, micros + n * us
        pos = match.end()
    if not (-(2**31) <= months < 2**31 and -(2**31) <= days < 2**31):
        raise LiteralError(f"interval literal {text!r} out of range")
    return Interval(months, days, micros)


def _text(_type_oid: int, text: str) -> str:
    if "\x00" in text:
        raise LiteralError("NUL in text literal")
    return text


def _uuid(_type_oid: int, text: str) -> uuid.UUID:
    stripped = text.strip()
    if _UUID.fullmatch(stripped) is None or stripped.startswith("{") != stripped.endswith("}"):
        raise LiteralError(f"uuid literal {text!r} (only hex with optional hyphens/braces)")
    return uuid.UUID(stripped)


def _jsonb(_type_oid: int, text: str) -> str:
    try:
        return canonical_jsonb(text)
    except ValueError as exc:
        raise LiteralError(f"jsonb literal {text!r} ({exc})") from exc


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')  # a quoted array element (blanks kept as written)


def _array(type_oid: int, text: str) -> tuple[Any, ...]:
    element = T.ARRAY_ELEMENT[type_oid]
    name = type_name(type_oid)
    if not text.startswith("{") or re.search(r"\s", _QUOTED.sub("", text)):
        raise LiteralError(f"{name} literal {text!r} (only '{{...}}' without whitespace "
                           "outside quotes)")
    try:
        return parse_array(text, lambda raw: _PARSERS[element](element, raw))
    except ValueError as exc:
        raise LiteralError(f"{name} literal {text!r}") from exc


_PARSERS: dict[int, Any] = {
    T.INT2: _int, T.INT4: _int, T.INT8: _int, T.NUMERIC: _numeric, T.BOOL: _bool,
    T.DATE: _date, T.TIMESTAMP: _timestamp, T.TEXT: _text, T.VARCHAR: _text, T.NAME: _text,
    T.UUID: _uuid, T.TIMESTAMPTZ: _timestamptz, T.INTERVAL: _interval, T.JSONB: _jsonb,
}
_PARSERS.update({T.ARRAY_OF[e]: _array for e in (T.INT2, T.INT4, T.INT8, T.TEXT, T.VARCHAR,
                                                 T.BOOL, T.UUID, T.DATE)})


def literal_value(type_oid: int, text: str) -> Any:
    """The canonical value of ``text`` as a literal of ``type_oid``; raises LiteralError."""
    parse = _PARSERS.get(type_oid)
    if parse is None:
        if type_oid in (T.TIMESTAMPTZ, T.TIMETZ):
            raise LiteralError(f"{type_name(type_oid)} literal (its value depends on the "
                               "session TimeZone)")
        raise LiteralError(f"literal of type {type_name(type_oid)}")
    return parse(type_oid, text)


def literal_value_in_zone(type_oid: int, text: str, zone: str | None) -> Any:
    """:func:`literal_value` in a session whose TimeZone is ``zone``: a timestamptz without
    an offset (an ISO or textual date or timestamp) is that wall-clock time in the zone, made
    an instant as PostgreSQL does (a time in a DST gap or overlap resolved as for ``AT TIME
    ZONE``)."""
    try:
        return literal_value(type_oid, text)
    except LiteralError:
        if type_oid != T.TIMESTAMPTZ or zone is None or not pgzones.zone_known(zone):
            raise
    parts = _parts(text)
    if parts.offset is not None or parts.zone is not None:
        raise LiteralError(f"timestamptz literal {text!r}")  # pragma: no cover - read above
    return _in_zone(text, parts.local, zone)


def can_type(type_oid: int) -> bool:
    return type_oid in _PARSERS
