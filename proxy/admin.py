"""weir's own SQL commands: recognising them and their arguments (pure).

Owns: the grammar of the admin statements (ReadySet-compatible where it makes sense) and the
``AdminCommand`` values they parse into. Executing them is the registry's job.

    CREATE CACHE [name] FROM <select | query_id>
    DROP CACHE name            DROP ALL CACHES
    SHOW CACHES [WITH LITERALS]
    SHOW PROXIED [SUPPORTED] QUERIES [WITH LITERALS]
    EXPLAIN CREATE CACHE FROM <select>
    EXPLAIN LAST STATEMENT     SHOW WEIR STATUS       SHOW WEIR TABLES

Keywords are case-insensitive; a trailing semicolon is allowed; names are SQL identifiers
(quoted ones keep their case). A text that is not one of these is not an admin command and
goes through the normal route (so ``SHOW search_path`` still reaches PostgreSQL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_QUERY_ID = re.compile(r"^q_[0-9a-f]{16}$")


@dataclass(frozen=True, slots=True)
class CreateCache:
    name: str | None
    source: str  # a SELECT text or a query id
    explain_only: bool = False

    @property
    def is_query_id(self) -> bool:
        return bool(_QUERY_ID.match(self.source))


@dataclass(frozen=True, slots=True)
class DropCache:
    name: str | None  # None: DROP ALL CACHES


@dataclass(frozen=True, slots=True)
class Show:
    what: str  # "caches", "proxied", "supported", "status", "tables", "last"
    literals: bool = False  # query texts with their literal values (else $n in their place)


AdminCommand = CreateCache | DropCache | Show

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE | re.DOTALL), kind) for p, kind in (
        (rf"^CREATE\s+CACHE\s+(?:(?P<name>{_IDENT})\s+)?FROM\s+(?P<src>.+)$", "create"),
        (r"^EXPLAIN\s+CREATE\s+CACHE\s+FROM\s+(?P<src>.+)$", "explain"),
        (rf"^DROP\s+CACHE\s+(?P<name>{_IDENT})$", "drop"),
        (r"^DROP\s+ALL\s+CACHES$", "drop_all"),
        (r"^SHOW\s+CACHES(?P<lit>\s+WITH\s+LITERALS)?$", "caches"),
        (r"^SHOW\s+PROXIED\s+QUERIES(?P<lit>\s+WITH\s+LITERALS)?$", "proxied"),
        (r"^SHOW\s+PROXIED\s+SUPPORTED\s+QUERIES(?P<lit>\s+WITH\s+LITERALS)?$",
         "supported"),
        (r"^SHOW\s+WEIR\s+STATUS$", "status"),
        (r"^SHOW\s+WEIR\s+TABLES$", "tables"),
        (r"^EXPLAIN\s+LAST\s+STATEMENT$", "last"),
    )
)

#: First words that can start an admin command: a cheap pre-check on the hot path.
FIRST_WORDS = ("CREATE", "EXPLAIN", "DROP", "SHOW")


def identifier(text: str) -> str:
    """An SQL identifier's value: unquoted ones fold to lower case."""
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


def parse_admin(text: str) -> AdminCommand | None:
    """The admin command ``text`` is, or None if it is ordinary SQL."""
    stripped = text.strip()
    if not stripped[:7].upper().startswith(FIRST_WORDS):
        return None
    stripped = stripped.rstrip(";").strip()
    for pattern, kind in _PATTERNS:
        m = pattern.match(stripped)
        if m is None:
            continue
        if kind in ("create", "explain"):
            name = m.groupdict().get("name")
            return CreateCache(identifier(name) if name else None, m.group("src").strip(),
                               explain_only=kind == "explain")
        if kind == "drop":
            return DropCache(identifier(m.group("name")))
        if kind == "drop_all":
            return DropCache(None)
        return Show(kind, literals=bool(m.groupdict().get("lit")))
    return None
