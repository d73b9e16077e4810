"""The state of one v3 conversation, fed with the messages of both directions (sans-I/O).

Owns: the phase of the connection (startup, TLS/GSS negotiation, authentication, ready,
closed), which 'p' message the server expects next, the queue of responses the backend
still owes, the "skip until Sync" rule after an error in an extended batch, the COPY
sub-modes and the transaction status from ReadyForQuery. Both connection roles
(``ServerConnection`` facing the app, ``ClientConnection`` facing the upstream) wrap one
``Conversation``: they feed it the frontend messages in the order the backend will read them
and the backend messages in the order they were sent. A relay that forwards raw bytes can
feed it type bytes and payloads directly (``frontend`` / ``backend``) without decoding.

The owed responses (``pending``) are tracked per frontend message, as PostgreSQL answers:
  Query -> ... ReadyForQuery            Parse -> ParseComplete     Bind -> BindComplete
  Describe S -> ParameterDescription, RowDescription|NoData      Describe P -> Row|NoData
  Execute -> DataRow* CommandComplete|EmptyQueryResponse|PortalSuspended (or COPY)
  Close -> CloseComplete   Sync -> ReadyForQuery   FunctionCall -> FunctionCallResponse, RFQ
An ErrorResponse owed by an extended message drops every owed response up to the next Sync
(and, if no Sync was sent yet, ignores further frontend messages until one is). While the
backend reads COPY data it swallows Sync/Flush (libpq sends Sync right after an Execute that
turns out to be COPY); any other message type there makes PostgreSQL send an ERROR and a
FATAL "protocol synchronization was lost" (the FATAL closes the conversation here too).
CopyDone/CopyFail are queued as markers to find that boundary.
NoticeResponse, ParameterStatus and NotificationResponse may come at any time.

Invariant: every transition is a table lookup; a message the tables do not allow raises
``ProtocolViolation`` (08P01) and leaves the state unchanged.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable

from pgwire.errors import ErrorResponse
from pgwire.events import Phase, State
from pgwire.framing import ProtocolViolation


class Owed(enum.Enum):
    """What one queued frontend message still waits for."""

    __hash__ = object.__hash__  # members are singletons; Enum's name hash is slow

    QUERY = "Q"
    PARSE = "P"
    BIND = "B"
    DESCRIBE_STATEMENT = "DS"
    DESCRIBE_ROWS = "DP"
    EXECUTE = "E"
    CLOSE = "C"
    SYNC = "S"
    FUNCTION_CALL = "F"
    COPY_END = "c"


class PasswordKind(enum.Enum):
    """Which 'p' message the server expects after its last authentication request."""

    __hash__ = object.__hash__

    PASSWORD = "PasswordMessage"
    SASL_INITIAL = "SASLInitialResponse"
    SASL = "SASLResponse"
    GSS = "GSSResponse"


class Copy(enum.Enum):
    __hash__ = object.__hash__

    IN = "in"
    OUT = "out"
    BOTH = "both"


class _Act(enum.Enum):
    STAY = 0
    POP = 1
    READY = 2
    ERROR = 3
    ROWS = 4
    COPY_IN = 5
    COPY_OUT = 6
    COPY_BOTH = 7


_EXTENDED = frozenset(
    {Owed.PARSE, Owed.BIND, Owed.DESCRIBE_STATEMENT, Owed.DESCRIBE_ROWS, Owed.EXECUTE, Owed.CLOSE}
)
_COPY_START = {ord("G"): _Act.COPY_IN, ord("H"): _Act.COPY_OUT, ord("W"): _Act.COPY_BOTH}
_E = ord("E")

#: owed response -> backend message type -> action.
_RESPONSES: dict[Owed, dict[int, _Act]] = {
    Owed.QUERY: {
        **{ord(t): _Act.STAY for t in "TDCI"},
        **_COPY_START,
        _E: _Act.ERROR,
        ord("Z"): _Act.READY,
    },
    Owed.PARSE: {ord("1"): _Act.POP, _E: _Act.ERROR},
    Owed.BIND: {ord("2"): _Act.POP, _E: _Act.ERROR},
    Owed.DESCRIBE_STATEMENT: {ord("t"): _Act.ROWS, _E: _Act.ERROR},
    Owed.DESCRIBE_ROWS: {ord("T"): _Act.POP, ord("n"): _Act.POP, _E: _Act.ERROR},
    Owed.EXECUTE: {
        ord("D"): _Act.STAY,
        **{ord(t): _Act.POP for t in "CIs"},
        **_COPY_START,
        _E: _Act.ERROR,
    },
    Owed.CLOSE: {ord("3"): _Act.POP, _E: _Act.ERROR},
    Owed.SYNC: {ord("Z"): _Act.READY, _E: _Act.ERROR},
    Owed.FUNCTION_CALL: {ord("V"): _Act.STAY, _E: _Act.ERROR, ord("Z"): _Act.READY},
}

#: backend message types allowed inside each COPY mode besides CommandComplete/ErrorResponse.
_COPY_BACKEND: dict[Copy, frozenset[int]] = {
    Copy.IN: frozenset(),
    Copy.OUT: frozenset({ord("d"), ord("c")}),
    Copy.BOTH: frozenset({ord("d"), ord("c")}),
}
_COPY_STATE = {Copy.IN: State.COPY_IN, Copy.OUT: State.COPY_OUT, Copy.BOTH: State.COPY_BOTH}

#: backend messages allowed at any time once authenticated.
_ASYNC = frozenset({ord("N"), ord("S"), ord("A")})

#: frontend message type -> what it is owed (None: nothing, e.g. Flush, CopyData).
_FRONTEND_OWED: dict[int, Owed | None] = {
    ord("Q"): Owed.QUERY,
    ord("P"): Owed.PARSE,
    ord("B"): Owed.BIND,
    ord("E"): Owed.EXECUTE,
    ord("C"): Owed.CLOSE,
    ord("S"): Owed.SYNC,
    ord("F"): Owed.FUNCTION_CALL,
    ord("c"): Owed.COPY_END,
    ord("f"): Owed.COPY_END,
    ord("H"): None,
    ord("d"): None,
}
_DESCRIBE = {ord("S"): Owed.DESCRIBE_STATEMENT, ord("P"): Owed.DESCRIBE_ROWS}

#: authentication request code -> the 'p' message it asks for (None: none).
AUTH_REPLY: dict[int, PasswordKind | None] = {
    0: None,
    2: None,
    3: PasswordKind.PASSWORD,
    5: PasswordKind.PASSWORD,
    7: PasswordKind.GSS,
    8: PasswordKind.GSS,
    9: PasswordKind.GSS,
    10: PasswordKind.SASL_INITIAL,
    11: PasswordKind.SASL,
    12: None,
}

#: (phase, startup-phase event) -> next phase.
_STARTUP: dict[tuple[Phase, str], Phase] = {
    (Phase.STARTUP, "SSLRequest"): Phase.NEGOTIATING,
    (Phase.STARTUP, "GSSENCRequest"): Phase.NEGOTIATING,
    (Phase.STARTUP, "StartupMessage"): Phase.AUTHENTICATING,
    (Phase.STARTUP, "CancelRequest"): Phase.CLOSED,
    (Phase.NEGOTIATING, "answer"): Phase.STARTUP,
    (Phase.AUTHENTICATING, "AuthenticationOk"): Phase.STARTING,
    (Phase.AUTHENTICATING, "ErrorResponse"): Phase.CLOSED,
    (Phase.STARTING, "ErrorResponse"): Phase.CLOSED,
    (Phase.STARTING, "ReadyForQuery"): Phase.READY,
}


_TERMINABLE = frozenset({Phase.AUTHENTICATING, Phase.STARTING, Phase.READY})


def _violation(what: str) -> ProtocolViolation:
    return ProtocolViolation(what)


class Conversation:
    """Both directions of one connection (see the module docstring)."""

    __slots__ = (
        "_copy",
        "_frontend_handlers",
        "_handlers",
        "_owed",
        "_skipping",
        "password_kind",
        "phase",
        "transaction_status",
    )

    def __init__(self) -> None:
        self.phase = Phase.STARTUP
        self.password_kind: PasswordKind | None = None
        self.transaction_status = "I"
        self._owed: deque[Owed] = deque()
        self._skipping = False
        self._copy: Copy | None = None
        self._handlers: dict[Phase, Callable[[int, bytes], None]] = {
            Phase.AUTHENTICATING: self._backend_authenticating,
            Phase.STARTING: self._backend_starting,
            Phase.READY: self._backend_ready,
            # after Terminate the backend may still owe answers to what came before it
            Phase.CLOSED: self._backend_ready,
        }
        self._frontend_handlers: dict[Phase, Callable[[int, bytes], None]] = {
            Phase.AUTHENTICATING: self._frontend_authenticating,
            Phase.STARTING: self._frontend_ready,
            Phase.READY: self._frontend_ready,
        }

    # -- views -------------------------------------------------------------------------------

    @property
    def pending(self) -> tuple[Owed, ...]:
        """The responses the backend still owes, oldest first (COPY_END markers included)."""
        return tuple(self._owed)

    @property
    def copy(self) -> Copy | None:
        return self._copy

    @property
    def skipping(self) -> bool:
        """An extended batch failed and the backend ignores messages until the next Sync."""
        return self._skipping

    @property
    def state(self) -> State:
        """What the connection is doing (meaningful in Phase.READY)."""
        if self._copy is not None:
            return _COPY_STATE[self._copy]
        head = self._head()
        if head is None:
            return State.SKIP_UNTIL_SYNC if self._skipping else State.IDLE
        if head is Owed.QUERY:
            return State.SIMPLE_QUERY
        if head is Owed.FUNCTION_CALL:
            return State.FUNCTION_CALL
        return State.EXTENDED

    # -- startup phase -----------------------------------------------------------------------

    def startup(self, event: str) -> None:
        """Record a startup-phase event: a startup packet's class name, or "answer"."""
        nxt = _STARTUP.get((self.phase, event))
        if nxt is None:
            raise _violation(f"{event} not expected in phase {self.phase.value}")
        self.phase = nxt

    # -- frontend ----------------------------------------------------------------------------

    def frontend(self, mtype: int, payload: bytes) -> None:
        """Record a typed frontend message, in the order the backend reads them."""
        if mtype == ord("X") and self.phase in _TERMINABLE:
            self.phase = Phase.CLOSED
            return
        handler = self._frontend_handlers.get(self.phase)
        if handler is None:
            raise _violation(
                f"frontend message {chr(mtype)!r} not expected in phase {self.phase.value}"
            )
        handler(mtype, payload)

    def _frontend_authenticating(self, mtype: int, payload: bytes) -> None:
        if mtype != ord("p") or self.password_kind is None:
            raise _violation(f"expected password response, got message type {mtype}")
        self.password_kind = None

    def _frontend_ready(self, mtype: int, payload: bytes) -> None:
        if mtype == ord("D"):
            owed = _DESCRIBE.get(payload[0]) if payload else None
            if owed is None:
                raise _violation("invalid Describe message")
        elif mtype in _FRONTEND_OWED:
            owed = _FRONTEND_OWED[mtype]
        else:
            raise _violation(f"invalid frontend message type {mtype}")
        if owed is None:
            return
        if self._skipping:
            if owed is not Owed.SYNC:
                return
            self._skipping = False
        self._owed.append(owed)

    # -- backend -----------------------------------------------------------------------------

    def backend(self, mtype: int, payload: bytes) -> None:
        """Record a backend message, in the order the backend sent them."""
        handler = self._handlers.get(self.phase)
        if handler is None:
            raise _violation(
                f"backend message {chr(mtype)!r} not expected in phase {self.phase.value}"
            )
        handler(mtype, payload)

    def _backend_authenticating(self, mtype: int, payload: bytes) -> None:
        if mtype == ord("R"):
            code = int.from_bytes(payload[:4], "big", signed=True) if len(payload) >= 4 else -1
            if code not in AUTH_REPLY:
                raise _violation(f"unknown authentication request code {code}")
            self.password_kind = AUTH_REPLY[code]
            if code == 0:
                self.startup("AuthenticationOk")
        elif mtype == _E:
            self.startup("ErrorResponse")
        elif mtype not in (ord("v"), ord("N")):
            raise _violation(f"backend message {chr(mtype)!r} during authentication")

    def _backend_starting(self, mtype: int, payload: bytes) -> None:
        if mtype == ord("Z"):
            self._set_status(payload)
            self.startup("ReadyForQuery")
        elif mtype == _E:
            self.startup("ErrorResponse")
        elif mtype not in _ASYNC and mtype != ord("K"):
            raise _violation(f"backend message {chr(mtype)!r} during startup")

    def _backend_ready(self, mtype: int, payload: bytes) -> None:
        if mtype in _ASYNC:
            return
        if self._copy is not None and self._in_copy(mtype, payload):
            return
        head = self._head()
        act = _COMPILED[head].get(mtype) if head is not None else None
        if act is None:
            if mtype == _E and _is_fatal(payload):
                self.phase = Phase.CLOSED
                return
            owed = head.name if head is not None else "nothing"
            raise _violation(f"backend message {chr(mtype)!r} while owing {owed}")
        act(self, payload)

    def _in_copy(self, mtype: int, payload: bytes) -> bool:
        """Handle a backend message inside COPY; True if it was fully handled."""
        assert self._copy is not None
        if mtype in _COPY_BACKEND[self._copy]:
            return True
        if mtype not in (ord("C"), _E):
            raise _violation(f"backend message {chr(mtype)!r} during COPY {self._copy.value}")
        self._end_copy()
        return False

    def _end_copy(self) -> None:
        """The backend left COPY: drop what its COPY reader consumed (Syncs, the end marker)."""
        if self._copy is not Copy.OUT:
            owed = self._owed
            head = owed.popleft()
            while owed and owed[0] is Owed.SYNC:
                owed.popleft()
            if owed and owed[0] is Owed.COPY_END:
                owed.popleft()
            owed.appendleft(head)
        self._copy = None

    def _head(self) -> Owed | None:
        """The oldest owed response, dropping stale CopyDone/CopyFail markers."""
        owed = self._owed
        while owed and owed[0] is Owed.COPY_END:
            owed.popleft()
        return owed[0] if owed else None

    def _set_status(self, payload: bytes) -> None:
        status = payload.decode("latin-1")
        if len(status) != 1 or status not in "ITE":
            raise _violation(f"invalid transaction status {status!r}")
        self.transaction_status = status

    def _pop(self, payload: bytes) -> None:
        self._owed.popleft()

    def _stay(self, payload: bytes) -> None:
        pass

    def _ready(self, payload: bytes) -> None:
        self._set_status(payload)
        self._owed.popleft()

    def _rows(self, payload: bytes) -> None:
        self._owed[0] = Owed.DESCRIBE_ROWS

    def _error(self, payload: bytes) -> None:
        owed = self._owed
        if _is_fatal(payload):
            self.phase = Phase.CLOSED
        if owed[0] not in _EXTENDED:
            return
        while owed and owed[0] is not Owed.SYNC:
            owed.popleft()
        if not owed:
            self._skipping = True

    def _copy_in(self, payload: bytes) -> None:
        self._copy = Copy.IN

    def _copy_out(self, payload: bytes) -> None:
        self._copy = Copy.OUT

    def _copy_both(self, payload: bytes) -> None:
        self._copy = Copy.BOTH


_ACTIONS: dict[_Act, Callable[[Conversation, bytes], None]] = {
    _Act.STAY: Conversation._stay,
    _Act.POP: Conversation._pop,
    _Act.READY: Conversation._ready,
    _Act.ERROR: Conversation._error,
    _Act.ROWS: Conversation._rows,
    _Act.COPY_IN: Conversation._copy_in,
    _Act.COPY_OUT: Conversation._copy_out,
    _Act.COPY_BOTH: Conversation._copy_both,
}


#: _RESPONSES with the actions resolved to methods (what the hot path looks up).
_COMPILED: dict[Owed, dict[int, Callable[[Conversation, bytes], None]]] = {
    owed: {mtype: _ACTIONS[act] for mtype, act in table.items()}
    for owed, table in _RESPONSES.items()
}


def _is_fatal(payload: bytes) -> bool:
    try:
        severity = ErrorResponse.decode(payload).severity
    except ProtocolViolation:
        return False
    return severity in ("FATAL", "PANIC")
