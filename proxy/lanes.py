"""Lanes: quiet sessions are served by threads outside Python — their memoized cached reads
answered (hit sessions), their requests and answers relayed (pass sessions).

Owns: the lane threads (``cython_ext.lanes``: epoll loops that run without the GIL), which
sessions are handed to them and when they are taken back, and what the lanes may answer or
relay.

A session is handed to a lane right after the hit path (``proxy.hitpath``) answered a
prepared statement's Bind from its memo, when nothing else is going on in it: READY, every
gate of the hit path open, nothing waiting in its framer, nothing buffered for the client, not
paused, not TLS. Reading from its client socket then pauses (``pause_client("hit lane")``)
and the lane reads it instead. The lane answers a run of ``Bind`` [``Describe``] ``Execute``
``Sync`` of a statement the session holds, for a Bind tail whose memoized reply the hit path
stamped into the lane (:meth:`HitLanes.offer`: each answer the hit path gives is stamped),
and hands the session back at anything else, with the bytes it did not answer; the session
then goes on exactly as if its transport had delivered those bytes. After a miss went
upstream, the session is handed back as soon as it is covered (``proxy.aftermiss``,
:meth:`HitLanes.enter`), not at its next memoized answer on the event loop.

A session that holds nothing locally is handed to a lane as a *pass session* right after the
relay core relayed an answer ending idle (:meth:`HitLanes.offer_pass`), when it is quiet:
READY, idle (nothing outstanding upstream, nothing swallowed, no transaction block, nothing
held, no batch open), nothing buffered either way, neither socket TLS, its memos current, not
in auto mode (which counts every run as it comes). Reading pauses on both sockets and the
lane relays whole cycles: client messages up to a Sync or simple Query when each is one the
relay core forwards without routing it again (Execute, Sync, Describe, Flush before a Sync,
the Binds and Parses in the session's memos, plain simple Queries), upstream answers up to
an idle ReadyForQuery when none needs a look (see ``cython_ext.lanes``). At anything else it
hands the session back with what it did not relay; the session then observes what the lane
relayed (each Bind and Parse once, in the order of their last use, every run counted), what
the lane sent upstream whose answer is still to come, writes what the lane could not send,
and handles the rest as if just read.

Invariants:
- a lane answers only what the hit path would answer with the same bytes now: every stamp is
  made right after the hit path validated that entry against the engine (the engine answer
  it was encoded from is the reader's current one), and is registered with that answer
  (``Runtime.watched``); a reader reports each watched answer before it replaces or drops it
  (a write's delta, an eviction, a fill of the key again: ``Runtime.on_drop``, which drops
  that answer's stamps at once, :meth:`HitLanes.dropped`), so a write or an eviction of one
  key stops only that key's stamps; the epoch is bumped (no stamp is used again) before a
  change that may replace or drop any answer (a cache dropped, the engine reset:
  ``Engine.on_change``), when the remembered privileges are forgotten and when the memos are
  cleared; each statement's gate is the expiry of its role's remembered privilege
  for its cache, and the freshness deadline, set whenever ``fresh_as_of`` or the stream's
  state changes (``EngineHost.on_fresh``), is ``fresh_as_of + staleness_bound`` while the
  stream is up and already past while it is down;
- a session's gates that only the session itself changes (transaction state, pending
  requests, read-your-writes, output settings, the statements it holds) cannot change while
  a lane reads it: the lane hands back anything but the answered runs;
- only one of the lane and the event loop reads the client socket, and writes to it:
  anything of the session the loop handles while it is in a lane (upstream data, the
  upstream going away, closing) takes it back first (:meth:`HitLanes.reclaim`), which waits
  for the lane to finish with it; the lane has its own duplicate of the descriptor, so the
  socket outlives a close by the transport until the lane lets it go;
- what the lane did is applied when the session comes back (the lanes count their answers
  themselves, for ``SHOW WEIR STATUS``): the last statement is the cached one, the unnamed
  portal is gone (as after the hit path), unsent reply bytes are written before anything
  else.

- a pass session's lane forwards only what the relay core would forward without a look, and
  relays only answers the relay core would relay without a look (``Relay._forward_quiet`` and
  ``Relay._ready_run``), so that what the session observes on its return is what the relay
  core would have observed; a change of the routing state (caches created or dropped:
  ``CacheService.refresh_names`` calls :meth:`HitLanes.routing`) makes every pass session
  hand back before it forwards anything more; SHOW PROXIED QUERIES first takes every pass
  session back (:meth:`HitLanes.settle`), so its counts include what lanes relayed.

The pure-Python implementation has no lanes (``WEIR_IMPL=python`` or no compiled module): the
event loop's hit path and relay, whose contracts the lanes keep, do everything.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import cython_ext
from pgwire.events import Phase
from pgwire.framing import Framer
from proxy import lane_misses, lane_switch, lane_writes
from proxy.extended import Extended
from proxy.forwarding import ForwardMemos
from proxy.hitpath import Hit, HitService, may_serve, session_settings_id
from proxy.hitpath import Session as HitSession
from proxy.lane_replay import resume
from proxy.lane_switch import NEVER, socket_fd
from proxy.metrics import LATENCY_BOUNDS
from proxy.routing import Routing
from proxy.rules import READ_ONLY_TAGS, WATCHED_WORDS, WRITE_WORDS

log = logging.getLogger("weir.lanes")


class LaneService(HitService, Protocol):
    """What the lanes read of the cache service (``proxy.service.CacheService``)."""

    @property
    def routing(self) -> Routing: ...


class Session(HitSession, Protocol):
    """What the lanes use of a session (``proxy.relay.Session``) besides the hit path's."""

    lane_fd: int | None
    upstream_lane_fd: int | None
    lane_miss_skip: int  # misses before it may go to a lane that forwards misses again
    lane_miss_run: int  # cycles its last lane that forwarded misses relayed
    client_received: Callable[[bytes], None]
    upstream_received: Callable[[bytes], None]

    @property
    def phase(self) -> Phase: ...

    @property
    def lane(self) -> int: ...

    @property
    def extended(self) -> Extended: ...

    @property
    def memos(self) -> ForwardMemos: ...

    @property
    def cframer(self) -> Framer: ...

    @property
    def uframer(self) -> Framer: ...

    @property
    def upstream(self) -> asyncio.Transport | None: ...

    @property
    def client(self) -> asyncio.Transport: ...

    def pause_client(self, why: str) -> None: ...

    def resume_client(self, why: str) -> None: ...

