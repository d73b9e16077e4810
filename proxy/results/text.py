"""Text-format (format code 0) output of canonical values, as PostgreSQL's output functions.

Owns: one factory per type oid, ``factory(settings, typmod) -> (value -> bytes)``, in
:data:`TEXT_FACTORIES`; the DateStyle/TimeZone layouts of dates and timestamps (EncodeDateOnly
/ EncodeDateTime / EncodeTimezone), the four IntervalStyles (EncodeInterval), float output
under every extra_float_digits (shortest-exact for > 0, ``%.{15+n}g`` otherwise), numeric with
typmod scale, bytea hex/escape, and the types whose output no setting changes, kept as the
text PostgreSQL printed (inet, cidr, macaddr, macaddr8, bit, varbit, integer and numeric
ranges) or as str (xml).

Invariants: output is UTF-8 (settings with another client encoding are refused upstream of
here); a value that cannot be printed exactly raises
:class:`~proxy.results.temporal.Unencodable`; factories do all per-column work so the
returned function does only per-value work.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from engine import Interval, TextValue, oids
from proxy.results.floats import float_text
from proxy.results.settings import OutputSettings
from proxy.results.temporal import (
    USECS_PER_HOUR,
    USECS_PER_MINUTE,
    USECS_PER_SEC,
    Stamp,
    Unencodable,
    date_fields,
    infinite,
    interval_parts,
    stamp_fields,
    time_fields,
    weekday,
    zoned_fields,
)

Encode = Callable[[Any], bytes]
Factory = Callable[[OutputSettings, int], Encode]

_DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MAXTZLEN = 10


def utf8(value: Any) -> bytes:
    """A str as UTF-8 (the only client encoding weir accepts)."""
    if not isinstance(value, str):
        raise Unencodable(f"expected str, got {type(value).__name__}")
    try:
        return value.encode()
    except UnicodeEncodeError as exc:  # lone surrogates: no PostgreSQL text looks like that
        raise Unencodable(str(exc)) from exc


def _bool(value: Any) -> bytes:
    if type(value) is not bool:
        raise Unencodable(f"expected bool, got {type(value).__name__}")
    return b"t" if value else b"f"


def _int(value: Any) -> bytes:
    if type(value) is not int:
        raise Unencodable(f"expected int, got {type(value).__name__}")
    return b"%d" % value


def as_float(value: Any) -> float:
    """A float column's value as a float (an int only when the conversion is exact)."""
    if type(value) is float:
        return value
    if type(value) is int and float(value) == value:
        return float(value)
    raise Unencodable(f"expected float, got {value!r}")


def char(value: Any) -> bytes:
    """The internal one-byte "char" type (ASCII only; high-bit bytes print as octal)."""
    if not isinstance(value, str) or len(value) > 1 or (value and ord(value) > 0x7F):
        raise Unencodable(f'"char" value {value!r} is not one ASCII character')
    return value.encode()


def _float_factory(float4: bool) -> Factory:
    def factory(settings: OutputSettings, typmod: int) -> Encode:
        digits = settings.extra_float_digits

        def encode(value: Any) -> bytes:
            return float_text(as_float(value), digits, float4).encode()

        return encode

    return factory


_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def numeric_scale(typmod: int) -> int | None:
    """The declared scale of numeric(p, s), or None when unconstrained."""
    if typmod < 4:
        return None
    scale = (typmod - 4) & 0x7FF
    return scale - 0x800 if scale & 0x400 else scale


