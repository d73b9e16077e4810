"""Binary-format (format code 1) output of canonical values, as PostgreSQL's send functions.

Owns: one factory per type oid, ``factory(settings, typmod) -> (value -> bytes)``, in
:data:`BINARY_FACTORIES`: network-order integers and IEEE floats, numeric as base-10000
digits (ndigits, weight, sign, dscale), text types as UTF-8, uuid's 16 bytes, jsonb's
version-1 prefix, date/time types as integers since 2000-01-01 (with the infinity
sentinels), timetz with its zone in seconds west, interval as (usecs, days, months), and
the network and bit-string types (kept as PostgreSQL's text, see :mod:`proxy.results.text`)
as network_send / macaddr_send / varbit_send lay them out.

Invariants: binary output does not depend on any session setting except the client
encoding (text types; only UTF-8 is accepted); values that do not fit the type raise
:class:`~proxy.results.temporal.Unencodable` (never truncated or wrapped).
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from uuid import UUID

from engine import TextValue, oids
from proxy.results.settings import OutputSettings
from proxy.results.temporal import (
    Unencodable,
    date_days,
    infinite,
    instant_usecs,
    interval_parts,
    naive_usecs,
    time_fields,
)
from proxy.results.text import as_bytes, as_float, numeric_scale, numeric_value, utf8
from proxy.results.text import char as char_text

Encode = Callable[[Any], bytes]
Factory = Callable[[OutputSettings, int], Encode]

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
_F32 = struct.Struct("!f")
_F64 = struct.Struct("!d")
_NUMERIC_HEAD = struct.Struct("!hhHH")
_TIMETZ = struct.Struct("!qi")
_INTERVAL = struct.Struct("!qii")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
NUMERIC_POS, NUMERIC_NEG, NUMERIC_NAN = 0x0000, 0x4000, 0xC000
NUMERIC_PINF, NUMERIC_NINF = 0xD000, 0xF000


def _packer(s: struct.Struct, what: str) -> Encode:
    pack = s.pack

    def encode(value: Any) -> bytes:
        if type(value) is not int:
            raise Unencodable(f"expected int for {what}, got {type(value).__name__}")
        try:
            return pack(value)
        except struct.error as exc:
            raise Unencodable(f"{value!r} does not fit {what}") from exc

    return encode


def _bool(value: Any) -> bytes:
    if type(value) is not bool:
        raise Unencodable(f"expected bool, got {type(value).__name__}")
    return b"\x01" if value else b"\x00"


def _char(value: Any) -> bytes:
    return char_text(value) or b"\x00"  # the empty text is the NUL "char"


def _jsonb(value: Any) -> bytes:
    return b"\x01" + utf8(value)


def numeric_binary(value: Decimal) -> bytes:
    """numeric_send of a Decimal (already at PostgreSQL's scale)."""
    if value.is_nan():
        return _NUMERIC_HEAD.pack(0, 0, NUMERIC_NAN, 0)
    if value.is_infinite():
        # PostgreSQL reads dscale out of the special header's bits: 0x1000 >> 7 == 32
        return _NUMERIC_HEAD.pack(0, 0, NUMERIC_PINF if value > 0 else NUMERIC_NINF, 32)
    text = f"{value:f}"
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    dscale = len(frac)
    whole = whole.lstrip("0")
    if not whole and not frac.strip("0"):
        return _NUMERIC_HEAD.pack(0, 0, NUMERIC_POS, dscale)
    whole = "0" * (-len(whole) % 4) + whole
    frac += "0" * (-len(frac) % 4)
    digits = whole + frac
    groups = [int(digits[i : i + 4]) for i in range(0, len(digits), 4)]
    weight = len(whole) // 4 - 1
    first = 0
    while groups[first] == 0:
        first += 1
    last = len(groups)
    while groups[last - 1] == 0:
        last -= 1
    groups = groups[first:last]
    weight -= first
    if not -32768 <= weight <= 32767 or dscale > 0x3FFF:
        raise Unencodable("numeric out of range")
    head = _NUMERIC_HEAD.pack(len(groups), weight, NUMERIC_NEG if negative else NUMERIC_POS,
                              dscale)
    return head + struct.pack(f"!{len(groups)}H", *groups)


def _numeric(settings: OutputSettings, typmod: int) -> Encode:
    scale = numeric_scale(typmod)

    def encode(value: Any) -> bytes:
        return numeric_binary(numeric_value(value, scale))

    return encode


def _float4(value: Any) -> bytes:
    return _F32.pack(as_float(value))


def _float8(value: Any) -> bytes:
    return _F64.pack(as_float(value))


def _date(value: Any) -> bytes:
    sign = infinite(value, oids.DATE)
    if sign:
        return _I32.pack(_INT32_MAX if sign > 0 else _INT32_MIN)
    return _I32.pack(date_days(value))


def _timestamp_with(usecs: Callable[[Any], int], oid: int) -> Encode:
    def encode(value: Any) -> bytes:
        sign = infinite(value, oid)
        if sign:
            return _I64.pack(_INT64_MAX if sign > 0 else _INT64_MIN)
        return _I64.pack(usecs(value))

    return encode


def _time(value: Any) -> bytes:
    usec, _ = time_fields(value, False)
    return _I64.pack(usec)


def _timetz(value: Any) -> bytes:
    usec, offset = time_fields(value, True)
    return _TIMETZ.pack(usec, -(offset or 0))


def _interval(value: Any) -> bytes:
    if isinstance(value, TextValue):
        raise Unencodable(f"interval text {value.text!r}")
    v = interval_parts(value)
    try:
        return _INTERVAL.pack(v.microseconds, v.days, v.months)
    except struct.error as exc:
        raise Unencodable(f"interval out of range: {v}") from exc


def _uuid(value: Any) -> bytes:
    if not isinstance(value, UUID):
        raise Unencodable(f"expected UUID, got {type(value).__name__}")
    return value.bytes


def _fixed(fn: Encode) -> Factory:
    return lambda settings, typmod: fn


def _kept_text(value: Any, oid: int) -> str:
    if not isinstance(value, TextValue) or value.oid != oid:
        raise Unencodable(f"expected the text of type oid {oid}, got {value!r}")
    return value.text


def _network(oid: int, is_cidr: bool) -> Encode:
    """network_send: family (2 IPv4, 3 IPv6), prefix bits, is_cidr, address size, address."""

    def encode(value: Any) -> bytes:
        try:
            iface = ipaddress.ip_interface(_kept_text(value, oid))
        except ValueError as exc:
            raise Unencodable(str(exc)) from exc
        raw = iface.ip.packed
        family = 2 if iface.version == 4 else 3
        return bytes((family, iface.network.prefixlen, int(is_cidr), len(raw))) + raw

    return encode


def _macaddr(oid: int, size: int) -> Encode:
    def encode(value: Any) -> bytes:
        raw = bytes.fromhex(_kept_text(value, oid).replace(":", ""))
        if len(raw) != size:
            raise Unencodable(f"a {size}-byte MAC address expected, got {value!r}")
        return raw

    return encode


def _bits(oid: int) -> Encode:
    """varbit_send: the bit count, then the bits packed from the most significant, zero-padded."""

    def encode(value: Any) -> bytes:
        text = _kept_text(value, oid)
        if text.strip("01"):
            raise Unencodable(f"not a bit string: {text!r}")
        nbytes = (len(text) + 7) // 8
        packed = int(text.ljust(nbytes * 8, "0") or "0", 2).to_bytes(nbytes, "big")
        return _I32.pack(len(text)) + packed

    return encode


NETWORK_BINARY: dict[int, Encode] = {
    869: _network(869, False),  # inet
    650: _network(650, True),  # cidr
    829: _macaddr(829, 6),
    774: _macaddr(774, 8),
    1560: _bits(1560),  # bit
    1562: _bits(1562),  # varbit
}


BINARY_FACTORIES: dict[int, Factory] = {
    oids.BOOL: _fixed(_bool),
    oids.INT2: _fixed(_packer(_I16, "int2")),
    oids.INT4: _fixed(_packer(_I32, "int4")),
    oids.INT8: _fixed(_packer(_I64, "int8")),
    oids.OID: _fixed(_packer(_U32, "oid")),
    oids.FLOAT4: _fixed(_float4),
    oids.FLOAT8: _fixed(_float8),
    oids.NUMERIC: _numeric,
    oids.TEXT: _fixed(utf8),
    oids.VARCHAR: _fixed(utf8),
    oids.BPCHAR: _fixed(utf8),
    oids.NAME: _fixed(utf8),
    oids.CHAR: _fixed(_char),
    oids.JSON: _fixed(utf8),
    oids.JSONB: _fixed(_jsonb),
    oids.BYTEA: _fixed(as_bytes),
    oids.UUID: _fixed(_uuid),
    oids.DATE: _fixed(_date),
    oids.TIME: _fixed(_time),
    oids.TIMETZ: _fixed(_timetz),
    oids.TIMESTAMP: _fixed(_timestamp_with(naive_usecs, oids.TIMESTAMP)),
    oids.TIMESTAMPTZ: _fixed(_timestamp_with(instant_usecs, oids.TIMESTAMPTZ)),
    oids.INTERVAL: _fixed(_interval),
    **{oid: _fixed(fn) for oid, fn in NETWORK_BINARY.items()},
}
