"""Text codecs: known PostgreSQL outputs decode to canonical values and print back unchanged."""

from __future__ import annotations

import math
import struct
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.values import (
    FLOAT_NAN,
    NUMERIC_NAN,
    Interval,
    TextValue,
    decode_text,
    encode_text,
    oids,
)
from engine.values.scalars import format_float4, format_float8

CASES = [
    (oids.BOOL, "t", True),
    (oids.BOOL, "f", False),
    (oids.INT2, "-32768", -32768),
    (oids.INT8, "9223372036854775807", 9223372036854775807),
    (oids.OID, "4294967295", 4294967295),
    (oids.FLOAT8, "1.5", 1.5),
    (oids.FLOAT8, "Infinity", math.inf),
    (oids.FLOAT8, "-Infinity", -math.inf),
    (oids.FLOAT8, "1e+15", 1e15),
    (oids.FLOAT8, "123456789012345", 123456789012345.0),
    (oids.FLOAT8, "1e-05", 1e-05),
    (oids.FLOAT8, "0.0001", 0.0001),
    (oids.FLOAT8, "-0", -0.0),
    (oids.FLOAT8, "0.1", 0.1),
    (oids.FLOAT8, "1.7976931348623157e+308", 1.7976931348623157e308),
    (oids.FLOAT4, "0.1", float(struct.unpack("f", struct.pack("f", 0.1))[0])),
    (oids.FLOAT4, "1e+06", 1e6),
    (oids.FLOAT4, "123456", 123456.0),
    (oids.NUMERIC, "1.50", Decimal("1.50")),
    (oids.NUMERIC, "-0.000001", Decimal("-0.000001")),
    (oids.NUMERIC, "Infinity", Decimal("Infinity")),
    (oids.NUMERIC, "100000000000000000000", Decimal("100000000000000000000")),
    (oids.TEXT, "hé llo", "hé llo"),
    (oids.BPCHAR, "ab  ", "ab  "),
    (oids.BYTEA, "\\x00ff10", b"\x00\xff\x10"),
    (oids.BYTEA, "\\x", b""),
    (oids.UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
     uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
    (oids.DATE, "2024-02-29", date(2024, 2, 29)),
    (oids.DATE, "0099-01-01", date(99, 1, 1)),
    (oids.TIME, "13:14:15.5", time(13, 14, 15, 500000)),
    (oids.TIME, "00:00:00", time(0)),
    (oids.TIMETZ, "13:14:15+05:30", time(13, 14, 15, tzinfo=timezone(timedelta(hours=5.5)))),
    (oids.TIMETZ, "13:14:15-08", time(13, 14, 15, tzinfo=timezone(timedelta(hours=-8)))),
    (oids.TIMESTAMP, "2020-01-02 03:04:05.000001", datetime(2020, 1, 2, 3, 4, 5, 1)),
    (oids.TIMESTAMPTZ, "2020-01-02 03:04:05+00", datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),
    (oids.INTERVAL, "00:00:00", Interval()),
    (oids.INTERVAL, "1 year 2 mons 3 days 04:05:06.5", Interval(14, 3, 14706500000)),
    (oids.INTERVAL, "-1 years -2 mons +3 days -04:05:06", Interval(-14, 3, -14706000000)),
    (oids.INTERVAL, "1 mon -1 days +01:00:00", Interval(1, -1, 3600000000)),
    (oids.INTERVAL, "-00:00:00.000001", Interval(0, 0, -1)),
    (oids.INTERVAL, "1 day", Interval(0, 1, 0)),
    (oids.INTERVAL, "-1 days", Interval(0, -1, 0)),
    (oids.INTERVAL, "100:00:00", Interval(0, 0, 360000000000)),
    (oids.JSONB, '{"a": [1, 2]}', '{"a": [1, 2]}'),
    (1007, "{1,2,NULL,-4}", (1, 2, None, -4)),
    (1009, '{"a b","",NULL,"NULL","q\\"\\\\",x}', ("a b", "", None, "NULL", 'q"\\', "x")),
    (1007, "{{1,2},{3,4}}", ((1, 2), (3, 4))),
    (1007, "{}", ()),
    (1182, "{2020-01-01,infinity}", (date(2020, 1, 1), TextValue(oids.DATE, "infinity"))),
]


@pytest.mark.parametrize(("oid", "text", "value"), CASES)
def test_decode_and_round_trip(oid: int, text: str, value: object) -> None:
    decoded = decode_text(oid, text)
    assert decoded == value
    assert type(decoded) is type(value)
    assert encode_text(oid, decoded) == text


@pytest.mark.parametrize(
    ("oid", "text"),
    [(oids.DATE, "infinity"), (oids.DATE, "2020-01-01 BC"), (oids.TIME, "24:00:00"),
     (oids.TIMESTAMP, "-infinity"), (oids.TIMESTAMPTZ, "10000-01-01 00:00:00+00"),
     (1007, "[0:1]={1,2}"), (600, "(1,2)")],
)
def test_unrepresentable_values_stay_text(oid: int, text: str) -> None:
    decoded = decode_text(oid, text)
    assert decoded == TextValue(oid, text)
    assert encode_text(oid, decoded) == text


def test_nan_is_a_singleton_equal_to_itself_in_containers() -> None:
    assert decode_text(oids.FLOAT8, "NaN") is FLOAT_NAN
    assert decode_text(oids.NUMERIC, "NaN") is NUMERIC_NAN
    assert (decode_text(oids.FLOAT8, "NaN"),) == (decode_text(oids.FLOAT4, "NaN"),)
    assert {decode_text(oids.NUMERIC, "NaN"): 1}[NUMERIC_NAN] == 1
    assert encode_text(oids.FLOAT8, FLOAT_NAN) == "NaN"
    assert encode_text(oids.NUMERIC, NUMERIC_NAN) == "NaN"


def test_timestamptz_is_normalised_to_utc() -> None:
    value = decode_text(oids.TIMESTAMPTZ, "2020-01-02 03:04:05+05:30")
    assert value.tzinfo is UTC
    assert encode_text(oids.TIMESTAMPTZ, value) == "2020-01-01 21:34:05+00"


@pytest.mark.parametrize(("oid", "text"), [(oids.BOOL, "yes"), (oids.INT4, "x"),
                                           (oids.NUMERIC, "1.2.3"), (1007, "{1,2")])
def test_garbage_raises_value_error(oid: int, text: str) -> None:
    with pytest.raises(ValueError):
        decode_text(oid, text)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False))
