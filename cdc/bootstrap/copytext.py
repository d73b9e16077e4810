"""PostgreSQL's COPY text format for one row, and the order-independent row checksum.

Owns: splitting a ``COPY ... TO STDOUT`` text line into column values (``None`` for ``\\N``,
backslash escapes undone), the inverse (a tuple of text values as the line COPY would write),
and the checksum every part of the bootstrap agrees on: a row's hash is the first 8 bytes of
BLAKE2b over its COPY text line (an injective encoding of the tuple of text values), and a set
of rows sums those hashes modulo 2**64, so the checksum of a table is the sum of its
partitions' and does not depend on row order.

Values are the types' text output under weir's session settings (``cdc.connection``), the same
text pgoutput sends, so rows read by COPY and rows patched from the replication stream hash
alike. No I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from functools import partial
from itertools import repeat
from operator import methodcaller
from typing import Literal

MASK64 = (1 << 64) - 1
NULL = b"\\N"

_UNESCAPE = {
    ord("b"): b"\b", ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r",
    ord("t"): b"\t", ord("v"): b"\v", ord("\\"): b"\\",
}
_ESCAPE = {
    "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
}
_NEEDS_ESCAPE = frozenset(_ESCAPE)


_ESCAPE_RE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)


def _unescape_one(m: re.Match[bytes]) -> bytes:
    octal, hexa, other = m.groups()
    if octal is not None:
        return bytes([int(octal, 8) & 0xFF])
    if hexa is not None:
        return bytes([int(hexa, 16)])
    return _UNESCAPE.get(other[0], other)


def unescape(field: bytes) -> bytes:
    """Undo COPY text escapes in one field (``\\n``, ``\\t``, octal, hex, ``\\x``...)."""
    return _ESCAPE_RE.sub(_unescape_one, field)


def parse_line(line: bytes) -> tuple[str | None, ...]:
    """One COPY text line (without its newline) as a tuple of text values."""
    return tuple(
        None if field == NULL
        else (unescape(field) if b"\\" in field else field).decode("utf-8")
        for field in line.split(b"\t")
    )


def _escape(value: str) -> str:
    if _NEEDS_ESCAPE.isdisjoint(value):
        return value
    return "".join(_ESCAPE.get(ch, ch) for ch in value)


def format_line(values: Sequence[str | None]) -> bytes:
    """The COPY text line (without newline) PostgreSQL writes for these text values."""
    return "\t".join("\\N" if v is None else _escape(v) for v in values).encode("utf-8")


def split_lines(rest: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines of ``rest + chunk`` and the incomplete tail (COPY text escapes
    newlines inside values, so a raw newline always ends a row)."""
    lines = (rest + chunk).split(b"\n")
    return lines, lines.pop()


def line_hash(line: bytes) -> int:
    """A row's 64-bit hash, from its COPY text line."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


_blake8 = partial(hashlib.blake2b, digest_size=8)
_digest = methodcaller("digest")


def lines_checksum(lines: Iterable[bytes]) -> int:
    """``checksum(map(line_hash, lines))``, without a Python frame per line."""
    little: Literal["little"] = "little"
    return sum(map(int.from_bytes, map(_digest, map(_blake8, lines)), repeat(little))) & MASK64


def row_hash(values: Sequence[str | None]) -> int:
    return line_hash(format_line(values))


def checksum(hashes: Iterable[int]) -> int:
    """The order-independent checksum of a set of rows given their hashes."""
    return sum(hashes) & MASK64


def combine(checksums: Iterable[int]) -> int:
    """The checksum of a union of disjoint row sets."""
    return sum(checksums) & MASK64
