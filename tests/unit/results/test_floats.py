"""Float text: shortest-exact digits that read back, never on the rounding interval's bound."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.results.floats import float_text, shortest_float8


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.floats(min_value=2.0**53, max_value=1e300))
def test_shortest_float8_reads_back_and_is_short(value: float) -> None:
    text = shortest_float8(value)
    assert float(text) == value
    digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
    assert len(digits) <= 17
    if abs(value) < 2.0**53:  # no integer-valued interval bounds: Python's repr agrees
        assert float(text) == float(repr(value)) and len(digits) <= len(
            repr(abs(value)).split("e")[0].replace(".", "").strip("0")) + 1


@settings(max_examples=200, deadline=None)
@given(st.floats(), st.integers(-15, 0))
def test_low_extra_float_digits_is_printf_g(value: float, digits: int) -> None:
    text = float_text(value, digits, float4=False)
    if math.isnan(value):
        assert text == "NaN"
    elif math.isinf(value):
        assert text == ("Infinity" if value > 0 else "-Infinity")
    else:
        assert text == "%.*g" % (max(1, 15 + digits), value)  # noqa: UP031


def test_known_bound_cases() -> None:
    assert shortest_float8(4.260872852980234e16) == "4.2608728529802336e+16"
    assert shortest_float8(1.7976931348623157e308) == "1.7976931348623157e+308"
    assert shortest_float8(2.0**53) == "9.007199254740992e+15"
    # PostgreSQL 15 prints these (verified): "1e+23" lies exactly on 1e23's rounding bound
    assert shortest_float8(1e23) == "9.999999999999999e+22"
    assert shortest_float8(2e23) == "1.9999999999999998e+23"
    assert shortest_float8(1e22) == "1e+22"
