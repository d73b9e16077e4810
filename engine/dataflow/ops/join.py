"""Equi-join (inner and left): joins each delta with the other input's current rows.

Owns: ``JoinNode`` and ``join_deltas``, its delta loop (with a Cython twin).

Stateless itself; its lookups are pulls into the inputs by join key (base-store indexes or
a stateful input keyed by its join columns). Output = left columns + right columns.

Delta rule per join value j (inputs are already updated for the batch):
``d(L join R) = dL join R_new + L_new join dR - dL join dR``; for LEFT JOIN the NULL-extended
rows change by ``pad(L_new)[R_new empty] - pad(L_old)[R_old empty]`` with
``L_old = L_new - dL`` and ``|R_old| = |R_new| - |dR|``, so the first right row for j retracts
the padded rows and the last one brings them back, also within one batch. Only ``|R_new|``
is needed when the left side did not change: the right input *counts* (``Node.count``, O(1)
for a base store with a primary key or a keyed state), so a hot join value is not listed.

Join miss (a lookup finds j missing while processing deltas): the deltas for j are dropped
and become ``Arrival`` eviction rows - each delta row combined with the stored rows of the
other side, with NULLs (LEFT JOIN) and with an all-UNKNOWN other side - so every downstream
key the change could touch is evicted (thesis section 4.5.2). An eviction row arriving at a
join pairs with the other side's rows for its join value when that key is present there
(then they are complete), else with the stored ones and with an all-UNKNOWN row.

Pulls (replays): drive from the side the bound columns select (the left, full side of a LEFT
JOIN unless the right join key is bound) and look the other side up per join value; when the
driving side's base key is missing and both sides are filters/projections over base tables,
the fill also *prefetches* the other side by semi-join, so one round trip usually suffices.
NULL join values never match; a left row with a NULL join value is always padded.
An inner join pulled with an interval (``Span``) on one side and equality values only on
the other drives from the equality values and pulls the interval's side per join value
with the interval (a range-partial reader keyed on another table; no prefetch).
"""

from __future__ import annotations

from collections import Counter

import cython_ext
from engine.dataflow.fills import FillRequest, SemiJoin
from engine.dataflow.node import BaseKey, Cols, Node, PullCtx
from engine.dataflow.records import (
    UNKNOWN,
    Arrival,
    Delta,
    Row,
    arrival,
    consolidate,
    has_unknown,
    key_of,
)
from engine.dataflow.state.intervals import Span, span_of
from engine.plan.ir import TableRef


