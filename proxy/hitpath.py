"""The hit path: a held (cached) prepared statement run again, answered in one step.

Owns: recognising the batch a driver sends to run a prepared statement — ``Bind`` to the
unnamed portal, optionally ``Describe`` of that portal, ``Execute`` of all rows, ``Sync`` — for
a statement weir holds, and answering it from a memo of complete encoded answers without
decoding the messages or building portal objects. It also owns the memo itself
(:class:`HitMemos`): per (cache, statement text, declared parameter types, output settings),
the raw Bind parameter bytes mapped to the answer encoded the last time, together with the
engine answers it was encoded from.

Invariants:
- a memo entry is used only while every engine answer it was encoded from is still the
  reader's current answer for its key (object identity: a reader hands out a new answer
  object whenever a key's rows change, is evicted or is filled again), so a memoized answer is
  exactly what the general path would encode now;
- every gate of the general path (``Extended._execute`` and ``CacheService.read_rows_now``)
  holds before an entry is used: nothing of the batch upstream, no request outstanding, no
  transaction block, no read-your-writes barrier due, role defaults read, the role known to
  be allowed to read the cache, the replication stream up and within the staleness bound;
- anything else (another message shape, a named portal, a row limit, a memo miss) returns
  False having changed nothing, and the general path handles the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.wire import backend as be

if TYPE_CHECKING:
    from proxy.extended import HeldStatement
    from proxy.relay import Session

_T_BIND = ord("B")
_T_DESCRIBE = ord("D")
_T_EXECUTE = ord("E")
_T_SYNC = ord("S")
#: Execute of the unnamed portal with no row limit, and Describe of the unnamed portal.
_EXECUTE_ALL = b"\x00\x00\x00\x00\x00"
_DESCRIBE_PORTAL = b"P\x00"
_READY_IDLE = be.ReadyForQuery("I").encode()
_BIND_COMPLETE = be.BIND_COMPLETE.encode()

#: bounds: answers remembered per memo, memos remembered, size of one remembered answer
MEMO_ENTRIES = 8192
MEMOS = 1024
MAX_ANSWER_BYTES = 16384


@dataclass(frozen=True, slots=True)
class Hit:
    """One remembered answer: the engine answers it came from and its encoding."""

    reads: tuple[tuple[str, tuple[Any, ...], object], ...]  # (cache, key, answer object)
    row_description: bytes  # for a Describe of the portal
    body: bytes  # DataRows + CommandComplete
    last: tuple[str, str]  # EXPLAIN LAST STATEMENT after serving it


class HitMemos:
    """The memos of every (cache, statement, output settings) in use, bounded."""

    def __init__(self) -> None:
        self._memos: dict[tuple[Any, ...], dict[bytes, Hit]] = {}
        self._settings: dict[Any, int] = {}
        self.served = 0  # answers given from a memo (SHOW WEIR STATUS)

    def settings_id(self, settings: Any) -> int:
        """A small number standing for an output-settings value (interned)."""
        sid = self._settings.get(settings)
        if sid is None:
            sid = self._settings[settings] = len(self._settings)
        return sid

    def memo(self, held: HeldStatement, sid: int) -> dict[bytes, Hit]:
        """The memo of a held statement under the output settings ``sid``."""
        entry = held.route.cache
        key = (entry.name, id(entry), held.parse.query, held.parse.param_types, sid)
        memo = self._memos.get(key)
        if memo is None:
            if len(self._memos) >= MEMOS:
                del self._memos[next(iter(self._memos))]
            memo = self._memos[key] = {}
        return memo

    def remember(self, memo: dict[bytes, Hit], bind_rest: bytes, hit: Hit) -> None:
        if len(hit.body) > MAX_ANSWER_BYTES:
            return
        if len(memo) >= MEMO_ENTRIES:
            del memo[next(iter(memo))]
        memo[bind_rest] = hit

    def clear(self) -> None:
        self._memos.clear()


def bind_rest(raw_bind: bytes) -> bytes | None:
    """The part of a whole Bind message after the statement name (parameter formats,
    values, result formats), or None unless it binds the unnamed portal."""
    if len(raw_bind) < 7 or raw_bind[5] != 0:
        return None
    end = raw_bind.find(b"\x00", 6)
    return None if end < 0 else raw_bind[end + 1 :]


def try_answer(session: Session, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
    """Answer ``raw`` (whole messages, framed in ``index``) from the memo and return True,
    or return False having changed nothing."""
    count = len(index)
    if count == 3:
        (bt, bs, be_), (et, es, ee), (st, ss, se) = index
        describe = False
    elif count == 4:
        (bt, bs, be_), (dt, ds, de), (et, es, ee), (st, ss, se) = index
        if dt != _T_DESCRIBE or raw[ds:de] != _DESCRIBE_PORTAL:
            return False
        describe = True
    else:
        return False
    if bt != _T_BIND or et != _T_EXECUTE or st != _T_SYNC or ss != se \
            or raw[es:ee] != _EXECUTE_ALL or raw[bs] != 0:
        return False
    name_end = raw.find(b"\x00", bs + 1, be_)
    if name_end < 0:
        return False
    ext = session.extended
    held = ext.held.get(raw[bs + 1 : name_end].decode("utf-8", "replace"))
    if held is None or held.route.cache is None:
        return False
    hit = _lookup(session, held, raw[name_end + 1 : be_])
    if hit is None:
        return False
    ext.portals.pop("", None)  # the unnamed portal is replaced, then ends with the Sync
    session.server.service.hits.served += 1
    assert session.ctx is not None
    session.ctx.last = hit.last
    head = _BIND_COMPLETE + hit.row_description if describe else _BIND_COMPLETE
    session.client.write(head + hit.body + _READY_IDLE)
    return True


def _lookup(session: Session, held: HeldStatement, rest: bytes) -> Hit | None:
    """The memo entry for this Bind if it may be served now (see the module docstring)."""
    ext = session.extended
    state = session.state
    ctx = session.ctx
    if ext.batch_upstream or ext.batch_local or ext.batch_failed or not state.idle \
            or state.transaction_status != "I" or ctx is None or not ctx.defaults_applied:
        return None
    service = session.server.service
    if ctx.wrote and service.settings.read_your_writes == "on":
        return None
    host = service.host
    if host is None or not host.connected \
            or host.staleness() > service.settings.staleness_bound:
        return None
    _, sid = service.output_settings_id(state, ctx)
    if held.memo_sid != sid or held.memo is None:
        held.memo = service.hits.memo(held, sid)
        held.memo_sid = sid
    hit = held.memo.get(rest)
    if hit is None or service.granted(ctx.user, held.route.cache.name) is not True:
        return None
    engine = host.engine
    try:
        for cache, key, answer in hit.reads:
            if engine.lookup(cache, key) is not answer:
                del held.memo[rest]
                return None
    except Exception:  # a dropped cache, an engine failure: the general path decides
        held.memo.pop(rest, None)
        return None
    return hit
