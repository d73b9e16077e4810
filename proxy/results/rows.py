"""DataRow assembly: per-column encoders resolved once, then whole rows encoded.

Owns: :class:`ColumnEncoder` and its fast-path kinds (``KIND_*``, understood by
``cython_ext/results.pyx``), :func:`supports`, :func:`column_encoder` (built from the text,
binary and array factories of this package) and :func:`encode_rows` with its pure reference
``encode_rows_python`` (the compiled twin replaces ``encode_rows`` under ``WEIR_IMPL``).
The contract of each is in the package docstring (:mod:`proxy.results`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from functools import lru_cache
from typing import Any

import cython_ext
from engine import oids
from proxy.results.arrays import array_factory
from proxy.results.binary import BINARY_FACTORIES
from proxy.results.settings import OutputSettings
from proxy.results.temporal import Unencodable
from proxy.results.text import TEXT_FACTORIES, numeric_scale

__all__ = [
    "KIND_CALL",
    "ColumnEncoder",
    "OutputSettings",
    "Unencodable",
    "column_encoder",
    "encode_rows",
    "supports",
]

TEXT, BINARY = 0, 1

# fast-path kinds understood by cython_ext/results.pyx (anything else: call ``encode``)
KIND_CALL = 0
KIND_TEXT_INT = 1  # b"%d" % value for an exact int
KIND_UTF8 = 2  # value.encode() for an exact str
KIND_BIN_INT2 = 3
KIND_BIN_INT4 = 4
KIND_BIN_INT8 = 5
KIND_TEXT_BOOL = 6
KIND_BIN_FLOAT8 = 7
KIND_BIN_TIMESTAMP = 8  # naive datetime -> int64 usecs since 2000-01-01
KIND_BIN_TIMESTAMPTZ = 9  # datetime with tzinfo datetime.UTC -> int64 usecs
KIND_TEXT_TIMESTAMP_ISO = 10  # naive datetime, DateStyle ISO
KIND_TEXT_TIMESTAMPTZ_ISO_UTC = 11  # datetime.UTC datetime, DateStyle ISO, a zero-offset zone
KIND_TEXT_NUMERIC = 12  # Decimal already at ``ColumnEncoder.scale`` (None: unconstrained)
KIND_BIN_NUMERIC = 13  # likewise, binary
KIND_TEXT_TIMESTAMPTZ_ISO = 14  # aware datetime, DateStyle ISO, rotated into ``zone``
_ZERO_ZONES = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT"})

_KINDS: dict[tuple[int, int], int] = {
    (oids.INT2, TEXT): KIND_TEXT_INT,
    (oids.INT4, TEXT): KIND_TEXT_INT,
    (oids.INT8, TEXT): KIND_TEXT_INT,
    (oids.OID, TEXT): KIND_TEXT_INT,
    (oids.BOOL, TEXT): KIND_TEXT_BOOL,
    (oids.INT2, BINARY): KIND_BIN_INT2,
    (oids.INT4, BINARY): KIND_BIN_INT4,
    (oids.INT8, BINARY): KIND_BIN_INT8,
    (oids.FLOAT8, BINARY): KIND_BIN_FLOAT8,
    (oids.TIMESTAMP, BINARY): KIND_BIN_TIMESTAMP,
    (oids.TIMESTAMPTZ, BINARY): KIND_BIN_TIMESTAMPTZ,
    **{(oid, fmt): KIND_UTF8 for oid in (oids.TEXT, oids.VARCHAR, oids.BPCHAR, oids.NAME,
                                         oids.JSON) for fmt in (TEXT, BINARY)},
    (oids.JSONB, TEXT): KIND_UTF8,
}

Encode = Callable[[Any], bytes]
Factory = Callable[[OutputSettings, int], Encode]


@dataclass(frozen=True, slots=True)
class ColumnEncoder:
    """How one result column's non-NULL values become bytes."""

    type_oid: int
    fmt: int
    encode: Encode
    kind: int = KIND_CALL
    scale: int | None = None  # numeric's declared scale (KIND_*_NUMERIC)
    zone: tzinfo | None = None  # the session zone (KIND_TEXT_TIMESTAMPTZ_ISO)


def _factory(type_oid: int, fmt: int) -> Factory | None:
    table = TEXT_FACTORIES if fmt == TEXT else BINARY_FACTORIES
    found = table.get(type_oid)
    if found is not None:
        return found
    element = oids.ARRAY_ELEMENT.get(type_oid)
    if element is None or element not in table or element not in BINARY_FACTORIES:
        return None
    return array_factory(element, table[element], fmt)


