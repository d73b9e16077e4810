"""POSIX regular expression matches ``text ~ 'pattern'`` (``~*``, ``!~``, ``!~*``): which
patterns weir evaluates exactly as PostgreSQL, and their translation to Python's ``re``.

Owns: ``regex_match`` (the operator and its operands -> ``ir.Regex``, or PlanError with the
reason), ``similar_to`` (``SIMILAR TO`` as the anchored regular expression PostgreSQL makes of
it, ``similar_regex``) and ``translate`` (a PostgreSQL advanced regular expression (ARE) -> the
Python pattern matching the same strings).

Why a subset is exact: ``~`` only asks whether some substring matches, so the answer depends on
the set of strings the expression describes, not on how an engine prefers among matches (POSIX
leftmost-longest or Python's backtracking). The subset is the part of the ARE syntax whose
meaning PostgreSQL fixes independently of the locale: ordinary characters (any but
``\\ ^ $ . [ ] ( ) | * + ? { }``), a backslash before a character that is not a letter or digit
(that character), ``.`` (any character, newline included: PostgreSQL's default is not
newline-sensitive, Python's ``DOTALL``), ``^`` and ``$`` (start and end of the string only:
``\\A`` and ``\\Z``, as Python's ``$`` would also match before a final newline), bracket
expressions of ordinary characters and ranges ``a-z`` (code point ranges in PostgreSQL, as in
Python; under ``~*`` only ranges within a-z or A-Z or without ASCII letters), ``(...)`` and
``(?:...)`` groups with ``|`` alternatives, and the quantifiers ``* + ? {m} {m,} {m,n}`` (m, n
up to 255, PostgreSQL's DUPMAX; the non-greedy forms describe the same strings) on a single
character, ``.`` or bracket expression, and ``?`` on a group. ``~*`` folds case: PostgreSQL
folds only ASCII letters under the C and POSIX collations (Python's ``IGNORECASE | ASCII``);
under any other collation it folds by the locale, so ``~*`` goes upstream there.

Upstream, each with its reason: a pattern that is not a constant; classes ``[[:alpha:]]``,
``\\d``, ``\\w``, ``\\s``, word boundaries, back references and other letter escapes (locale- or
engine-specific); embedded options ``(?i)`` and the ``***`` directors; groups under a repeating
quantifier (a Python backtracking hazard: ``(a*)*``); empty groups, alternatives or brackets; a
subject that is not text or varchar (bpchar drops trailing spaces first); a nondeterministic
collation (PostgreSQL refuses it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from engine.plan import ir
from engine.plan.scope import PlanError
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.exprs import ExprBuilder

Node = dict[str, Any]

#: operator name -> (case-insensitive, negated)
REGEX_OPERATORS = {"~": (False, False), "~*": (True, False), "!~": (False, True),
                   "!~*": (True, True)}
_META = set("\\^$.[]()|*+?{}")
_DUPMAX = 255
_QUANTIFIED = 8  # at most this many quantifiers (each is a backtracking loop in Python)
_CASELESS_COLLATIONS = frozenset({"C", "POSIX"})
_BOUND = re.compile(r"\{(\d{1,3})(,(\d{1,3})?)?\}")


def regex_match(b: ExprBuilder, name: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    """``left name right`` for a regex operator ``name`` (``REGEX_OPERATORS``)."""
    caseless, negated = REGEX_OPERATORS[name]
    if left.type_oid not in (T.TEXT, T.VARCHAR):
        raise PlanError(f"operator {name} on {_type(left)}")
    if not isinstance(right, ir.Const) or not isinstance(right.value, str):
        raise PlanError(f"operator {name} with a pattern that is not a text constant")
    from engine.plan.exprs import deterministic
    coll = b.collation(left)
    if not deterministic(coll, b.catalog):
        raise PlanError(f"operator {name} under nondeterministic collation {coll}")
    if caseless and coll not in _CASELESS_COLLATIONS:
        raise PlanError(f"operator {name} under collation {coll} (case folding by the locale)")
    return ir.Regex(left, right.value, translate(right.value, caseless), caseless, negated)


def _folds_alike(lo: str, hi: str) -> bool:
    """Whether a caseless range is inside a-z, inside A-Z, or holds no ASCII letter (its case
    variants are then plainly those of its letters, in both engines)."""
    return (lo >= "a" and hi <= "z") or (lo >= "A" and hi <= "Z") or not any(
        chr(c).isascii() and chr(c).isalpha() for c in range(ord(lo), min(ord(hi), 127) + 1))


def _type(e: ir.Expr) -> str:
    from engine.plan import pgtypes
    return pgtypes.type_name(e.type_oid)


def translate(pattern: str, caseless: bool = False) -> str:
    """The Python pattern (for ``re.search`` with ``DOTALL``, and ``IGNORECASE | ASCII`` when
    ``caseless``) describing the strings the ARE ``pattern`` describes, or PlanError naming
    what is outside the subset."""
    return _Translator(pattern, caseless).run()


class _Translator:
    def __init__(self, pattern: str, caseless: bool) -> None:
        self.s, self.i, self.quantified, self.caseless = pattern, 0, 0, caseless
        self.out: list[str] = []

    def run(self) -> str:
        if self.s.startswith("***"):
            raise PlanError("regular expression director ***")
        self._alternatives(top=True)
        return "".join(self.out)

    def _fail(self, what: str) -> PlanError:
        return PlanError(f"regular expression {what} (only a subset PostgreSQL and Python "
                         "read alike is cached)")

    def _alternatives(self, top: bool) -> None:
        while True:
            if not self._branch():
                raise self._fail("with an empty alternative or group")
            if self.i < len(self.s) and self.s[self.i] == "|":
                self.out.append("|")
                self.i += 1
                continue
            if top and self.i < len(self.s):  # a ')' without its '('
                raise self._fail(f"with an unmatched {self.s[self.i]!r}")
            return

    def _branch(self) -> bool:
        """One alternative: atoms until '|', ')' or the end; False when empty."""
        start = len(self.out)
        s = self.s
        while self.i < len(s) and s[self.i] not in "|)":
            ch = s[self.i]
            if ch == "(":
                self._group()
                if s.startswith("?", self.i):  # optional: at most one pass, no blow-up
                    self.i += 2 if s.startswith("??", self.i) else 1
                    self._count()
                    self.out.append("?")
                self._no_quantifier("on a group other than ?")
                continue
            if ch in "^$":
                self.out.append(r"\A" if ch == "^" else r"\Z")
                self.i += 1
                self._no_quantifier("on an anchor")
                continue
            self._atom()
            self._quantifier()
        return len(self.out) > start

    def _group(self) -> None:
        s = self.s
        self.i += 1
        if s.startswith("?:", self.i):
            self.i += 2
        elif s.startswith("?", self.i):
            raise self._fail("with embedded options or lookaround (?")
        self.out.append("(?:")
        self._alternatives(top=False)
        if self.i >= len(s) or s[self.i] != ")":
            raise self._fail("with an unclosed (")
        self.out.append(")")
        self.i += 1

    def _atom(self) -> None:
        s, ch = self.s, self.s[self.i]
        if ch == ".":
            self.out.append(".")
            self.i += 1
        elif ch == "[":
            self._bracket()
        elif ch == "\\":
            if self.i + 1 >= len(s):
                raise self._fail("ending in a backslash")
            nxt = s[self.i + 1]
            if nxt.isalnum() or not nxt.isascii():
                raise self._fail(f"escape \\{nxt}")
            self.out.append(re.escape(nxt))
            self.i += 2
        elif ch in _META:
            raise self._fail(f"with {ch!r} where a character is expected")
        else:
            self.out.append(re.escape(ch))
            self.i += 1

    def _bracket(self) -> None:
        s = self.s
        self.i += 1
        negate = s.startswith("^", self.i)
        if negate:
            self.i += 1
        items: list[str] = []
        while True:
            if self.i >= len(s):
                raise self._fail("with an unclosed [")
            ch = s[self.i]
            if ch == "]":
                if not items:
                    raise self._fail("with an empty or ']'-first bracket expression")
                self.i += 1
                break
            if ch in "[\\-":
                raise self._fail(f"bracket expression holding {ch!r}")
            if s.startswith("-", self.i + 1) and self.i + 2 < len(s) and s[self.i + 2] != "]":
                hi = s[self.i + 2]
                if hi in "[\\-" or hi < ch or (self.caseless and not _folds_alike(ch, hi)):
                    raise self._fail(f"range {ch}-{hi}")
                items.append(f"{re.escape(ch)}-{re.escape(hi)}")
                self.i += 3
                continue
            items.append(re.escape(ch))
            self.i += 1
        self.out.append("[" + ("^" if negate else "") + "".join(items) + "]")

    def _quantifier(self) -> None:
        s = self.s
        if self.i >= len(s):
            return
        ch = s[self.i]
        if ch in "*+?":
            q = ch
            self.i += 1
        elif ch == "{":
            m = _BOUND.match(s, self.i)
            if m is None:
                raise self._fail("with a '{' that is not a bound {m,n}")
            lo, comma, hi = m.group(1), m.group(2), m.group(3)
            if int(lo) > _DUPMAX or (hi is not None and not int(lo) <= int(hi) <= _DUPMAX):
                raise self._fail(f"bound {m.group(0)}")
            q = "{" + str(int(lo)) + ("," if comma else "") + (str(int(hi)) if hi else "") + "}"
            self.i = m.end()
        else:
            return
        if self.i < len(s) and s[self.i] == "?":  # non-greedy: the same strings
            self.i += 1
        self._count()
        self.out.append(q)
        self._no_quantifier("on a quantifier")

    def _count(self) -> None:
        self.quantified += 1
        if self.quantified > _QUANTIFIED:
            raise self._fail(f"with more than {_QUANTIFIED} quantifiers")

    def _no_quantifier(self, where: str) -> None:
        if self.i < len(self.s) and self.s[self.i] in "*+?{":
            raise self._fail(f"quantifier {where}")


def similar_to(b: ExprBuilder, body: Node) -> ir.Expr:
    """``arg [NOT] SIMILAR TO pattern [ESCAPE e]``: PostgreSQL matches it as the regular
    expression ``similar_escape`` makes of the pattern, anchored at both ends; that regular
    expression must be in the subset above."""
    call = body["rexpr"].get("FuncCall", {})
    args = call.get("args", [])
    pattern = b.build(args[0]) if args else None
    escape = b.build(args[1]) if len(args) > 1 else ir.Const("\\", T.TEXT)
    if not isinstance(pattern, ir.Const) or not isinstance(pattern.value, str):
        raise PlanError("SIMILAR TO a pattern that is not a text constant")
    if not isinstance(escape, ir.Const) or not isinstance(escape.value, str) \
            or len(escape.value) > 1:
        raise PlanError("SIMILAR TO with an ESCAPE that is not one character")
    name = "!~" if _node_name(body) == "!~" else "~"
    return regex_match(b, name, b.build(body["lexpr"]),
                       ir.Const(similar_regex(pattern.value, escape.value), T.TEXT))


def _node_name(body: Node) -> str:
    return "".join(p["String"]["sval"] for p in body.get("name", []) if "String" in p)


def similar_regex(pattern: str, escape: str) -> str:
    """The regular expression PostgreSQL matches for SIMILAR TO ``pattern`` (``escape``: the
    escape character, or '' for none): ``%`` any string, ``_`` any character, ``|`` ``*``
    ``+`` ``?`` ``{m,n}`` ``( )`` as in regular expressions, an escaped character and every
    other character literal; bracket expressions go upstream."""
    out = ["^(?:"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 >= len(pattern):
                raise PlanError("SIMILAR TO pattern ending in its escape character (an error)")
            nxt = pattern[i + 1]
            if nxt == '"':
                raise PlanError('SIMILAR TO with an escaped " (substring markers)')
            out.append("\\" + nxt)  # (a letter or digit: a class escape, refused later)
            i += 2
            continue
        if ch == "[":
            raise PlanError("SIMILAR TO with a bracket expression")
        out.append({"%": ".*", "_": "."}.get(ch, "\\" + ch if ch in ".^$\\" else ch))
        i += 1
    out.append(")$")
    return "".join(out)
