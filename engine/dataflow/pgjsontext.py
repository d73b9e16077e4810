"""json (not jsonb) operators with PostgreSQL's semantics, over the document's original text.

Owns: the kernels named by ``ir.Func`` for ``->`` / ``->>`` (object field, array element
with negative subscripts), ``#>`` / ``#>>`` (path) on a ``json`` value, and the span scanner
they rest on. A json value keeps the text it was written with (PostgreSQL stores it as
given), so a result is the exact substring of the value: inner whitespace kept, outer
whitespace dropped, numbers as written (``1.50``), strings still escaped; ``->>`` of a
string gives it unescaped, of ``null`` SQL NULL, of anything else the substring.

Invariants, each checked against PostgreSQL: a duplicate key finds its last occurrence; a
raw scalar root has no elements (unlike jsonb); a path element on an array must be an
integer as ``strtoint`` reads it; an empty path gives the whole document without its
trailing blanks, and without its leading ones too unless it is a scalar. A document
holding the escape ``\\u0000`` makes PostgreSQL's operators fail ("cannot be converted to
text") whatever the path: an ``EvalError``, so the read goes upstream for PostgreSQL's error.
The stored text was validated by json_in, so the scanner does not re-validate it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from engine.dataflow.pgjson import _PATH_INDEX, _flat_path
from engine.dataflow.pgmath import EvalError

Span = tuple[int, int]
_WS = " \t\n\r"
_STOP = frozenset(",]}:" + _WS)
_INT_MIN = -(2**31)


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


def _string_end(s: str, i: int) -> int:
    """``s[i]`` is an opening quote: the index after the closing one."""
    i += 1
    while True:
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        else:
            i += 1


def _value_end(s: str, i: int) -> int:
    c = s[i]
    if c == '"':
        return _string_end(s, i)
    if c in "[{":
        depth = 0
        while True:
            c = s[i]
            if c == '"':
                i = _string_end(s, i)
                continue
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    n = len(s)
    while i < n and s[i] not in _STOP:
        i += 1
    return i


def _members(s: str, span: Span) -> Iterator[tuple[Span | None, Span]]:
    """(key span or None for an array element, value span) of the container at ``span``."""
    start = span[0]
    obj = s[start] == "{"
    i = _skip(s, start + 1)
    if s[i] in "]}":
        return
    while True:
        key = None
        if obj:
            end = _string_end(s, i)
            key = (i, end)
            i = _skip(s, _skip(s, end) + 1)  # past the colon
        end = _value_end(s, i)
        yield key, (i, end)
        i = _skip(s, end)
        if s[i] in "]}":
            return
        i = _skip(s, i + 1)


def _root(text: str) -> Span:
    if "\\u0000" in text:
        raise EvalError("22P05", "unsupported Unicode escape sequence")
    start = _skip(text, 0)
    return start, _value_end(text, start)


def _field(s: str, span: Span | None, key: str) -> Span | None:
    if span is None or s[span[0]] != "{":
        return None
    found = None
    for k, value in _members(s, span):
        assert k is not None
        if json.loads(s[k[0]:k[1]]) == key:
            found = value  # the last occurrence wins
    return found


def _element(s: str, span: Span | None, index: int) -> Span | None:
    if span is None or s[span[0]] != "[":
        return None
    items = [v for _, v in _members(s, span)]
    if index < 0:
        index += len(items)
    return items[index] if 0 <= index < len(items) else None


def _step(s: str, span: Span | None, key: str | None) -> Span | None:
    if span is None or key is None:
        return None
    if s[span[0]] == "{":
        return _field(s, span, key)
    if s[span[0]] == "[" and _PATH_INDEX.fullmatch(key) is not None:
        index = int(key)
        if _INT_MIN < index < 2**31:
            return _element(s, span, index)
    return None


def _json(s: str, span: Span | None) -> str | None:
    return None if span is None else s[span[0]:span[1]]


def _text(s: str, span: Span | None) -> str | None:
    if span is None:
        return None
    value = s[span[0]:span[1]]
    token = value.lstrip(_WS)
    if token[0] == '"':
        out: str = json.loads(token)
        return out
    return None if token == "null" else value


def json_field(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _json(args[0], _field(args[0], _root(args[0]), args[1]))


def json_field_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _text(args[0], _field(args[0], _root(args[0]), args[1]))


def json_index(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _json(args[0], _element(args[0], _root(args[0]), args[1]))


def json_index_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _text(args[0], _element(args[0], _root(args[0]), args[1]))


def _walk(text: str, path: Any) -> Span | None:
    span: Span | None = _root(text)
    keys = _flat_path(path)
    if not keys and span is not None and text[span[0]] not in "[{":
        return 0, span[1]  # a scalar document, whole: PostgreSQL keeps its leading blanks
    for key in keys:
        span = _step(text, span, key)
    return span


def json_path(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _json(args[0], _walk(args[0], args[1]))


def json_path_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    return _text(args[0], _walk(args[0], args[1]))


FUNCTIONS = {
    "json_field": json_field, "json_field_text": json_field_text,
    "json_index": json_index, "json_index_text": json_index_text,
    "json_path": json_path, "json_path_text": json_path_text,
}
