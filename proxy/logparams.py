"""Whether weir's log lines may show parameter values (``--log-parameters``).

Owns: that one switch (set once at start by ``weir serve``; off unless asked) and ``shown``,
which every log line about one read passes its values through. Values are user data (keys,
literals, sometimes secrets): with the switch off a line says how many values there were and
never what they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_ON = [False]


def configure(on: bool) -> None:
    """Set the switch (``weir serve`` does, from ``--log-parameters``)."""
    _ON[0] = on


def enabled() -> bool:
    return _ON[0]


def shown(values: Sequence[Any]) -> str:
    """``values`` for a log line: their reprs with the switch on, else only their count."""
    if _ON[0]:
        return "(" + ", ".join(repr(v) for v in values) + ")"
    return f"({len(values)} value(s) hidden; --log-parameters on shows them)"
