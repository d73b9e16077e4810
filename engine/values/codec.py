"""Per-type-oid text codecs: PostgreSQL text output <-> canonical Python values.

Owns: the dispatch tables from type oid to parser and formatter, array handling by element
oid, and the fallback for unknown types (kept as :class:`TextValue` with their oid).

Contract: ``decode_text(oid, text)`` never raises for text PostgreSQL produced for that oid
under weir's session settings (DateStyle ISO, IntervalStyle postgres, bytea_output hex,
extra_float_digits >= 1, TimeZone UTC); for garbage it raises ``ValueError``.
``encode_text(oid, decode_text(oid, t)) == t`` for such text (round trip; timestamptz
prints in UTC unless a zone is given by the caller of ``format_timestamptz``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.values import oids, scalars, temporal
from engine.values.arrays import format_array, parse_array
from engine.values.types import TextValue


def _identity(text: str) -> str:
    return text


Parser = Callable[[str], Any]
Formatter = Callable[[Any], str]

PARSERS: dict[int, Parser] = {
    oids.BOOL: scalars.parse_bool,
    oids.INT2: int,
    oids.INT4: int,
    oids.INT8: int,
    oids.OID: int,
    oids.FLOAT4: scalars.parse_float4,
    oids.FLOAT8: scalars.parse_float,
    oids.NUMERIC: scalars.parse_numeric,
    oids.BYTEA: scalars.parse_bytea,
    oids.UUID: scalars.parse_uuid,
    oids.DATE: temporal.parse_date,
    oids.TIME: temporal.parse_time,
    oids.TIMETZ: temporal.parse_timetz,
    oids.TIMESTAMP: temporal.parse_timestamp,
    oids.TIMESTAMPTZ: temporal.parse_timestamptz,
    oids.INTERVAL: temporal.parse_interval,
    oids.JSON: _identity,
    oids.JSONB: _identity,
    **{oid: _identity for oid in oids.STRING_TYPES},
}

FORMATTERS: dict[int, Formatter] = {
    oids.BOOL: scalars.format_bool,
    oids.INT2: str,
    oids.INT4: str,
    oids.INT8: str,
    oids.OID: str,
    oids.FLOAT4: scalars.format_float4,
    oids.FLOAT8: scalars.format_float8,
    oids.NUMERIC: scalars.format_numeric,
    oids.BYTEA: scalars.format_bytea,
    oids.UUID: scalars.format_uuid,
    oids.DATE: temporal.format_date,
    oids.TIME: temporal.format_time,
    oids.TIMETZ: temporal.format_time,
    oids.TIMESTAMP: temporal.format_timestamp,
    oids.TIMESTAMPTZ: temporal.format_timestamptz,
    oids.INTERVAL: temporal.format_interval,
    oids.JSON: str,
    oids.JSONB: str,
    **{oid: str for oid in oids.STRING_TYPES},
}


def parser_for(oid: int) -> Parser:
    """The text parser for ``oid`` (resolve once per column, call per value)."""
    found = PARSERS.get(oid)
    if found is not None:
        return found
    element_oid = oids.ARRAY_ELEMENT.get(oid)
    if element_oid is not None:
        return _array_parser(oid, PARSERS[element_oid])
    return lambda text: TextValue(oid, text)


def _array_parser(oid: int, element: Parser) -> Parser:
    def parse(text: str) -> Any:
        if not text.startswith("{"):
            return TextValue(oid, text)
        return parse_array(text, element)

    return parse


def _element_formatter(inner: Formatter) -> Formatter:
    def fmt(value: Any) -> str:
        return value.text if isinstance(value, TextValue) else inner(value)

    return fmt


def decode_text(oid: int, text: str) -> Any:
    """PostgreSQL's text output of a value of type ``oid`` -> the canonical Python value."""
    return parser_for(oid)(text)


def encode_text(oid: int, value: Any) -> str:
    """A canonical value of type ``oid`` -> PostgreSQL's text output for it."""
    if isinstance(value, TextValue):
        return value.text
    found = FORMATTERS.get(oid)
    if found is not None:
        return found(value)
    element_oid = oids.ARRAY_ELEMENT.get(oid)
    if element_oid is not None and isinstance(value, tuple):
        return format_array(value, _element_formatter(FORMATTERS[element_oid]))
    return str(value)