class JoinNode(Node):
    consolidated = True  # ``join_deltas`` consolidates (its twin only where rows may repeat)

    def __init__(self, nid: int, left: Node, right: Node, left_keys: Cols, right_keys: Cols,
                 kind: str) -> None:
        super().__init__(nid, (left, right), left.width + right.width)
        self.lk, self.rk, self.kind = left_keys, right_keys, kind
        self.nl = left.width
        self.pad: Row = (None,) * right.width
        self.unknown_l: Row = (UNKNOWN,) * left.width
        self.unknown_r: Row = (UNKNOWN,) * right.width
        #: the Cython twin's lookup state per input (``cython_ext.join._Side``), made on
        #: first use and kept while the node lives
        self.lookups: object = None

    # ------------------------------------------------------------------ deltas
    def process(self, deltas: list[Delta]) -> tuple[Delta, list[Row]]:
        return join_deltas(self, deltas[0], deltas[1])

    def _unknown(self, side: int, j: Row) -> Row:
        """An eviction row's unknown partner on ``side`` for join value ``j``: every column
        UNKNOWN but the join columns, which any real partner has equal to ``j`` - so nodes
        downstream keyed by them evict one key, not every key."""
        row = list(self.unknown_l if side == 0 else self.unknown_r)
        for col, value in zip(self.lk if side == 0 else self.rk, j, strict=True):
            row[col] = value
        return tuple(row)

    def _miss_rows(self, j: Row, dl: Delta, dr: Delta) -> list[Row]:
        rows: list[Row] = []
        if dl:
            stored_r = self._stored(1, j)
            unknown_r = self._unknown(1, j)
            for lrow, _ in dl:
                rows.extend(arrival(lrow + r) for r in stored_r)
                rows.append(arrival(lrow + unknown_r))
                if self.kind == "left":
                    rows.append(arrival(lrow + self.pad))
        if dr:
            stored_l = self._stored(0, j)
            unknown_l = self._unknown(0, j)
            for rrow, _ in dr:
                rows.extend(arrival(lrow + rrow) for lrow in stored_l)
                rows.append(arrival(unknown_l + rrow))
            if self.kind == "left":
                rows.extend(arrival(lrow + self.pad) for lrow in stored_l)
        return rows

    def _stored(self, side: int, j: Row) -> list[Row]:
        cols = self.lk if side == 0 else self.rk
        return self.inputs[side].pull(cols, j, PullCtx(partial=True)) or []

    def _partners(self, side: int, j: Row, row: Row) -> tuple[list[Row], bool]:
        """The other side's rows for ``j`` and whether unknown partners are possible: when
        the other side's key is not present, its stored rows may be incomplete - rows that
        were partners may have been dropped earlier in the same eviction (a self-join, or
        one base under both sides), and an ``Arrival`` may have partners never loaded."""
        cols = self.lk if side == 0 else self.rk
        complete = self.inputs[side].pull(cols, j, PullCtx(probe=True))
        return (complete, False) if complete is not None else (self._stored(side, j), True)

    # ------------------------------------------------------------------ evictions
    def evict_rows(self, rows: list[list[Row]]) -> list[Row]:
        out: list[Row] = []
        for lrow in rows[0]:
            tag = arrival if lrow.__class__ is Arrival else tuple
            j = key_of(lrow, self.lk)
            if has_unknown(j):
                out.append(tag(lrow + self.unknown_r))
                continue
            if None not in j:
                partners, unknown = self._partners(1, j, lrow)
                out.extend(tag(lrow + r) for r in partners)
                if unknown:
                    out.append(tag(lrow + self._unknown(1, j)))
            if self.kind == "left":
                out.append(tag(lrow + self.pad))
        for rrow in rows[1]:
            tag = arrival if rrow.__class__ is Arrival else tuple
            j = key_of(rrow, self.rk)
            if has_unknown(j):
                out.append(tag(self.unknown_l + rrow))
                if self.kind == "left":
                    out.append(tag(self.unknown_l + self.pad))
                continue
            if None in j:
                continue
            partners, unknown = self._partners(0, j, rrow)
            out.extend(tag(lrow + rrow) for lrow in partners)
            if unknown:
                out.append(tag(self._unknown(0, j) + rrow))
            if self.kind == "left":
                out.extend(tag(lrow + self.pad) for lrow in partners)
                if unknown:
                    out.append(tag(self._unknown(0, j) + self.pad))
        return out

    def span_columns(self, cols: tuple[int, ...]) -> tuple[Node, list[int | None]] | None:
        """The side holding every column of ``cols`` (the right one of an inner join only:
        a LEFT JOIN's right columns may be padding), traced to its base."""
        nl, nr = self.nl, self.width - self.nl
        if all(c < nl for c in cols):
            below = self.inputs[0].span_columns(cols)
            return None if below is None else (below[0], below[1] + [None] * nr)
        if self.kind == "inner" and all(c >= nl for c in cols):
            below = self.inputs[1].span_columns(tuple(c - nl for c in cols))
            pad: list[int | None] = [None] * nl
            return None if below is None else (below[0], pad + below[1])
        return None

    # ------------------------------------------------------------------ pulls
    def pull(self, cols: Cols, key: Row, ctx: PullCtx) -> list[Row] | None:
        """Drive from the side the bound columns select (the full side of a LEFT JOIN when
        the right side's join key is not bound) and look the other side up per join value."""
        if any(v is None for v in key):
            return []
        nl = self.nl
        lb = {c: v for c, v in zip(cols, key, strict=True) if c < nl}
        rb = {c - nl: v for c, v in zip(cols, key, strict=True) if c >= nl}
        if self.kind == "inner" and span_of(key) is not None:
            # an interval on one side, equality values on the other only (a reader keyed
            # on another table than its range): drive from the equality values, and pull
            # the interval's side per join value with the interval (pieces per join value)
            c = cols[-1]
            if c < nl and rb and len(lb) == 1 and c not in self.lk:
                return self._pull_from(1, rb, lb, ctx, by_span=True)
            if c >= nl and lb and len(rb) == 1 and c - nl not in self.rk:
                return self._pull_from(0, lb, rb, ctx, by_span=True)
        if all(c in lb for c in self.lk) or self.kind == "left" or lb or not rb:
            return self._pull_from(0, lb, rb, ctx)
        return self._pull_from(1, rb, lb, ctx)

    def _pull_from(self, side: int, own: dict[int, object], other: dict[int, object],
                   ctx: PullCtx, by_span: bool = False) -> list[Row] | None:
        keys, okeys = (self.lk, self.rk) if side == 0 else (self.rk, self.lk)
        if all(c in other for c in okeys) and not all(c in own for c in keys):
            own = {**own, **{c: other[o] for c, o in zip(keys, okeys, strict=True)}}
        before = set(ctx.missing)
        rows = self.inputs[side].pull(tuple(own), tuple(own.values()), ctx)
        spans = [(c, v) for c, v in other.items() if type(v) is Span] if by_span else []
        if rows is None and spans:
            return None  # (the other side is pulled by interval: no point prefetch)
        if rows is None:
            # the other side's own key when the pull binds it (a point fill, merged across
            # a batch), else a semi-join through the driving rows (one statement)
            if self.inputs[1 - side].base_columns() is not None \
                    or not self._partners_ahead(side, own, ctx):
                self._prefetch(side, ctx.missing - before, ctx)
            return None
        by_j: dict[Row, list[Row]] = {}
        out: list[Row] = []
        for r in rows:
            j = key_of(r, keys)
            if None not in j:
                by_j.setdefault(j, []).append(r)
            elif side == 0 and self.kind == "left" and not other:
                out.append(r + self.pad)
        complete = True
        for j, mine in by_j.items():
            theirs = self.inputs[1 - side].pull(
                (*okeys, spans[0][0]), (*j, spans[0][1]), ctx) if spans \
                else self.inputs[1 - side].pull(okeys, j, ctx)
            if theirs is None:
                complete = False
                continue
            match = [r for r in theirs if _matches(r, other)]
            if side == 0:
                out.extend(lrow + rrow for lrow in mine for rrow in match)
                if self.kind == "left" and not theirs and not other:
                    out.extend(lrow + self.pad for lrow in mine)
            else:
                out.extend(lrow + rrow for rrow in mine for lrow in match)
        return out if complete else None

    def _partners_ahead(self, side: int, own: dict[int, object], ctx: PullCtx) -> bool:
        """When the driving side misses but the pull binds its join columns, pull the other
        side for that join value now, so that what it misses is fetched in the same fill
        (the other side is not a base chain, e.g. an aggregate); whether the pull binds
        them."""
        keys, okeys = (self.lk, self.rk) if side == 0 else (self.rk, self.lk)
        if not all(c in own for c in keys):
            return False
        j = tuple(own[c] for c in keys)
        if None not in j and not has_unknown(j):
            self.inputs[1 - side].pull(okeys, j, ctx)
        return True

    def _prefetch(self, side: int, missed: set[BaseKey], ctx: PullCtx) -> bool:
        """When the driving side misses, also fetch the other side's rows for the join
        values the driving rows will have (semi-join), if the driving side is a base chain
        and the other side's join columns trace to base columns its pull reads by
        (``Node.prefetch_columns``: a base chain, or a keyed node over one such as an
        aggregate grouped on them); whether they are."""
        drive, other = self.inputs[side].base_columns(), self.inputs[1 - side].prefetch_columns()
        if drive is None or other is None:
            return False
        dkeys, okeys = (self.lk, self.rk) if side == 0 else (self.rk, self.lk)
        djoin = tuple(c for k in dkeys if (c := drive[1][k]) is not None)
        ojoin = tuple(c for k in okeys if (c := other[1][k]) is not None)
        if len(djoin) != len(dkeys) or len(ojoin) != len(okeys):
            return False
        dtable: TableRef = drive[0].table  # type: ignore[attr-defined]
        otable: TableRef = other[0].table  # type: ignore[attr-defined]
        for nid, cols, key in missed:
            if nid == drive[0].nid and span_of(key) is None:  # (an interval: no semi-join)
                req = FillRequest(otable, ojoin, (), SemiJoin(dtable, cols, key, djoin))
                ctx.prefetch.append((other[0].nid, req))
        return True


