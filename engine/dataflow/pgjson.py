"""jsonb operators with PostgreSQL's semantics, over the text PostgreSQL printed for a jsonb.

Owns: ``parse_jsonb`` (jsonb input rules: duplicate keys keep the last value, numbers are
numerics, no ``\\u0000``), ``format_jsonb`` (jsonb output: keys ordered by byte length then
bytes, ``", "`` and ``": "`` separators, numbers as ``numeric_out`` prints them, PostgreSQL's
string escapes), and the operator kernels named by ``ir.Func``: ``->`` / ``->>`` (object
field, array element with negative subscripts), ``#>`` / ``#>>`` (path), ``@>`` / ``<@``
(containment, numerics compared by value) and ``?`` (key or string element exists).

Invariant: a jsonb value inside the engine is the text PostgreSQL's ``jsonb_out`` printed
(what replication and fills deliver); every kernel returns such text, so operators chain.
Parsed documents are cached by text (bounded).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from engine.dataflow.pgmath import EvalError
from engine.values import oids as T
from engine.values.codec import encode_text


class JNum:
    """A JSON number: its text as ``numeric_out`` prints it, compared by numeric value."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def value(self) -> Decimal:
        return Decimal(self.text)


JValue = Any  # dict[str, JValue] | list[JValue] | str | JNum | bool | None (JSON null)

_MAX_EXPONENT = 1000  # beyond, numeric_in's limits: not typed here


def _number(text: str) -> JNum:
    try:
        value = Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the JSON grammar is a subset
        raise ValueError(f"bad JSON number {text!r}") from exc
    if abs(value.adjusted()) > _MAX_EXPONENT:
        raise ValueError(f"JSON number {text!r} out of the typed range")
    if value == 0 and value.is_signed():
        value = value.copy_abs()  # numeric has no negative zero
    return JNum(f"{value:f}")


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        _check_string(key)
        out[key] = value  # a duplicate key keeps its last value, as jsonb does
    return {k: out[k] for k in sorted(out, key=_key_order)}


def _key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return len(raw), raw


_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def _check_string(text: str) -> None:
    if _BAD_CHARS.search(text):
        raise ValueError("\\u0000 or an unpaired surrogate in a JSON string")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_number, parse_int=_number,
                            parse_constant=_constant)


def parse_jsonb(text: str) -> JValue:
    """A JSON document read as jsonb reads it; ValueError when this module cannot be sure
    PostgreSQL reads it the same way."""
    value = _DECODER.decode(text)
    _check_strings(value)
    return value


def _check_strings(value: JValue) -> None:
    if isinstance(value, str):
        _check_string(value)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_strings(item)


