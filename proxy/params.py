"""Bind parameter values -> canonical engine values (pure).

Owns: decoding the bytes a client sent in a Bind message, in text or binary format, into the
canonical values the engine keys on, for the types that can key a cache. The type used is the
one the client declared in Parse when it did (a binary value's layout depends on it), else the
column type the parameter is compared with. A declared type of another family than the column
(e.g. float8 against numeric) is refused: PostgreSQL would compare after a cast whose result
weir does not reproduce, so such a statement goes upstream.

Text values of integer and uuid parameters are read by PostgreSQL's own input rules
(:func:`_exact_text`): ASCII digits with an optional sign and surrounding white space, in the
range of the declared type (or of the column's when none is declared) — ``'0_1'``,
full-width or Arabic-Indic digits and ``'40000'`` for an int2 are refused, as are uuid forms
``uuid_in`` refuses (``urn:uuid:...``, hyphens elsewhere than between groups of four digits).
A refused parameter sends the statement upstream, where PostgreSQL raises its own error
(22P02, 22003); weir never answers a value PostgreSQL would not have accepted.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from engine import TextValue, decode_text, encode_text, oids


class ParamError(ValueError):
    """The parameter cannot be turned into a key value exactly (the statement goes upstream)."""


_INTS = frozenset({oids.INT2, oids.INT4, oids.INT8, oids.OID})
_TEXTS = frozenset({oids.TEXT, oids.VARCHAR, oids.NAME})


#: the ranges of PostgreSQL's integer input functions (int2in, int4in, int8in, oidin)
_RANGES = {oids.INT2: (-(2**15), 2**15 - 1), oids.INT4: (-(2**31), 2**31 - 1),
           oids.INT8: (-(2**63), 2**63 - 1), oids.OID: (0, 2**32 - 1)}
_C_SPACE = " \t\n\r\v\f"  # isspace() in the C locale, which PostgreSQL's input uses
_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_OID_TEXT = re.compile(r"[0-9]+\Z")
#: numeric_in and float8in's decimal forms (ASCII digits; specials such as NaN go upstream)
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_DECIMALS = frozenset({oids.NUMERIC, oids.FLOAT4, oids.FLOAT8})
#: uuid_in: optional braces, 32 hex digits, a hyphen allowed after each group of four
_UUID_TEXT = re.compile(r"(\{)?[0-9a-fA-F]{4}(?:-?[0-9a-fA-F]{4}){7}(?(1)\})\Z")


def _exact_text(kind: int, text: str) -> None:
    """Refuse (ParamError) a text value PostgreSQL's input function for ``kind`` would
    refuse, or read differently from weir's decoder (integers, oid, uuid; arrays of them
    element by element); other types are left to the decoder."""
    element = oids.ARRAY_ELEMENT.get(kind)
    if element is not None:
        if element in _RANGES or element == oids.UUID:
            inner = text.replace("{", "").replace("}", "")  # the form is checked later
            for item in inner.split(",") if inner else ():
                if item != "NULL":
                    _exact_text(element, item)
        return
    if kind in _RANGES:
        body = text.strip(_C_SPACE)
        pattern = _OID_TEXT if kind == oids.OID else _INT_TEXT
        if pattern.match(body) is None:
            raise ParamError(f"invalid input syntax for type {kind}")
        low, high = _RANGES[kind]
        if not low <= int(body) <= high:
            raise ParamError(f"value out of range for type {kind}")
    elif kind == oids.UUID and _UUID_TEXT.match(text) is None:
        raise ParamError("invalid input syntax for type uuid")
    elif kind in _DECIMALS and _DECIMAL_TEXT.match(text.strip(_C_SPACE)) is None:
        raise ParamError(f"not a decimal number weir reads as PostgreSQL does: {text!r}")


def _family(oid: int) -> int:
    if oid in _INTS:
        return oids.INT8
    if oid in _TEXTS:
        return oids.TEXT
    element = oids.ARRAY_ELEMENT.get(oid)
    return oid if element is None else -_family(element)  # arrays: minus their element's


def _struct(fmt: str) -> Callable[[bytes], Any]:
    unpack = struct.Struct(fmt).unpack

    def decode(data: bytes) -> Any:
        try:
            return unpack(data)[0]
        except struct.error as exc:
            raise ParamError(f"binary parameter of {len(data)} bytes: {exc}") from exc

    return decode


def _utf8(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ParamError("parameter is not valid UTF-8") from exc


def _bool(data: bytes) -> bool:
    if len(data) != 1:
        raise ParamError("binary bool is one byte")
    return data != b"\x00"


def _uuid(data: bytes) -> uuid.UUID:
    if len(data) != 16:
        raise ParamError("binary uuid is 16 bytes")
    return uuid.UUID(bytes=data)


_EPOCH = datetime(2000, 1, 1)
_DAY0 = _EPOCH.date().toordinal()
_I32, _I64 = struct.Struct("!i"), struct.Struct("!q")


def _date(data: bytes) -> date | TextValue:
    if len(data) != 4:
        raise ParamError("binary date is 4 bytes")
    (days,) = _I32.unpack(data)
    if days in (2**31 - 1, -(2**31)):
        return TextValue(oids.DATE, "infinity" if days > 0 else "-infinity")
    try:
        return date.fromordinal(_DAY0 + days)
    except (ValueError, OverflowError) as exc:
        raise ParamError("date outside the years 1-9999") from exc


def _timestamp(oid: int) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> datetime | TextValue:
        if len(data) != 8:
            raise ParamError("binary timestamp is 8 bytes")
        (micros,) = _I64.unpack(data)
        if micros in (2**63 - 1, -(2**63)):
            return TextValue(oid, "infinity" if micros > 0 else "-infinity")
        try:
            value = _EPOCH + timedelta(microseconds=micros)
        except OverflowError as exc:
            raise ParamError("timestamp outside the years 1-9999") from exc
        return value.replace(tzinfo=UTC) if oid == oids.TIMESTAMPTZ else value

    return decode


BINARY_DECODERS: dict[int, Callable[[bytes], Any]] = {
    oids.DATE: _date,
    oids.TIMESTAMP: _timestamp(oids.TIMESTAMP),
    oids.TIMESTAMPTZ: _timestamp(oids.TIMESTAMPTZ),
    oids.INT2: _struct("!h"),
    oids.INT4: _struct("!i"),
    oids.INT8: _struct("!q"),
    oids.OID: _struct("!I"),
    oids.TEXT: _utf8,
    oids.VARCHAR: _utf8,
    oids.NAME: _utf8,
    oids.BOOL: _bool,
    oids.UUID: _uuid,
    oids.BYTEA: bytes,
}


def decode_param(value: bytes | None, fmt: int, declared: int, column_type: int) -> Any:
    """The canonical value of one Bind parameter compared with a column of ``column_type``."""
    if value is None:
        return None
    if declared and _family(declared) != _family(column_type):
        raise ParamError(f"parameter declared as type {declared} for a column of type "
                         f"{column_type}")
    kind = declared or column_type
    element = oids.ARRAY_ELEMENT.get(column_type)
    if fmt == 0:
        text = _utf8(value)
        _exact_text(kind, text)
        if kind != column_type:
            _exact_text(column_type, text)
        try:
            result = decode_text(column_type, text)
        except ParamError:
            raise
        except Exception as exc:
            raise ParamError(f"invalid text value for type {column_type}: {exc}") from exc
        if element is not None and (not isinstance(result, tuple)
                                    or encode_text(column_type, result) != text):
            # PostgreSQL's array input also takes blanks, bounds and quoting weir's parser
            # reads differently: only its own output form is decoded
            raise ParamError("array parameter not in PostgreSQL's output form")
        if isinstance(result, TextValue) and result.text not in ("infinity", "-infinity"):
            # a value weir keeps as text (BC dates, special words): whether PostgreSQL reads
            # the input as that value is not known here, so it decides
            raise ParamError(f"parameter {text!r} is not decoded exactly by weir")
        if column_type == oids.TIMESTAMP and isinstance(result, datetime) and result.tzinfo:
            raise ParamError("timestamp parameter with a time zone offset")
        if (element if element is not None else column_type) in _INTS and not all(
                isinstance(v, int) for v in _leaves(result)):
            raise ParamError("not an integer")
        return result
    if fmt != 1:
        raise ParamError(f"unknown parameter format {fmt}")
    if element is not None:
        return _binary_array(value, oids.ARRAY_ELEMENT.get(kind, element), element)
    decoder = BINARY_DECODERS.get(kind)
    if decoder is None:
        raise ParamError(f"binary parameters of type {kind} are not decoded by weir")
    return decoder(value)


def _leaves(value: Any) -> list[Any]:
    """A decoded value's scalars: the non-NULL elements of an array, or the value itself."""
    if not isinstance(value, tuple):
        return [value]
    return [leaf for item in value if item is not None for leaf in _leaves(item)]