def join_deltas(node: JoinNode, dl_all: Delta, dr_all: Delta) -> tuple[Delta, list[Row]]:
    """The join's delta loop (with a Cython twin): group both inputs' deltas by join value,
    look the other side up per value (a LEFT JOIN with only right-side changes for a value
    counts the right rows instead of listing them), emit the joined and padded rows; a miss
    turns that value's deltas into eviction rows (``JoinNode._miss_rows``). The inputs are
    consolidated deltas; so is the output."""
    out: Delta = []
    evict: list[Row] = []
    left_join = node.kind == "left"
    by_j: dict[Row, tuple[Delta, Delta]] = {}
    lk, rk, pad = node.lk, node.rk, node.pad
    for row, w in dl_all:
        j = key_of(row, lk)
        if None in j:
            if left_join:
                out.append((row + pad, w))
            continue
        sides = by_j.get(j)
        if sides is None:
            by_j[j] = ([(row, w)], [])
        else:
            sides[0].append((row, w))
    for row, w in dr_all:
        j = key_of(row, rk)
        if None in j:
            continue
        sides = by_j.get(j)
        if sides is None:
            by_j[j] = ([], [(row, w)])
        else:
            sides[1].append((row, w))
    ctx = PullCtx(lookup=True)
    left, right = node.inputs
    for j, (dl, dr) in by_j.items():
        rrows: list[Row] | None = right.pull(rk, j, ctx) if dl else []
        r_new = (len(rrows) if dl else right.count(rk, j, ctx)) if (
            left_join and rrows is not None) else 0
        lrows = left.pull(lk, j, ctx) if dr else []
        if rrows is None or lrows is None or r_new is None:
            evict.extend(node._miss_rows(j, dl, dr))
            continue
        for lrow, lw in dl:
            out.extend([(lrow + rrow, lw) for rrow in rrows])
        for rrow, rw in dr:
            out.extend([(lrow + rrow, rw) for lrow in lrows])
            for lrow, lw in dl:
                out.append((lrow + rrow, -lw * rw))
        if left_join:
            _padding(pad, dl, dr, lrows, r_new, out)
    return consolidate(out), evict


