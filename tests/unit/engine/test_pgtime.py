"""Date/time kernels (engine.dataflow.pgtime) against values PostgreSQL 15 printed."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from engine.dataflow import pgtime
from engine.dataflow.pgmath import EvalError
from engine.values import Interval, TextValue, encode_text
from engine.values import oids as T

TS = datetime(2024, 5, 1, 10, 0, 1, 123456)


@pytest.mark.parametrize(("field", "value", "printed"), [
    ("second", datetime(2024, 1, 1, 10, 0, 5), "5.000000"),
    ("second", datetime(2024, 1, 1, 10, 0, 5, 250000), "5.250000"),
    ("epoch", datetime(2024, 1, 1, 10, 0, 5, 250000), "1704103205.250000"),
    ("milliseconds", datetime(2024, 1, 1, 10, 0, 5, 250000), "5250.000"),
    ("microseconds", datetime(2024, 1, 1, 10, 0, 5, 250000), "5250000"),
    ("dow", datetime(2024, 1, 7), "0"), ("isodow", datetime(2024, 1, 7), "7"),
    ("week", datetime(2024, 1, 1), "1"), ("doy", datetime(2024, 12, 31), "366"),
    ("decade", datetime(2024, 12, 31), "202"), ("century", datetime(2000, 12, 31), "20"),
    ("millennium", datetime(2001, 12, 31), "3"), ("isoyear", datetime(2021, 1, 1), "2020"),
    ("epoch", date(2024, 1, 2), "1704153600"), ("day", date(2024, 1, 2), "2"),
])
def test_extract(field: str, value: object, printed: str) -> None:
    assert encode_text(T.NUMERIC, pgtime.extract([field, value], ())) == printed


@pytest.mark.parametrize(("unit", "printed"), [
    ("century", "2001-01-01 00:00:00"), ("millennium", "2001-01-01 00:00:00"),
    ("decade", "2020-01-01 00:00:00"), ("week", "2024-04-29 00:00:00"),
    ("quarter", "2024-04-01 00:00:00"), ("milliseconds", "2024-05-01 10:00:01.123"),
])
def test_date_trunc(unit: str, printed: str) -> None:
    assert encode_text(T.TIMESTAMP, pgtime.date_trunc([unit, TS], ())) == printed


def test_interval_arithmetic() -> None:
    jan31 = datetime(2024, 1, 31, 10)
    assert pgtime.add_interval(jan31, Interval(1, 0, 0)) == datetime(2024, 2, 29, 10)
    assert pgtime.add_interval(datetime(2024, 3, 31, 10), Interval(1, 1, 0), -1) == datetime(
        2024, 2, 28, 10)
    since = pgtime.ts_diff(datetime(2024, 3, 1), datetime(2024, 1, 1, 1))
    assert encode_text(T.INTERVAL, since) == "59 days 23:00:00"
    before = pgtime.ts_diff(datetime(2024, 1, 1), datetime(2024, 3, 1, 1))
    assert encode_text(T.INTERVAL, before) == "-60 days -01:00:00"
    with pytest.raises(EvalError):
        pgtime.add_days(date(9999, 12, 31), 1)
    with pytest.raises(EvalError):
        pgtime.add_interval(TextValue(T.TIMESTAMP, "infinity"), Interval(0, 1, 0))


def test_range_frame_keys_measure_in_microseconds() -> None:
    from datetime import UTC, date, datetime

    import pytest

    from engine.dataflow.pgmath import EvalError
    from engine.dataflow.windows import micros
    from engine.values import oids as T
    from engine.values.types import TextValue
    assert micros(date(2000, 1, 2)) == 86_400_000_000
    assert micros(datetime(1999, 12, 31, 23, 59, 59, 999_999)) == -1
    assert micros(datetime(2000, 1, 1, 1, tzinfo=UTC)) == 3_600_000_000
    assert micros(TextValue(T.DATE, "infinity")) == float("inf")
    assert micros(TextValue(T.TIMESTAMP, "-infinity")) + 10**12 == float("-inf")
    with pytest.raises(EvalError):
        micros(TextValue(T.DATE, "0044-03-15 BC"))