def numeric_value(value: Any, scale: int | None) -> Decimal:
    """The Decimal PostgreSQL would hold: rounded half away from zero to a declared scale,
    negative zero made positive."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = Decimal(value)
    if not isinstance(value, Decimal):
        raise Unencodable(f"expected Decimal for numeric, got {type(value).__name__}")
    dec: Decimal = value
    if not dec.is_finite():
        return dec
    if scale is not None and dec.as_tuple().exponent != -scale:
        try:
            dec = dec.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP,
                               context=_EXACT)
        except InvalidOperation as exc:
            raise Unencodable(f"numeric {dec} does not fit scale {scale}") from exc
    if dec.is_zero() and dec.is_signed():
        return dec.copy_abs()
    return dec


def numeric_text(value: Decimal) -> str:
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:f}"


def _numeric(settings: OutputSettings, typmod: int) -> Encode:
    scale = numeric_scale(typmod)

    def encode(value: Any) -> bytes:
        return numeric_text(numeric_value(value, scale)).encode()

    return encode


def bytea_escape(value: bytes) -> bytes:
    out = bytearray()
    for b in value:
        if b == 0x5C:
            out += b"\\\\"
        elif b < 0x20 or b > 0x7E:
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out)


def _bytea(settings: OutputSettings, typmod: int) -> Encode:
    if settings.bytea_output == "escape":
        return lambda value: bytea_escape(as_bytes(value))
    return lambda value: b"\\x" + as_bytes(value).hex().encode()


def as_bytes(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise Unencodable(f"expected bytes, got {type(value).__name__}")
    return bytes(value)


def _uuid(settings: OutputSettings, typmod: int) -> Encode:
    def encode(value: Any) -> bytes:
        if not isinstance(value, UUID):
            raise Unencodable(f"expected UUID, got {type(value).__name__}")
        return str(value).encode()

    return encode


# -- dates and times ------------------------------------------------------------------------

def _year(year: int) -> str:
    return f"{year if year > 0 else 1 - year:04d}"


def date_text(f: Stamp, s: OutputSettings) -> str:
    """EncodeDateOnly."""
    y, m, d = _year(f.year), f"{f.month:02d}", f"{f.day:02d}"
    if s.date_style == "ISO":
        out = f"{y}-{m}-{d}"
    elif s.date_style == "German":
        out = f"{d}.{m}.{y}"
    else:
        sep = "/" if s.date_style == "SQL" else "-"
        out = f"{d}{sep}{m}{sep}{y}" if s.date_order == "DMY" else f"{m}{sep}{d}{sep}{y}"
    return out + " BC" if f.year <= 0 else out


def clock_text(usec: int) -> str:
    """HH:MM:SS[.ffffff without trailing zeros]."""
    hour, rest = divmod(usec, USECS_PER_HOUR)
    minute, rest = divmod(rest, USECS_PER_MINUTE)
    sec, frac = divmod(rest, USECS_PER_SEC)
    out = f"{hour:02d}:{minute:02d}:{sec:02d}"
    return out + f".{frac:06d}".rstrip("0") if frac else out


def zone_text(offset: int) -> str:
    """EncodeTimezone (``offset`` in seconds east of UTC)."""
    sign = "-" if offset < 0 else "+"
    minutes, sec = divmod(abs(offset), 60)
    hour, minute = divmod(minutes, 60)
    if sec:
        return f"{sign}{hour:02d}:{minute:02d}:{sec:02d}"
    if minute:
        return f"{sign}{hour:02d}:{minute:02d}"
    return f"{sign}{hour:02d}"


def _zone_suffix(f: Stamp, numeric_space: bool) -> str:
    if f.offset is None:
        return ""
    if f.abbrev:
        return " " + f.abbrev[:_MAXTZLEN]
    return (" " if numeric_space else "") + zone_text(f.offset)


def datetime_text(f: Stamp, s: OutputSettings) -> str:
    """EncodeDateTime: timestamp (offset None) or timestamptz (offset and abbreviation)."""
    clock = clock_text(f.usec)
    y, m, d = _year(f.year), f"{f.month:02d}", f"{f.day:02d}"
    if s.date_style == "ISO":
        out = f"{y}-{m}-{d} {clock}" + ("" if f.offset is None else zone_text(f.offset))
    elif s.date_style == "SQL":
        md = f"{d}/{m}" if s.date_order == "DMY" else f"{m}/{d}"
        out = f"{md}/{y} {clock}" + _zone_suffix(f, False)
    elif s.date_style == "German":
        out = f"{d}.{m}.{y} {clock}" + _zone_suffix(f, False)
    else:
        mon = _MONTHS[f.month - 1]
        md = f"{d} {mon}" if s.date_order == "DMY" else f"{mon} {d}"
        day = _DAYS[weekday(f.year, f.month, f.day)]
        out = f"{day} {md} {clock} {y}" + _zone_suffix(f, True)
    return out + " BC" if f.year <= 0 else out


def _infinity_text(value: Any, oid: int) -> bytes | None:
    sign = infinite(value, oid)
    if sign == 0:
        return None
    return b"infinity" if sign > 0 else b"-infinity"


def _date(settings: OutputSettings, typmod: int) -> Encode:
    iso = settings.date_style == "ISO"

    def encode(value: Any) -> bytes:
        if iso and type(value) is date:
            return value.isoformat().encode()
        special = _infinity_text(value, oids.DATE)
        return special or date_text(date_fields(value), settings).encode()

    return encode


def _timestamp(settings: OutputSettings, typmod: int) -> Encode:
    def encode(value: Any) -> bytes:
        special = _infinity_text(value, oids.TIMESTAMP)
        return special or datetime_text(stamp_fields(value), settings).encode()

    return encode


def iso_timestamptz(local: datetime) -> str:
    """ISO text of an aware datetime already in the session zone (C-level isoformat, then
    PostgreSQL's trimming of fraction zeros and of a zero minutes field in the offset)."""
    text = local.isoformat(" ")
    if local.microsecond:
        frac, zone = text[19:26].rstrip("0"), text[26:]
    else:
        frac, zone = "", text[19:]
    if len(zone) == 6 and zone.endswith(":00"):
        zone = zone[:3]
    return text[:19] + frac + zone


def _timestamptz(settings: OutputSettings, typmod: int) -> Encode:
    zone = settings.zone
    iso = settings.date_style == "ISO"

    def encode(value: Any) -> bytes:
        if iso and type(value) is datetime and value.tzinfo is not None:
            try:
                local = value.astimezone(zone)
            except OverflowError:
                pass
            else:
                offset = local.utcoffset()
                if offset is not None and not offset.microseconds:
                    return iso_timestamptz(local).encode()
        special = _infinity_text(value, oids.TIMESTAMPTZ)
        if special is not None:
            return special
        return datetime_text(zoned_fields(value, zone), settings).encode()

    return encode


def _time_factory(zoned: bool) -> Factory:
    def factory(settings: OutputSettings, typmod: int) -> Encode:
        def encode(value: Any) -> bytes:
            usec, offset = time_fields(value, zoned)
            out = clock_text(usec)
            return (out if offset is None else out + zone_text(offset)).encode()

        return encode

    return factory


# -- intervals ------------------------------------------------------------------------------

def _seconds(sec: int, fsec: int, fill: bool) -> str:
    out = f"{abs(sec):02d}" if fill else str(abs(sec))
    return out + f".{abs(fsec):06d}".rstrip("0") if fsec else out


def _split(value: Interval) -> tuple[int, int, int, int, int, int, int]:
    def trunc(a: int, b: int) -> tuple[int, int]:
        q = abs(a) // b
        q = -q if a < 0 else q
        return q, a - q * b

    year, mon = trunc(value.months, 12)
    hour, rest = trunc(value.microseconds, USECS_PER_HOUR)
    minute, rest = trunc(rest, USECS_PER_MINUTE)
    sec, fsec = trunc(rest, USECS_PER_SEC)
    return year, mon, value.days, hour, minute, sec, fsec


def interval_postgres(v: Interval) -> str:
    year, mon, mday, hour, minute, sec, fsec = _split(v)
    parts: list[str] = []
    is_before, is_zero = False, True
    for n, unit in ((year, "year"), (mon, "mon"), (mday, "day")):
        if n:
            plus = "+" if (is_before and n > 0) else ""
            parts.append(f"{plus}{n} {unit}{'' if n == 1 else 's'}")
            is_before, is_zero = n < 0, False
    if is_zero or hour or minute or sec or fsec:
        minus = hour < 0 or minute < 0 or sec < 0 or fsec < 0
        sign = "-" if minus else ("+" if is_before else "")
        parts.append(f"{sign}{abs(hour):02d}:{abs(minute):02d}:{_seconds(sec, fsec, True)}")
    return " ".join(parts)


def interval_verbose(v: Interval) -> str:
    year, mon, mday, hour, minute, sec, fsec = _split(v)
    out = "@"
    is_before, is_zero = False, True
    for n, unit in ((year, "year"), (mon, "mon"), (mday, "day"), (hour, "hour"), (minute, "min")):
        if n == 0:
            continue
        if is_zero:
            is_before, n = n < 0, abs(n)
        elif is_before:
            n = -n
        out += f" {n} {unit}{'' if n == 1 else 's'}"
        is_zero = False
    if sec or fsec:
        out += " "
        if sec < 0 or (sec == 0 and fsec < 0):
            if is_zero:
                is_before = True
            elif not is_before:
                out += "-"
        elif is_before:
            out += "-"
        out += _seconds(sec, fsec, False) + (" secs" if abs(sec) != 1 or fsec else " sec")
        is_zero = False
    if is_zero:
        out += " 0"
    return out + " ago" if is_before else out


def interval_sql(v: Interval) -> str:
    year, mon, mday, hour, minute, sec, fsec = _split(v)
    fields = (year, mon, mday, hour, minute, sec, fsec)
    neg, pos = any(x < 0 for x in fields), any(x > 0 for x in fields)
    has_ym, has_dt = bool(year or mon), bool(mday or hour or minute or sec or fsec)
    standard = not (neg and pos) and not (has_ym and has_dt)
    out = ""
    if neg and standard:
        out = "-"
        year, mon, mday, hour, minute, sec, fsec = (-x for x in fields)
    if not neg and not pos:
        return "0"
    if not standard:
        ys = "-" if (year < 0 or mon < 0) else "+"
        ds = "-" if mday < 0 else "+"
        ts = "-" if (hour < 0 or minute < 0 or sec < 0 or fsec < 0) else "+"
        return (f"{ys}{abs(year)}-{abs(mon)} {ds}{abs(mday)} {ts}{abs(hour)}:{abs(minute):02d}:"
                + _seconds(sec, fsec, True))
    if has_ym:
        return f"{out}{year}-{mon}"
    if mday:
        return f"{out}{mday} {hour}:{minute:02d}:" + _seconds(sec, fsec, True)
    return f"{out}{hour}:{minute:02d}:" + _seconds(sec, fsec, True)


def interval_iso(v: Interval) -> str:
    year, mon, mday, hour, minute, sec, fsec = _split(v)
    if not (year or mon or mday or hour or minute or sec or fsec):
        return "PT0S"
    out = "P" + "".join(f"{n}{u}" for n, u in ((year, "Y"), (mon, "M"), (mday, "D")) if n)
    if hour or minute or sec or fsec:
        out += "T" + "".join(f"{n}{u}" for n, u in ((hour, "H"), (minute, "M")) if n)
    if sec or fsec:
        out += ("-" if sec < 0 or fsec < 0 else "") + _seconds(sec, fsec, False) + "S"
    return out


INTERVAL_TEXT: dict[str, Callable[[Interval], str]] = {
    "postgres": interval_postgres,
    "postgres_verbose": interval_verbose,
    "sql_standard": interval_sql,
    "iso_8601": interval_iso,
}


def _interval(settings: OutputSettings, typmod: int) -> Encode:
    layout = INTERVAL_TEXT[settings.interval_style]

    def encode(value: Any) -> bytes:
        if isinstance(value, TextValue):
            raise Unencodable(f"interval text {value.text!r}")
        return layout(interval_parts(value)).encode()

    return encode


def _fixed(fn: Encode) -> Factory:
    return lambda settings, typmod: fn


def _passthrough(oid: int) -> Encode:
    """Types kept as the text PostgreSQL printed, whose output no session setting changes."""

    def encode(value: Any) -> bytes:
        if not isinstance(value, TextValue) or value.oid != oid:
            raise Unencodable(f"expected the text of type oid {oid}, got {value!r}")
        return value.text.encode()

    return encode


#: inet, cidr, macaddr, macaddr8, bit, varbit, int4range, int8range, numrange
SETTING_FREE_TEXT_TYPES = (869, 650, 829, 774, 1560, 1562, 3904, 3926, 3906)


TEXT_FACTORIES: dict[int, Factory] = {
    oids.BOOL: _fixed(_bool),
    oids.INT2: _fixed(_int),
    oids.INT4: _fixed(_int),
    oids.INT8: _fixed(_int),
    oids.OID: _fixed(_int),
    oids.FLOAT4: _float_factory(True),
    oids.FLOAT8: _float_factory(False),
    oids.NUMERIC: _numeric,
    oids.TEXT: _fixed(utf8),
    oids.VARCHAR: _fixed(utf8),
    oids.BPCHAR: _fixed(utf8),
    oids.NAME: _fixed(utf8),
    oids.CHAR: _fixed(char),
    oids.JSON: _fixed(utf8),
    oids.JSONB: _fixed(utf8),
    oids.XML: _fixed(utf8),
    oids.BYTEA: _bytea,
    oids.UUID: _uuid,
    oids.DATE: _date,
    oids.TIME: _time_factory(False),
    oids.TIMETZ: _time_factory(True),
    oids.TIMESTAMP: _timestamp,
    oids.TIMESTAMPTZ: _timestamptz,
    oids.INTERVAL: _interval,
    **{oid: _fixed(_passthrough(oid)) for oid in SETTING_FREE_TEXT_TYPES},
}

__all__ = ["TEXT_FACTORIES", "Encode", "Factory", "char", "numeric_scale", "numeric_value", "utf8"]