def _padding(pad: Row, dl: Delta, dr: Delta, lrows: list[Row], r_new: int, out: Delta) -> None:
    """NULL-extended rows: only when the right side for ``j`` is or was empty (``r_new``
    right rows now, ``r_new - sum(dr)`` before the batch)."""
    if not dr:
        if r_new == 0:
            out.extend((lrow + pad, lw) for lrow, lw in dl)
        return
    r_old = r_new - sum(w for _, w in dr)
    if r_new == 0:
        out.extend((lrow + pad, 1) for lrow in lrows)
    if r_old == 0:
        old = Counter(lrows)
        for lrow, lw in dl:
            old[lrow] -= lw
        out.extend((lrow + pad, -n) for lrow, n in old.items() if n)


def _matches(row: Row, bound: dict[int, object]) -> bool:
    return all(row[c] == v or row[c] is UNKNOWN or type(v) is Span  # (pulled in it)
               for c, v in bound.items())


#: The pure-Python kernel (the parity tests compare the Cython twin with it).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
join_deltas_python = join_deltas

_fast = cython_ext.load("join")
if _fast is not None:
    from engine.dataflow.ops.aggregate import STALE, AggregateNode
    from engine.dataflow.ops.base import BaseNode

    _fast.configure(PullCtx, BaseNode, AggregateNode, consolidate, STALE)
    join_deltas = _fast.join_deltas
