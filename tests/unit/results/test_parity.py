"""Parity of ``proxy.results.encode_rows`` and its Cython twin on the same random rows.

Columns get random (type, format) encoders, including the kinds the twin inlines; values
are of the right type, at the edges of the type, of the wrong type, or NULL, so both the
fast paths and the fallbacks (and the exceptions they raise) are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from engine.values import oids
from pgwire.backend import decode_data_row_values
from proxy import results
from proxy.results import ColumnEncoder, OutputSettings, Unencodable, column_encoder

TWIN = cython_ext.load_pair("results")
SETTINGS = OutputSettings.from_parameters({"TimeZone": "America/New_York"})
ALL_SETTINGS = [SETTINGS, OutputSettings.from_parameters({"TimeZone": "Etc/UTC"}),
                OutputSettings.from_parameters({"TimeZone": "Australia/Lord_Howe"}),
                OutputSettings.from_parameters({"TimeZone": "America/St_Johns"}),
                OutputSettings.from_parameters({"TimeZone": "UTC", "DateStyle": "SQL, DMY"})]
COLUMNS = [(oid, fmt) for oid in (oids.INT2, oids.INT4, oids.INT8, oids.OID, oids.BOOL,
                                  oids.TEXT, oids.JSONB, oids.FLOAT8, oids.NUMERIC,
                                  oids.TIMESTAMP, oids.TIMESTAMPTZ, oids.BYTEA) for fmt in (0, 1)]


def test_twin_is_built() -> None:
    assert TWIN is not None, "cython_ext.results is not built: run `make compile`"


def _outcome(fn: Callable[..., bytes], *args: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except Unencodable:
        return ("unencodable", None)
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        return ("error", type(exc).__name__)


values = st.one_of(
    st.none(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, -1, 2**15, -(2**15) - 1, 2**31, -(2**31), 2**63 - 1, -(2**63), 2**63]),
    st.booleans(),
    st.text(max_size=8),
    st.floats(),
    st.decimals(allow_nan=True, places=3, min_value=-(10**6), max_value=10**6),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(),
    st.datetimes(timezones=st.timezones()),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=-3)))),
    st.binary(max_size=8),
)


def _ints(bits: int, signed: bool = True) -> st.SearchStrategy[int]:
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return st.integers(low, high) | st.sampled_from([low, high, 0, -1 if signed else 1])


#: values of the right type for each column (most rows must be encodable, or an
#: Unencodable value elsewhere in the row would hide a difference)
TYPED: dict[int, st.SearchStrategy[Any]] = {
    oids.INT2: _ints(16), oids.INT4: _ints(32), oids.INT8: _ints(64),
    oids.OID: _ints(32, signed=False), oids.BOOL: st.booleans(),
    oids.TEXT: st.text(max_size=8), oids.JSONB: st.text(max_size=8),
    oids.FLOAT8: st.floats(),
    oids.NUMERIC: st.decimals(allow_nan=True, places=2, min_value=-(10**6), max_value=10**6)
    | st.decimals(allow_nan=True, allow_infinity=True)
    | st.sampled_from([Decimal("-0.00"), Decimal("-NaN"), Decimal("sNaN"), Decimal("1E+3"),
                       Decimal("-Infinity"), Decimal("0"), Decimal("-0")]),
    oids.TIMESTAMP: st.datetimes(),
    oids.TIMESTAMPTZ: st.datetimes(timezones=st.just(UTC))
    | st.datetimes(timezones=st.timezones())
    | st.datetimes(min_value=datetime(1800, 1, 1), max_value=datetime(1930, 1, 1),
                   timezones=st.just(UTC))
    | st.sampled_from([datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, tzinfo=UTC)]),
    oids.BYTEA: st.binary(max_size=8),
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[ColumnEncoder], list[tuple[Any, ...]]]:
    cols = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6))
    session = draw(st.sampled_from(ALL_SETTINGS))
    typmods = [draw(st.sampled_from([-1, (12 << 16 | 2) + 4, (8 << 16) + 4]))
               if oid == oids.NUMERIC else -1 for oid, _ in cols]
    encoders = [column_encoder(oid, typmod, fmt, session)
                for (oid, fmt), typmod in zip(cols, typmods, strict=True)]
    hostile = draw(st.booleans())
    cells = [st.one_of(TYPED[oid], TYPED[oid], TYPED[oid], st.none(), *([values] if hostile
                       else [])) for oid, _ in cols]
    rows = draw(st.lists(st.tuples(*cells), max_size=5))
    return encoders, rows


@settings(max_examples=300, deadline=None)
@given(tables())
def test_encode_rows_parity(table: tuple[list[ColumnEncoder], list[tuple[Any, ...]]]) -> None:
    assert TWIN is not None
    encoders, rows = table
    want = _outcome(results.encode_rows_python, rows, encoders)
    assert _outcome(TWIN.encode_rows, rows, encoders) == want
    assert _outcome(TWIN.encode_rows, [list(r) for r in rows], encoders) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5),
                          st.none() | st.floats(allow_nan=False)), max_size=8))
def test_rows_decode_back(rows: list[tuple[int, str, float | None]]) -> None:
    encoders = [column_encoder(oids.INT8, -1, 0, SETTINGS), column_encoder(oids.TEXT, -1, 1,
                SETTINGS), column_encoder(oids.FLOAT8, -1, 1, SETTINGS)]
    data = results.encode_rows(rows, encoders)
    pos, decoded = 0, []
    while pos < len(data):
        assert data[pos:pos + 1] == b"D"
        size = int.from_bytes(data[pos + 1:pos + 5], "big")
        decoded.append(decode_data_row_values(data[pos + 5:pos + 1 + size]))
        pos += 1 + size
    assert decoded == [(str(a).encode(), b.encode(), None if c is None else
                        encoders[2].encode(c)) for a, b, c in rows]


def test_wrong_row_length_is_an_error() -> None:
    encoders = [column_encoder(oids.INT4, -1, 0, SETTINGS)]
    for fn in (results.encode_rows_python, *([TWIN.encode_rows] if TWIN else [])):
        assert _outcome(fn, [(1, 2)], encoders) == ("error", "ValueError")
        assert fn([], encoders) == b""
        assert fn([(Decimal(1),)], [column_encoder(oids.NUMERIC, -1, 0, SETTINGS)]) == (
            b"D\x00\x00\x00\x0b\x00\x01\x00\x00\x00\x011")



NUMERIC_EDGES = [Decimal(x) for x in ("-0.00", "-0", "0", "0.00", "-NaN", "NaN", "sNaN",
                                      "Infinity", "-Infinity", "1E+3", "-1.005", "12.345",
                                      "99.99", "-0.001", "1E-30", "123456789012345678901234567.5",
                                      "10000", "0.0001", "-12345.6789", "1E+5", "0.00010000")]


def test_lone_surrogates_are_refused_by_both() -> None:
    assert TWIN is not None
    for fmt in (0, 1):
        encoders = [column_encoder(oids.TEXT, -1, fmt, SETTINGS)]
        for fn in (results.encode_rows_python, TWIN.encode_rows):
            assert _outcome(fn, [("a\ud800",)], encoders) == ("unencodable", None)


def test_numeric_edges_parity() -> None:
    assert TWIN is not None
    typmods = (-1, (12 << 16 | 2) + 4, (8 << 16) + 4, (30 << 16 | 3) + 4)
    for typmod, fmt in ((t, f) for t in typmods for f in (0, 1)):
        encoders = [column_encoder(oids.NUMERIC, typmod, fmt, SETTINGS)]
        for value in NUMERIC_EDGES:
            want = _outcome(results.encode_rows_python, [(value,)], encoders)
            assert _outcome(TWIN.encode_rows, [(value,)], encoders) == want, (typmod, value)