def test_float8_text_round_trips(value: float) -> None:
    assert float(format_float8(value)) == value
    assert decode_text(oids.FLOAT8, format_float8(value)) == value


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float4_text_round_trips_through_float4(value: float) -> None:
    text = format_float4(value)
    assert struct.unpack("f", struct.pack("f", float(text)))[0] == value


@settings(max_examples=200, deadline=None)
@given(st.integers(-10**5, 10**5), st.integers(-10**5, 10**5), st.integers(-10**14, 10**14))
def test_interval_round_trips(months: int, days: int, usecs: int) -> None:
    value = Interval(months, days, usecs)
    assert decode_text(oids.INTERVAL, encode_text(oids.INTERVAL, value)) == value


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=6))
def test_text_arrays_round_trip(items: list[str | None]) -> None:
    value = tuple(items)
    assert decode_text(1009, encode_text(1009, value)) == value


def test_float8_text_on_a_rounding_boundary() -> None:
    """Ryu never picks digits on the rounding interval's bound; Python's repr may (>= 2**53)."""
    assert format_float8(1e23) == "9.999999999999999e+22"
    assert format_float8(4.260872852980234e16) == "4.2608728529802336e+16"
    assert encode_text(oids.FLOAT8, 1e23) == "9.999999999999999e+22"
