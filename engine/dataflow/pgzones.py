"""``AT TIME ZONE`` with a named zone, with PostgreSQL's semantics.

Owns: ``zone_known`` (which zone names the planner accepts), the ``timezone`` kernel named by
``ir.Func`` and ``date_trunc_zone`` (``date_trunc(unit, timestamptz, zone)``: truncated in the
zone's wall-clock time; units of a day and more take the offset of the truncated time, smaller
ones keep the instant's): ``timestamptz AT TIME ZONE z`` is the wall-clock time of the instant
in ``z`` (a timestamp); ``timestamp AT TIME ZONE z`` is the instant that wall-clock time is in
``z`` (a timestamptz). Neither reads the session TimeZone. A wall-clock time inside a
transition takes PostgreSQL's choice (DetermineTimeZoneOffset): the later instant, i.e. the
offset before a spring-forward gap and the offset after a fall-back overlap.

Invariant: only full IANA names (``Area/City``) and ``UTC`` are accepted: PostgreSQL reads a
name first as a time zone abbreviation (whose table is a setting), and names with a ``/`` are
never abbreviations. The zone rules are the system tz database's, which PostgreSQL (built
with system tzdata, as Debian's is) and Python's zoneinfo both read; weir's result encoder
already prints timestamptz in the session TimeZone from the same database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from engine.dataflow.pgmath import EvalError
from engine.dataflow.pgtime import _guard, _plain, _trunc
from engine.values import oids as T


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo | None:
    if name != "UTC" and ("/" not in name or name.startswith("/") or ".." in name):
        return None
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        return None


def zone_known(name: str) -> bool:
    return _zone(name) is not None


def _offset(local: datetime, zone: ZoneInfo, fold: int) -> timedelta:
    off = local.replace(tzinfo=zone, fold=fold).utcoffset()
    assert off is not None
    return off


@_guard
def timezone(args: Any, types: Any) -> datetime:
    zone = _zone(args[0])
    if zone is None:
        raise EvalError("22023", f"time zone \"{args[0]}\" not recognized by weir")
    value = _plain(args[1])
    if types[1] == T.TIMESTAMPTZ:
        return value.astimezone(zone).replace(tzinfo=None)  # type: ignore[no-any-return]
    # the later instant of the two readings: the smaller offset
    offset = min(_offset(value, zone, 0), _offset(value, zone, 1))
    return (value - offset).replace(tzinfo=UTC)  # type: ignore[no-any-return]


#: date_trunc units at or above a day: PostgreSQL finds the offset again for the truncated
#: wall-clock time (smaller units keep the instant's own offset)
_REDO_OFFSET = frozenset({"day", "week", "month", "quarter", "year", "decade", "century",
                          "millennium"})


@_guard
def date_trunc_zone(args: Any, types: Any) -> datetime:
    """``date_trunc(unit, timestamptz, zone)``: truncated as a wall-clock time in ``zone``,
    as PostgreSQL's timestamptz_trunc_zone does."""
    unit, name, value = args
    local: datetime = timezone((name, value), (T.TEXT, T.TIMESTAMPTZ))
    cut = _trunc(local, unit)
    if unit in _REDO_OFFSET:
        return timezone((name, cut), (T.TEXT, T.TIMESTAMP))  # type: ignore[no-any-return]
    return _plain(value) - (local - cut)  # type: ignore[no-any-return]
