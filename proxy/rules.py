"""The quiet-message and hidden-write rules: which messages the relay and the lanes may pass
without a look, written once.

Owns (pure references; their compiled twins are ``cython_ext/rules.pyx`` for Python callers
and the inline C of ``cython_ext/rules_kernel.pxd``, which the relay core and the lanes call):

- :data:`WATCHED_WORDS`: first words after which a simple Query may matter to weir beyond
  its routing (admin commands, SET/RESET, DISCARD/DEALLOCATE);
- :func:`query_head`: what the bytes of a simple Query payload say about it being plain;
- :data:`READ_ONLY_TAGS` and :func:`read_only_tag`: CommandComplete tags that cannot have
  written anything (read-your-writes ignores them; the lanes relay them);
- :data:`WRITE_WORDS`, :func:`hiding_words` and :func:`hides_write`: a statement that may
  write while its tag says it cannot (read-your-writes must count it as a write), and
  :func:`with_writes`: a data-modifying WITH whose tag tells (no compiled twin: read once
  per Parse);
- :func:`plain_text`: a Query text that needs no look while caching runs (it names no cached
  relation and hides no write);
- on the message classes of ``pgwire.classes`` (:func:`request_class`, :func:`answer_class`:
  what a message's type says, a write included; bound here to their compiled twins): the
  content-free client messages with the request each stands for (:data:`CONTENT_FREE`), and
  which answers the relay core and the lanes pass without a look (:data:`RELAY_QUIET`,
  :data:`LANE_QUIET`).

Every function is pure; each compiled twin returns what its reference returns for every
input (``tests/unit/proxy/test_rules_parity.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache

import cython_ext
from pgwire.classes import (
    ANSWER_BLOCK,
    ANSWER_IDLE,
    ANSWER_OTHER,
    ANSWER_READ,
    ANSWER_ROW,
)
from pgwire.classes import answer_class as answer_class
from pgwire.classes import request_class as request_class
from proxy.admin import FIRST_WORDS as ADMIN_WORDS

#: first words after which a simple query may matter to weir beyond its routing: admin
#: commands, SET/RESET (``observe_set``), DISCARD/DEALLOCATE (the session state), DO, CALL,
#: EXECUTE (code weir does not see may change the session's role: ``proxy.identity``), a
#: BEGIN with transaction modes and START TRANSACTION (the isolation level), ROLLBACK and
#: ABORT (the block ends: ``proxy.transactions``; a COMMIT's tag is observed anyway)
WATCHED_WORDS = (*(w.encode() for w in ADMIN_WORDS), b"SET", b"RESET", b"DISCARD",
                 b"DEALLOCATE", b"DO", b"CALL", b"EXECUTE", b"BEGIN ", b"START", b"ROLLBACK",
                 b"ABORT")
#: a Query containing this (in any case) is never plain: it may change the session's role
#: or search_path (``proxy.identity``)
IDENTITY_WORD = b"set_config"
#: CommandComplete tags that cannot have written anything (read-your-writes ignores them).
READ_ONLY_TAGS = (b"SELECT", b"SHOW", b"SET", b"FETCH", b"BEGIN", b"ROLLBACK", b"LISTEN",
                  b"UNLISTEN", b"DISCARD", b"DEALLOCATE", b"PREPARE", b"DECLARE", b"CLOSE",
                  b"RESET", b"MOVE", b"EXPLAIN")
#: words of the statements that write; a statement starting with one says so in its
#: CommandComplete tag, a statement containing one otherwise may hide a write (``WITH ...
#: UPDATE``, ``EXPLAIN ANALYZE DELETE``)
WRITE_WORDS = ("insert", "update", "delete", "merge")


def query_head(raw: bytes, start: int, end: int, watched: tuple[bytes, ...]) -> int:
    """What the bytes of the Query payload ``raw[start:end]`` say: 0 — not plain (a NUL
    before the end or none at the end; the first word, after ASCII white space, not ASCII
    letters first, or one of ``watched`` in any case; :data:`IDENTITY_WORD` in any case
    anywhere; anything but ``;`` and white space after a ``;``: a second statement, whose
    first word is not looked at here); 1 — plain so far, all ASCII; 2 — plain so far, UTF-8
    validity still to check."""
    if end <= start or raw.find(b"\0", start, end) != end - 1:
        return 0
    text = raw[start : end - 1]
    head = text.lstrip()[:10]
    if not (head[:1].isalpha() and head.isascii()) or head.upper().startswith(watched):
        return 0
    semicolon = text.find(b";")
    if semicolon >= 0 and text[semicolon:].strip(b"; \t\n\r\x0b\x0c"):
        return 0
    if IDENTITY_WORD in text.lower():
        return 0
    return 1 if text.isascii() else 2


def read_only_tag(payload: bytes, tags: tuple[bytes, ...]) -> bool:
    """Whether the first 8 bytes of a CommandComplete payload start with one of ``tags``."""
    return payload[:8].startswith(tags)


def hiding_words(functions: tuple[str, ...]) -> tuple[str, ...]:
    """The words (lower case) that make a statement :func:`hides_write` where they stand as
    whole words: :data:`WRITE_WORDS`, ``execute`` (a prepared statement's text is not
    seen) and the ``functions`` that may write (volatile, outside the system schemas)."""
    return tuple(sorted({*WRITE_WORDS, "execute", *functions}))


@lru_cache(maxsize=8)
def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern finding any of ``words`` as a whole word."""
    return re.compile(r"(?<![\w$])(?:" + "|".join(re.escape(w) for w in words) + r")(?![\w$])")


_FIRST_WORD = re.compile(r"\s*([a-z_]+)")


