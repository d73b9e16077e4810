"""A fill's text rows decode as the stream's values do (``proxy.fillsql.decode_rows``: the
parser of each column chosen once per batch, issue 18), and the engine's deterministic order
of what it issues and wakes (``engine.api._in_order``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Column, decode_text, oids
from engine.api import _in_order
from proxy.fillsql import decode_rows

COLUMNS = (Column("i", oids.INT4), Column("t", oids.TEXT), Column("n", oids.NUMERIC),
           Column("a", 1007), Column("d", oids.DATE), Column("u", 424242))  # (an unknown type)
TEXTS = {
    oids.INT4: st.integers(-(2**31), 2**31 - 1).map(str),
    oids.TEXT: st.text(),
    oids.NUMERIC: st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    1007: st.lists(st.integers(-9, 9), max_size=3).map(
        lambda xs: "{" + ",".join(map(str, xs)) + "}"),
    oids.DATE: st.dates().map(lambda d: d.isoformat()),
    424242: st.text(),
}
RECORDS = st.lists(st.tuples(*(st.none() | TEXTS[c.type_oid] for c in COLUMNS)), max_size=5)


@given(RECORDS)
def test_each_value_decodes_as_decode_text_does(records: list[tuple[Any, ...]]) -> None:
    expected = [tuple(None if v is None else decode_text(c.type_oid, v)
                      for c, v in zip(COLUMNS, rec, strict=True)) for rec in records]
    assert decode_rows(COLUMNS, records) == expected


def test_a_record_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match="zip"):
        decode_rows(COLUMNS[:2], [("1", "a", "b")])
    assert decode_rows(COLUMNS[:2], []) == []


@given(st.sets(st.tuples(st.integers(0, 3), st.tuples(st.integers() | st.text()))))
def test_in_order_is_the_order_by_repr(items: set[tuple[int, tuple[Any, ...]]]) -> None:
    assert _in_order(items) == sorted(items, key=repr)
