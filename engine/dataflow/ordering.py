"""ORDER BY in PostgreSQL's order, as Python sort keys.

Owns: ``order_key`` (a key function for ``SortKey`` lists, with DESC and NULLS FIRST/LAST)
and ``row_key`` (a total order on whole rows, used to break ties deterministically). A DESC
number's key is its negation (compared in C); other DESC values are wrapped in ``Desc``.

Invariants: NULL sorts as larger than every value (so last for ASC, first for DESC, unless
NULLS FIRST/LAST says otherwise); NaN (float or numeric) sorts above every other number; text
compares by code point (PostgreSQL's C collation), or under a ``SortKey``'s libc collation
through ``engine.values.collation`` (a ``CollKey`` per value).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from engine.plan.ir import SortKey
from engine.values.collation import key_function

Row = Sequence[Any]


class Desc:
    """Wraps a key so that it sorts in reverse."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: Desc) -> bool:
        return bool(other.key < self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Desc) and bool(self.key == other.key)

    def __hash__(self) -> int:
        return hash(self.key)


#: types whose DESC key is the negated value (a tuple compares in C, a ``Desc`` in Python);
#: they all compare with one another, so a column mixing them still sorts
_NEGATABLE = frozenset({int, float, Decimal})


def value_key(value: Any) -> tuple[int, Any]:
    """Sort key of one non-NULL value: NaN (float or numeric) above every number."""
    if type(value) in _NEGATABLE and value != value:
        return (1, 0)
    return (0, value)


def row_key(row: Row) -> tuple[tuple[int, Any], ...]:
    """A total order on rows of one schema (NULLs last in every column)."""
    return tuple((2, 0) if v is None else value_key(v) for v in row)


def desc_key(value: Any) -> Any:
    """The key of one non-NULL value sorted in reverse (DESC): ``(0, -value)`` for numbers
    (NaN, the largest, first as ``(-1, 0)``), else ``Desc(value_key(value))``."""
    if type(value) in _NEGATABLE:
        if value != value:  # NaN (float or numeric)
            return (-1, 0)
        return (0, -value)
    return Desc(value_key(value))


def order_key(
    order_by: Sequence[SortKey], tie_break: bool = True
) -> Callable[[Row], tuple[Any, ...]]:
    """Key function sorting rows by ``order_by`` (then by the whole row if ``tie_break``)."""
    specs = [(k.column, k.descending, k.effective_nulls_first,
              None if k.collation is None else key_function(k.collation)) for k in order_by]

    def key(row: Row) -> tuple[Any, ...]:
        out: list[Any] = []
        for col, desc, nulls_first, coll in specs:
            v = row[col]
            if v is None:
                out.append((0 if nulls_first else 2, 0))
            else:
                if coll is not None:
                    v = coll(v)
                out.append((1, desc_key(v) if desc else value_key(v)))
        if tie_break:
            out.append(row_key(row))
        return tuple(out)

    return key
