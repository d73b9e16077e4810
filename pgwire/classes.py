"""What a message's type says to a relay that observes a session without decoding every
message: the classes of client messages (:data:`REQUEST_CLASSES`, :func:`request_class`) and
of backend messages (:func:`answer_class`: rows, a CommandComplete that may have written, a
ReadyForQuery's status, one whose content changes the session state).

Pure references: the values are those of the enums of ``cython_ext/rules_kernel.pxd``, whose
inline C functions of the same names the relay core, the backend scan and the lanes call;
``proxy.rules`` binds these names to their compiled twins (``cython_ext/rules.pyx``) and says
which classes weir passes without a look (parity: ``tests/unit/proxy/test_rules_parity.py``).
"""

from __future__ import annotations

#: client messages: decoded and observed one by one
REQUEST_OTHER = 0
#: Execute, Describe: content-free, the request/answer cycle goes on
REQUEST_FREE = 1
#: Flush: content-free; no ReadyForQuery ends the answers it asks for
REQUEST_FLUSH = 2
#: Sync: content-free, ends a cycle
REQUEST_SYNC = 3
#: Bind, Parse: quiet when the session sent the same before (``proxy.forwarding``)
REQUEST_SEEN = 4
#: simple Query: quiet when plain (``proxy.rules.query_head``); ends a cycle
REQUEST_QUERY = 5
#: CopyData: relayed without a look
REQUEST_COPY = 6
#: client message type -> its class (absent: :data:`REQUEST_OTHER`)
REQUEST_CLASSES = {ord("E"): REQUEST_FREE, ord("D"): REQUEST_FREE, ord("S"): REQUEST_SYNC,
                   ord("B"): REQUEST_SEEN, ord("P"): REQUEST_SEEN, ord("Q"): REQUEST_QUERY,
                   ord("H"): REQUEST_FLUSH, ord("d"): REQUEST_COPY}

#: backend messages: nothing the session state reads (COPY, ...): quiet for the relay only
ANSWER_OTHER = 0
#: rows, descriptions, the completions of the extended protocol, notices, notifications
ANSWER_ROW = 1
#: CommandComplete whose tag cannot have written anything
ANSWER_READ = 2
#: ReadyForQuery, idle
ANSWER_IDLE = 3
#: ReadyForQuery in a transaction block (or a failed one)
ANSWER_BLOCK = 4
#: CommandComplete that may have written: weir's read-your-writes counts it
ANSWER_WRITE = 5
#: ErrorResponse, ParameterStatus, a malformed ReadyForQuery: the session state decodes it
ANSWER_STATE = 6
#: the types of :data:`ANSWER_ROW`
_ROWS = frozenset(b"D123ntTIsNA")
_READY = {ord("I"): ANSWER_IDLE, ord("T"): ANSWER_BLOCK, ord("E"): ANSWER_BLOCK}
_T_COMMAND_COMPLETE, _T_READY = ord("C"), ord("Z")
_STATE = frozenset(b"ES")


def answer_class(mtype: int, payload: bytes | bytearray, tags: tuple[bytes, ...]) -> int:
    """What the backend message ``mtype`` with ``payload`` says (one of the ``ANSWER_``
    values), ``tags`` being the CommandComplete tags that cannot have written anything
    (``proxy.rules.READ_ONLY_TAGS``), of which the first 8 bytes of ``payload`` may start with
    one."""
    if mtype in _ROWS:
        return ANSWER_ROW
    if mtype == _T_COMMAND_COMPLETE:
        return ANSWER_READ if payload[:8].startswith(tags) else ANSWER_WRITE
    if mtype == _T_READY:
        return _READY.get(payload[0], ANSWER_STATE) if len(payload) == 1 else ANSWER_STATE
    return ANSWER_STATE if mtype in _STATE else ANSWER_OTHER


def request_class(mtype: int) -> int:
    """The class of a client message type (:data:`REQUEST_CLASSES`)."""
    return REQUEST_CLASSES.get(mtype, REQUEST_OTHER)
