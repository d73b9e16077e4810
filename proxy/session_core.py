"""The session core: every field of a session that its hot paths read, declared once.

Owns: the declaration of one client session's state — its phase and hot flags, the request
ledger (what :class:`proxy.session.SessionState` keeps: the requests outstanding upstream and
what their answers will change), and the statements and portals weir holds itself
(:class:`proxy.extended.Extended`). A newcomer finds the session's state here.

The compiled twin is ``cython_ext/session_core.pxd`` (a ``cdef class`` with the same fields,
typed): the relay core (``cython_ext/relay_scan.pyx``) and the compiled hit path
(``cython_ext/hitpath.pyx``) read them as C struct members. :class:`SessionCore_python` is the
pure reference, with the same names in ``__slots__``; ``SessionCore`` is whichever
``cython_ext.load`` picks. Behaviour lives elsewhere: the ledger's rules in
``proxy.session`` (``SessionState`` is a ``SessionCore``), the session's life in
``proxy.relay``; nothing reads a session through ``__dict__`` or a private name.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import cython_ext

#: the fields, in declaration order (the parity test holds the compiled twin to them)
FIELDS = (
    # the phase and the hot flags of the session (proxy.relay.Session)
    "phase", "local_busy", "caching", "paused", "waiting", "lane", "hit_view",
    # the request ledger (proxy.session.SessionState)
    "transaction_status", "parameters", "parameters_version", "statements", "portals",
    "pending", "swallowing", "discarded", "uncertain", "skipping", "replacement", "on_settled",
    "last_parse", "last_bind",
    # held statements and local portals (proxy.extended.Extended)
    "held", "held_portals", "reasons", "portal_statements", "routes", "last_reason",
    "last_route", "batch_upstream", "batch_local", "batch_failed",
    # timing (proxy.metrics.UPSTREAM_STATEMENTS)
    "upstream_since",
)


class SessionCore_python:
    """One session's declared state (pure reference of ``cython_ext.session_core``)."""

    __slots__ = FIELDS

    #: ``pgwire.events.Phase``: where the session is in its life
    phase: Any
    #: weir is answering locally: client messages wait in :attr:`waiting`
    local_busy: bool
    #: weir answers some statements itself (the cache service is enabled)
    caching: bool
    #: why reading from the client is paused (it resumes when none is left)
    paused: set[str]
    #: client messages (whole, with their headers) waiting behind a local answer
    waiting: list[bytes]
    #: the token of the lane reading the client (``proxy.lanes``), or 0
    lane: int
    #: what the compiled hit path took of the session once (``cython_ext.hitpath``)
    hit_view: Any
    #: the last ReadyForQuery's status: ``I``, ``T`` or ``E``
    transaction_status: str
    #: the server-reported parameters (ParameterStatus), bumping ``parameters_version``
    parameters: dict[str, str]
    parameters_version: int
    #: the prepared statements the upstream holds (name -> PreparedStatement)
    statements: dict[str, Any]
    #: the portals the upstream holds: name -> the statement each was bound from
    portals: dict[str, str]
    #: the outstanding requests, oldest first (``proxy.session._Pending``)
    pending: deque[Any]
    #: outstanding requests whose answers must not reach the client, plus one while
    #: :attr:`skipping`: either way the relay observes the upstream one message at a time
    swallowing: int
    #: outstanding requests weir sent itself whose answers it discards whole (no
    #: replacement, no outcome awaited): they do not hold a local answer back
    discarded: int
    #: outstanding requests whose outcome weir's own bookkeeping waits for
    uncertain: int
    #: an error ended an extended-protocol batch before its Sync: PostgreSQL skips to it
    skipping: bool
    #: what the client gets in place of the answer swallowed last
    replacement: bytes
    #: called when :attr:`uncertain` drops to zero
    on_settled: Any
    #: the last Parse and Bind observed with their ledger items (reused when repeated)
    last_parse: Any
    last_bind: Any
    #: statements weir holds (name -> ``proxy.held.HeldStatement``)
    held: dict[str, Any]
    #: portals bound from held statements (name -> ``proxy.held.LocalPortal``)
    held_portals: dict[str, Any]
    #: why each statement the upstream holds went there
    reasons: dict[str, str]
    #: which statement each portal the upstream holds runs
    portal_statements: dict[str, str]
    #: statements parsed upstream that routing classified (each run counts)
    routes: dict[str, Any]
    #: the routing reason and route of the last Parse that went upstream
    last_reason: str
    last_route: Any
    #: something of the current batch went upstream / weir answered some of it / weir
    #: answered an error (the batch is skipped until its Sync)
    batch_upstream: bool
    batch_local: bool
    batch_failed: bool
    #: ``time.monotonic()`` when the oldest request still unanswered went upstream (0.0:
    #: none timed); each ReadyForQuery from the upstream observes the time since
    upstream_since: float

    def __init__(self, phase: Any = None) -> None:
        self.phase = phase
        self.local_busy = False
        self.caching = False
        self.paused = set()
        self.waiting = []
        self.lane = 0
        self.hit_view = None
        self.transaction_status = "I"
        self.parameters = {}
        self.parameters_version = 0
        self.statements = {}
        self.portals = {}
        self.pending = deque()
        self.swallowing = 0
        self.discarded = 0
        self.uncertain = 0
        self.skipping = False
        self.replacement = b""
        self.on_settled = None
        self.last_parse = None
        self.last_bind = None
        self.held = {}
        self.held_portals = {}
        self.reasons = {}
        self.portal_statements = {}
        self.routes = {}
        self.last_reason = "not a cached query"
        self.last_route = None
        self.batch_upstream = False
        self.batch_local = False
        self.batch_failed = False
        self.upstream_since = 0.0


SessionCore = SessionCore_python
_fast = cython_ext.load("session_core")
if _fast is not None:
    SessionCore = _fast.SessionCore  # type: ignore[misc]
