"""The partial materialization of one virtual base table.

Owns: ``BaseStore`` - the rows of an upstream table that present downstream keys derive from,
by row identity (primary key, or the whole row for tables without one), with *partial
indexes*: per column set, the index keys that are *present* (every upstream row with those
column values is stored) and, for every stored row, its position in each index; and the
kernels with Cython twins: ``apply_changes`` (the apply loop of a batch) and
``present_rows`` (a present index key's rows: a join's lookup).

Invariants (the engine's correctness rests on them):
- S1. A stored row equals the upstream row as of the applied position (fills install patched
  rows; every change to a stored row's identity updates it).
- S2. A row is stored iff some present index key covers it (``() `` = the whole table).
- S3. Every base row that contributes to a present key anywhere downstream is stored, and
  every present downstream key was replayed from present index keys that are still present.
  Hence evicting an index key sends downstream its *key row* (the key's columns, everything
  else UNKNOWN) and the rows it drops, and a change to a row that is not stored is sent as an
  eviction row rather than as a delta. A lookup binding the whole primary key of a stored
  row marks that primary-key index key present (the row is complete for it).
- A replica-identity-only old row (REPLICA IDENTITY DEFAULT) is completed from the stored
  row; an unchanged TOASTed column of an update is taken from the stored row, and when the
  row is not stored the new row is sent as an eviction row with that column ``UNKNOWN``.
- SQL equality: a key containing NULL matches no row, so it is always present and empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import cython_ext
from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange
from engine.dataflow.records import (
    UNKNOWN,
    Delta,
    Row,
    arrival,
    consolidate,
    has_unknown,
    key_of,
    row_size,
)
from engine.dataflow.state.intervals import Pieces, Span
from engine.plan.ir import TableRef

Cols = tuple[int, ...]


class Index:
    """One partial index: present keys and the identities of stored rows per key."""

    __slots__ = ("by_key", "cols", "present")

    def __init__(self, cols: Cols) -> None:
        self.cols = cols
        self.present: set[Row] = set()
        self.by_key: dict[Row, set[Row]] = {}

    def add(self, ident: Row, row: Row) -> None:
        key = key_of(row, self.cols)
        idents = self.by_key.get(key)
        if idents is None:
            self.by_key[key] = {ident}
        else:
            idents.add(ident)

    def remove(self, ident: Row, row: Row) -> None:
        key = key_of(row, self.cols)
        idents = self.by_key.get(key)
        if idents is not None:
            idents.discard(ident)
            if not idents:
                del self.by_key[key]


class BaseStore:
    """Stored rows and partial indexes of one table (see the module invariants)."""

    def __init__(self, table: TableRef) -> None:
        self.table = table
        self.pk = table.primary_key
        self.rows: dict[Row, list[Any]] = {}  # ident -> [row, multiplicity, size]
        self.indexes: dict[Cols, Index] = {}
        #: filled intervals (range-partial state) per columns ``(equality columns..., span
        #: column)`` and per value of the equality columns (``()`` for none): every row
        #: whose equality values match and whose span value lies in a piece is stored (S2
        #: with pieces counting as coverage)
        self.spans: dict[Cols, dict[Row, Pieces]] = {}
        self.bytes = 0
        #: the Cython twin's view of ``rows`` and ``indexes`` (rebuilt when an index is added)
        self.twin: object = None

    # ------------------------------------------------------------------ identity, coverage
    def ident(self, row: Row) -> Row:
        return key_of(row, self.pk) if self.pk else row

    def index(self, cols: Cols) -> Index:
        idx = self.indexes.get(cols)
        if idx is None:
            idx = self.indexes[cols] = Index(cols)
            for ident, entry in self.rows.items():
                idx.add(ident, entry[0])
        return idx

    def covered(self, row: Row) -> bool:
        for cols, idx in self.indexes.items():
            if idx.present and key_of(row, cols) in idx.present:
                return True
        for cols, slots in self.spans.items():
            pieces = slots.get(key_of(row, cols[:-1]))
            value = row[cols[-1]]
            if pieces is not None and value is not UNKNOWN and pieces.contains(value):
                return True
        return False

    # ------------------------------------------------------------------ intervals
    def span_rows(self, cols: Cols, prefix: Row,
                  span: Span) -> tuple[list[Row] | None, list[Span]]:
        """The rows whose ``cols[:-1]`` equal ``prefix`` and whose ``cols[-1]`` lies in
        ``span`` when the pieces cover it (else None), and the pieces that back the
        answer."""
        if span.empty or span.start >= span.end:
            return [], []
        pieces = self.spans.get(cols, {}).get(prefix)
        reach = pieces.reach(span.start) if pieces is not None else None
        if pieces is None or reach is None or reach[0] < span.end:
            return None, []
        col, out = cols[-1], []
        for entry in self._candidates(cols, prefix):
            row = entry[0]
            if span.holds(row[col]):
                out.extend([row] * entry[1])
        return out, pieces.overlapping(span)

    def _candidates(self, cols: Cols, prefix: Row) -> list[list[Any]]:
        """The stored entries whose ``cols[:-1]`` equal ``prefix`` (all for no prefix; an
        equality prefix is found through an index on those columns, kept over every stored
        row)."""
        if not prefix:
            return list(self.rows.values())
        idents = self.index(cols[:-1]).by_key.get(prefix, ())
        return [self.rows[i] for i in idents]

    def install_span(self, cols: Cols, prefix: Row, span: Span,
                     rows: Iterable[Row]) -> list[Span]:
        """Mark ``span`` of ``cols`` at ``prefix`` filled with exactly ``rows`` (its rows as
        of the applied position, S1); the pieces added (its parts not filled already)."""
        slots = self.spans.setdefault(cols, {})
        pieces = slots.get(prefix)
        if pieces is None:
            pieces = slots[prefix] = Pieces(span.on(cols[-1]))
        for row in rows:  # (tables with a primary key only: a stored row is current)
            self._store(row)
        return pieces.add(span)

    def evict_span(self, cols: Cols, prefix: Row, span: Span) -> list[Row]:
        """Drop the piece ``span`` of ``cols`` at ``prefix``; the rows no longer stored, as
        eviction rows (a reader piece holding one of them is dropped; a reader piece whose
        rows all stay stored stays exact: every later change to its interval is a delta or
        an eviction row)."""
        slots = self.spans.get(cols)
        pieces = slots.get(prefix) if slots is not None else None
        if slots is None or pieces is None or not pieces.remove(span):
            return []
        if not pieces:
            del slots[prefix]
            if not slots:
                del self.spans[cols]
        dropped: list[Row] = []
        col = cols[-1]
        for entry in self._candidates(cols, prefix):
            row = entry[0]
            if span.holds(row[col]) and not self.covered(row):
                ident = self.ident(row)
                while self._unstore(ident) is not None:
                    dropped.append(row)
        return dropped

    def is_present(self, cols: Cols, key: Row) -> bool:
        idx = self.indexes.get(cols)
        return idx is not None and key in idx.present

    # ------------------------------------------------------------------ reads
    def lookup(self, cols: Cols, key: Row,
               mark: bool = True) -> tuple[list[Row] | None, tuple[Cols, Row] | None]:
        """All rows with ``cols = key`` (None when that is not known: missing), and the
        present index key that guarantees the answer (for recency; None for NULL keys).

        A lookup that binds the whole primary key of a stored row is complete (S1); unless
        ``mark`` is false (probes while evicting) it marks that primary-key index key present,
        so that the row stays covered (S3)."""
        found, backing = self._find(cols, key, mark)
        if isinstance(found, Index):
            return self._rows_of(found, key), backing
        return found, backing

    def count(self, cols: Cols, key: Row,
              mark: bool = True) -> tuple[int | None, tuple[Cols, Row] | None]:
        """``len`` of ``lookup``'s rows without listing them (O(1) with a primary key; else
        O(distinct rows of the key)), with the same effects."""
        found, backing = self._find(cols, key, mark)
        if not isinstance(found, Index):
            return (None if found is None else len(found)), backing
        idents = found.by_key.get(key, ())
        if self.pk:
            return len(idents), backing
        rows = self.rows
        return sum(rows[i][1] for i in idents), backing

    def _find(self, cols: Cols, key: Row,
              mark: bool) -> tuple[Index | list[Row] | None, tuple[Cols, Row] | None]:
        """Where the complete answer for ``cols = key`` is: an index holding it under ``key``,
        the rows themselves, or None (missing); and the backing present key."""
        if None in key:
            return [], None
        idx = self.indexes.get(cols)
        if idx is not None and key in idx.present:
            return idx, (cols, key)
        full = self.indexes.get(())
        if full is not None and () in full.present:
            return self.index(cols), ((), ())
        if self.pk and set(self.pk) <= set(cols):
            pk_key = tuple(key[cols.index(c)] for c in self.pk)
            entry = self.rows.get(pk_key)
            if entry is not None:
                if mark:
                    self.index(self.pk).present.add(pk_key)
                found: Row = entry[0]
                rows = [found] * entry[1] if key_of(found, cols) == key else []
                return rows, (self.pk, pk_key)
        return None, None

    def rows_list(self) -> list[Row]:
        """Every stored row, each as often as its multiplicity."""
        return [e[0] for e in self.rows.values() for _ in range(e[1])]

    def stored(self, cols: Cols, key: Row) -> list[Row]:
        """The stored rows with ``cols = key`` (complete or not)."""
        return self._rows_of(self.index(cols), key)

    def _rows_of(self, idx: Index, key: Row) -> list[Row]:
        idents = idx.by_key.get(key)
        if not idents:
            return []
        rows = self.rows
        if self.pk:  # one row per identity
            return [rows[i][0] for i in idents]
        out: list[Row] = []
        for ident in idents:
            row, count, _ = rows[ident]
            out.extend([row] * count)
        return out

    def present_rows(self, cols: Cols, key: Row) -> list[Row] | None:
        """The rows with ``cols = key`` when that index key is present (the common case of a
        join's lookup), else None (ask ``lookup``)."""
        return present_rows(self, cols, key)

    # ------------------------------------------------------------------ writes
    def _store(self, row: Row) -> None:
        ident = self.ident(row)
        entry = self.rows.get(ident)
        if entry is not None:
            if self.pk:
                return
            entry[1] += 1
            return
        size = row_size(row)
        self.rows[ident] = [row, 1, size]
        self.bytes += size
        for idx in self.indexes.values():
            idx.add(ident, row)

    def _unstore(self, ident: Row) -> Row | None:
        entry = self.rows.get(ident)
        if entry is None:
            return None
        row: Row = entry[0]
        if entry[1] > 1:
            entry[1] -= 1
            return row
        del self.rows[ident]
        self.bytes -= entry[2]
        for idx in self.indexes.values():
            idx.remove(ident, row)
        return row

    def install(self, cols: Cols, key: Row, rows: Iterable[Row]) -> None:
        """Mark ``cols = key`` present with exactly ``rows`` (fetched and patched; S1)."""
        idx = self.index(cols)
        if key in idx.present:
            return
        if self.pk:
            for row in rows:
                self._store(row)
        else:  # identical rows: the fetched bag gives the multiplicity
            for row, n in Counter(rows).items():
                if row not in self.rows:
                    for _ in range(n):
                        self._store(row)
        idx.present.add(key)

    def key_row(self, cols: Cols, key: Row) -> Row:
        """The eviction row naming "every row with ``cols = key``" (other columns UNKNOWN)."""
        row: list[object] = [UNKNOWN] * len(self.table.columns)
        for c, v in zip(cols, key, strict=True):
            row[c] = v
        return tuple(row)

    def evict(self, cols: Cols, key: Row) -> list[Row]:
        """Make ``cols = key`` missing; return eviction rows: the key row (downstream keys
        that relied on the key being complete) and the rows no longer stored (S2, S3)."""
        idx = self.indexes.get(cols)
        if idx is None or key not in idx.present:
            return []
        idx.present.discard(key)
        dropped: list[Row] = [self.key_row(cols, key)]
        for ident in list(idx.by_key.get(key, ())):
            row = self.rows[ident][0]
            if not self.covered(row):
                while self._unstore(ident) is not None:
                    dropped.append(row)
        return dropped

    def apply(self, change: RowChange) -> tuple[Delta, list[Row]]:
        """Apply one upstream change: the delta for present keys and the eviction rows."""
        kind = change.kind
        if kind is ChangeKind.INSERT:
            assert change.new is not None
            return self._arrive(change.new, [])
        if kind is ChangeKind.TRUNCATE:
            delta: Delta = [(e[0], -e[1]) for e in self.rows.values()]
            for ident in list(self.rows):
                while self._unstore(ident) is not None:
                    pass
            return delta, []
        old = change.old if change.old is not None else change.new
        assert old is not None
        stored = self._unstore(self.ident(old) if self.pk else self._full_old(change))
        out: Delta = [(stored, -1)] if stored is not None else []
        if kind is ChangeKind.DELETE:
            return out, []
        assert change.new is not None
        return self._arrive(self._complete(change.new, stored), out)

    def _uncover(self, row: Row) -> list[Row]:
        """Evict every present index key that may cover a row we cannot store (S2)."""
        dropped: list[Row] = []
        for cols, idx in self.indexes.items():
            key = key_of(row, cols)
            doomed = list(idx.present) if any(v is UNKNOWN for v in key) else (
                [key] if key in idx.present else [])
            for k in doomed:
                dropped.extend(self.evict(cols, k))
        for cols, slots in list(self.spans.items()):
            prefix, value = key_of(row, cols[:-1]), row[cols[-1]]
            if has_unknown(prefix):
                held = [(k, p) for k, pieces in slots.items() for p in pieces]
            else:
                pieces = slots.get(prefix)
                held = [] if pieces is None else [(prefix, p) for p in pieces] \
                    if value is UNKNOWN else [
                        (prefix, p) for p in (pieces.holding(value),) if p is not None]
            for k, piece in list(held):
                dropped.extend(self.evict_span(cols, k, piece))
        return dropped

    def _full_old(self, change: RowChange) -> Row:
        if change.old is None or not change.old_full:
            raise ValueError(f"table {self.table.name} has no primary key: REPLICA IDENTITY "
                             "FULL is required to apply updates and deletes")
        return change.old

    def _complete(self, new: Row, stored: Row | None) -> Row:
        if not any(v is UNCHANGED_TOAST for v in new):
            return new
        return tuple(
            (stored[i] if stored is not None else UNKNOWN) if v is UNCHANGED_TOAST else v
            for i, v in enumerate(new)
        )

    def _arrive(self, row: Row, delta: Delta) -> tuple[Delta, list[Row]]:
        if any(v is UNKNOWN for v in row):
            return delta, [arrival(row), *self._uncover(row)]
        if not self.covered(row):
            return delta, [row]
        self._store(row)
        delta.append((row, 1))
        return delta, []


def present_rows(store: BaseStore, cols: Cols, key: Row) -> list[Row] | None:
    """``BaseStore.present_rows`` (with a Cython twin)."""
    idx = store.indexes.get(cols)
    if idx is None or key not in idx.present:
        return None
    return store._rows_of(idx, key)


def apply_changes(store: BaseStore, changes: Iterable[RowChange]) -> tuple[Delta, list[Row]]:
    """The base store's apply loop (with a Cython twin): the deltas and eviction rows of
    ``changes`` applied in order (``BaseStore.apply`` each); the delta is consolidated (the
    twin skips that when it is so by construction: inserts and deletes of distinct primary
    keys)."""
    delta: Delta = []
    evictions: list[Row] = []
    for change in changes:
        d, e = store.apply(change)
        delta.extend(d)
        evictions.extend(e)
    return consolidate(delta), evictions


#: The pure-Python kernel (the parity tests compare the Cython twin with it).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
apply_changes_python = apply_changes
present_rows_python = present_rows

_fast = cython_ext.load("basestore")
if _fast is not None:
    _fast.configure(ChangeKind.INSERT, ChangeKind.UPDATE, ChangeKind.DELETE, UNCHANGED_TOAST,
                    UNKNOWN, Index, consolidate)
    apply_changes = _fast.apply_changes
    present_rows = _fast.present_rows
