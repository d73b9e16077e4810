"""Array operators and functions with PostgreSQL's semantics, over canonical array values.

Owns: the kernels named by ``ir.Func`` for ``x = ANY(array)`` (``array_any_eq``), ``@>``
(``array_contains``), ``<@`` (``array_contained``), ``&&`` (``array_overlap``),
``cardinality``, ``array_length(a, n)``, subscripts (``array_subscript``), slices of
one-dimensional arrays (``array_slice``, ``array_slice_from``, ``array_slice_to``,
``array_slice_all``: ``a[lo:hi]``, ``a[lo:]``, ``a[:hi]``, ``a[:]``) and ``ARRAY[...]`` of
scalars (``array_construct``, NULL elements kept). A canonical
array is a tuple of elements (nested tuples for more dimensions, None for NULL); the
planner lets through only element types whose PostgreSQL equality is Python's equality of
the canonical values.

Invariants (checked against PostgreSQL): ``= ANY`` is three-valued (true on a match; else NULL
when the value or an element is NULL; false for an empty array whatever the value);
containment and overlap compare every element whatever the dimensions, a NULL element
matching nothing (``@>`` of an array holding NULL is false), and are never NULL for non-NULL
arrays; ``array_length`` is NULL for an empty array or a dimension it does not have; a slice
keeps the elements between the bounds clamped to 1..length (an omitted bound is the array's
own), an empty array when none, and is NULL for a NULL bound; a slice of a multidimensional
array raises ``EvalError`` (computed upstream). An array
printed with explicit bounds (``[0:1]={...}``) is kept as text by the decoder: an
``EvalError``, so the read goes upstream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from engine.dataflow.pgmath import EvalError


def _elements(value: Any) -> Iterator[Any]:
    if not isinstance(value, tuple):
        raise EvalError("0A000", "array with explicit bounds (kept as text)")
    for item in value:
        if isinstance(item, tuple):
            yield from _elements(item)
        else:
            yield item


def array_any_eq(args: Sequence[Any], types: Sequence[int]) -> bool | None:
    value, array = args
    if array is None:
        return None
    items = list(_elements(array))
    if not items:
        return False
    if value is None:
        return None
    if any(e is not None and e == value for e in items):
        return True
    return None if any(e is None for e in items) else False


def _contains(outer: Any, inner: Any) -> bool:
    have = [e for e in _elements(outer) if e is not None]
    return all(e is not None and e in have for e in _elements(inner))


def array_contains(args: Sequence[Any], types: Sequence[int]) -> bool:
    return _contains(args[0], args[1])


def array_contained(args: Sequence[Any], types: Sequence[int]) -> bool:
    return _contains(args[1], args[0])


def array_overlap(args: Sequence[Any], types: Sequence[int]) -> bool:
    have = [e for e in _elements(args[0]) if e is not None]
    return any(e is not None and e in have for e in _elements(args[1]))


def cardinality(args: Sequence[Any], types: Sequence[int]) -> int:
    return sum(1 for _ in _elements(args[0]))


def array_length(args: Sequence[Any], types: Sequence[int]) -> int | None:
    array, dim = args
    list(_elements(array))  # an array kept as text: EvalError
    level = array
    for _ in range(dim - 1 if dim >= 1 else -1):
        if not level or not isinstance(level[0], tuple):
            return None
        level = level[0]
    if dim < 1 or not level:
        return None
    return len(level)


def array_subscript(args: Sequence[Any], types: Sequence[int]) -> Any:
    """``a[i][j]...``: NULL for a NULL array or index, an index outside 1..length, or a
    count of subscripts other than the array's dimensions (an empty array has none)."""
    array, indexes = args[0], args[1:]
    if array is None:
        return None
    if not isinstance(array, tuple):
        raise EvalError("0A000", "array with explicit bounds (kept as text)")
    if any(i is None for i in indexes):
        return None
    dims, level = 0, array
    while isinstance(level, tuple) and level:
        dims, level = dims + 1, level[0]
    if dims != len(indexes):
        return None
    value: Any = array
    for i in indexes:
        if not 1 <= i <= len(value):
            return None
        value = value[i - 1]
    return value


def _slice(array: Any, lo: int | None, hi: int | None) -> tuple[Any, ...]:
    if not isinstance(array, tuple):
        raise EvalError("0A000", "array with explicit bounds (kept as text)")
    if array and isinstance(array[0], tuple):
        raise EvalError("0A000", "slice of a multidimensional array")
    start = 1 if lo is None else max(lo, 1)
    end = len(array) if hi is None else min(hi, len(array))
    return array[start - 1: end] if start <= end else ()


def array_slice(args: Sequence[Any], types: Sequence[int]) -> tuple[Any, ...]:
    return _slice(args[0], args[1], args[2])


def array_slice_from(args: Sequence[Any], types: Sequence[int]) -> tuple[Any, ...]:
    return _slice(args[0], args[1], None)


def array_slice_to(args: Sequence[Any], types: Sequence[int]) -> tuple[Any, ...]:
    return _slice(args[0], None, args[1])


def array_slice_all(args: Sequence[Any], types: Sequence[int]) -> tuple[Any, ...]:
    return _slice(args[0], None, None)


def array_construct(args: Sequence[Any], types: Sequence[int]) -> tuple[Any, ...]:
    """``ARRAY[x, y, ...]`` of scalars: a one-dimensional array, NULL elements kept."""
    return tuple(args)


def param_flag(args: Sequence[Any], types: Sequence[int]) -> None:
    """The placeholder of an EXISTS with a parameter: its value is the host's."""
    return None


FUNCTIONS = {
    "array_any_eq": array_any_eq, "array_contains": array_contains,
    "array_contained": array_contained, "array_overlap": array_overlap,
    "cardinality": cardinality, "array_length": array_length,
    "array_subscript": array_subscript, "array_slice": array_slice,
    "array_slice_from": array_slice_from, "array_slice_to": array_slice_to,
    "array_slice_all": array_slice_all, "array_construct": array_construct,
    "param_flag": param_flag,
}