@lru_cache(maxsize=4096)
def _parsed(text: str) -> JValue:
    try:
        return parse_jsonb(text)
    except ValueError as exc:  # not PostgreSQL's output: never silently answer
        raise EvalError("22P02", f"jsonb text not understood: {exc}") from exc


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t"}
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f]')


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def _quote(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def format_jsonb(value: JValue) -> str:
    """jsonb_out's text of a parsed value."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quote(k)}: {format_jsonb(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(format_jsonb(v) for v in value) + "]"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, JNum):
        return value.text
    if value is None:
        return "null"
    return "true" if value else "false"


def canonical_jsonb(text: str) -> str:
    """The text PostgreSQL prints for the jsonb literal ``text`` (ValueError if unsure)."""
    return format_jsonb(parse_jsonb(text))


def _as_text(value: JValue) -> str | None:
    """``->>``: a string unquoted, JSON null as SQL NULL, anything else as printed."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return format_jsonb(value)


def _field(doc: JValue, key: str) -> tuple[bool, JValue]:
    if isinstance(doc, dict) and key in doc:
        return True, doc[key]
    return False, None


def _element(doc: JValue, index: int) -> tuple[bool, JValue]:
    if not isinstance(doc, list):
        return False, None
    if index < 0:
        index += len(doc)
    if 0 <= index < len(doc):
        return True, doc[index]
    return False, None


_PATH_INDEX = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+", re.ASCII)  # strtoint's accepted form
_INT_MIN = -(2**31)


def _step(doc: JValue, key: str | None) -> tuple[bool, JValue]:
    if key is None:
        return False, None
    if isinstance(doc, dict):
        return _field(doc, key)
    if isinstance(doc, list):
        if _PATH_INDEX.fullmatch(key) is None:
            return False, None
        index = int(key)
        if not _INT_MIN <= index < 2**31 or index == _INT_MIN:
            return False, None
        return _element(doc, index)
    return False, None


def _walk(text: str, path: Sequence[str | None]) -> tuple[bool, JValue]:
    doc = _parsed(text)
    for key in path:
        found, doc = _step(doc, key)
        if not found:
            return False, None
    return True, doc


def _scalar_root(text: str) -> bool:
    return not isinstance(_parsed(text), dict | list)


def jsonb_field(args: Sequence[Any], types: Sequence[int]) -> str | None:
    found, value = _field(_parsed(args[0]), args[1])
    return format_jsonb(value) if found else None


def jsonb_field_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    found, value = _field(_parsed(args[0]), args[1])
    return _as_text(value) if found else None


def jsonb_index(args: Sequence[Any], types: Sequence[int]) -> str | None:
    found, value = _element(_root(args[0])[0], args[1])  # a raw scalar is a 1-array here
    return format_jsonb(value) if found else None


def jsonb_index_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    found, value = _element(_root(args[0])[0], args[1])
    return _as_text(value) if found else None


def _flat_path(path: Any) -> list[str | None]:
    """The path's elements in storage order (deconstruct_array flattens dimensions)."""
    out: list[str | None] = []
    for item in path:
        out.extend(_flat_path(item) if isinstance(item, tuple) else (item,))
    return out


def jsonb_path(args: Sequence[Any], types: Sequence[int]) -> str | None:
    path = _flat_path(args[1])
    if not path:
        return str(args[0])
    found, value = _walk(args[0], path)
    return format_jsonb(value) if found else None


def jsonb_path_text(args: Sequence[Any], types: Sequence[int]) -> str | None:
    path = _flat_path(args[1])
    if not path:
        doc = _parsed(args[0])
        return _as_text(doc) if _scalar_root(args[0]) else format_jsonb(doc)
    found, value = _walk(args[0], path)
    return _as_text(value) if found else None


def _scalar_equal(a: JValue, b: JValue) -> bool:
    if isinstance(a, JNum) and isinstance(b, JNum):
        return a.value() == b.value()
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if a is None or b is None:
        return a is None and b is None
    return isinstance(a, str) and isinstance(b, str) and a == b


def _is_container(value: JValue) -> bool:
    return isinstance(value, dict | list)


def _contains(left: JValue, right: JValue, *, left_raw: bool = False,
              right_raw: bool = False) -> bool:
    """JsonbDeepContains: does ``left`` contain ``right`` (containers only; a raw scalar
    root is the one-element array jsonb stores it as)."""
    if isinstance(left, dict) != isinstance(right, dict):
        return False
    if isinstance(left, dict):
        if len(left) < len(right):
            return False
        for key, want in right.items():
            if key not in left:
                return False
            have = left[key]
            if _is_container(have) != _is_container(want):
                return False
            if _is_container(want):
                if not _contains(have, want):
                    return False
            elif not _scalar_equal(have, want):
                return False
        return True
    if left_raw and not right_raw:
        return False
    inner = [item for item in left if _is_container(item)]
    for want in right:
        if not _is_container(want):
            if not any(not _is_container(h) and _scalar_equal(h, want) for h in left):
                return False
        elif not any(_contains(h, want) for h in inner):
            return False
    return True


def _root(text: str) -> tuple[JValue, bool]:
    doc = _parsed(text)
    return (doc, False) if _is_container(doc) else ([doc], True)


def jsonb_contains(args: Sequence[Any], types: Sequence[int]) -> bool:
    (left, left_raw), (right, right_raw) = _root(args[0]), _root(args[1])
    return _contains(left, right, left_raw=left_raw, right_raw=right_raw)


def jsonb_contained(args: Sequence[Any], types: Sequence[int]) -> bool:
    return jsonb_contains((args[1], args[0]), (types[1], types[0]))


def jsonb_exists(args: Sequence[Any], types: Sequence[int]) -> bool:
    doc, _raw = _root(args[0])
    if isinstance(doc, dict):
        return args[1] in doc
    return any(isinstance(item, str) and item == args[1] for item in doc)


#: Argument types json_agg / jsonb_agg are planned for (their JSON form is known exactly).
JSON_ELEMENT_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.NUMERIC, T.TEXT, T.VARCHAR, T.NAME,
                                T.BOOL, T.JSONB, T.DATE, T.TIMESTAMP, T.UUID})


def json_element(value: Any, oid: int) -> str:
    """The JSON text of one value, as json_agg (datum_to_json) and jsonb_agg (to_jsonb, then
    jsonb_out) both print it for ``JSON_ELEMENT_TYPES``."""
    if value is None:
        return "null"
    if oid == T.BOOL:
        return "true" if value else "false"
    if oid in (T.INT2, T.INT4, T.INT8):
        return str(value)
    if oid == T.NUMERIC:
        if not (isinstance(value, Decimal) and value.is_finite()):
            raise EvalError("22P02", "a non-finite numeric in a JSON aggregate")
        return f"{value:f}"
    if oid == T.JSONB:
        return str(value)
    if oid in (T.DATE, T.TIMESTAMP):
        if not hasattr(value, "year"):  # infinity, BC, year > 9999: kept as text
            raise EvalError("22008", "a date/time outside the years 1-9999 in a JSON aggregate")
        return _quote(encode_text(oid, value).replace(" ", "T"))
    return _quote(str(value))  # text types and uuid


def json_array(values: Sequence[Any], oid: int) -> str:
    """json_agg / jsonb_agg of ``values`` in order (at least one)."""
    return "[" + ", ".join(json_element(v, oid) for v in values) + "]"


FUNCTIONS = {
    "jsonb_field": jsonb_field, "jsonb_field_text": jsonb_field_text,
    "jsonb_index": jsonb_index, "jsonb_index_text": jsonb_index_text,
    "jsonb_path": jsonb_path, "jsonb_path_text": jsonb_path_text,
    "jsonb_contains": jsonb_contains, "jsonb_contained": jsonb_contained,
    "jsonb_exists": jsonb_exists,
}