_HEADER = struct.Struct("!iiI")
_INT = struct.Struct("!i")


def _binary_array(data: bytes, declared_element: int, element: int) -> tuple[Any, ...]:
    """PostgreSQL's binary array format (ndim, has-null flag, element type, per dimension
    its size and lower bound, then each element as a length and bytes, -1 for NULL) ->
    nested tuples, the elements decoded as ``element`` values."""
    try:
        ndim, _flags, element_oid = _HEADER.unpack_from(data, 0)
        if element_oid not in (declared_element, element) and _family(element_oid) != _family(
                element):
            raise ParamError(f"array of type {element_oid} for elements of type {element}")
        decoder = BINARY_DECODERS.get(element_oid)
        if decoder is None:
            raise ParamError(f"binary arrays of type {element_oid} are not decoded by weir")
        if not 0 <= ndim <= 6:
            raise ParamError(f"array of {ndim} dimensions")
        pos = _HEADER.size
        sizes = []
        for _ in range(ndim):
            (size,) = _INT.unpack_from(data, pos)
            sizes.append(size)
            pos += 8
        items: list[Any] = []
        total = 1 if sizes else 0
        for size in sizes:
            total *= size
        for _ in range(total):
            (length,) = _INT.unpack_from(data, pos)
            pos += 4
            if length < 0:
                items.append(None)
                continue
            if pos + length > len(data):
                raise ParamError("binary array element past the end")
            items.append(decoder(data[pos: pos + length]))
            pos += length
    except struct.error as exc:
        raise ParamError(f"truncated binary array: {exc}") from exc
    if pos != len(data):
        raise ParamError("junk after a binary array")
    for size in reversed(sizes[1:]):
        items = [tuple(items[i: i + size]) for i in range(0, len(items), size)]
    return tuple(items)


def formats_for(count: int, codes: tuple[int, ...]) -> tuple[int, ...]:
    """Per-item format codes from a Bind's list (empty: all text; one: all that one)."""
    if not codes:
        return (0,) * count
    if len(codes) == 1:
        return codes * count
    if len(codes) != count:
        raise ParamError(f"{len(codes)} format codes for {count} items")
    return codes
