"""The base node: the root of the graph for one upstream table.

Owns: the table's ``BaseStore`` (see ``engine.dataflow.state.base`` for the invariants) and
its entry points: ``apply`` (upstream changes -> delta + eviction rows), ``install`` (a
patched fill), ``pull`` (index lookups; a missing index key is what fills fetch) and
``evict_key`` (an index key ``(cols, key)``).

Invariant: every present index key is in the runtime's LRU (``install`` touches it, a lookup
that marks a primary-key index key present records it, only ``evict_key`` forgets it), so a
join's lookup (``ctx.lookup``) of a present key has nothing to record.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, TypeVar, cast

from engine.changes import RowChange
from engine.dataflow.node import Cols, Node, PullCtx, Runtime
from engine.dataflow.records import Delta, Row, key_of
from engine.dataflow.state import base as _store
from engine.dataflow.state.base import BaseStore
from engine.dataflow.state.intervals import Span, from_points, span_of
from engine.plan.ir import TableRef

T = TypeVar("T")


class BaseNode(Node):
    stateful = True
    consolidated = True  # ``apply_changes`` consolidates

    def __init__(self, nid: int, table: TableRef, runtime: Runtime) -> None:
        super().__init__(nid, (), len(table.columns))
        self.table = table
        self.store = BaseStore(table)
        self.rt = runtime

    @property
    def bytes(self) -> int:
        return self.store.bytes

    @bytes.setter
    def bytes(self, value: int) -> None:
        pass

    def apply(self, changes: Iterable[RowChange]) -> tuple[Delta, list[Row]]:
        return _store.apply_changes(self.store, changes)

    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        return [], []

    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        span = span_of(key)
        if span is not None:
            return self._pull_span(cols, key, span, ctx)
        if ctx.lookup:  # a present index key is in the LRU already: nothing to record
            rows = _store.present_rows(self.store, cols, key)
            if rows is not None:
                return rows
        if ctx.partial:
            return self.store.stored(cols, key)
        rows, backing = self.store.lookup(cols, key, mark=not ctx.probe)
        if ctx.probe and rows is not None:
            return rows
        return self._used(rows, backing, cols, key, ctx)

    def _pull_span(self, cols: Cols, key: Row, span: Span,
                   ctx: PullCtx) -> list[Row] | None:
        """The rows of an interval (range-partial state) at the equality values ``key[:-1]``
        of ``cols[:-1]``: missing unless its pieces cover it; the pieces backing it are read
        (recency)."""
        col, prefix = cols[-1], key[:-1]
        if ctx.partial:
            return [r for r in self.store.rows_list()
                    if span.holds(r[col]) and key_of(r, cols[:-1]) == prefix]
        rows, pieces = self.store.span_rows(cols, prefix, span)
        if rows is None and span.first is not None and ctx.cover is not None:
            rows, pieces = self._stretch(cols, prefix, span, ctx.cover)
        if rows is None:
            ctx.missing.add((self.nid, cols, (*prefix, span.on(col))))
            return None
        for piece in pieces:
            item = (cols, (*prefix, piece))
            ctx.used.add((self.nid, item))
            self.rt.touch(self.nid, item)
        return rows

    def _stretch(self, cols: Cols, prefix: Row, span: Span, cover: list[tuple[Any, Any]]
                 ) -> tuple[list[Row] | None, list[Span]]:
        """A span with ``first`` rows that the pieces do not cover whole: the stretch they
        cover contiguous from its near end (the start; the end ``from_top``) when it holds
        at least ``first`` rows (its end is appended to ``cover``), else None (PullCtx)."""
        slot = self.store.spans.get(cols, {}).get(prefix)
        if slot is None:
            return None, []
        near = (span.end, span.hi) if span.from_top else (span.start, span.lo)
        far = slot.reach_down(span.end) if span.from_top else slot.reach(span.start)
        if far is None:
            return None, []
        part = from_points(span, far, near) if span.from_top else from_points(span, near, far)
        rows, pieces = self.store.span_rows(cols, prefix, part)
        if rows is None or len(rows) < (span.first or 0):
            return None, []
        cover.append(far)
        return rows, pieces

    def count(self, cols: Cols, key: Row, ctx: PullCtx) -> int | None:
        if span_of(key) is not None:
            return super().count(cols, key, ctx)
        if ctx.partial:
            return len(self.store.stored(cols, key))
        n, backing = self.store.count(cols, key, mark=not ctx.probe)
        if ctx.probe and n is not None:
            return n
        return self._used(n, backing, cols, key, ctx)

    def _used(self, found: T | None, backing: tuple[Cols, Row] | None, cols: Cols, key: Row,
              ctx: PullCtx) -> T | None:
        """Recency and ``ctx`` bookkeeping of a lookup's answer (None: missing)."""
        if found is None:
            ctx.missing.add((self.nid, cols, key))
            return None
        if backing is not None and (not ctx.lookup or (self.nid, backing) not in self.rt.lru):
            ctx.used.add((self.nid, backing))
            self.rt.touch(self.nid, backing)
        return found

    def base_columns(self) -> tuple[Node, list[int | None]] | None:
        return self, list(range(self.width))

    def install(self, cols: Cols, key: Row, rows: Iterable[Row]) -> None:
        span = span_of(key)
        if span is not None:  # each piece it adds is a present key of its own
            prefix = key[:-1]
            for piece in self.store.install_span(cols, prefix, span, list(rows)):
                self.rt.touch(self.nid, (cols, (*prefix, piece)))
            return
        self.store.install(cols, key, list(rows))
        self.rt.touch(self.nid, (cols, key))

    def evict_key(self, key: Hashable) -> list[Row]:
        cols, values = cast(tuple[Cols, Row], key)
        self.rt.forget(self.nid, key)
        span = span_of(values)
        if span is not None:
            return self.store.evict_span(cols, values[:-1], span)
        return self.store.evict(cols, values)

    def clear(self) -> None:
        for cols, idx in self.store.indexes.items():
            for k in idx.present:
                self.rt.forget(self.nid, (cols, k))
        for cols, slots in self.store.spans.items():
            for prefix, pieces in slots.items():
                for piece in pieces:
                    self.rt.forget(self.nid, (cols, (*prefix, piece)))
        self.store = BaseStore(self.table)
