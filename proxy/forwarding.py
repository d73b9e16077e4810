"""What a session remembers about client messages it forwarded untouched, so that seeing the
same kind of message again costs neither decoding nor routing (used by ``proxy.relay``).

Owns: recognising a *plain* simple Query, and the per-session memos — the ``ctx.last`` a
plain Query records, the decoded Parse messages and the Bind names seen before.

Invariants:
- a plain Query is well-formed (one NUL, at the end; UTF-8), its first word is ASCII and none
  of ``WATCHED_WORDS``, and no registry router looks at it (no registry, or explicit caching,
  no cached table named and no write hidden behind a read-only tag, see :func:`hides_write`):
  ``CacheService.route`` then routes it upstream for the same reason as any other plain
  Query, ``observe_set`` ignores it, it has no effect on the session's statements and it
  cannot write without its CommandComplete saying so; so the relay learns that reason once
  and only records it after;
- the memos hold only what depends on the message bytes and on the service's routing state
  (its registry and cached table names); :meth:`ForwardMemos.current` forgets them when that state
  changes;
- each memo is bounded (``MEMO_ENTRIES``; cleared when full).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

import cython_ext
from pgwire import frontend as fe
from proxy.admin import _FIRST_WORDS as _ADMIN_WORDS

if TYPE_CHECKING:
    from proxy.service import CacheService

_V = TypeVar("_V")

#: bound of each memo
MEMO_ENTRIES = 256
#: first words after which a simple query may matter to weir beyond its routing: admin
#: commands, SET/RESET (``observe_set``), DISCARD/DEALLOCATE (the session state)
WATCHED_WORDS = (*(w.encode() for w in _ADMIN_WORDS), b"SET", b"RESET", b"DISCARD",
                 b"DEALLOCATE")
#: frontend messages whose content neither the session state nor ``Extended`` needs while
#: nothing is held locally: type -> pending kind (``SessionState.expect``)
CONTENT_FREE = {ord("E"): "execute", ord("S"): "sync", ord("H"): "", ord("D"): "describe"}
#: CommandComplete tags that cannot have written anything (read-your-writes ignores them).
READ_ONLY_TAGS = (b"SELECT", b"SHOW", b"SET", b"FETCH", b"BEGIN", b"ROLLBACK", b"LISTEN",
                  b"UNLISTEN", b"DISCARD", b"DEALLOCATE", b"PREPARE", b"DECLARE", b"CLOSE",
                  b"RESET", b"MOVE", b"EXPLAIN")


#: words of the statements that write; a statement starting with one says so in its
#: CommandComplete tag, a statement containing one otherwise may hide a write (``WITH ...
#: UPDATE``, ``EXPLAIN ANALYZE DELETE``)
WRITE_WORDS = ("insert", "update", "delete", "merge")


def hiding_words(functions: tuple[str, ...]) -> tuple[str, ...]:
    """The words (lower case) that make a statement :func:`hides_write` where they stand as
    whole words: :data:`WRITE_WORDS`, ``execute`` (a prepared statement's text is not
    seen) and the ``functions`` that may write (volatile, outside the system schemas)."""
    return tuple(sorted({*WRITE_WORDS, "execute", *functions}))


def writes_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern finding any of ``words`` (:func:`hiding_words`) as a whole word."""
    return re.compile(r"(?<![\w$])(?:" + "|".join(re.escape(w) for w in words) + r")(?![\w$])")


def hides_write(lowered: str, pattern: re.Pattern[str]) -> bool:
    """Whether a statement (its text in lower case) may write while its CommandComplete tag
    says it cannot (SELECT calling a function that writes, a data-modifying WITH, EXPLAIN
    ANALYZE of a write, EXECUTE): read-your-writes must then count it as a write. A
    statement that starts with one of :data:`WRITE_WORDS` hides nothing (its tag tells)."""
    first = _FIRST_WORD.match(lowered)
    if first is not None and first.group(1) in WRITE_WORDS:
        return False
    return pattern.search(lowered) is not None


_FIRST_WORD = re.compile(r"\s*([a-z_]+)")


def query_head(raw: bytes, start: int, end: int, watched: tuple[bytes, ...]) -> int:
    """What the bytes of the Query payload ``raw[start:end]`` say: 0 — not plain (a NUL
    before the end or none at the end; the first word, after ASCII white space, not ASCII
    letters first, or one of ``watched`` in any case); 1 — plain so far, all ASCII; 2 —
    plain so far, UTF-8 validity still to check. Hot kernel (twin in relay_scan.pyx)."""
    if end <= start or raw.find(b"\0", start, end) != end - 1:
        return 0
    text = raw[start : end - 1]
    head = text.lstrip()[:10]
    if not (head[:1].isalpha() and head.isascii()) or head.upper().startswith(watched):
        return 0
    return 1 if text.isascii() else 2


def plain_query(raw: bytes, start: int, end: int, service: CacheService) -> bool:
    """Whether the Query payload ``raw[start:end]`` is plain (see the module docstring)."""
    head = query_head(raw, start, end, WATCHED_WORDS)
    if head == 0:
        return False
    if service.registry is None:
        return head == 1 or _utf8(raw[start : end - 1]) is not None
    if service.settings.caching == "auto":
        return False
    decoded = _utf8(raw[start : end - 1])
    return decoded is not None and service.plain_text(decoded)


def bind_names(raw: bytes, start: int, end: int) -> bytes:
    """The portal and statement names at the start of the Bind payload ``raw[start:end]``
    (with their NULs), or b"" when they are not both there."""
    portal_end = raw.find(b"\0", start, end)
    statement_end = raw.find(b"\0", portal_end + 1, end) if portal_end >= 0 else -1
    return raw[start : statement_end + 1] if statement_end >= 0 else b""


class ForwardMemos:
    """One session's memos (see the module docstring)."""

    __slots__ = ("_names", "_registry", "binds", "parses", "plain_last")

    def __init__(self) -> None:
        #: what ``ctx.last`` becomes for a plain Query, once learnt
        self.plain_last: tuple[str, str] | None = None
        self.parses: dict[bytes, fe.Parse] = {}  # Parse payload -> the decoded Parse
        self.binds: dict[bytes, fe.Bind] = {}  # Bind names -> a Bind holding just them
        self._registry: object = None
        self._names: object = None

    def current(self, service: CacheService) -> bool:
        """Forget what depends on the routing state if it changed (a cache was created or
        dropped) since the last call; True when it did."""
        if service.registry is not self._registry or service._names is not self._names:
            self._registry, self._names = service.registry, service._names
            self.plain_last = None
            self.parses.clear()
            return True
        return False

    def remember_parse(self, payload: bytes, msg: fe.Parse) -> None:
        _put(self.parses, payload, msg)

    def remember_bind(self, raw: bytes, start: int, end: int, msg: fe.Bind) -> None:
        names = bind_names(raw, start, end)
        if names:
            _put(self.binds, names, fe.Bind(msg.portal, msg.statement))


def _utf8(text: bytes) -> str | None:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _put(memo: dict[bytes, _V], key: bytes, value: _V) -> None:
    if len(memo) >= MEMO_ENTRIES:
        memo.clear()
    memo[key] = value


#: The pure-Python reference, whatever ``WEIR_IMPL`` selects (for parity tests).
query_head_python = query_head

_fast = cython_ext.load("relay_scan")
if _fast is not None:
    query_head = _fast.query_head
