"""Date/time arithmetic, date_trunc and extract with PostgreSQL's results.

Owns: ``ARITH`` ((op, left type, right type) -> implementation), ``date_trunc``,
``extract`` and the date/timestamp casts (``CASTS``). Only operations whose result does not
depend on the session TimeZone live here (the planner refuses the others): timestamp and
date arithmetic, and on timestamptz only the addition of an interval without months or
days and the difference of two instants.

Invariants: intervals are added months first (the day clamped to the month's end), then
days, then microseconds, as PostgreSQL does; a timestamp difference is an interval of days
and microseconds (justified by 24-hour days, truncating toward zero); a value Python cannot
hold (infinity, BC, years after 9999, kept as ``TextValue``) or a result outside the years
1-9999 raises ``EvalError`` (the read then goes upstream).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from engine.dataflow.pgmath import EvalError
from engine.values import Interval
from engine.values import oids as T

_DAY_US = 86_400_000_000
_EPOCH = datetime(1970, 1, 1)


def _plain(value: Any) -> Any:
    if not isinstance(value, date):
        raise EvalError("22008", f"date/time value {value!r} is outside the range weir computes")
    return value


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        try:
            return fn(*args)
        except (OverflowError, ValueError) as exc:
            raise EvalError("22008", f"date/time field value out of range: {exc}") from exc

    return run


def _add_months(value: datetime, months: int) -> datetime:
    total = value.year * 12 + value.month - 1 + months
    year, month = divmod(total, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


@_guard
def add_interval(value: Any, interval: Interval, sign: int = 1) -> datetime:
    """timestamp (or date at midnight, or timestamptz) + ``sign`` * interval."""
    plain = _plain(value)
    start = plain if isinstance(plain, datetime) else datetime(plain.year, plain.month,
                                                                plain.day)
    if interval.months:
        start = _add_months(start, sign * interval.months)
    return start + timedelta(days=sign * interval.days,
                             microseconds=sign * interval.microseconds)


@_guard
def add_days(value: Any, days: int) -> date:
    result: date = _plain(value) + timedelta(days=days)
    return result


def date_diff(a: Any, b: Any) -> int:
    return (_plain(a) - _plain(b)).days  # type: ignore[no-any-return]


def ts_diff(a: Any, b: Any) -> Interval:
    delta = _plain(a) - _plain(b)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    days = abs(micros) // _DAY_US * (1 if micros >= 0 else -1)  # toward zero
    return Interval(0, days, micros - days * _DAY_US)


ARITH: dict[tuple[str, int, int], Callable[[Any, Any], Any]] = {
    ("+", T.DATE, T.INT4): add_days,
    ("+", T.INT4, T.DATE): lambda a, b: add_days(b, a),
    ("-", T.DATE, T.INT4): lambda a, b: add_days(a, -b),
    ("-", T.DATE, T.DATE): date_diff,
    ("-", T.TIMESTAMP, T.TIMESTAMP): ts_diff,
    ("-", T.TIMESTAMPTZ, T.TIMESTAMPTZ): ts_diff,
}
for _t in (T.TIMESTAMP, T.TIMESTAMPTZ, T.DATE):
    ARITH[("+", _t, T.INTERVAL)] = add_interval
    ARITH[("+", T.INTERVAL, _t)] = lambda a, b: add_interval(b, a)
    ARITH[("-", _t, T.INTERVAL)] = lambda a, b: add_interval(a, b, -1)

#: The result type of each operation in ``ARITH`` (a date plus an interval is a timestamp).
ARITH_TYPES: dict[tuple[str, int, int], int] = {
    ("+", T.DATE, T.INT4): T.DATE, ("+", T.INT4, T.DATE): T.DATE,
    ("-", T.DATE, T.INT4): T.DATE, ("-", T.DATE, T.DATE): T.INT4,
    ("-", T.TIMESTAMP, T.TIMESTAMP): T.INTERVAL, ("-", T.TIMESTAMPTZ, T.TIMESTAMPTZ): T.INTERVAL,
}
for _t, _r in ((T.TIMESTAMP, T.TIMESTAMP), (T.TIMESTAMPTZ, T.TIMESTAMPTZ),
               (T.DATE, T.TIMESTAMP)):
    for _key in (("+", _t, T.INTERVAL), ("+", T.INTERVAL, _t), ("-", _t, T.INTERVAL)):
        ARITH_TYPES[_key] = _r


# ----------------------------------------------------------------------------- date_trunc

def _trunc(value: datetime, field: str) -> datetime:
    midnight = value.replace(hour=0, minute=0, second=0, microsecond=0)
    year = value.year
    cuts: dict[str, Callable[[], datetime]] = {
        "microseconds": lambda: value,
        "milliseconds": lambda: value.replace(microsecond=value.microsecond // 1000 * 1000),
        "second": lambda: value.replace(microsecond=0),
        "minute": lambda: value.replace(second=0, microsecond=0),
        "hour": lambda: value.replace(minute=0, second=0, microsecond=0),
        "day": lambda: midnight,
        "week": lambda: midnight - timedelta(days=value.weekday()),
        "month": lambda: midnight.replace(day=1),
        "quarter": lambda: midnight.replace(month=(value.month - 1) // 3 * 3 + 1, day=1),
        "year": lambda: midnight.replace(month=1, day=1),
        "decade": lambda: midnight.replace(year=year // 10 * 10, month=1, day=1),
        "century": lambda: midnight.replace(year=(year - 1) // 100 * 100 + 1, month=1, day=1),
        "millennium": lambda: midnight.replace(year=(year - 1) // 1000 * 1000 + 1, month=1,
                                               day=1),
    }
    return cuts[field]()


TRUNC_FIELDS = frozenset({"microseconds", "milliseconds", "second", "minute", "hour", "day",
                          "week", "month", "quarter", "year", "decade", "century",
                          "millennium"})


@_guard
def date_trunc(args: Any, types: Any) -> datetime:
    """date_trunc(field, timestamp) -> timestamp."""
    return _trunc(_plain(args[1]), args[0])


# ----------------------------------------------------------------------------- extract

def _micros_of_minute(v: datetime) -> int:
    return v.second * 1_000_000 + v.microsecond


_DATE_FIELDS: dict[str, Callable[[date], int]] = {
    "year": lambda v: v.year,
    "month": lambda v: v.month,
    "day": lambda v: v.day,
    "quarter": lambda v: (v.month - 1) // 3 + 1,
    "week": lambda v: v.isocalendar()[1],
    "isoyear": lambda v: v.isocalendar()[0],
    "dow": lambda v: (v.weekday() + 1) % 7,
    "isodow": lambda v: v.isoweekday(),
    "doy": lambda v: v.timetuple().tm_yday,
    "decade": lambda v: v.year // 10,
    "century": lambda v: (v.year + 99) // 100,
    "millennium": lambda v: (v.year + 999) // 1000,
}
_TIME_FIELDS: dict[str, Callable[[datetime], Decimal]] = {
    "hour": lambda v: Decimal(v.hour),
    "minute": lambda v: Decimal(v.minute),
    "second": lambda v: Decimal(_micros_of_minute(v)).scaleb(-6),
    "milliseconds": lambda v: Decimal(_micros_of_minute(v)).scaleb(-3),
    "microseconds": lambda v: Decimal(_micros_of_minute(v)),
}
#: extract fields per argument type (timestamptz: only epoch is TimeZone-independent)
EXTRACT_FIELDS = {
    T.DATE: frozenset(_DATE_FIELDS) | {"epoch"},
    T.TIMESTAMP: frozenset(_DATE_FIELDS) | frozenset(_TIME_FIELDS) | {"epoch"},
    T.TIMESTAMPTZ: frozenset({"epoch"}),
}


@_guard
def extract(args: Any, types: Any) -> Decimal:
    """extract(field FROM date | timestamp | timestamptz) -> numeric, scaled as PostgreSQL's."""
    field, value = args[0], _plain(args[1])
    if field == "epoch":
        if isinstance(value, datetime):
            delta = value.astimezone(UTC).replace(tzinfo=None) - _EPOCH if value.tzinfo \
                else value - _EPOCH
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return Decimal(micros).scaleb(-6)
        return Decimal((value - _EPOCH.date()).days * 86_400)
    if field in _TIME_FIELDS:
        return _TIME_FIELDS[field](value)
    return Decimal(_DATE_FIELDS[field](value))


# ----------------------------------------------------------------------------- casts

@_guard
def to_date(value: Any, src: int) -> date:
    value = _plain(value)
    return value.date() if isinstance(value, datetime) else value


@_guard
def to_timestamp(value: Any, src: int) -> datetime:
    value = _plain(value)
    if isinstance(value, datetime):
        return value
    return datetime(value.year, value.month, value.day)


CASTS: dict[tuple[int, int], Callable[[Any, int], Any]] = {
    (T.TIMESTAMP, T.DATE): to_date,
    (T.DATE, T.TIMESTAMP): to_timestamp,
}
