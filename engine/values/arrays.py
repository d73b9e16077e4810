"""Array text codec: ``{1,2,NULL}`` and nested ``{{"a b",c},{d,e}}``.

Owns: splitting PostgreSQL's array text output into element texts (quotes, backslash escapes,
NULL), nesting, and the reverse. Canonical value: a tuple of element values (nested tuples for
multi-dimensional arrays, ``None`` for NULL). Arrays printed with explicit bounds
(``[0:1]={...}``) are not decoded (the caller keeps them as text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_NEEDS_QUOTES = frozenset('{}",\\ \t\n\r\v\f')


def parse_array(text: str, element: Callable[[str], Any], delim: str = ",") -> tuple[Any, ...]:
    """Parse ``text`` (which starts with ``{``), converting each element with ``element``."""
    value, end = _parse_level(text, 0, element, delim)
    if text[end:].strip():
        raise ValueError(f"junk after array: {text[end:]!r}")
    return value


def _parse_level(
    text: str, pos: int, element: Callable[[str], Any], delim: str
) -> tuple[tuple[Any, ...], int]:
    if text[pos : pos + 1] != "{":
        raise ValueError(f"array text must start with '{{' at {pos}: {text!r}")
    pos += 1
    items: list[Any] = []
    if text[pos : pos + 1] == "}":
        return (), pos + 1
    while True:
        if text[pos : pos + 1] == "{":
            sub, pos = _parse_level(text, pos, element, delim)
            items.append(sub)
        else:
            raw, quoted, pos = _element(text, pos, delim)
            items.append(None if (not quoted and raw.upper() == "NULL") else element(raw))
        sep = text[pos : pos + 1]
        pos += 1
        if sep == "}":
            return tuple(items), pos
        if sep != delim:
            raise ValueError(f"bad array text at {pos - 1}: {text!r}")


def _element(text: str, pos: int, delim: str) -> tuple[str, bool, int]:
    if text[pos : pos + 1] == '"':
        out: list[str] = []
        pos += 1
        while True:
            ch = text[pos : pos + 1]
            if ch == "":
                raise ValueError(f"unterminated quoted array element: {text!r}")
            if ch == "\\":
                out.append(text[pos + 1 : pos + 2])
                pos += 2
            elif ch == '"':
                return "".join(out), True, pos + 1
            else:
                out.append(ch)
                pos += 1
    end = pos
    while end < len(text) and text[end] not in (delim, "}"):
        end += 1
    return text[pos:end], False, end


def format_array(value: tuple[Any, ...], element: Callable[[Any], str], delim: str = ",") -> str:
    parts: list[str] = []
    for item in value:
        if item is None:
            parts.append("NULL")
        elif isinstance(item, tuple):
            parts.append(format_array(item, element, delim))
        else:
            parts.append(_quote(element(item), delim))
    return "{" + delim.join(parts) + "}"


def _quote(text: str, delim: str) -> str:
    if text and text.upper() != "NULL" and delim not in text and not _NEEDS_QUOTES & set(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