_T_BIND = ord("B")
_PAUSE = lane_switch.PAUSE
_PAUSE_PASS = "pass lane"
#: bytes of stamped replies past which the lanes forget them all
MAX_BYTES = 64 << 20
#: sessions go to a lane only once this many seconds passed since the last bump (bumps are
#: rare: writes and evictions drop only their keys' stamps; after one every stamp is stale,
#: and each read would cost a hand-back)
QUIET_EPOCH = 0.02
#: seconds a lane keeps polling its sessions after the last one it served before it sleeps:
#: a lane that does not sleep is not woken (no wake-up, no cross-CPU interrupt) when the next
#: request comes, which is most of the cost of an answer on small machines; the threads sleep
#: after this much quiet, so an idle weir costs nothing
SPIN = 200e-6
#: lane tables remembered before they are all forgotten (memos come and go)
MAX_TABLES = 4096


class HitLanes:
    """See the module docstring. ``start()`` in the event loop; ``stop()`` at the end."""

    def __init__(self, count: int, service: LaneService, cpus: tuple[int, ...] = ()) -> None:
        core = cython_ext.load("lanes")
        if core is None:
            raise RuntimeError("hit lanes need the compiled cython_ext.lanes")
        self.core = core.Lanes(count, SPIN, cpus)
        self.core.set_words(WATCHED_WORDS, READ_ONLY_TAGS)
        self.core.set_latency_bounds(LATENCY_BOUNDS)
        self._queries = core.QUERIES
        self._passing: set[int] = set()  # tokens of the pass sessions in lanes
        self.service = service
        self.count = count
        self._threads: list[threading.Thread] = []
        self._sessions: dict[int, Session] = {}
        self._next = 0
        #: the lane table of each memo in use: id(memo) -> (table, memo kept alive)
        self._tables: dict[int, tuple[int, dict[bytes, Hit]]] = {}
        self._lasts: dict[int, tuple[str, str]] = {}  # table -> EXPLAIN LAST STATEMENT
        self._caches: dict[int, str] = {}  # table -> the cache its answers come from
        self._served: dict[str, int] = {}  # answers of forgotten tables, by cache
        self._loop: asyncio.AbstractEventLoop | None = None
        self.entered = 0  # sessions handed to a lane (SHOW WEIR STATUS)
        self.passed = 0  # pass sessions handed to a lane (SHOW WEIR STATUS)
        self._stopped = False
        self._bumped = float("-inf")  # time.monotonic() of the last bump
        #: the stamps of each engine answer, (reader nid, key) -> {(table, Bind tail)}, and
        #: back: what is dropped when the engine replaces or drops that answer
        #: (``Runtime.watched``; :meth:`dropped`), and whose recency a lane answer records
        self._stamped: dict[tuple[int, Any], set[tuple[int, bytes]]] = {}
        self._items: dict[tuple[int, bytes], tuple[int, Any]] = {}
        self.bumps = 0  # epoch bumps (SHOW WEIR STATUS)
        self.taken = 0  # sessions the event loop took back (SHOW WEIR STATUS)
        self.refused = 0  # hand-overs refused within QUIET_EPOCH of a bump (the same)
        self.missing = 0  # pass sessions entered that forward misses (SHOW WEIR STATUS)
        self._forwarding: set[int] = set()  # tokens of those in lanes
        self._switching: set[int] = set()  # tokens of hit sessions that may switch (lane_switch)
        self._count_at: asyncio.TimerHandle | None = None  # the next :meth:`_count`
        self.writes = lane_writes.WriteHandbacks()  # hand-backs at a write (lane_left_write)
        self._pace = lane_misses.Pace()  # whether lanes forward misses now (its ``tell``)

    @staticmethod
    def available() -> bool:
        return cython_ext.load("lanes") is not None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.core.notify_fd, self._handed)
        for i in range(self.count):
            thread = threading.Thread(target=self.core.run, args=(i,), name=f"weir-lane-{i}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, replay: bool = False) -> None:
        """Take every session back and end the threads (with ``replay``, the sessions go on
        on the event loop: a drain); a second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        if self._count_at is not None:
            self._count_at.cancel()
            self._count_at = None
        for session in list(self._sessions.values()):
            self.reclaim(session, replay=replay)
        self.core.stop()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        if self._loop is not None:
            self._loop.remove_reader(self.core.notify_fd)

    # -- what the lanes may answer ----------------------------------------------------------

    def bump(self) -> None:
        """Nothing stamped before now is answered again (see the module docstring): a
        change that may replace or drop any answer (a cache dropped, the engine reset,
        privileges forgotten, the memos cleared)."""
        self.core.bump()
        self._bumped = time.monotonic()
        self.bumps += 1
        self._stamped.clear()
        self._items.clear()
        host = self.service.host
        if host is not None:
            host.engine.rt.watched.clear()

    def attach(self, engine: Any) -> None:
        """Be told of ``engine``'s answers replaced or dropped one by one, and record the
        recency of what the lanes answered before it evicts (``EngineHost`` calls this again
        for the engine of a reset)."""
        engine.rt.on_drop = self.dropped
        engine.before_evict = self.recency

    def dropped(self, nid: int, key: Any) -> None:
        """The engine is about to replace or drop its answer for ``key`` at reader
        ``nid``: no lane answers from a stamp of it any more (``Runtime.on_drop``)."""
        stamps = self._stamped.pop((nid, key), None)
        if stamps:
            self.core.drop(list(stamps))
            items = self._items
            for stamp in stamps:
                items.pop(stamp, None)

    def recency(self) -> None:
        """Move the keys the lanes answered since the last call to the recent end of the
        engine's LRU (as the hit path's ``Engine.current`` does for its answers)."""
        host = self.service.host
        if host is None:
            return
        rt, items = host.engine.rt, self._items
        lru = rt.lru
        for stamp in self.core.touched():
            item = items.get(stamp)
            if item is not None and item in lru:
                rt.touch_answer(item)  # (and what the answer was replayed from)

    def fresh(self) -> None:
        """The freshness deadline from the cache host's state."""
        host = self.service.host
        if host is None or not host.stream.up:
            self.core.set_fresh_until(float("-inf"))
        else:
            self.core.set_fresh_until(host.fresh_as_of + self.service.settings.staleness_bound)

    def clear(self) -> None:
        self.bump()
        self.core.clear()
        self._fold(self.core.served_by_table(True))
        self._caches.clear()
        self._tables.clear()
        self._lasts.clear()

    def _fold(self, by_table: dict[int, int]) -> dict[str, int]:
        """Add answers counted per table to ``_served`` (per cache); returns ``_served``."""
        served = self._served
        for table, n in by_table.items():
            cache = self._caches.get(table)
            if cache is not None:
                served[cache] = served.get(cache, 0) + n
        return served

    def served_by_cache(self) -> dict[str, int]:
        """Answers the lanes gave, by cache (for /metrics)."""
        return {**self._fold(self.core.served_by_table(True))}

    def upstream_latency(self) -> tuple[tuple[int, ...], float]:
        """Bucket counts (``metrics.LATENCY_BOUNDS``, then +Inf) and sum of seconds of the
        cycles pass sessions relayed, each from its Sync or Query to its ReadyForQuery."""
        counts, total = self.core.upstream_latency()
        return tuple(counts), float(total)

    def _table(self, memo: dict[bytes, Hit]) -> int:
        known = self._tables.get(id(memo))
        if known is not None and known[1] is memo:
            return known[0]
        if len(self._tables) >= MAX_TABLES:
            self.clear()
        self._next += 1
        self._tables[id(memo)] = (self._next, memo)
        return self._next

    # -- sessions ---------------------------------------------------------------------------

    def offer(self, session: Session, raw: bytes) -> None:
        """The hit path just answered ``raw`` (a held statement's Bind run) for ``session``:
        stamp that answer and hand the session to a lane if it is quiet."""
        if session.lane or raw[0] != _T_BIND or self._stopped:
            return
        fd = session.lane_fd
        if fd is None:
            fd = session.lane_fd = socket_fd(session.client)
        if fd < 0:
            return
        end = raw.find(b"\x00", 6)
        held = session.state.held.get(raw[6:end].decode("utf-8", "replace"))
        if held is None or held.memo is None:
            return
        memo = held.memo
        length = int.from_bytes(raw[1:5], "big")
        rest = raw[end + 1 : 1 + length]
        hit = memo.get(rest)
        if hit is not None and self.stamp(memo, rest, hit):
            self.enter(session, fd)

    def stamp(self, memo: dict[bytes, Hit], rest: bytes, hit: Hit) -> bool:
        """Stamp ``hit`` (remembered in ``memo`` for the Bind tail ``rest``) into the lanes,
        if it is what the hit path would answer now: its one engine answer is the reader's
        current one (:meth:`offer`, and ``proxy.portal_reads.memoize`` when the general path
        remembers an answer: the lanes then answer a key's second read already)."""
        host = self.service.host
        if host is None or len(hit.reads) != 1 or self._stopped:
            return False
        cache, key, answer = hit.reads[0]
        engine = host.engine
        cached = engine.graph.caches.get(cache)
        if cached is None or cached[0].answers.get(key) is not answer:
            return False  # (the cache is gone, or the answer changed since)
        item = (cached[0].nid, key)
        table = self._table(memo)
        self._lasts[table] = hit.last
        self._caches[table] = cache
        stamp = (table, rest)
        # the stamp is made and registered at once: the engine tells (``dropped``) before it
        # replaces or drops this answer, which the hit path just found current
        engine.rt.watched.add(item)
        self._stamped.setdefault(item, set()).add(stamp)
        self._items[stamp] = item
        self.core.put(table, rest, hit.replies[0], hit.replies[1])
        if self.core.stats()[2] > MAX_BYTES:
            self.clear()
            return False
        return True

    def enter(self, session: Session, fd: int) -> None:
        """Hand ``session`` (its client socket ``fd``) to a lane if it is quiet (:meth:`offer`;
        ``proxy.aftermiss``: at once when a miss's answer came and the session is covered)."""
        if session.lane or self._stopped or not self._quiet(session):
            return
        if time.monotonic() - self._bumped < QUIET_EPOCH:
            self.refused += 1
            return
        stmts = self._statements(session)
        if not stmts:
            return
        switch = lane_switch.switch_args(self, session, stmts)
        self._next += 1
        token = self._next
        session.pause_client(_PAUSE)
        upstream = session.upstream if switch is not None else None
        if upstream is not None:
            upstream.pause_reading()
        try:
            self.core.enter(token, fd, stmts, switch)
        except OSError as exc:
            log.warning("could not hand a session to a lane: %s", exc)
            if upstream is not None:
                upstream.resume_reading()
            session.resume_client(_PAUSE)
            return
        session.state.lane = token
        self._sessions[token] = session
        self.entered += 1
        if switch is not None:
            self._switching.add(token)
            self._forwarding.add(token)
            self._count_soon()

    def _quiet(self, session: Session) -> bool:
        core = session.state
        return (core.phase is Phase.READY and not core.paused and not core.waiting
                and not core.local_busy and not session.cframer.buffered
                and session.client.get_write_buffer_size() == 0 and may_serve(session))

    def _statements(self, session: Session) -> list[tuple[bytes, int, float]]:
        """(name, table, gate) of each held statement the lane may answer."""
        service = self.service
        user = session.ctx.user  # type: ignore[union-attr]
        sid = session_settings_id(session)
        grants = service.gates.grants
        out = []
        for name, held in session.state.held.items():
            entry = held.route.cache
            if entry is None:
                continue
            verdict = grants.get((user, entry.name))
            if verdict is None or not verdict[0]:
                continue
            memo = service.hits.statement_memo(held, sid)
            out.append((name.encode(), self._table(memo), verdict[1]))
        return out

    def reclaim(self, session: Session, replay: bool = True, handed: bool = False) -> None:
        """Take ``session`` back from its lane now (see the module docstring); with
        ``replay``, the bytes the lane did not answer are then handled as if just read (else
        they are dropped: the session is ending); ``handed``: the lane handed it back."""
        token = session.lane
        if not token:
            return
        if not handed and token not in self._passing:
            self.taken += 1
        session.state.lane = 0
        del self._sessions[token]
        result = self.core.leave(token)
        if token in self._switching:
            self._switching.discard(token)
            self._forwarding.discard(token)
            if result is not None and len(result) > 4:  # (it switched: a pass session)
                lane_switch.switched(self, session, token, result, replay)
                return
            upstream = session.upstream
            if upstream is not None and result is not None and replay \
                    and session.phase is not Phase.CLOSED:
                upstream.resume_reading()  # (before what the lane did not answer is handled)
        if result is None:
            return
        if token in self._passing:
            self._passing.discard(token)
            if token in self._forwarding:  # (before the ledger: as they were forwarded)
                self._forwarding.discard(token)
                lane_misses.returned(session, token, result, self._pace)
                lane_switch.ran(session, result)
            if session.ctx is not None and (result[0] or result[8] or result[9]):
                # what the lane relayed or sent moves seen(s) (proxy.seen); nothing: kept
                session.ctx.seen.pending = True
            resume(session, result, replay, _PAUSE_PASS)
            return
        served, table, unanswered, unsent = result
        if served:  # (counted by the lanes themselves: SHOW WEIR STATUS adds them up)
            self.served_hits(session, served, table)
        if unsent:
            session.client.write(unsent)
        if not replay or session.phase is Phase.CLOSED:
            return
        session.resume_client(_PAUSE)
        if unanswered:
            self.writes.note(session, unanswered)
            session.client_received(unanswered)

    def served_hits(self, session: Session, served: int, table: int) -> None:
        """What a hit session's lane answering ``served`` runs (the last one's lane table
        ``table``) leaves in the session."""
        session.lane_miss_run = 0  # (hits lately: not mostly misses, aftermiss)
        session.lane_recent = (session.lane_recent << min(served, 8)) & 0xFF
        session.state.held_portals.pop("", None)
        last = self._lasts.get(table)
        if last is not None and session.ctx is not None:
            session.ctx.last = last

    def _handed(self) -> None:
        for token in self.core.handed():
            session = self._sessions.get(token)
            if session is not None:
                self.reclaim(session, handed=True)

    def settle(self) -> None:
        """Take every pass session back, so that what their lanes relayed is counted (SHOW
        PROXIED QUERIES); they go back to a lane at their next quiet answer."""
        for token in [*self._passing, *self._switching]:
            session = self._sessions.get(token)
            if session is not None:
                self.reclaim(session)

    def routing(self) -> None:
        """The service's routing state (registry, cached relation names, functions that may
        write) changed: pass sessions hand back before they forward anything more."""
        routing = self.service.routing
        self.core.routing(tuple(name.encode() for name in routing.cached_names),
                          tuple(w.encode() for w in routing.hiding_now()),
                          tuple(w.encode() for w in WRITE_WORDS))

    # -- pass sessions ----------------------------------------------------------------------
    def offer_pass(self, session: Session) -> int:
        """``session`` relayed a quiet answer ending idle (the relay core calls this): to a
        lane if quiet; how many such answers to wait before offering again (after a miss: 0)."""
        if session.ctx is not None and session.ctx.seen.missed \
                and lane_misses.settled(session, self.after_miss):
            return 0  # (held statements: to their hit lane once covered; else a plain pass)
        return self._enter_pass(session, None)

    def after_miss(self, session: Session) -> None:
        """A miss's answer came, seen(s) settled (also ``proxy.missfast_position``): to a lane
        that also forwards the held statements' reads it has no stamped answer for."""
        if not session.lane and session.lane_miss_skip:  # (its last such lane answered no
            session.lane_miss_skip -= 1  # miss but one)
        elif not session.lane:
            held = lane_misses.forwardable(session, self.service, self._statements(session))
            if held:  # (the lanes forward only first reads while the event loop is behind)
                self._pace.tell(self.service, self.core)
                self._enter_pass(session, held)

    def _enter_pass(self, session: Session, held: list[tuple[bytes, int]] | None) -> int:
        """:meth:`offer_pass`: to a lane as a pass session if quiet (``held``: statements
        whose misses it forwards too, which it may hold); how many answers to wait."""
        if session.lane:
            return NEVER
        ready = lane_switch.pass_ready(self, session, held)
        if isinstance(ready, int):
            return ready
        fd, ufd, queries = ready
        upstream, memos = session.upstream, session.memos
        assert upstream is not None
        self._next += 1
        token = self._next
        session.pause_client(_PAUSE_PASS)
        upstream.pause_reading()
        try:
            self.core.enter_pass(token, fd, ufd, list(memos.binds), list(memos.parses),
                                 self._queries[queries], held)
        except OSError as exc:
            log.warning("could not hand a session to a lane: %s", exc)
            upstream.resume_reading()
            session.resume_client(_PAUSE_PASS)
            return NEVER
        session.state.lane = token
        self._sessions[token] = session
        self._passing.add(token)
        self.passed += 1
        if held:
            self.missing += 1
            self._forwarding.add(token)
            self._count_soon()
        return 0

    def _count_soon(self) -> None:
        """Read what lanes forwarded in :data:`lane_misses.COUNT_EVERY` (unless due)."""
        if self._count_at is None and self._loop is not None:
            self._count_at = self._loop.call_later(lane_misses.COUNT_EVERY, self._count)

    def _count(self) -> None:
        """Read the misses lanes forwarded (admission, fills), now and then (lane_misses)."""
        self._count_at = None
        lane_misses.count(self.core.take_missed(), self._sessions, self._pace)
        self._pace.tell(self.service, self.core)
        if self._forwarding and self._loop is not None and not self._stopped:
            self._count_at = self._loop.call_later(lane_misses.COUNT_EVERY, self._count)

    def stats(self) -> dict[str, Any]:
        answers, entries, size, sessions, relayed, moved = self.core.stats()
        (leaves, dropped), (misses, hits_forwarded) = self.core.leaves(), self.core.misses()
        return {"lanes": self.count, "lane_cpus": ",".join(map(str, self.core.cpus)) or "none",
                "lane_answers": answers, "lane_entries": entries, "lane_bytes": size,
                "lane_sessions": sessions, "lane_entered": self.entered,
                "lane_pass_entered": self.passed, "lane_relayed": relayed,
                "lane_miss_entered": self.missing, "lane_miss_closed": self._pace.closed,
                "lane_miss_firsts": self._pace.firsts,  # (see docs/admin-commands.md)
                "lane_misses": misses, "lane_hits_forwarded": hits_forwarded, "lane_moves": moved,
                "lane_switched": self.core.switched(),  # (hit sessions that switched at a miss)
                # why hit sessions left their lane: the first request it could not answer
                **{f"lane_left_{why}": n for why, n in leaves.items()},
                "lane_left_taken": self.taken,  # (taken back by the event loop)
                "lane_left_write": self.writes.count,  # (of lane_left_statement: lane_writes)
                "lane_stamps_dropped": dropped, "lane_bumps": self.bumps,
                "lane_refused_epoch": self.refused}
