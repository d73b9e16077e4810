"""Records flowing through the dataflow: signed deltas, partial rows, sizes.

Owns: ``Delta`` (a list of ``(row, weight)``; weight > 0 adds copies of the row, < 0 revokes
them), ``consolidate`` (sum weights per row, drop zeros: the batch kernel with a Cython twin),
``key_of`` (key extraction), the ``UNKNOWN`` column value of *eviction rows*, and
``row_size`` (the measured byte size used by memory accounting).

An *eviction row* names the rows a change or an eviction may have touched: columns whose
value is not known are ``UNKNOWN``. A stateful node receiving one evicts the key it computes
from it, or every key when a key column is ``UNKNOWN``. Eviction rows never change state
other than by making keys missing, so sending more of them than needed is always safe.

Two kinds: a plain eviction row stands for rows that *were* part of present state (their
partners at a join are stored, base invariant S3); an ``Arrival`` stands for a delta that
could not be applied (a join miss, an expression error, a row with unknown columns), whose
partners at a later join may not be loaded - a join pairs it with UNKNOWN unless the
partner key is present.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

import cython_ext

Row = tuple[Any, ...]
Delta = list[tuple[Row, int]]


class _Unknown:
    __slots__ = ()
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()


class Arrival(tuple):  # type: ignore[type-arg]
    """An eviction row for a delta that was dropped (see the module docstring)."""

    __slots__ = ()


def arrival(row: Row) -> Row:
    return Arrival(row)


def dedupe(rows: Iterable[Row]) -> list[Row]:
    """Drop repeated eviction rows (an ``Arrival`` and an equal plain row are both kept)."""
    seen: set[tuple[Row, bool]] = set()
    out: list[Row] = []
    for r in rows:
        k = (r, r.__class__ is Arrival)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def consolidate(delta: Iterable[tuple[Row, int]]) -> Delta:
    """Sum the weights of equal rows and drop rows whose weight is zero (first-seen order)."""
    acc: dict[Row, int] = {}
    for row, w in delta:
        acc[row] = acc.get(row, 0) + w
    return [(row, w) for row, w in acc.items() if w]


def key_of(row: Sequence[Any], cols: Sequence[int]) -> Row:
    """The values of ``cols`` in ``row`` as a tuple."""
    return tuple([row[i] for i in cols])


def has_unknown(values: Iterable[Any]) -> bool:
    return any(v is UNKNOWN for v in values)


def row_size(row: Row) -> int:
    """Bytes one stored row occupies (the tuple and its values, as ``sys.getsizeof`` measures;
    small ints, None and booleans are shared by the interpreter and counted as a pointer)."""
    size = sys.getsizeof(row)
    for v in row:
        if v is not None and v is not True and v is not False:
            size += sys.getsizeof(v)
    return size


_fast = cython_ext.load("records")
if _fast is not None:
    consolidate = _fast.consolidate
    key_of = _fast.key_of