def supports(type_oid: int, typmod: int, fmt: int, settings: OutputSettings) -> str | None:
    """None if values of this column can be encoded exactly, else the reason they cannot."""
    if fmt not in (TEXT, BINARY):
        return f"unknown result format code {fmt}"
    reason = settings.reason()
    if reason is not None:
        return reason
    if _factory(type_oid, fmt) is None:
        return f"no exact {'text' if fmt == TEXT else 'binary'} encoder for type oid {type_oid}"
    return None


def column_encoder(type_oid: int, typmod: int, fmt: int, settings: OutputSettings) -> ColumnEncoder:
    """The encoder of one result column (ValueError with the reason if unsupported).
    Encoders are pure, so they are cached per (type, typmod, format, settings)."""
    reason = supports(type_oid, typmod, fmt, settings)
    if reason is not None:
        raise ValueError(reason)
    return _build_encoder(type_oid, typmod, fmt, settings)


@lru_cache(maxsize=4096)
def _build_encoder(type_oid: int, typmod: int, fmt: int, settings: OutputSettings) -> ColumnEncoder:
    factory = _factory(type_oid, fmt)
    assert factory is not None
    encode = factory(settings, typmod)
    guarded = _with_typmod(type_oid, typmod, encode)
    if guarded is not None:
        return ColumnEncoder(type_oid, fmt, guarded)
    if type_oid == oids.NUMERIC:
        scale = numeric_scale(typmod)
        if scale is None or scale >= 0:
            kind = KIND_TEXT_NUMERIC if fmt == TEXT else KIND_BIN_NUMERIC
            return ColumnEncoder(type_oid, fmt, encode, kind, scale)
    kind = _kind(type_oid, fmt, settings)
    zone = settings.zone if kind == KIND_TEXT_TIMESTAMPTZ_ISO else None
    return ColumnEncoder(type_oid, fmt, encode, kind, zone=zone)


_PRECISION_TYPES = frozenset({oids.TIME, oids.TIMETZ, oids.TIMESTAMP, oids.TIMESTAMPTZ})


def _with_typmod(type_oid: int, typmod: int, encode: Encode) -> Encode | None:
    """``encode`` enforcing what the column's typmod implies (None: the typmod changes
    nothing). char(n) values are padded to n characters as PostgreSQL stores them; a
    time/timestamp(p) value finer than p digits is refused (PostgreSQL would have rounded it
    when storing, so the canonical value cannot be what it sent)."""
    if type_oid == oids.BPCHAR and typmod >= 4:
        width = typmod - 4

        def padded(value: Any) -> bytes:
            if isinstance(value, str) and len(value) != width:
                if len(value) > width:
                    raise Unencodable(f"{len(value)} characters in a char({width}) column")
                value = value.ljust(width)
            return encode(value)

        return padded
    if type_oid in _PRECISION_TYPES and 0 <= typmod < 6:
        step = 10 ** (6 - typmod)

        def precise(value: Any) -> bytes:
            if getattr(value, "microsecond", 0) % step:
                raise Unencodable(f"{value!r} has more than {typmod} fractional digits")
            return encode(value)

        return precise
    return None


def _kind(type_oid: int, fmt: int, settings: OutputSettings) -> int:
    if fmt == TEXT and settings.date_style == "ISO":
        if type_oid == oids.TIMESTAMP:
            return KIND_TEXT_TIMESTAMP_ISO
        if type_oid == oids.TIMESTAMPTZ and settings.timezone in _ZERO_ZONES:
            return KIND_TEXT_TIMESTAMPTZ_ISO_UTC
        if type_oid == oids.TIMESTAMPTZ:
            return KIND_TEXT_TIMESTAMPTZ_ISO
    return _KINDS.get((type_oid, fmt), KIND_CALL)


_HEAD = struct.Struct("!cih")
_LEN = struct.Struct("!i")
_NULL = b"\xff\xff\xff\xff"


def encode_rows(rows: Iterable[Sequence[Any]], encoders: Sequence[ColumnEncoder]) -> bytes:
    """The DataRow messages of ``rows`` (each as long as ``encoders``; None is NULL)."""
    fns = [e.encode for e in encoders]
    ncols = len(fns)
    head, pack = _HEAD.pack, _LEN.pack
    out: list[bytes] = []
    append = out.append
    for row in rows:
        if len(row) != ncols:
            raise ValueError(f"row has {len(row)} values, expected {ncols}")
        parts: list[bytes] = []
        size = 6
        for fn, value in zip(fns, row, strict=True):
            if value is None:
                parts.append(_NULL)
                size += 4
            else:
                data = fn(value)
                parts.append(pack(len(data)))
                parts.append(data)
                size += 4 + len(data)
        append(head(b"D", size, ncols))
        out.extend(parts)
    return b"".join(out)


#: The pure-Python reference, whatever ``WEIR_IMPL`` selects (for parity tests).
encode_rows_python = encode_rows

_fast = cython_ext.load("results")
if _fast is not None:
    encode_rows = _fast.encode_rows
