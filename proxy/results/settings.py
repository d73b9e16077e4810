"""The session settings that change how PostgreSQL prints result values.

Owns: :class:`OutputSettings` (DateStyle style and field order, TimeZone, IntervalStyle,
extra_float_digits, bytea_output, client/server encoding), built from a session's parameter
dict exactly as PostgreSQL reports or accepts the values, and the reason a setting cannot be
honoured byte-exactly (then cached reads of that session go upstream).

Invariants: an ``OutputSettings`` is immutable and hashable (encoders may be cached per
settings); ``reason()`` is None only if every field is one weir reproduces exactly. Missing
parameters take PostgreSQL's built-in defaults, which may differ from a server or role
default: the session must pass what is actually in effect (ParameterStatus reports
DateStyle, TimeZone, IntervalStyle and the encodings; extra_float_digits and bytea_output
are not reported and must be tracked from the startup packet, SET, or a SHOW).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DATE_STYLES = {"ISO": "ISO", "SQL": "SQL", "POSTGRES": "Postgres", "GERMAN": "German"}
DATE_ORDERS = {"DMY": "DMY", "EURO": "DMY", "EUROPEAN": "DMY", "MDY": "MDY", "US": "MDY",
               "NONEURO": "MDY", "NONEUROPEAN": "MDY", "YMD": "YMD"}
INTERVAL_STYLES = ("postgres", "postgres_verbose", "sql_standard", "iso_8601")
BYTEA_OUTPUTS = ("hex", "escape")
_UTF8_NAMES = frozenset({"UTF8", "UTF-8", "UNICODE"})


@lru_cache(maxsize=256)
def load_zone(name: str) -> tzinfo | None:
    """The IANA zone ``name`` as PostgreSQL (built with system tzdata) would use it, or None."""
    if name in ("UTC", "Etc/UTC"):
        return ZoneInfo(name)
    if not name or name.startswith(("/", ".")) or ".." in name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class OutputSettings:
    """What a session's result text depends on; see :meth:`from_parameters`."""

    date_style: str = "ISO"
    date_order: str = "MDY"
    timezone: str = "UTC"
    interval_style: str = "postgres"
    extra_float_digits: int = 1
    bytea_output: str = "hex"
    client_encoding: str = "UTF8"
    problems: tuple[str, ...] = ()
    zone: tzinfo = field(default=UTC, compare=False, hash=False)

    def reason(self) -> str | None:
        """Why these settings cannot be reproduced exactly, or None if they can."""
        return "; ".join(self.problems) if self.problems else None

    @classmethod
    def from_parameters(cls, params: Mapping[str, str]) -> OutputSettings:
        """Settings from session parameters (names case-insensitive, values as PostgreSQL
        reports them, e.g. ``{"DateStyle": "ISO, MDY", "TimeZone": "Europe/Berlin"}``).
        Other parameters are ignored; equal inputs give the same (cached) object."""
        relevant = tuple(sorted((k.lower(), v.strip()) for k, v in params.items()
                                if k.lower() in _NAMES))
        return _parse(relevant)


_NAMES = frozenset({"datestyle", "timezone", "intervalstyle", "extra_float_digits",
                    "bytea_output", "client_encoding", "server_encoding", "integer_datetimes"})


@lru_cache(maxsize=1024)
def _parse(items: tuple[tuple[str, str], ...]) -> OutputSettings:
    p = dict(items)
    problems: list[str] = []
    style, order = _date_style(p.get("datestyle", "ISO, MDY"), problems)
    tz_name = p.get("timezone", "UTC")
    zone = load_zone(tz_name)
    if zone is None:
        problems.append(f"TimeZone {tz_name!r} is not an IANA zone weir can load")
    interval = p.get("intervalstyle", "postgres").lower()
    if interval not in INTERVAL_STYLES:
        problems.append(f"IntervalStyle {interval!r} is unknown")
    efd = _float_digits(p.get("extra_float_digits", "1"), problems)
    bytea = p.get("bytea_output", "hex").lower()
    if bytea not in BYTEA_OUTPUTS:
        problems.append(f"bytea_output {bytea!r} is unknown")
    encoding = p.get("client_encoding", "UTF8")
    for key in ("client_encoding", "server_encoding"):
        value = p.get(key, "UTF8")
        if value.upper() not in _UTF8_NAMES:
            problems.append(f"{key} {value!r} is not UTF8")
    if p.get("integer_datetimes", "on").lower() != "on":
        problems.append("integer_datetimes is off")
    return OutputSettings(style, order, tz_name, interval, efd, bytea, encoding, tuple(problems),
                          zone if zone is not None else UTC)


def _date_style(value: str, problems: list[str]) -> tuple[str, str]:
    style: str | None = None
    order: str | None = None
    for token in (t.strip().upper() for t in value.split(",")):
        if token in DATE_STYLES and style is None:
            style = DATE_STYLES[token]
        elif token in DATE_ORDERS and order is None:
            order = DATE_ORDERS[token]
        else:
            problems.append(f"DateStyle {value!r} is not understood")
            break
    if order is None:
        order = "DMY" if style == "German" else "MDY"
    return style or "ISO", order


def _float_digits(value: str, problems: list[str]) -> int:
    try:
        digits = int(value)
    except ValueError:
        problems.append(f"extra_float_digits {value!r} is not an integer")
        return 1
    if not -15 <= digits <= 3:
        problems.append(f"extra_float_digits {digits} is out of range")
    return digits
