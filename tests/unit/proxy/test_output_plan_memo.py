"""``ReadPath.output_plan`` memoizes column encoders per cache *entry*: a read that began
before its cache was planned again (a column's type changed) and resumed after the memo was
cleared must not leave the old entry's encoders for the new entry's reads."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from proxy.reads import ReadPath
from proxy.results.settings import OutputSettings


@dataclass(frozen=True)
class _Field:
    type_oid: int
    type_modifier: int = -1


@dataclass(frozen=True, eq=False)
class _Entry:
    name: str
    fields: tuple[_Field, ...]
    timezone: str | None = None  # the session TimeZone the cache computes in


def _text(path: Any, entry: _Entry, value: float) -> bytes:
    _, encoders = ReadPath.output_plan(path, entry, (0,), OutputSettings())
    return bytes(encoders[0].encode(value))


def test_an_old_entry_read_late_does_not_poison_the_new_one() -> None:
    path = SimpleNamespace(_encoders={})
    float8 = _Entry("c", (_Field(701),))
    real = _Entry("c", (_Field(700),))  # the same cache name, planned again
    value = 1.6666666269302368  # the double nearest the float4 of 1.6666666
    assert _text(path, float8, value) == b"1.6666666269302368"
    path._encoders.clear()  # forget_encoders(): the caches changed
    assert _text(path, real, value) == b"1.6666666"
    assert _text(path, float8, value) == b"1.6666666269302368"  # a read that began before
    assert _text(path, real, value) == b"1.6666666"
