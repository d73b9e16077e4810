"""Window functions maintained incrementally over one reader key's rows.

Owns: ``Partition`` - a key's rows with each window's value, kept per window and per partition
of the key's rows (``ir.Window.partition``; one when the window is partitioned on lookup keys
only) as a list sorted in that window's order (window ORDER BY, then the whole row, then an id
telling copies of a row apart), and the key's answer (output columns in the reader's ORDER BY,
OFFSET/LIMIT cut) built from projected rows kept per row id. ``change`` applies one delta row;
``answer`` brings the stale values up to date and returns the answer rows.

Cost of one change in a partition of N rows: a binary search and a list insert/delete per window
(and per reader order); lag/lead values are recomputed at once for the ``offset`` neighbours on
either side of the change; row_number/rank/dense_rank are marked stale from the changed position
onward (the lowest such position per window) and recomputed from there at the next read (from
the start of that position's peer group, seeded by the clean value before it); row_number stops
after the last changed position when as many rows were inserted as deleted (an update that keeps
or moves a row: only the rows between its old and new positions are renumbered). A running
aggregate (count, sum, avg, min, max) is marked stale like rank and recomputed at the read from
the peer group before its mark, its accumulator seeded with the arguments before that group (one
add per earlier row, no projection). A sliding frame (``Window.frame`` = (a, b)) recomputes only
the rows whose frame can meet the changed positions lo .. hi: positions lo - max(b, 0) .. hi -
min(a, 0), each aggregated afresh over its at most ``b - a + 1`` rows. A RANGE/GROUPS/EXCLUDE
frame (``Window.ranged``) is recomputed over the whole partition (``windows.range_values``).
Only rows whose value changed are projected again. The answer is one pass over the ids in order.
When the reader's ORDER BY starts with a row_number column the answer is that window's list
(reversed for DESC); when it reads another window column the answer's order depends on the
values, and it is sorted at the read (as the recompute did).

Invariants: the values agree with ``windows.apply_windows`` on the same rows (the property
test ``tests/property/test_window_state.py`` checks it): rank/dense_rank peers are rows equal
on the window's ORDER BY keys (``ordering.order_key`` without tie-break: NULL ordering, DESC,
several keys); rows tied on it are numbered in whole-row order by row_number/lag/lead, which
the planner only allows when the ORDER BY cannot tie. Positions before a window's stale mark
hold correct values. An aggregate that raises ``EvalError`` (PostgreSQL's error for the same
rows, a float overflow) keeps its mark and values: ``answer`` raises it until the rows change.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from engine.dataflow.ordering import order_key, row_key
from engine.dataflow.pgmath import EvalError
from engine.dataflow.records import row_key as bag_key
from engine.dataflow.records import same_print
from engine.dataflow.windows import (
    AGGREGATES,
    frame_values,
    partition_key,
    range_values,
    running_values,
)
from engine.plan import ir

Row = tuple[Any, ...]
Entry = tuple[Any, Any, int]  # (order key, whole-row key, row id)

#: Bytes a row costs in a partition besides the reader's bag, per window or order list
#: (an entry tuple, its key tuples, a slot in the list) and per row (its value list and ids).
ENTRY_BYTES = 120
ROW_BYTES = 200

_third = itemgetter(2)
_RANKING = frozenset({"row_number", "rank", "dense_rank"})
_STALE = _RANKING | AGGREGATES  # the windows recomputed from a stale mark at the read


class Partition:
    """One key's rows and window values (see the module docstring)."""

    __slots__ = ("final", "fkey", "follow", "hi", "ids", "lists", "lo", "next_id", "out", "output",
                 "per_row", "pkeys", "redo", "rows", "sort", "stale", "vals", "windows", "wkeys")

    def __init__(self, windows: Sequence[ir.Window], order_by: Sequence[ir.SortKey],
                 output: Sequence[int], lo: int, hi: int | None) -> None:
        self.windows = tuple(windows)
        self.wkeys = [order_key(w.order, tie_break=False) for w in windows]
        self.pkeys = [partition_key(w) for w in windows]
        # per window: partition key -> its entries in window order
        self.lists: list[dict[Row, list[Entry]]] = [{} for _ in windows]
        # (window, partition key) -> stale mark
        self.stale: dict[tuple[int, Row], tuple[int, int, int]] = {}
        self.rows: dict[int, Row] = {}
        self.vals: dict[int, list[Any]] = {}
        self.out: dict[int, Row] = {}  # projected answer rows, except the ids in ``redo``
        self.redo: set[int] = set()
        self.ids: dict[Row, list[int]] = {}  # bag key -> ids of its copies
        self.next_id = 0
        self.output = tuple(output)
        self.lo, self.hi = lo, hi
        columns = {w.column for w in windows}
        by_value = any(k.column in columns for k in order_by)
        # the reader's order as a kept list, unless it reads window values (sorted per read)
        self.fkey = order_key(order_by, tie_break=False) if order_by and not by_value else None
        self.final: list[Entry] | None = [] if self.fkey is not None else None
        self.sort = order_key(order_by) if by_value else None
        # ORDER BY a row_number column first (``ORDER BY rn LIMIT k``): its values are unique,
        # so the answer's order is that window's list (reversed when DESC), no sort
        self.follow: tuple[int, bool] | None = None
        if by_value:
            i = next(i for i, w in enumerate(windows) if w.column == order_by[0].column) \
                if order_by[0].column in columns else -1
            if i >= 0 and windows[i].func == "row_number" and not windows[i].partition:
                self.follow, self.sort = (i, order_by[0].descending), None
        self.per_row = ROW_BYTES + ENTRY_BYTES * (len(windows) + (self.final is not None))

    def __len__(self) -> int:
        return len(self.rows)

    def change(self, row: Row, w: int) -> None:
        """Add (``w`` > 0) or remove (``w`` < 0) ``|w|`` copies of ``row``."""
        for _ in range(abs(w)):
            if w > 0:
                self._insert(row)
            else:
                self._delete(row)

    def _insert(self, row: Row) -> None:
        rid = self.next_id
        self.next_id += 1
        self.rows[rid] = row
        self.ids.setdefault(bag_key(row), []).append(rid)
        self.vals[rid] = [None] * len(self.windows)
        self.redo.add(rid)
        rk = row_key(row)
        for i, parts in enumerate(self.lists):
            pk = self.pkeys[i](row)
            lst = parts.get(pk)
            if lst is None:
                lst = parts[pk] = []
            entry = (self.wkeys[i](row), rk, rid)
            p = bisect_left(lst, entry)
            lst.insert(p, entry)
            self._touched(i, pk, lst, p, True)
        if self.final is not None:
            assert self.fkey is not None
            entry = (self.fkey(row), rk, rid)
            self.final.insert(bisect_left(self.final, entry), entry)

    def _delete(self, row: Row) -> None:
        k = bag_key(row)
        copies = self.ids[k]
        # a copy that prints the same (1.0 is not 1.00)
        rid = next(r for r in copies if same_print(self.rows[r], row))
        copies.remove(rid)
        if not copies:
            del self.ids[k]
        row = self.rows.pop(rid)
        rk = row_key(row)
        for i, parts in enumerate(self.lists):
            pk = self.pkeys[i](row)
            lst = parts[pk]
            p = bisect_left(lst, (self.wkeys[i](row), rk, rid))
            del lst[p]
            if lst:
                self._touched(i, pk, lst, p, False)
            else:  # the partition's last row
                del parts[pk]
                self.stale.pop((i, pk), None)
        if self.final is not None:
            assert self.fkey is not None
            del self.final[bisect_left(self.final, (self.fkey(row), rk, rid))]
        del self.vals[rid]
        self.out.pop(rid, None)
        self.redo.discard(rid)

    def _touched(self, i: int, pk: Row, lst: list[Entry], p: int, inserted: bool) -> None:
        """Window ``i``'s list ``lst`` (partition ``pk``) gained (``inserted``) or lost the
        entry at position ``p``.
        A ranking window's stale mark (lo, hi, net): positions before lo hold their values,
        positions after hi hold them plus ``net`` (the inserts less the deletes: every
        change was at or before hi), so row_number is final after hi when net is 0."""
        w = self.windows[i]
        if w.func in _STALE:
            lo, hi, net = self.stale.get((i, pk)) or (p, p - 1, 0)
            if inserted:
                hi, net = (hi + 1 if p <= hi else p), net + 1
            else:
                hi, net = (hi - 1 if p <= hi else p - 1), net - 1
            self.stale[i, pk] = (min(lo, p), hi, net)
            return
        # lag reads ``offset`` back: positions p .. p+offset read something else now;
        # lead reads ahead: positions p-offset .. p
        vals, arg, col = self.vals, w.arg, i
        assert arg is not None
        step = -w.offset if w.func == "lag" else w.offset
        start, stop = (p, p + w.offset) if w.func == "lag" else (p - w.offset, p)
        n = len(lst)
        for q in range(max(start, 0), min(stop, n - 1) + 1):
            rid = lst[q][2]
            src = q + step
            v = self.rows[lst[src][2]][arg] if 0 <= src < n else None
            old = vals[rid]
            if old[col] is not v:
                old[col] = v
                self.redo.add(rid)

    def _refresh(self) -> None:
        """Recompute the ranking values from each window's stale mark onward."""
        for (i, pk), mark in list(self.stale.items()):
            del self.stale[i, pk]
            s, hi, net = mark
            lst, vals, redo = self.lists[i][pk], self.vals, self.redo
            n = len(lst)
            func = self.windows[i].func
            if func in AGGREGATES:
                try:
                    if self.windows[i].ranged is not None:
                        self._ranged(i, lst)
                    elif self.windows[i].frame is None:
                        self._running(i, lst, s)
                    else:
                        self._sliding(i, lst, s, hi)
                except EvalError:  # (a float sum's overflow) the mark stays: it raises again
                    self.stale[i, pk] = mark
                    raise
                continue
            if s >= n:
                continue
            if func == "row_number":
                for q in range(s, n if net else min(hi + 1, n)):
                    v = vals[lst[q][2]]
                    if v[i] != q + 1:
                        v[i] = q + 1
                        redo.add(lst[q][2])
                continue
            g = bisect_left(lst, (lst[s][0],))  # the start of position s's peer group
            dense = vals[lst[g - 1][2]][i] if g > 0 and func == "dense_rank" else 0
            rank, previous = 0, object()
            for q in range(g, n):
                entry = lst[q]
                if entry[0] != previous:
                    rank, dense, previous = q + 1, dense + 1, entry[0]
                value = rank if func == "rank" else dense
                v = vals[entry[2]]
                if v[i] != value:
                    v[i] = value
                    redo.add(entry[2])

    def _running(self, i: int, lst: list[Entry], s: int) -> None:
        """Aggregate window ``i``'s values (over partition list ``lst``) from the peer group
        before position ``s`` (a row joining or leaving a peer group changes its earlier peers)
        onward, seeded with the arguments of the rows before it."""
        w, rows = self.windows[i], self.rows
        n = len(lst)
        if not n:
            return
        s = min(s, n)
        g = s if w.rows else bisect_left(lst, (lst[max(s - 1, 0)][0],))
        arg = w.arg
        args = [None if arg is None else rows[e[2]][arg] for e in lst]
        self._store(i, lst, g, running_values(w, [e[0] for e in lst[g:]], args[g:], args[:g]))

    def _sliding(self, i: int, lst: list[Entry], lo: int, hi: int) -> None:
        """Sliding-frame window ``i``'s values (partition list ``lst``) at the positions whose
        frame can meet the changed positions ``lo .. hi`` (see the module docstring)."""
        w, rows = self.windows[i], self.rows
        assert w.frame is not None
        a, b = w.frame
        n = len(lst)
        first, last = max(lo - max(b, 0), 0), min(hi - min(a, 0), n - 1)
        if first > last:
            return
        # the rows those frames read: first + a .. last + b
        base = max(first + a, 0)
        stop = min(last + b, n - 1) + 1
        arg = w.arg
        args = [None if arg is None else rows[e[2]][arg] for e in lst[base:stop]]
        # positions relative to ``base`` (frames clamp at the slice's ends as at the list's)
        self._store(i, lst, first, frame_values(w, args, first - base, last - base))

    def _ranged(self, i: int, lst: list[Entry]) -> None:
        """RANGE/GROUPS-frame window ``i``'s values over partition list ``lst``, all afresh
        (a change moves the frame ends of rows anywhere in the partition)."""
        w, rows = self.windows[i], self.rows
        key = w.order[0].column if w.order else None
        arg = w.arg
        self._store(i, lst, 0, range_values(
            w, [e[0] for e in lst],
            [None if key is None else rows[e[2]][key] for e in lst],
            [None if arg is None else rows[e[2]][arg] for e in lst]))

    def _store(self, i: int, lst: list[Entry], first: int, values: list[Any]) -> None:
        """Write window ``i``'s ``values`` at positions ``first ..`` of ``lst``, marking
        changed rows."""
        vals, redo = self.vals, self.redo
        for q, value in enumerate(values, first):
            rid = lst[q][2]
            v = vals[rid]
            old = v[i]
            if old is not value and (old != value or str(old) != str(value)):
                v[i] = value
                redo.add(rid)

    def _full(self, rid: int) -> list[Any]:
        row = list(self.rows[rid])
        for w, v in zip(self.windows, self.vals[rid], strict=True):
            row[w.column] = v
        return row

    def answer(self) -> tuple[Row, ...]:
        """The key's answer rows (output columns, reader order, OFFSET/LIMIT)."""
        self._refresh()
        out, output = self.out, self.output
        if self.sort is not None:  # the order reads window values: sort at the read
            full = [self._full(rid) for rid in self.rows]
            full.sort(key=self.sort)
            self.redo.clear()
            return tuple(tuple(r[i] for i in output) for r in full[self.lo:self.hi])
        for rid in self.redo:
            r = self._full(rid)
            out[rid] = tuple([r[i] for i in output])
        self.redo.clear()
        if self.follow is not None:
            lst = self.lists[self.follow[0]].get((), [])
            ids = list(map(_third, (lst[::-1] if self.follow[1] else lst)[self.lo:self.hi]))
        elif self.final is not None:
            ids = list(map(_third, self.final[self.lo:self.hi]))
        else:
            ids = list(self.rows)[self.lo:self.hi]
        return tuple(map(out.__getitem__, ids))
