"""Records flowing through the dataflow: signed deltas, partial rows, sizes.

Owns: ``Delta`` (a list of ``(row, weight)``; weight > 0 adds copies of the row, < 0 revokes
them), ``consolidate`` (sum weights per row, drop zeros: the batch kernel with a Cython twin),
``key_of`` (key extraction), the ``UNKNOWN`` column value of *eviction rows*,
``row_size`` (the measured byte size used by memory accounting), and bags of rows
(``Bag``; ``bag_add``/``bag_rows``/``bag_size``, the reader's ``apply_bag``).

Row identity: two rows are the same row of a result only if PostgreSQL prints them the same
(``exact_key``). Dictionaries key rows by themselves (``row_key``: cheap, hashes once per
value object) and tell print variants of one value apart (``same_print``) only when two equal
rows meet; rows holding a NaN key by ``exact_key`` (NaN is not equal to itself). Every
kernel here has a Cython twin (``cython_ext.records``).

An *eviction row* names the rows a change or an eviction may have touched: columns whose
value is not known are ``UNKNOWN``. A stateful node receiving one evicts the key it computes
from it, or every key when a key column is ``UNKNOWN``. Eviction rows never change state
other than by making keys missing, so sending more of them than needed is always safe.

An ``Arrival`` is an eviction row standing for a delta that could not be applied (a join
miss, an expression error, a row with unknown columns) rather than for rows that were part
of present state; the tag is carried along for diagnostics (joins treat both alike: they
pair an eviction row with UNKNOWN unless the partner key is present).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
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


def exact_key(row: Row) -> Row:
    """A key under which rows are the same only if PostgreSQL prints them the same: numerics
    that differ only in scale (1.0, 1.00) and floats 0.0/-0.0 are equal values but different
    rows of a result, and float NaN is one row although NaN != NaN in Python."""
    for v in row:
        t = v.__class__
        if t is float or t is Decimal:
            return tuple([(_EXACT, str(x) if x.__class__ is Decimal else repr(x))
                          if x.__class__ in (float, Decimal) else x for x in row])
    return row


_EXACT = "\x00exact"


def row_key(row: Row) -> Row:
    """The dictionary key of a row in a bag: the row itself (Python equality; print variants
    such as 1.0 and 1.00 are told apart by ``same_print`` on collision), or ``exact_key`` for
    a row holding a NaN (NaN is not equal to itself, so it cannot key by value)."""
    for v in row:
        t = v.__class__
        if (t is float and v != v) or (t is Decimal and v.is_nan()):
            return exact_key(row)
    return row


def same_print(a: Row, b: Row) -> bool:
    """``exact_key(a) == exact_key(b)`` for rows known to be equal keys (``row_key``)."""
    if a is b:
        return True
    for x, y in zip(a, b, strict=True):
        if x is not y and (x.__class__ in _INEXACT or y.__class__ in _INEXACT) and (
                exact_key((x,)) != exact_key((y,))):
            return False
    return True


_INEXACT = (float, Decimal)


def consolidate(delta: Iterable[tuple[Row, int]]) -> Delta:
    """Sum the weights of identical rows (``exact_key``) and drop rows whose weight is zero
    (first-seen order). Rows key by ``row_key``; only when two print variants of one value
    meet does it fall back to keying every row by ``exact_key`` (same result)."""
    delta = list(delta)
    acc: dict[Row, list[Any]] = {}
    for row, w in delta:
        k = row_key(row)
        entry = acc.get(k)
        if entry is None:
            acc[k] = [row, w]
        elif same_print(entry[0], row):
            entry[1] += w
        else:
            return _consolidate_exact(delta)
    return [(row, w) for row, w in acc.values() if w]


def _consolidate_exact(delta: list[tuple[Row, int]]) -> Delta:
    acc: dict[Row, list[Any]] = {}
    for row, w in delta:
        k = exact_key(row)
        entry = acc.get(k)
        if entry is None:
            acc[k] = [row, w]
        else:
            entry[1] += w
    return [(row, w) for row, w in acc.values() if w]


def key_of(row: Sequence[Any], cols: Sequence[int]) -> Row:
    """The values of ``cols`` in ``row`` as a tuple."""
    return tuple([row[i] for i in cols])


def has_unknown(values: Iterable[Any]) -> bool:
    return any(v is UNKNOWN for v in values)


#: Bytes per value by exact type, as ``sys.getsizeof`` reports them on 64-bit CPython 3.11
#: (ints up to 2**60, ASCII text); None and booleans are shared singletons (pointer only).
#: A fixed table keeps the estimate consistent between both implementations and cheap.
SIZES: dict[type, int] = {int: 32, float: 24, Decimal: 104, bool: 0, type(None): 0}
TUPLE_BASE = 40
POINTER = 8
OTHER = 64


def row_size(row: Row) -> int:
    """Bytes one stored row occupies: the tuple (40 + 8 per column) plus each value (``SIZES``;
    str 49 + length, bytes 33 + length, anything else 64)."""
    size = TUPLE_BASE + POINTER * len(row)
    for v in row:
        t = v.__class__
        fixed = SIZES.get(t)
        if fixed is not None:
            size += fixed
        elif t is str:
            size += 49 + len(v)
        elif t is bytes:
            size += 33 + len(v)
        else:
            size += OTHER
    return size


#: A bag of rows: a flat list ``[row, n, row2, n2, ...]`` while it holds at most
#: ``SMALL_BAG`` distinct rows (found by comparison: no row is hashed - a fresh numeric's hash
#: is expensive), else a dict ``row_key(row) -> [row, n, variant, n2, ...]``.
Bag = list[Any] | dict[Row, list[Any]]
SMALL_BAG = 8


def _same_row(x: Row, row: Row, k: Row) -> bool:
    """``x`` and ``row`` (whose ``row_key`` is ``k``) are one row of a bag: equal keys and the
    same print. A row without NaN is its own key, and then ``x`` cannot hold a NaN either
    if it equals it."""
    if x is row:
        return True
    if k is row:
        return x == row and same_print(x, row)
    return row_key(x) == k and same_print(x, row)


def bag_add(bag: Bag, row: Row, w: int) -> Bag:
    """Add ``w`` copies of ``row`` to a bag (a new empty bag is ``[]``); return the bag - a new
    object when a list outgrows ``SMALL_BAG`` rows. Rows that print differently stay apart,
    no row has multiplicity 0."""
    k = row_key(row)
    if bag.__class__ is list:
        for i in range(0, len(bag), 2):
            if _same_row(bag[i], row, k):
                n = bag[i + 1] + w
                if n:
                    bag[i + 1] = n
                else:
                    del bag[i:i + 2]
                return bag
        if len(bag) < 2 * SMALL_BAG:
            bag += [row, w]
            return bag
        big: dict[Row, list[Any]] = {}
        for i in range(0, len(bag), 2):
            _dict_add(big, bag[i], bag[i + 1])
        bag = big
    _dict_add(bag, row, w, k)  # type: ignore[arg-type]
    return bag


def _dict_add(bag: dict[Row, list[Any]], row: Row, w: int, k: Row | None = None) -> None:
    """``bag_add`` into the dict form: ``row_key(row) -> [row, n, variant, n2, ...]``, one
    ``(row, n)`` pair per print variant (almost always one); ``k``: ``row_key(row)`` if
    known."""
    if k is None:
        k = row_key(row)
    entry = bag.get(k)
    if entry is None:
        bag[k] = [row, w]
        return
    for i in range(0, len(entry), 2):
        if same_print(entry[i], row):
            n = entry[i + 1] + w
            if n:
                entry[i + 1] = n
            elif len(entry) == 2:
                del bag[k]
            else:
                del entry[i:i + 2]
            return
    entry += [row, w]


def _pairs(bag: Bag) -> list[list[Any]]:
    """A bag's ``[row, n, ...]`` lists (the list itself, or the dict's entries)."""
    return [bag] if bag.__class__ is list else list(bag.values())  # type: ignore[union-attr]


def bag_rows(bag: Bag) -> list[Row]:
    """The rows of a bag, each as often as its multiplicity."""
    rows: list[Row] = []
    for entry in _pairs(bag):
        for i in range(0, len(entry), 2):
            rows.extend([entry[i]] * entry[i + 1])
    return rows


def bag_size(bag: Bag) -> int:
    """Bytes of a bag's rows: ``row_size`` times multiplicity (what ``apply_bag`` added)."""
    return sum([row_size(entry[i]) * entry[i + 1]
                for entry in _pairs(bag) for i in range(0, len(entry), 2)])


