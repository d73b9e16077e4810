"""OutputSettings parsing and the reasons weir gives for settings and types it cannot honour."""

from __future__ import annotations

import pytest

from engine.values import oids
from proxy.results import OutputSettings, column_encoder, supports


def test_defaults_and_reported_values() -> None:
    s = OutputSettings.from_parameters({})
    assert (s.date_style, s.date_order, s.timezone, s.reason()) == ("ISO", "MDY", "UTC", None)
    s = OutputSettings.from_parameters({"datestyle": "German", "TIMEZONE": "Europe/Berlin",
                                        "IntervalStyle": "SQL_STANDARD",
                                        "extra_float_digits": "-3", "bytea_output": "escape"})
    assert (s.date_style, s.date_order) == ("German", "DMY")
    assert (s.interval_style, s.extra_float_digits, s.bytea_output) == ("sql_standard", -3,
                                                                        "escape")
    assert s.reason() is None
    assert OutputSettings.from_parameters({"DateStyle": "Postgres, European"}).date_order == "DMY"
    assert OutputSettings.from_parameters({"DateStyle": "SQL, YMD"}) == (
        OutputSettings.from_parameters({"DateStyle": "sql,ymd"}))


@pytest.mark.parametrize(("params", "fragment"), [
    ({"TimeZone": "UTC+3"}, "TimeZone"),
    ({"TimeZone": "../etc/passwd"}, "TimeZone"),
    ({"DateStyle": "Klingon"}, "DateStyle"),
    ({"IntervalStyle": "ancient"}, "IntervalStyle"),
    ({"extra_float_digits": "4"}, "extra_float_digits"),
    ({"extra_float_digits": "x"}, "extra_float_digits"),
    ({"bytea_output": "base64"}, "bytea_output"),
    ({"client_encoding": "LATIN1"}, "client_encoding"),
    ({"server_encoding": "SQL_ASCII"}, "server_encoding"),
    ({"integer_datetimes": "off"}, "integer_datetimes"),
])
def test_unsupported_settings_have_reasons(params: dict[str, str], fragment: str) -> None:
    s = OutputSettings.from_parameters(params)
    reason = s.reason()
    assert reason is not None and fragment in reason
    assert supports(oids.INT4, -1, 0, s) == reason
    with pytest.raises(ValueError, match=fragment):
        column_encoder(oids.INT4, -1, 0, s)


def test_unsupported_types_and_formats() -> None:
    s = OutputSettings()
    assert supports(oids.INT4, -1, 0, s) is None
    assert supports(1185, -1, 1, s) is None  # timestamptz[]
    assert supports(869, -1, 0, s) is None  # inet: text kept as printed
    assert supports(869, -1, 1, s) is None
    assert "binary encoder for type oid 3904" in (supports(3904, -1, 1, s) or "")  # int4range
    assert "oid 790" in (supports(790, -1, 0, s) or "")  # money depends on lc_monetary
    assert "format" in (supports(oids.INT4, -1, 2, s) or "")
    assert supports(oids.XML, -1, 0, s) is None
    assert supports(oids.XML, -1, 1, s) is not None
