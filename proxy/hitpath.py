"""The hit path: a cached read the session has run before, answered in one step.

Owns: recognising the three batches drivers send for a read, and answering them from memos of
complete encoded answers without decoding the messages or building statement and portal
objects:
- a prepared statement weir holds run again: ``Bind`` to the unnamed portal, optionally
  ``Describe`` of that portal, ``Execute`` of all rows, ``Sync`` — memoized per (cache,
  statement text, declared parameter types, output settings) by the Bind's bytes after the
  statement name;
- an unnamed statement parsed and run in one batch (``Parse``, ``Bind``, optionally
  ``Describe`` of the portal, ``Execute``, ``Sync``; libpq's PQexecParams, JDBC, psycopg before
  it prepares) — memoized per (database, search_path, output settings) by the batch's bytes;
  the session's unnamed statement becomes the held one, as on the general path;
- a simple ``Query`` — memoized the same way by the message's bytes.
It also owns the memos (:class:`HitMemos`); every entry keeps the engine answers it was
encoded from.

Invariants:
- a memo entry is used only while every engine answer it was encoded from is still the
  reader's current answer for its key (object identity: a reader hands out a new answer
  object whenever a key's rows change, is evicted or is filled again), so a memoized answer is
  exactly what the general path would encode now;
- every gate of the general path (``Extended._execute`` and ``ReadPath.read_rows_now``)
  holds before an entry is used: nothing of the batch upstream, no request outstanding, no
  transaction block, no read-your-writes barrier due, role defaults read, the role known to
  be allowed to read the cache, the replication stream up and within the staleness bound;
- anything else (another message shape, a named portal, a row limit, a memo miss) returns
  False having changed nothing but, for a batch the memo may learn, ``Extended.recording``
  (where the general path's answer is to be remembered), and the general path handles it.

It runs for every cached answer, so it reads the state behind those gates directly — the
host's ``stream.up`` and ``fresh_as_of``, ``service.gates.grants``, the session's memo of its output
settings id — instead of calling the methods that own them (``host.connected``,
``host.staleness()``, ``gates.granted()``, ``reads.output_settings_id()``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import cython_ext
from pgwire import backend as be
from pgwire import frontend as fe
from proxy.caching import EngineHost
from proxy.router import SessionContext
from proxy.seen import may_serve as seen_allows
from proxy.session import SessionState
from proxy.settings import Settings

_T_BIND = ord("B")
_T_DESCRIBE = ord("D")
_T_EXECUTE = ord("E")
_T_SYNC = ord("S")
_T_QUERY = ord("Q")
_T_PARSE = ord("P")
#: Execute of the unnamed portal with no row limit, and Describe of the unnamed portal.
_EXECUTE_ALL = b"\x00\x00\x00\x00\x00"
_DESCRIBE_PORTAL = b"P\x00"
_READY_IDLE = be.ReadyForQuery("I").encode()
_BIND_COMPLETE = be.BIND_COMPLETE.encode()

#: bounds: answers remembered per memo, memos remembered, size of one remembered answer,
#: answers and bytes (keys and encoded replies; the engine's answers, which entries share, are
#: the engine's) remembered in all — past either total the oldest answers are forgotten
MEMO_ENTRIES = 16384
MEMOS = 1024
MAX_ANSWER_BYTES = 16384
TOTAL_ENTRIES = 200_000
TOTAL_BYTES = 64 << 20
#: what one remembered answer costs beyond its key and replies (the Hit, its tuples, the
#: memo's slot), counted in ``HitMemos.bytes`` so that the memos' share of the memory
#: budget holds for the process (``proxy.misses.budgets``)
ENTRY_OVERHEAD = 256
#: what an answer's place in the order of remembering costs (``HitMemos._order``)
ORDER_BYTES = 72
#: the key of the entry that marks a memo dropped from :class:`HitMemos` (real keys are whole
#: messages or a Bind's tail: never empty); a statement holding such a memo fetches its
#: memo again before remembering (``Extended``), so no answer goes where no bound counts it
DEAD = b""


class Memoized(Protocol):
    """What a memo is kept on: a held statement (``proxy.held.HeldStatement``)."""

    route: Any  # its ``cache`` names the memo with the statement's text and types
    parse: Any
    memo: dict[bytes, Hit] | None
    memo_sid: int


@dataclass(frozen=True, slots=True)
class Hit:
    """One remembered answer: the engine answers it came from and its encoding."""

    reads: tuple[tuple[str, tuple[Any, ...], object], ...]  # (cache, key, answer object)
    row_description: bytes  # for a Describe of the portal (prepared statements)
    body: bytes  # DataRows + CommandComplete (for batches: every answer up to ReadyForQuery)
    last: tuple[str, str]  # EXPLAIN LAST STATEMENT after serving it
    statement: Any = None  # an unnamed batch: the HeldStatement the session then holds
    #: what is written, ReadyForQuery included: for a held statement's Bind without and with
    #: a Describe of the portal; for a batch, ``body`` then ReadyForQuery (twice)
    replies: tuple[bytes, bytes] = field(init=False)

    def __post_init__(self) -> None:
        if self.row_description:
            replies = (_BIND_COMPLETE + self.body + _READY_IDLE,
                       _BIND_COMPLETE + self.row_description + self.body + _READY_IDLE)
        else:
            reply = self.body + _READY_IDLE
            replies = (reply, reply)
        object.__setattr__(self, "replies", replies)


class HitMemos:
    """The memos of every (cache, statement, output settings) in use, bounded."""

    def __init__(self) -> None:
        self._memos: dict[tuple[Any, ...], dict[bytes, Hit]] = {}
        self._settings: dict[Any, int] = {}
        self.served = 0  # answers given from a memo (SHOW WEIR STATUS)
        #: answers remembered when a fill installed their key (``proxy.fillstamps``; the same)
        self.from_fills = 0
        #: (memo, key, bytes counted) of every answer remembered, oldest first: past a bound
        #: the oldest are forgotten one by one (before, every memo started over: under a
        #: memory budget, every second or so in eviction churn, and each answer then had to
        #: be encoded and remembered again)
        self._order: deque[tuple[dict[bytes, Hit], bytes, int]] = deque()
        self.bytes = 0  # bytes counted for the answers remembered (SHOW WEIR STATUS)
        self.limit = TOTAL_BYTES  # past it the oldest are forgotten (``proxy.misses.budgets``)
        self.forgotten = 0  # answers forgotten to stay within the bounds (SHOW WEIR STATUS)

    def settings_id(self, settings: Any) -> int:
        """A small number standing for an output-settings value (interned)."""
        sid = self._settings.get(settings)
        if sid is None:
            sid = self._settings[settings] = len(self._settings)
        return sid

    def memo(self, held: Memoized, sid: int) -> dict[bytes, Hit]:
        """The memo of a held statement under the output settings ``sid``."""
        entry = held.route.cache
        return self._memo((entry.name, id(entry), held.parse.query, held.parse.param_types,
                           sid))

    def statement_memo(self, held: Memoized, sid: int) -> dict[bytes, Hit]:
        """:meth:`memo`, kept on the statement (``held.memo``/``memo_sid``) and fetched again
        when the output settings changed or the memo was dropped (:data:`DEAD`)."""
        memo = held.memo
        if memo is None or held.memo_sid != sid or DEAD in memo:
            memo = held.memo = self.memo(held, sid)
            held.memo_sid = sid
        return memo

    def batches(self, database: str, search_path: tuple[str, ...], sid: int
                ) -> dict[bytes, Hit]:
        """The memo of unnamed batches and simple queries for a session's name resolution
        and output settings."""
        return self._memo((database, search_path, sid))

    def _memo(self, key: tuple[Any, ...]) -> dict[bytes, Hit]:
        memo = self._memos.get(key)
        if memo is None:
            if len(self._memos) >= MEMOS:
                _drop(self._memos.pop(next(iter(self._memos))))
            memo = self._memos[key] = {}
        return memo

    def remember(self, memo: dict[bytes, Hit], key: bytes, hit: Hit) -> None:
        if len(hit.body) > MAX_ANSWER_BYTES or DEAD in memo:
            return
        if len(memo) >= MEMO_ENTRIES:
            del memo[next(iter(memo))]
        plain, described = hit.replies
        size = len(key) + len(plain) + ENTRY_OVERHEAD + ORDER_BYTES + (
            len(described) if described is not plain else 0)
        order = self._order
        order.append((memo, key, size))
        self.bytes += size
        memo[key] = hit
        while self.bytes > self.limit or len(order) > TOTAL_ENTRIES:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        """Forget the oldest answer remembered (its bytes stay counted until then even when
        its memo dropped it earlier, or it was remembered again: a bound, never less)."""
        old_memo, old_key, size = self._order.popleft()
        self.bytes -= size
        if old_memo.pop(old_key, None) is not None:
            self.forgotten += 1

    def clear(self) -> None:
        """Forget every answer: every memo is emptied and dropped (marked :data:`DEAD`)."""
        for memo in self._memos.values():
            _drop(memo)
        self._memos.clear()
        self._order.clear()
        self.bytes = 0


class HitService(Protocol):
    """What the hit path reads of the cache service (``proxy.service.CacheService``)."""

    @property
    def hits(self) -> HitMemos: ...

    @property
    def host(self) -> EngineHost | None: ...

    @property
    def gates(self) -> HitGates: ...

    @property
    def reads(self) -> HitReads: ...

    @property
    def settings(self) -> Settings: ...


class HitGates(Protocol):
    @property
    def grants(self) -> dict[tuple[str, str], tuple[bool, float]]: ...


class HitReads(Protocol):
    def output_settings_id(self, state: SessionState, ctx: SessionContext
                           ) -> tuple[Any, int]: ...


class HitServer(Protocol):
    @property
    def service(self) -> HitService: ...


class HitExtended(Protocol):
    """What the hit path changes of ``proxy.extended.Extended``."""

    recording: tuple[bytes, bool] | None

    def simple_query(self, answered: bool = False) -> None: ...


class Session(Protocol):
    """What the hit path uses of a session (``proxy.relay.Session``): its core, its
    routing context, its ``Extended``, the cache service and the client's transport."""

    @property
    def state(self) -> SessionState: ...

    @property
    def ctx(self) -> SessionContext | None: ...

    @property
    def extended(self) -> HitExtended: ...

    @property
    def server(self) -> HitServer: ...

    @property
    def client(self) -> Any: ...

    lane_miss_run: int  # (reset by a hit: ``proxy.aftermiss.mostly_misses``)
    lane_recent: int  # (a 0 shifted in by a hit: ``proxy.lane_switch.switch_args``)


