"""Typing of SQL literals: PostgreSQL input text -> canonical Python value of a given type.

Owns: ``literal_value(type_oid, text)`` — the value a quoted literal (or a text-format
parameter) denotes once coerced to ``type_oid``, for the types and input forms whose
PostgreSQL meaning is unambiguous and independent of session settings. Anything else raises
``LiteralError`` (the planner turns that into Unsupported; the host may forward upstream).

Invariant: when this returns a value, PostgreSQL's input function for that type accepts the
same text and produces an equal value (stricter than PostgreSQL, never looser or different).
"""

from __future__ import annotations

import re
import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from engine.plan.pgtypes import type_name
from engine.values import oids as T


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
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None:
        raise LiteralError(f"timestamp literal {text!r} (only ISO forms are typed)")
    frac = match[7] or ".0"
    try:
        return datetime(int(match[1]), int(match[2]), int(match[3]), int(match[4] or 0),
                        int(match[5] or 0), int(match[6] or 0),
                        int(frac[1:].ljust(6, "0")))
    except ValueError as exc:
        raise LiteralError(str(exc)) from exc


def _text(_type_oid: int, text: str) -> str:
    if "\x00" in text:
        raise LiteralError("NUL in text literal")
    return text


def _uuid(_type_oid: int, text: str) -> uuid.UUID:
    stripped = text.strip()
    if _UUID.fullmatch(stripped) is None or stripped.startswith("{") != stripped.endswith("}"):
        raise LiteralError(f"uuid literal {text!r} (only hex with optional hyphens/braces)")
    return uuid.UUID(stripped)


_PARSERS: dict[int, Any] = {
    T.INT2: _int, T.INT4: _int, T.INT8: _int, T.NUMERIC: _numeric, T.BOOL: _bool,
    T.DATE: _date, T.TIMESTAMP: _timestamp, T.TEXT: _text, T.VARCHAR: _text, T.NAME: _text,
    T.UUID: _uuid,
}


def literal_value(type_oid: int, text: str) -> Any:
    """The canonical value of ``text`` as a literal of ``type_oid``; raises LiteralError."""
    parse = _PARSERS.get(type_oid)
    if parse is None:
        if type_oid in (T.TIMESTAMPTZ, T.TIMETZ):
            raise LiteralError(f"{type_name(type_oid)} literal (its value depends on the "
                               "session TimeZone)")
        raise LiteralError(f"literal of type {type_name(type_oid)}")
    return parse(type_oid, text)


def can_type(type_oid: int) -> bool:
    return type_oid in _PARSERS
