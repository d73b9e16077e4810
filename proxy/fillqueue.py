"""Background fills: which missed keys are filled, when, and together with which (sans-I/O).

Owns: :class:`Admission` (a key is admitted to the cache on its first read while the keys
read once come back, its second read within a window, a later one while fills do not pay,
or on every read), :class:`FillQueue` (fills waiting
for an upstream transaction: bounded, taken in batches of fills whose tables are under the
per-table bound, tables whose fills failed held back with an exponential back-off) and
:class:`FillPolicy`, their settings.
``proxy.caching.EngineHost`` performs what these decide; nothing here does I/O or reads a
clock (times are passed in).

Why this is safe (DESIGN §12): a read whose key is missing is answered upstream at once, so
nothing here changes what a client sees — only how soon, and at what upstream cost, later
reads of the key become hits. A key that is not admitted, whose table is backing off, or that
finds the queue full simply keeps going upstream.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: admission policies (``--admission``; ``auto``: the first read while keys read once come
#: back, as a cold cache's do, else as ``second``)
ADMISSIONS = ("auto", "second", "always")


@dataclass(frozen=True, slots=True)
class FillPolicy:
    """How background fills run. ``admission``: ``auto`` (a key is filled on its first read
    while keys read once come back, else as ``second``), ``second`` (a key is filled on its
    second read within the doorkeeper's window) or ``always``; ``max_queued``: fills waiting for an
    upstream transaction (more misses are not filled); ``batch``: fills per upstream
    transaction; ``per_table``: upstream fill transactions at once that read one table;
    ``backoff``: first and longest pause, in seconds, after a fill of a table failed;
    ``linger``: seconds the first fill of an idle queue waits for others to join its
    batch while another batch is being read upstream (``proxy.fillrun``; on an idle
    upstream it starts at once; a miss is answered upstream, so no client waits for it)."""

    admission: str = "auto"
    max_queued: int = 4096
    batch: int = 64
    per_table: int = 2
    backoff: tuple[float, float] = (0.5, 30.0)
    doorkeeper: int = 1 << 16
    linger: float = 0.002


#: fills between two looks at what fills yield (:meth:`Admission.observe`)
YIELD_WINDOW = 256
#: seconds at least between two looks (the first window starts at the first miss): a fill's
#: hits come after it installs, so a window of fills that all started within a few ms would
#: see their misses and not yet their hits (a cold Zipf start: 256 fills in the first 60 ms,
#: 63 hits by then, 400 more in the next 60 ms, 24 hits per fill a second later)
YIELD_SECONDS = 0.25
#: of the keys refused on their first read (``keep`` 1) over a window, the share admitted on
#: their second from which ``auto`` admits on the first read (``keep`` 0): nearly every key
#: comes back (a cold cache over a skewed key space), so its first miss's fill saves the
#: second miss for the price of a fill
RETURNS = 0.5
#: at ``keep`` 0, one key in this many (by hash) is still refused on its first read, a
#: sample of the keys read once whose returns :data:`COLD_RETURNS` judges
SAMPLE = 16
#: sampled refusals (distinct keys, one in :data:`SAMPLE`) at ``keep`` 0 before their
#: returns are judged: about 3,200 distinct keys read, counted in keys rather than seconds
#: so that the verdict does not depend on how fast the machine reads
MIN_SAMPLES = 200
#: of the sampled keys, the share read again below which ``keep`` 0 goes to 1: the share
#: of the keys read so far that were read again grows with the reads, and by 3,200
#: distinct keys it is 0.38 for Zipf(1.1) over 10,000 keys (0.65 later), 0.22 over 100,000
#: (0.31 later) and 0.02 for uniform keys over 100,000 (simulated)
COLD_RETURNS = 0.3
#: hits per fill below which fills do not pay at ``keep`` 0 (a quarter of :data:`MIN_YIELD`:
#: at a cold start a fill's hits lag its start by 100 ms and more, 1,000 fills starting at
#: once, so a window then sees about one hit per two fills even over a skewed key space;
#: one-off reads see next to none)
ZERO_YIELD = 0.25
#: hits per fill below which fills do not pay: keys must then be read twice as often as
#: before (each look)
MIN_YIELD = 1.0
#: hits per fill from which fills pay well: keys are admitted one read sooner (each look,
#: down to the second read; between the two the rule stays as it is)
PAYS = 4.0
#: the most reads of a key admission refuses (the key is admitted on the next one)
MAX_KEEP = 7


class Admission:
    """A doorkeeper (TinyLFU's first stage): the hashes of keys read lately, with how many
    times (up to :attr:`keep`). A key read more than ``keep`` times is admitted (and
    forgotten: its fill is under way); the counts start over when they hold ``capacity``
    keys, so "lately" is the last ``capacity`` distinct keys that were refused.

    ``keep`` (reads refused before a key is admitted) follows what fills yield (fed back
    by :meth:`observe`, every :data:`YIELD_WINDOW` fills): 1 (the second read is admitted)
    while they pay; doubled each time the last window's fills were followed by fewer than
    :data:`MIN_YIELD` hits each (a uniform key space larger than what is read, a crawler:
    each fill costs the event loop and the upstream a transaction, and a key read twice at
    random is rarely read again), up to :data:`MAX_KEEP`; one fewer each time they were
    followed by :data:`PAYS` or more. A skewed workload (hot keys read many times) yields
    many hits per fill and keeps the second read. ``strict``: ``keep`` above 1.

    ``auto`` adds ``keep`` 0 (a key is admitted on its first read) and starts there: a cold
    cache (the first seconds after ``CREATE CACHE``, a restart) over a skewed key space reads
    nearly every key again, so the fill of its first miss saves its second miss (Zipf over
    10,000: half the misses). At 0 ``keep`` goes to 1 (and on as ``second``) when a window's
    fills were followed by fewer than :data:`ZERO_YIELD` hits each (one-off reads), or when,
    once :data:`MIN_SAMPLES` of a sample of keys (one in :data:`SAMPLE` by hash, still
    refused on their first read) were read, fewer than :data:`COLD_RETURNS` of them were read
    again (a long tail: Zipf over 100,000 keys, where a first read's fill saves a second
    miss for only a fifth to a third of the keys); from 1 it comes back to 0 when fills pay
    well and at least :data:`RETURNS` of the keys refused on their first read over the
    window came back (:attr:`returned` against the refusals)."""

    def __init__(self, policy: str = "second", capacity: int = 1 << 16) -> None:
        if policy not in ADMISSIONS:
            raise ValueError(f"admission must be one of {ADMISSIONS}, not {policy!r}")
        self.always = policy == "always"
        self.floor = 0 if policy == "auto" else 1  # (the fewest reads refused)
        self.capacity = capacity
        self._reads: dict[int, int] = {}
        self.refused = 0  # misses not filled because the key was not read often enough
        self.returned = 0  # keys admitted on a later read (one refused before)
        self.keep = self.floor
        self.raised = 0  # times ``keep`` went up (``SHOW WEIR STATUS`` fills_admission_raised)
        self._mark = (0, 0)  # (hits, fills) at the last look
        self._since = (-1.0, 0, 0)  # (time, refused, returned) at the last look
        self._stint = self._since  # (the same) when ``keep`` last went to 0

    @property
    def strict(self) -> bool:
        """Whether a key needs more than two reads now (fills do not pay)."""
        return self.keep > 1

    @property
    def reads(self) -> int:
        """The read of a key that is admitted now (``SHOW WEIR STATUS``
        fills_admitted_on_read): 2, the second, while fills pay; 0 with ``always``."""
        return 0 if self.always else self.keep + 1

    def observe(self, hits: Callable[[], int], fills: int, now: float) -> None:
        """The host's running count of fills started, and of cache hits (asked for only
        when due: the lanes' count is a call), at ``now`` (seconds, monotonic): every
        :data:`YIELD_WINDOW` fills and :data:`YIELD_SECONDS`, what they yielded moves
        ``keep`` (class docstring)."""
        hits0, fills0 = self._mark
        if self._since[0] < 0:  # (the first miss: the first window starts)
            self._since = self._stint = (now, self.refused, self.returned)
        if self.always or fills - fills0 < YIELD_WINDOW or now - self._since[0] < YIELD_SECONDS:
            return
        _, refused0, returned0 = self._since
        count = hits()
        paid = count - hits0
        if self.keep == 0:
            _, sampled, came = self._stint
            sampled, came = self.refused - sampled, self.returned - came
            if paid < ZERO_YIELD * (fills - fills0) or (
                    sampled >= MIN_SAMPLES and came < COLD_RETURNS * sampled):
                self.keep = 1
                self.raised += 1
        elif paid < MIN_YIELD * (fills - fills0):
            if self.keep < MAX_KEEP:  # (doubled: one-off traffic is told in a few
                self.keep = min(MAX_KEEP, 2 * self.keep)  # windows, its fills cost most)
                self.raised += 1
        elif paid >= PAYS * (fills - fills0) and self.keep > self.floor and (
                self.keep > 1 or self.returned - returned0 >= RETURNS * (
                    self.refused - refused0)):  # (to 0: most keys read once came back)
            self.keep -= 1
            if not self.keep:
                self._stint = (now, self.refused, self.returned)
        self._mark = (count, fills)
        self._since = (now, self.refused, self.returned)

    def admit(self, key: Hashable, seen_before: int = 0) -> bool:
        """Whether ``key``'s fill starts now; ``seen_before``: how many earlier reads another
        doorkeeper saw and counted (the lanes', ``proxy.lane_misses.Doorkeeper``, which keeps
        the first ``keep`` reads of a key it was told and passes on the later ones)."""
        if self.always:
            return True
        h = hash(key)
        keep = self.keep or int(h % SAMPLE == 0)  # (keep 0: the sample, as at 1)
        reads = max(self._reads.get(h, 0), seen_before) + 1  # (this one included)
        if reads > keep:
            self.returned += reads > 1
            self._reads.pop(h, None)
            return True
        if h not in self._reads and len(self._reads) >= self.capacity:
            self._reads.clear()
        self._reads[h] = reads
        self.refused += 1
        return False

    def vouch(self, key: Hashable) -> None:
        """``key`` was read once (another doorkeeper saw it: the lanes',
        ``proxy.lane_misses``): its next :meth:`admit` takes it as read once at least."""
        h = hash(key)
        if not self.always and h not in self._reads:
            if len(self._reads) >= self.capacity:
                self._reads.clear()
            self._reads[h] = 1


@dataclass(frozen=True, slots=True)
class Queued:
    """A fill waiting for an upstream transaction: the engine's ``RunFill``, the tables it
    reads, and since when it waits (``time.monotonic()``)."""

    run: Any
    tables: frozenset[int]
    at: float


@dataclass(slots=True)
class _Backoff:
    until: float
    delay: float


@dataclass(slots=True)
class FillQueue:
    policy: FillPolicy = field(default_factory=FillPolicy)
    waiting: deque[Queued] = field(default_factory=deque)
    busy: Counter[int] = field(default_factory=Counter)  # fill transactions per table
    backoff: dict[int, _Backoff] = field(default_factory=dict)
    #: the table sets of the fills waiting, how many each (:meth:`take` looks at these
    #: before it scans the queue)
    sets: Counter[frozenset[int]] = field(default_factory=Counter)
    dropped: int = 0  # misses not filled: the queue was full
    held_back: int = 0  # misses not filled: a table was backing off

    @property
    def full(self) -> bool:
        return len(self.waiting) >= self.policy.max_queued

    def backing_off(self, tables: Iterable[int], now: float) -> bool:
        """Whether a fill reading ``tables`` should not start now (one of them failed
        recently)."""
        for oid in tables:
            b = self.backoff.get(oid)
            if b is not None and now < b.until:
                return True
        return False

    def push(self, run: Any, tables: frozenset[int], now: float) -> None:
        self.waiting.append(Queued(run, tables, now))
        self.sets[tables] += 1

    def take(self, now: float) -> tuple[list[Queued], list[Queued]]:
        """The next batch (the oldest fill whose tables are all under the per-table bound,
        and up to ``batch`` fills in all that read no other table; its tables count as busy
        from here until :meth:`finished`) and the fills given up
        because a table they read is backing off (the host abandons them). Scans the queue
        only when a fill can start or be given up (known from the waiting table sets), and
        no further than a full batch when none is backing off: a queue of thousands of fills
        on tables whose fills are all running is not walked at every free slot."""
        batch: list[Queued] = []
        gone: list[Queued] = []
        rest: deque[Queued] = deque()
        tables: set[int] = set()
        limit = self.policy.per_table
        backing = any(self.backing_off(t, now) for t in self.sets)
        if not backing and not any(all(self.busy[o] < limit for o in t) for t in self.sets):
            return batch, gone  # (every waiting fill reads a table at its bound)
        while self.waiting:
            if not backing and len(batch) >= self.policy.batch:
                rest.extend(self.waiting)  # (the rest can neither join nor be given up)
                self.waiting.clear()
                break
            q = self.waiting.popleft()
            if self.backing_off(q.tables, now):
                gone.append(q)
            elif not batch and all(self.busy[t] < limit for t in q.tables):
                batch.append(q)
                tables |= q.tables
            elif batch and len(batch) < self.policy.batch and q.tables <= tables:
                batch.append(q)  # (a batch reads one set of tables: a locked table stalls
                # only the fills that read it)
            else:
                rest.append(q)
        self.waiting = rest
        for oid in tables:
            self.busy[oid] += 1
        for q in (*batch, *gone):
            self.sets[q.tables] -= 1
            if self.sets[q.tables] <= 0:
                del self.sets[q.tables]
        return batch, gone

    def finished(self, batch: list[Queued], ok: bool, now: float) -> None:
        """A batch's transaction ended: its tables are free again; a failure starts (or
        doubles) their back-off, a success ends it."""
        first, longest = self.policy.backoff
        for oid in set().union(*(q.tables for q in batch)) if batch else ():
            self.busy[oid] -= 1
            if self.busy[oid] <= 0:
                del self.busy[oid]
            if ok:
                self.backoff.pop(oid, None)
            else:
                b = self.backoff.get(oid)
                delay = first if b is None else min(longest, b.delay * 2)
                self.backoff[oid] = _Backoff(now + delay, delay)
