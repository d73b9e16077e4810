"""What a session remembers about client messages it forwarded untouched, so that seeing the
same kind of message again costs neither decoding nor routing (used by ``proxy.relay``).

Owns: recognising a *plain* simple Query (by the rules of ``proxy.rules``), and the
per-session memos — the ``ctx.last`` a
plain Query records, the decoded Parse messages and the Bind names seen before.

Invariants:
- a plain Query is well-formed (one NUL, at the end; UTF-8), its first word is ASCII and none
  of ``WATCHED_WORDS``, and no registry router looks at it (no registry, or explicit caching,
  no cached table named and no write hidden behind a read-only tag, see
  ``proxy.rules.plain_text``):
  ``Routing.route`` then routes it upstream for the same reason as any other plain
  Query, ``observe_set`` ignores it, it has no effect on the session's statements and it
  cannot write without its CommandComplete saying so; so the relay learns that reason once
  and only records it after;
- the memos hold only what depends on the message bytes and on the routing state
  (``proxy.routing``: its registry and cached table names); :meth:`ForwardMemos.current`
  forgets them when that state changes;
- each memo is bounded (``MEMO_ENTRIES``; cleared when full).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pgwire import frontend as fe
from pgwire.framing import ProtocolViolation
from proxy import identity
from proxy.roles import RoutingState
from proxy.rules import WATCHED_WORDS, query_head

_V = TypeVar("_V")

#: bound of each memo
MEMO_ENTRIES = 256
_T_QUERY, _T_BIND = ord("Q"), ord("B")


#: client messages PostgreSQL answers with ERROR 08P01 (invalid message format) when they are
#: malformed, the session going on: type -> pending kind (``SessionState.expect``; a
#: FunctionCall gets none, as a well-formed one)
JUDGED_UPSTREAM = {ord("Q"): "query", ord("P"): "describe", ord("B"): "describe",
                   ord("C"): "describe", ord("D"): "describe", ord("E"): "execute",
                   ord("F"): ""}
#: :func:`decode_client`'s answer for a malformed message weir's pump must send upstream
#: (``Extended.malformed``)
TO_PUMP = object()


def decode_client(mtype: int, payload: bytes, quiet: bool, state: Any, ctx: Any,
                  routing: Any) -> object:
    """A client message decoded, its statement observed for the session's identity
    (``identity.observe``, with the ``routing``'s identity functions). A malformed one of
    :data:`JUDGED_UPSTREAM` goes upstream as it is for PostgreSQL's own error: with nothing
    held locally at once (None: see :func:`judged_upstream`), else through the pump
    (:data:`TO_PUMP`: ``Extended.malformed`` keeps the held statements and the batch right);
    any other malformed message raises ProtocolViolation (the session ends with FATAL
    08P01)."""
    try:
        msg = fe.decode_frontend(mtype, payload)
        identity.observe(ctx, msg, routing.identity_functions, state)
        return msg
    except ProtocolViolation:
        if mtype not in JUDGED_UPSTREAM:
            raise
    if not quiet:
        return TO_PUMP
    judged_upstream(mtype, state, ctx)
    return None


def judged_upstream(mtype: int, state: Any, ctx: Any) -> None:
    """Bookkeeping for a malformed client message of :data:`JUDGED_UPSTREAM` that goes
    upstream as it is: PostgreSQL answers it with an ERROR (and skips the rest of an
    extended batch up to its Sync); the session's identity counts as unknown, as weir did
    not read it."""
    kind = JUDGED_UPSTREAM[mtype]
    state.expect(kind)
    if kind and mtype != _T_QUERY:
        # the batch has a part upstream now: weir answers nothing more of it locally
        # (``Extended._can_answer``), PostgreSQL skips the rest of it after its error
        state.batch_upstream = True
    identity.taint(ctx, (identity.UNREAD, True))


def plain_query(raw: bytes, start: int, end: int, routing: RoutingState) -> bool:
    """Whether the Query payload ``raw[start:end]`` is plain (see the module docstring)."""
    head = query_head(raw, start, end, WATCHED_WORDS)
    if head == 0:
        return False
    if routing.registry is None:
        return head == 1 or _utf8(raw[start : end - 1]) is not None
    if routing.settings.caching == "auto":
        return False
    decoded = _utf8(raw[start : end - 1])
    return decoded is not None and routing.plain_text(decoded)


def bind_names(raw: bytes, start: int, end: int) -> bytes:
    """The portal and statement names at the start of the Bind payload ``raw[start:end]``
    (with their NULs), or b"" when they are not both there."""
    portal_end = raw.find(b"\0", start, end)
    statement_end = raw.find(b"\0", portal_end + 1, end) if portal_end >= 0 else -1
    return raw[start : statement_end + 1] if statement_end >= 0 else b""


class ForwardMemos:
    """One session's memos (see the module docstring)."""

    __slots__ = ("binds", "names_seen", "parses", "plain_last", "registry_seen")

    def __init__(self) -> None:
        #: what ``ctx.last`` becomes for a plain Query, once learnt
        self.plain_last: tuple[str, str] | None = None
        self.parses: dict[bytes, fe.Parse] = {}  # Parse payload -> the decoded Parse
        self.binds: dict[bytes, fe.Bind] = {}  # Bind names -> a Bind holding just them
        self.registry_seen: object = None
        self.names_seen: object = None

    def current(self, routing: RoutingState) -> bool:
        """Forget what depends on the routing state if it changed (a cache was created or
        dropped) since the last call; True when it did."""
        if routing.registry is not self.registry_seen \
                or routing.cached_names is not self.names_seen:
            self.registry_seen, self.names_seen = routing.registry, routing.cached_names
            self.plain_last = None
            self.parses.clear()
            return True
        return False

    def remember_parse(self, payload: bytes, msg: fe.Parse) -> None:
        """(A Parse that may change or give back the session's identity is never remembered:
        each one must be observed, ``proxy.identity``.)"""
        if identity.statement_changes(msg.query)[0] is None:
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


