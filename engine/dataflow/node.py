"""The node protocol every dataflow operator implements, and the shared runtime.

Owns: ``Node`` (inputs, children, reference count, and the four operations below),
``PullCtx`` (what a pull discovered: missing base keys, present keys it read) and
``Runtime`` (least-recently-used bookkeeping of present keys shared by all nodes).

Operations:
- ``process(deltas)``: one batch of signed deltas per input -> (output delta, eviction rows).
  Runs in topological order, so every input (and every state a lookup reads) is already
  updated for the batch.
- ``evict_rows(rows)``: eviction rows per input -> eviction rows for the children; a stateful
  node makes the keys they name missing.
- ``pull(cols, key, ctx)``: every output row with ``cols = key``, or None when some base key
  it needs is missing (recorded in ``ctx.missing``). With ``ctx.partial`` it never misses and
  returns just the rows it knows (used to name eviction targets). A stateful node whose key
  the pull determines installs the key it computed ("replay into the hole").
- ``count(cols, key, ctx)``: the number of rows ``pull`` would return (O(1) where the state
  keeps it: base stores with a primary key, projections of them, keyed states).
- stateful nodes also ``evict_key(key)`` -> eviction rows, and account ``bytes``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from engine.dataflow.frequency import Frequency
from engine.dataflow.records import Delta, Row

Cols = tuple[int, ...]
BaseKey = tuple[int, Cols, Row]  # (base node id, columns, key values)


class PullCtx:
    """``partial``: never miss, return the rows known. ``probe``: miss rather than replay
    into a stateful node (used while propagating evictions). ``lookup``: a join's lookup
    while processing deltas (not a read: recency and ``used`` are not recorded). ``cover``:
    set (to a list) by a range-partial reader whose equality key is on another table of the
    join than its range (``SpanReaderNode.cross``): a base's pull of a span with ``first``
    rows answers the stretch its pieces cover from the span's near end when that holds
    ``first`` rows, and appends where that stretch ends (the reader keeps the nearest)."""

    __slots__ = ("cover", "lookup", "missing", "partial", "prefetch", "probe", "used")

    def __init__(self, partial: bool = False, probe: bool = False, lookup: bool = False) -> None:
        self.missing: set[BaseKey] = set()
        self.prefetch: list[tuple[int, Any]] = []  # (base node id, fills.FillRequest)
        self.used: set[tuple[int, Hashable]] = set()
        self.partial = partial
        self.probe = probe
        self.lookup = lookup
        self.cover: list[tuple[Any, Any]] | None = None


class Runtime:
    """Recency of present keys across all stateful nodes (front = least recently used).

    A reader's present key records the keys of the states below it that its answer was
    replayed from (``deps``, set by ``ReaderNode.fill``); a read of the answer
    (:meth:`touch_answer`) makes them recent too. Without that, a hit would refresh only the
    reader's key, and the base key it was built from would age from its install and be
    evicted first, taking the hot answer with it (eviction in install order, not LRU)."""

    def __init__(self) -> None:
        self.lru: OrderedDict[tuple[int, Hashable], None] = OrderedDict()
        #: (reader nid, key) -> the (nid, key) items of the states its answer was replayed
        #: from (``ReaderNode.fill``; dropped with the reader's key, counted in its bytes)
        self.deps: dict[tuple[int, Hashable], tuple[tuple[int, Hashable], ...]] = {}
        #: recent reads of answers, (reader nid, key) hashed: hits (:meth:`touch_answer`,
        #: ``Engine.current``) and misses (``Engine.lookup``); only under a memory budget,
        #: for ``Engine.worth_filling``
        self.freq: Frequency | None = None
        self.pinned: dict[tuple[int, Hashable], int] = {}
        #: (reader nid, key) of the answers someone outside keeps a copy of (the proxy's hit
        #: lanes), and who is told, before such an answer is replaced or dropped
        #: (``ReaderNode``), that its copy is no longer the answer
        self.watched: set[tuple[int, Hashable]] = set()
        self.on_drop: Callable[[int, Hashable], None] | None = None

    def dropping(self, nid: int, key: Hashable) -> None:
        """The answer of ``key`` at reader ``nid`` is about to be replaced or dropped."""
        item = (nid, key)
        if item in self.watched:
            self.watched.discard(item)
            if self.on_drop is not None:
                self.on_drop(nid, key)

    def touch(self, nid: int, key: Hashable) -> None:
        item = (nid, key)
        self.lru[item] = None
        self.lru.move_to_end(item)

    def touch_answer(self, item: tuple[int, Hashable]) -> None:
        """A read of the answer ``item`` (reader nid, key): it and the keys it was replayed
        from become the most recently used (those already evicted are skipped)."""
        lru = self.lru
        if self.freq is not None:
            self.freq.add(hash(item))
        for dep in self.deps.get(item, ()):
            if dep in lru:
                lru.move_to_end(dep)
        lru[item] = None
        lru.move_to_end(item)

    def forget(self, nid: int, key: Hashable) -> None:
        self.lru.pop((nid, key), None)


class Node:
    """Base class: a stateless node with no inputs (operators override what they need)."""

    stateful = False
    #: ``process`` returns consolidated deltas by construction (the graph skips consolidating)
    consolidated = False

    def __init__(self, nid: int, inputs: Sequence[Node], width: int) -> None:
        self.nid = nid
        self.inputs = list(inputs)
        self.width = width
        self.children: list[tuple[Node, int]] = []
        self.refs = 0
        self.bytes = 0

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        raise NotImplementedError

    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        return [r for per_input in rows for r in per_input]

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        raise NotImplementedError

    def count(self, cols: Cols, key: Row, ctx: PullCtx) -> int | None:
        """``len(self.pull(cols, key, ctx))`` (None when missing), with the same effects on
        ``ctx`` and recency; nodes whose state knows the count override it so that a hot key
        is not enumerated just to be counted."""
        rows = self.pull(cols, key, ctx)
        return None if rows is None else len(rows)

    def evict_key(self, key: Hashable) -> list[Row]:
        return []

    def base_columns(self) -> tuple[Node, list[int | None]] | None:
        """For a chain of filters and projections over a base node: that base node and, per
        output column, the base column it is (None if computed); else None."""
        return None

    def span_columns(self, cols: tuple[int, ...]) -> tuple[Node, list[int | None]] | None:
        """For a range-partial reader over this node: like ``base_columns``, also through
        joins (the side that holds ``cols``; the other side's columns None), when every
        column of ``cols`` is a column of one base node; else None."""
        traced = self.base_columns()
        if traced is None or any(traced[1][c] is None for c in cols):
            return None
        return traced

    def prefetch_columns(self) -> tuple[Node, list[int | None]] | None:
        """Like ``base_columns``, for a join's semi-join prefetch into this side: the base
        node and, per output column c, the base column b such that a pull binding c to v
        reads exactly the base rows with b = v (so fetching those rows ahead lets the
        replay's pull succeed); None per column where no such b exists."""
        return self.base_columns()

    def clear(self) -> None:
        """Drop all state (used when the node is removed)."""
