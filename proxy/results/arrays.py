"""Array output (text ``{...}`` and binary array_send) built on the element encoders.

Owns: turning a canonical array (nested tuples, None for NULL; see :mod:`engine.values.arrays`)
into PostgreSQL's text output (quoting and escaping as array_out does, element text from the
session-aware element encoder) or its binary form (ndim, has-null flag, element oid, then
per dimension size and lower bound 1, then length-prefixed elements).

Invariants: arrays must be rectangular (as PostgreSQL's are); an array kept as text because
it had explicit bounds, or any other shape, raises
:class:`~proxy.results.temporal.Unencodable` rather than being guessed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from engine import format_array
from proxy.results.settings import OutputSettings
from proxy.results.temporal import Unencodable

Encode = Callable[[Any], bytes]
Factory = Callable[[OutputSettings, int], Encode]

_I32 = struct.Struct("!i")
_HEAD = struct.Struct("!iiI")
_DIM = struct.Struct("!ii")


def _dims(value: tuple[Any, ...]) -> list[int]:
    dims: list[int] = []
    level: Any = value
    while isinstance(level, tuple):
        dims.append(len(level))
        if not level:
            break
        level = level[0]
    return dims


def _flatten(value: tuple[Any, ...], dims: list[int], depth: int, out: list[Any]) -> None:
    if len(value) != dims[depth]:
        raise Unencodable("array is not rectangular")
    last = depth == len(dims) - 1
    for item in value:
        if last:
            if isinstance(item, tuple):
                raise Unencodable("array is not rectangular")
            out.append(item)
        else:
            if not isinstance(item, tuple):
                raise Unencodable("array is not rectangular")
            _flatten(item, dims, depth + 1, out)


def _check(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, tuple):
        raise Unencodable(f"array value of type {type(value).__name__}")
    return value


def array_factory(element_oid: int, element: Factory, fmt: int) -> Factory:
    """The factory of arrays whose elements ``element`` encodes (``fmt`` 0 text, 1 binary)."""

    def text(settings: OutputSettings, typmod: int) -> Encode:
        inner = element(settings, typmod)

        def elem(item: Any) -> str:
            return inner(item).decode()

        def encode(value: Any) -> bytes:
            value = _check(value)
            _flatten(value, _dims(value), 0, []) if value else None
            return format_array(value, elem).encode()

        return encode

    def binary(settings: OutputSettings, typmod: int) -> Encode:
        inner = element(settings, typmod)

        def encode(value: Any) -> bytes:
            value = _check(value)
            if not value:
                return _HEAD.pack(0, 0, element_oid)
            dims = _dims(value)
            flat: list[Any] = []
            _flatten(value, dims, 0, flat)
            parts = [_HEAD.pack(len(dims), 1 if any(x is None for x in flat) else 0, element_oid)]
            parts.extend(_DIM.pack(n, 1) for n in dims)
            for item in flat:
                if item is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = inner(item)
                    parts.append(_I32.pack(len(data)))
                    parts.append(data)
            return b"".join(parts)

        return encode

    return text if fmt == 0 else binary
