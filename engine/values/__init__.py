"""PostgreSQL type codecs: text (pgoutput, COPY, fills) <-> canonical Python values.

Public API: :func:`decode_text`, :func:`encode_text`, :func:`parser_for`, the value types
:class:`Interval` and :class:`TextValue`, the NaN singletons, and :mod:`engine.values.oids`.

Canonical values per type: bool -> ``bool``; int2/int4/int8/oid -> ``int``; float4/float8 ->
``float`` (NaN is ``FLOAT_NAN``); numeric -> ``Decimal`` (NaN is ``NUMERIC_NAN``, infinities
``Decimal('Infinity')``); text/varchar/bpchar/name/char -> ``str``; bytea -> ``bytes``; date ->
``date``; time -> ``time``; timetz -> ``time`` with fixed offset; timestamp -> naive
``datetime``; timestamptz -> UTC ``datetime``; interval -> :class:`Interval`; uuid -> ``UUID``;
json/jsonb -> ``str`` (the text PostgreSQL printed); arrays of these -> nested tuples with
``None`` for NULL; anything else, and values no Python type can hold (infinity dates, BC,
``24:00:00``), -> :class:`TextValue` (oid, text).

Where Python equality differs from PostgreSQL's operators (callers comparing values must know
the type): bpchar compares ignoring trailing spaces in PostgreSQL, but the canonical value
keeps the padding PostgreSQL prints; timetz values with different zones but the same instant
are equal in Python and unequal in PostgreSQL; text equality is byte equality (fine under
deterministic collations only). NaN: see :mod:`engine.values.types`.
"""

from __future__ import annotations

from engine.values import oids
from engine.values.codec import decode_text, encode_text, parser_for
from engine.values.types import FLOAT_NAN, NUMERIC_NAN, Interval, TextValue

__all__ = [
    "FLOAT_NAN",
    "NUMERIC_NAN",
    "Interval",
    "TextValue",
    "decode_text",
    "encode_text",
    "oids",
    "parser_for",
]
