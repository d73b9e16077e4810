"""Exact result encoding: canonical engine values -> the DataRow bytes PostgreSQL would send.

The package owns the public API the router and session use to answer cached reads (the
modules: ``rows`` assembles DataRows; ``text``, ``binary`` and ``arrays`` hold the per-type
factories; ``temporal`` the calendar arithmetic; ``floats`` float output; ``settings`` the
session's output settings):

- :class:`OutputSettings` (``OutputSettings.from_parameters(params)``, ``.reason()``): the
  session settings that change value text (DateStyle, TimeZone, IntervalStyle,
  extra_float_digits, bytea_output, encodings);
- :func:`supports` ``(type_oid, typmod, fmt, settings) -> str | None``: why a column cannot be
  encoded exactly (None when it can); the router sends such queries upstream;
- :func:`column_encoder` ``(type_oid, typmod, fmt, settings) -> ColumnEncoder``: resolve once
  per result column; ``ColumnEncoder.encode(value) -> bytes`` for a non-NULL value;
- :func:`encode_rows` ``(rows, encoders) -> bytes``: the concatenated DataRow messages of
  ``rows`` (tuples of canonical values, None for NULL) - the hot path, with a Cython twin in
  ``cython_ext/results.pyx`` selected by ``WEIR_IMPL``;
- :class:`Unencodable`: raised by an encoder (and so by ``encode_rows``) for a value it cannot
  reproduce exactly; the caller must then answer the statement from upstream.

Invariants: for every supported (type, typmod, format, settings) the bytes equal PostgreSQL's
output for the same value (integration tests compare them with a real server); nothing is
guessed; an encoder is a pure function of its value. ``ColumnEncoder.kind`` lets the compiled
``encode_rows`` inline the commonest conversions; it must produce exactly ``encode(value)``.
"""

from __future__ import annotations

from proxy.results.rows import (
    KIND_CALL,
    ColumnEncoder,
    OutputSettings,
    Unencodable,
    column_encoder,
    encode_rows,
    encode_rows_python,
    supports,
)

__all__ = [
    "KIND_CALL",
    "ColumnEncoder",
    "OutputSettings",
    "Unencodable",
    "column_encoder",
    "encode_rows",
    "encode_rows_python",
    "supports",
]
