"""Query text -> parse tree, shape and lifted literals, cached by exact text.

Owns: ``parse_query`` (one statement's text to a ``ParsedQuery``) and ``QueryTextCache`` (the
bounded exact-text cache in front of it). The parse tree is libpg_query's JSON form loaded
into plain dicts (``parse_sql_json`` + ``json.loads``): pglast's typed Python AST costs 10-17x
more, and the planner only needs to walk it once per shape.

Invariants:
- ``shape`` is pglast's normalized text reduced to its tokens (comments and layout dropped):
  two texts share it iff they differ only in the values of their constants, whitespace and
  comments (IN-list arity, ORDER BY positions and identifiers are part of it).
- ``literals`` are every ``A_Const`` of the tree in text order, their values in PostgreSQL text
  form (the form a client sends in a text-format Bind), so a lifted literal and a bound
  parameter are decoded the same way. Texts of one shape have the same number of literals in
  the same syntactic places.
- A text that does not parse, or holds several statements, yields ``error`` (never raises).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pglast import parser as pg_parser

from engine.sql.rewrite import values_in_lists

Node = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant of the query text: its kind ('int', 'numeric', 'str', 'bool', 'bits',
    'null') and its value as PostgreSQL text (None for NULL)."""

    location: int
    kind: str
    text: str | None


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """One statement's text, parsed."""

    text: str
    shape: str
    fingerprint: str
    stmt: Node | None
    literals: tuple[Literal, ...]
    error: str | None = None


def _literal(node: Node) -> Literal:
    loc = int(node.get("location", -1))
    if node.get("isnull"):
        return Literal(loc, "null", None)
    if "ival" in node:
        return Literal(loc, "int", str(node["ival"].get("ival", 0)))
    if "fval" in node:
        return Literal(loc, "numeric", str(node["fval"]["fval"]))
    if "sval" in node:
        return Literal(loc, "str", str(node["sval"].get("sval", "")))
    if "boolval" in node:
        return Literal(loc, "bool", "true" if node["boolval"].get("boolval") else "false")
    if "bsval" in node:
        return Literal(loc, "bits", str(node["bsval"]["bsval"]))
    return Literal(loc, "null", None)


def collect_literals(tree: Any) -> tuple[Literal, ...]:
    """Every A_Const under ``tree`` ordered by text location."""
    found: list[Literal] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            const = node.get("A_Const")
            if const is not None:
                found.append(_literal(const))
                continue
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    found.sort(key=lambda lit: lit.location)
    return tuple(found)


#: Integer/numeric literal spellings PostgreSQL 16 added (hex/octal/binary, digit
#: separators): pglast parses them (PostgreSQL 18 grammar), the upstream may not.
_NEWER_NUMBER = re.compile(r"[-+]?\s*(0[xXoObB]|[0-9.]*_)")

#: Quoted identifiers (kept), comments and whitespace runs (each becomes one space). In a
#: normalized text every literal is already a $n, so nothing else can hold a space.
_GAP = r"(?:\s|/\*.*?\*/|--[^\n]*)+"
_LAYOUT = re.compile(_GAP, re.DOTALL)
_QUOTED_LAYOUT = re.compile(r'("(?:[^"]|"")*")|' + _GAP, re.DOTALL)


_MARKS = ("--", "/*", "  ", "\n", "\t", "\r")


def _layout(match: re.Match[str]) -> str:
    return match.group(1) or " "


def canonical_shape(normalized: str) -> str:
    """The normalized text with comments dropped and whitespace runs collapsed: texts that
    differ only in layout or comments (request tags, traceparent) share a shape. Removing a
    comment or collapsing a run never joins two tokens (a space stays between them)."""
    if not any(mark in normalized for mark in _MARKS):
        return normalized.strip()  # the common case: nothing to do
    if '"' in normalized:
        return _QUOTED_LAYOUT.sub(_layout, normalized).strip()
    return _LAYOUT.sub(" ", normalized).strip()


def parse_query(text: str) -> ParsedQuery:
    """Parse one statement; errors come back as data."""
    try:
        shape = canonical_shape(pg_parser.normalize(text))
        fingerprint = pg_parser.fingerprint(text)
        doc = json.loads(pg_parser.parse_sql_json(text))
    except Exception as exc:  # pglast raises ParseError and friends
        return ParsedQuery(text, text, "", None, (), f"syntax error: {exc}")
    stmts = doc.get("stmts", [])
    if len(stmts) != 1:
        return ParsedQuery(text, shape, fingerprint, None, (),
                           "not exactly one statement" if stmts else "empty statement")
    stmt = stmts[0].get("stmt", {})
    literals = collect_literals(stmt)
    for lit in literals:
        if lit.kind in ("int", "numeric") and _NEWER_NUMBER.match(text, max(lit.location, 0)):
            return ParsedQuery(text, shape, fingerprint, None, (),
                               "numeric literal syntax newer than PostgreSQL 15 "
                               f"({text[lit.location:lit.location + 12]!r})")
    return ParsedQuery(text, shape, fingerprint, values_in_lists(stmt), literals)


class QueryTextCache:
    """Bounded LRU map from exact text to its ``ParsedQuery``: a repeat costs one lookup."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, ParsedQuery] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> ParsedQuery:
        entry = self._entries.get(text)
        if entry is not None:
            self._entries.move_to_end(text)
            return entry
        entry = parse_query(text)
        self._entries[text] = entry
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return entry