def apply_bag(state: dict[Row, Bag], answers: dict[Row, Any], delta: Delta,
              key_cols: Sequence[int]) -> int:
    """A reader's delta loop: add ``delta`` to the bags (``bag_add``) of present keys (keys
    missing from ``state`` are dropped) and forget their finished answers; return the change
    of the bags' total size (``row_size`` times weight; a key's share is ``bag_size``)."""
    total = 0
    for row, w in delta:
        k = tuple([row[i] for i in key_cols])
        bag = state.get(k)
        if bag is None:
            continue
        new = bag_add(bag, row, w)
        if new is not bag:
            state[k] = new
        total += row_size(row) * w
        answers.pop(k, None)
    return total


#: The pure-Python kernels (the parity tests compare the Cython twins with these).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
consolidate_python = consolidate
key_of_python = key_of
row_size_python = row_size
apply_bag_python = apply_bag
exact_key_python = exact_key
row_key_python = row_key
same_print_python = same_print
bag_add_python = bag_add
bag_rows_python = bag_rows
bag_size_python = bag_size
_consolidate_exact_python = _consolidate_exact

_fast = cython_ext.load("records")
if _fast is not None:
    consolidate = _fast.consolidate
    key_of = _fast.key_of
    row_size = _fast.row_size
    apply_bag = _fast.apply_bag
    exact_key = _fast.exact_key
    row_key = _fast.row_key
    same_print = _fast.same_print
    bag_add = _fast.bag_add
    bag_rows = _fast.bag_rows
    bag_size = _fast.bag_size