def hides_write(lowered: str, hiding: tuple[str, ...]) -> bool:
    """Whether a statement (its text in lower case) may write while its CommandComplete tag
    says it cannot (SELECT calling a function that writes, a data-modifying WITH, EXPLAIN
    ANALYZE of a write, EXECUTE): one of ``hiding`` (:func:`hiding_words`; none: nothing
    hides a write) is in it as a whole word. A statement that starts with one of
    :data:`WRITE_WORDS` hides nothing (its tag tells)."""
    if not hiding:
        return False
    first = _FIRST_WORD.match(lowered)
    if first is not None and first.group(1) in WRITE_WORDS:
        return False
    return _pattern(hiding).search(lowered) is not None


#: a token of a WITH clause at its top level (:func:`with_writes`): a word, a quoted name,
#: an opening parenthesis, a comma; anything else ends the scan (group ``other``)
_WITH_TOKEN = re.compile(r'\s*(?:(?P<word>[a-z_][a-z0-9_]*)|(?P<quoted>"(?:[^"]|"")*")'
                         r"|(?P<open>\()|(?P<comma>,)|(?P<other>\S))")
#: what may stand in a parenthesized group of a WITH clause without a closer look: no
#: comment, dollar quote, backslash (escape strings) or semicolon, parameters ``$n`` apart
_WITH_UNSURE = re.compile(r"--|/\*|\$(?!\d)|\\|;")
#: a string literal or quoted name inside a group (skipped when counting parentheses)
_WITH_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def with_writes(lowered: str) -> bool:
    """Whether a statement (its text in lower case) is ``WITH [RECURSIVE] name [(columns)] AS
    [[NOT] MATERIALIZED] (...) [, ...]`` followed by INSERT, UPDATE, DELETE or MERGE: its
    CommandComplete tag is then that statement's, a write's tag, whatever the WITH's own
    statements did (PostgreSQL tags a statement by its top-level command), so read-your-writes
    learns of its writes from the tag as for a plain INSERT and it hides none. False when
    the text is anything else or not simple enough to be sure (comments, dollar quotes,
    escape strings, SEARCH/CYCLE clauses, several statements): then :func:`hides_write`
    decides, as before. Read once per Parse (no compiled twin)."""
    if _WITH_UNSURE.search(lowered) is not None:
        return False
    pos, end = 0, len(lowered)
    expect = "with"  # what the grammar takes next
    while pos < end:
        token = _WITH_TOKEN.match(lowered, pos)
        if token is None:
            return False
        pos = token.end()
        word = token.group("word")
        if expect == "with":
            if word != "with":
                return False
            expect = "recursive"
        elif expect in ("recursive", "name"):
            if word == "recursive" and expect == "recursive":
                expect = "name"
            elif word is not None or token.group("quoted") is not None:
                expect = "columns"
            else:
                return False
        elif expect == "columns" and token.group("open") is not None:
            pos = _group_end(lowered, pos)
            expect = "as"
        elif expect in ("columns", "as"):
            if word != "as":
                return False
            expect = "body"
        elif expect == "body":
            if word in ("not", "materialized"):
                continue
            if token.group("open") is None:
                return False
            pos = _group_end(lowered, pos)
            expect = "next"
        elif expect == "next":
            if token.group("comma") is not None:
                expect = "name"
            else:
                return word in WRITE_WORDS
        if pos < 0:
            return False
    return False


def _group_end(lowered: str, pos: int) -> int:
    """The position after the parenthesis closing the group opened just before ``pos``
    (string literals and quoted names skipped); -1 when it is not closed."""
    depth = 1
    end = len(lowered)
    while pos < end:
        c = lowered[pos]
        if c in "'\"":
            quoted = _WITH_QUOTED.match(lowered, pos)
            if quoted is None:
                return -1
            pos = quoted.end()
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return -1


def plain_text(lowered: str, names: tuple[str, ...], hiding: tuple[str, ...]) -> bool:
    """Whether a Query text (in lower case) needs no look while caching runs: none of
    ``names`` (the relations the caches read, lower case) is in it and it hides no write."""
    return not any(name in lowered for name in names) and not hides_write(lowered, hiding)


# -- message classes (pgwire.classes) and what weir makes of them ----------------------------

#: the content-free client messages (whose content neither the session state nor
#: ``Extended`` needs while nothing is held locally): type -> pending kind
#: (``SessionState.expect``)
CONTENT_FREE = {ord("E"): "execute", ord("S"): "sync", ord("H"): "", ord("D"): "describe"}

#: answers a run of which (ending with ReadyForQuery) the relay core observes in one step
RELAY_QUIET = frozenset((ANSWER_OTHER, ANSWER_ROW, ANSWER_READ, ANSWER_IDLE, ANSWER_BLOCK))
#: answers a pass session's lane relays (an idle session's only: ``cython_ext/lanes_pass.pxi``)
LANE_QUIET = frozenset((ANSWER_ROW, ANSWER_READ, ANSWER_IDLE))


#: The pure references, whatever ``WEIR_IMPL`` selects (for parity tests).
query_head_python = query_head
read_only_tag_python = read_only_tag
hides_write_python = hides_write
plain_text_python = plain_text
answer_class_python = answer_class
request_class_python = request_class

_fast = cython_ext.load("rules")
if _fast is not None:
    _fast.configure(hides_write_python, plain_text_python, WRITE_WORDS)
    query_head = _fast.query_head
    read_only_tag = _fast.read_only_tag
    hides_write = _fast.hides_write
    plain_text = _fast.plain_text
    answer_class = _fast.answer_class
    request_class = _fast.request_class