def _drop(memo: dict[bytes, Hit]) -> None:
    memo.clear()
    memo[DEAD] = _DEAD_HIT


_DEAD_HIT = Hit((), b"", b"", ("", ""))


def bind_rest(raw_bind: bytes) -> bytes | None:
    """The part of a whole Bind message after the statement name (parameter formats,
    values, result formats), or None unless it binds the unnamed portal."""
    if len(raw_bind) < 7 or raw_bind[5] != 0:
        return None
    end = raw_bind.find(b"\x00", 6)
    return None if end < 0 else raw_bind[end + 1 :]


def learned_batch(batch: bytes, parse: fe.Parse, rest: bytes) -> bool:
    """Whether ``batch``, recorded by the hit path, begins with ``parse`` and a Bind of the
    unnamed portal and statement with ``rest`` after the statement name (its tail was checked
    when it was recorded): only then is the answer to that Bind the answer to the batch. A
    recording can outlive its batch when the relay core forwarded the batch by itself."""
    head = parse.encode()
    bind = b"B" + (len(rest) + 6).to_bytes(4, "big") + b"\x00\x00" + rest
    return batch.startswith(head) and batch.startswith(bind, len(head))


def try_answer(session: Session, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """Answer ``raw`` (whole messages, framed in ``index``) from a memo and return True,
    or return False (see the module docstring)."""
    first = index[0][0]
    if first == _T_BIND:
        return _prepared(session, raw, index)
    if first in (_T_QUERY, _T_PARSE):
        return _batch(session, raw, index)
    return False


def _tail(raw: bytes, index: list[tuple[int, int, int]], at: int) -> bool | None:
    """Whether ``index[at:]`` is [Describe portal ""] Execute("", all) Sync: True with the
    Describe, False without, None if it is something else."""
    rest = index[at:]
    describe = len(rest) == 3
    if describe:
        dt, ds, de = rest[0]
        if dt != _T_DESCRIBE or raw[ds:de] != _DESCRIBE_PORTAL:
            return None
    elif len(rest) != 2:
        return None
    (et, es, ee), (st, ss, se) = rest[-2:]
    if et != _T_EXECUTE or st != _T_SYNC or ss != se or raw[es:ee] != _EXECUTE_ALL:
        return None
    return describe


def _prepared(session: Session, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    found = _memoized(session, raw, index, True)
    if found is None:
        return False
    hit, describe = found
    session.state.held_portals.pop("", None)  # the unnamed portal is replaced, then ends
    # with the Sync
    _serve(session, hit, hit.replies[describe])
    return True


def _memoized(session: Session, raw: bytes, index: list[tuple[int, int, int]],
              covered: bool) -> tuple[Hit, bool] | None:
    """The memoized answer to a prepared statement's run and whether it is described, when
    every gate is open (``covered``: seen(s) included) and it is current; else None."""
    describe = _tail(raw, index, 1)
    _, bs, be_ = index[0]
    if describe is None or raw[bs] != 0:
        return None
    name_end = raw.find(b"\x00", bs + 1, be_)
    if name_end < 0:
        return None
    held = session.state.held.get(raw[bs + 1 : name_end].decode("utf-8", "replace"))
    if held is None or held.route.cache is None or not may_serve(session, covered):
        return None
    memo = session.server.service.hits.statement_memo(held, session_settings_id(session))
    rest = raw[name_end + 1 : be_]
    hit = memo.get(rest)
    if hit is None or not _current(session, memo, rest, hit):
        return None
    return hit, describe


def hit_once_covered(session: Session, raw: bytes, index: list[tuple[int, int, int]]
                     ) -> bool:
    """Whether ``raw`` is a run of a prepared statement (Bind [Describe] Execute Sync) whose
    memoized answer is current and every gate but the session's seen(s) coverage is open:
    the hit path answers it once the session is covered (``proxy.aftermiss.park``)."""
    return index[0][0] == _T_BIND and _memoized(session, raw, index, False) is not None


def _batch(session: Session, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """A simple Query, or Parse + Bind (unnamed statement and portal) + the tail."""
    ctx = session.ctx
    service = session.server.service
    if ctx is None or service.host is None:
        return False
    describe = False
    if index[0][0] == _T_PARSE:
        describe_ = _tail(raw, index, 2)
        if describe_ is None:
            return False
        (_, ps, _), (bt, bs, _) = index[0], index[1]
        if raw[ps] != 0 or bt != _T_BIND or raw[bs] != 0 or raw[bs + 1] != 0:
            return False
        describe = describe_
    elif len(index) != 1:
        return False
    if not may_serve(session):
        return False
    sid = session_settings_id(session)
    memo = service.hits.batches(ctx.database, ctx.search_path, sid)
    hit = memo.get(raw)
    if hit is None:
        if index[0][0] == _T_PARSE:
            session.extended.recording = (raw, describe)
        return False
    if not _current(session, memo, raw, hit):
        return False
    if hit.statement is not None:
        state = session.state
        state.held[""] = type(hit.statement)(hit.statement.parse, hit.statement.route)
        state.held_portals.pop("", None)
    else:  # a simple Query drops the unnamed statement
        session.extended.simple_query(answered=True)
    _serve(session, hit, hit.replies[0])
    return True


def remember_query(session: Session, raw: bytes, reads: list[Any], answer: bytes) -> None:
    """Remember a simple Query's answer (without ReadyForQuery) served from the caches."""
    ctx = session.ctx
    if ctx is None or not reads or ctx.tainted is not None:
        return
    service = session.server.service
    sid = session_settings_id(session)
    memo = service.hits.batches(ctx.database, ctx.search_path, sid)
    service.hits.remember(memo, raw, Hit(tuple(reads), b"", answer, ctx.last))


def _serve(session: Session, hit: Hit, reply: bytes) -> None:
    session.server.service.hits.served += 1
    session.ctx.last = hit.last  # type: ignore[union-attr]
    session.lane_miss_run = 0  # (a hit lately: not mostly misses, proxy.aftermiss)
    session.lane_recent = session.lane_recent << 1 & 0xFF  # (proxy.lane_switch)
    session.client.write(reply)


def may_serve(session: Session, covered: bool = True) -> bool:
    """The gates of the general path that do not depend on the cache (module docstring);
    without ``covered``, all but the session's seen(s) coverage."""
    state = session.state
    ctx = session.ctx
    if state.batch_upstream or state.batch_local or state.batch_failed or not state.caught_up \
            or state.transaction_status != "I" or ctx is None or not ctx.defaults_applied \
            or ctx.tainted is not None:
        return False
    service = session.server.service
    host = service.host
    if host is None:
        return False
    if covered and service.settings.read_your_writes == "on" \
            and not seen_allows(ctx.seen, host.coverage.covered):
        return False
    # ``host.connected`` and ``host.staleness()``, read directly
    return host.stream.up \
        and time.monotonic() - host.fresh_as_of <= service.settings.staleness_bound


def session_settings_id(session: Session) -> int:
    """``service.reads.output_settings_id(...)[1]``, from the session's memo of it when
    current."""
    state, ctx = session.state, session.ctx
    known = ctx.output  # type: ignore[union-attr]
    if known is not None and known[0] == state.parameters_version \
            and known[1] == ctx.settings_version:  # type: ignore[union-attr]
        return known[2][1]  # type: ignore[no-any-return]
    return session.server.service.reads.output_settings_id(state, ctx)[1]  # type: ignore[arg-type]


def _current(session: Session, memo: dict[bytes, Hit], key: bytes, hit: Hit) -> bool:
    """Whether ``hit`` is still what the caches answer, for a role allowed to read them
    (``Gates.granted`` read directly)."""
    service = session.server.service
    user = session.ctx.user  # type: ignore[union-attr]
    engine = service.host.engine  # type: ignore[union-attr]
    grants = service.gates.grants
    now = time.monotonic()
    try:
        for cache, k, answer in hit.reads:
            verdict = grants.get((user, cache))
            if verdict is None or not verdict[0] or now > verdict[1]:
                return False
            if not engine.current(cache, k, answer):
                del memo[key]
                return False
    except Exception:  # a dropped cache, an engine failure: the general path decides
        memo.pop(key, None)
        return False
    return True


try_answer_python = try_answer  # the reference the parity tests hold the twin to
_fast = cython_ext.load("hitpath")
if _fast is not None:
    try_answer = _fast.try_answer
