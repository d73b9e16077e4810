"""Snapshot-consistent fills (DESIGN section 6): issue, park, patch, install; the recent log.

Owns: ``FillRequest``/``RunFill`` (what the host must fetch), the in-flight table (one fill per
missing base key, so concurrent reads share it), parking a response until its position has been
reached (the host's signal that the stream has applied every transaction the fill's snapshot
sees: today the stream reaching the fill's position, an LSN read after its snapshot; in
either order with the response), patching the
fetched rows with the applied transactions not visible in the fill's snapshot, and the
recent-transaction log with its pruning rule.

Invariants:
- F-patch: when a fill is installed, every transaction visible in its snapshot has been
  applied (the position reached promises it), every transaction in the log that is not
  visible in it has been applied, and every applied transaction not in the log is visible
  in it; so fetched rows + patch = the table restricted to the fill's predicate as of the
  applied position.
- Pruning: a log entry is dropped once it is visible in a snapshot whose response arrived
  before every still-pending fill was issued (such a snapshot predates every pending or future
  fill's snapshot, and a committed transaction once visible stays visible). When the log
  exceeds its cap, the oldest entries are dropped and remembered; a fill whose snapshot does
  not see one of them is re-issued instead of installed.
- A local fill (``FillManager.local``: rows read from local bases, which are exactly at the
  applied position when read) is installed as read: no snapshot, no position wait, no patch.
- A patch that cannot complete a row (an unchanged TOASTed value of a row the fetch did not
  return, where the row may match the predicate) makes the fill re-issue too.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, deque
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.changes import UNCHANGED_TOAST, ChangeKind, RowChange, Snapshot, Transaction
from engine.dataflow.node import BaseKey
from engine.dataflow.records import Row, key_of
from engine.dataflow.state.intervals import Span, span_of
from engine.plan.ir import TableRef


@dataclass(frozen=True, slots=True)
class SemiJoin:
    """The join values of a prefetch: ``join_columns`` of the rows of ``table`` whose
    ``columns`` equal ``key`` (that request is part of the same fill)."""

    table: TableRef
    columns: tuple[int, ...]
    key: Row
    join_columns: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FillRequest:
    """Fetch the rows of ``table`` whose ``columns`` equal ``key`` (all rows if no columns).

    A *prefetch* has ``via`` set and ``key`` empty: fetch the rows of ``table`` whose
    ``columns`` equal (as a row) the ``via.join_columns`` of some row of ``via.table`` with
    ``via.columns = via.key`` - a semi-join, under the same snapshot, so that the replay's
    lookups into this table usually need no second round trip::

        SELECT * FROM table WHERE (columns) IN
            (SELECT join_columns FROM via.table WHERE via.columns = via.key)
    """

    table: TableRef
    columns: tuple[int, ...]
    key: Row
    via: SemiJoin | None = None


@dataclass(frozen=True, slots=True)
class RunFill:
    """Effect: under one snapshot (``pg_current_snapshot()``), run every request; then report
    ``Engine.fill_response(fill_id, snapshot, rows)`` and, once every transaction visible in
    that snapshot has been applied (the host reads the upstream's WAL insert position after
    the snapshot and waits for the stream to reach it: ``proxy.fillrun``),
    ``Engine.position_reached(fill_id)``."""

    fill_id: int
    requests: tuple[FillRequest, ...]


@dataclass(slots=True)
class Pending:
    fill_id: int
    keys: tuple[BaseKey, ...]
    requests: tuple[FillRequest, ...]
    issued: int
    snapshot: Snapshot | None = None
    rows: tuple[tuple[Row, ...], ...] | None = None
    at_position: bool = False
    nids: tuple[int, ...] = ()  # base node id per request


@dataclass(slots=True)
class FillManager:
    log_cap: int = 100_000
    log: deque[Transaction] = field(default_factory=deque)
    pending: dict[int, Pending] = field(default_factory=dict)
    in_flight: dict[BaseKey, int] = field(default_factory=dict)
    arrivals: list[tuple[int, Snapshot]] = field(default_factory=list)
    lost: set[int] = field(default_factory=set)
    #: span fills: the key installed (the interval the fetch filled) per requested key,
    #: taken by the engine when it installs what ``finish`` returned
    installed_as: dict[BaseKey, Row] = field(default_factory=dict)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _seq: Any = field(default_factory=lambda: itertools.count(1))

    def issue(self, keys: list[tuple[BaseKey, TableRef]],
              prefetch: Sequence[tuple[int, FillRequest]] = ()) -> RunFill | None:
        """A fill for the keys not already in flight (None if all are), plus the prefetches
        whose semi-join source is one of them (``(base node id, request)`` pairs)."""
        fresh = [(k, t) for k, t in dict(keys).items() if k not in self.in_flight]
        if not fresh:
            return None
        fill_id = next(self._ids)
        reqs = [FillRequest(t, k[1], k[2]) for k, t in fresh]
        nids = [k[0] for k, _ in fresh]
        sources = {(r.table.oid, r.columns, r.key) for r in reqs}
        for nid, req in dict.fromkeys(prefetch):
            assert req.via is not None
            if (req.via.table.oid, req.via.columns, req.via.key) in sources:
                reqs.append(req)
                nids.append(nid)
        self.pending[fill_id] = Pending(fill_id, tuple(k for k, _ in fresh), tuple(reqs),
                                        next(self._seq), nids=tuple(nids))
        for k, _ in fresh:
            self.in_flight[k] = fill_id
        return RunFill(fill_id, tuple(reqs))

    def record(self, txn: Transaction, tables: Container[int],
               oids: Iterable[int] | None = None) -> None:
        """Log ``txn``'s changes to ``tables`` (``oids``, when given: the tables it changes)."""
        changes = txn.changes
        if oids is None or any(oid not in tables for oid in oids):
            changes = tuple([c for c in txn.changes if c.table_oid in tables])
        if not changes:
            return
        same = len(changes) == len(txn.changes)
        self.log.append(txn if same else Transaction(txn.xid, txn.commit_lsn, changes))
        while len(self.log) > self.log_cap:
            self.lost.add(self.log.popleft().xid)

    def probe(self, snapshot: Snapshot) -> None:
        self.arrivals.append((next(self._seq), snapshot))
        self._prune()

    def response(self, fill_id: int, snapshot: Snapshot,
                 rows: tuple[tuple[Row, ...], ...]) -> Pending | None:
        """Park a response; the fill if it is ready to install (the stream reached its position)."""
        fill = self.pending.get(fill_id)
        if fill is None or fill.rows is not None:
            return None
        fill.snapshot, fill.rows = snapshot, rows
        self.arrivals.append((next(self._seq), snapshot))
        return fill if fill.at_position else None

    def reached(self, fill_id: int) -> Pending | None:
        fill = self.pending.get(fill_id)
        if fill is None:
            return None
        fill.at_position = True
        return fill if fill.rows is not None else None

    def local(self, fill_id: int, rows: tuple[tuple[Row, ...], ...]) -> Pending | None:
        """A fill answered from local bases exactly as of the applied position: ready to
        install now, with no snapshot, position wait or patch (its ``snapshot`` stays None)."""
        fill = self.pending.get(fill_id)
        if fill is None or fill.rows is not None:
            return None
        fill.rows, fill.at_position = rows, True
        return fill

    def abandon(self, fill_id: int) -> tuple[BaseKey, ...]:
        """Forget a fill the host gave up on; the base keys it was fetching."""
        fill = self.pending.pop(fill_id, None)
        if fill is None:
            return ()
        for k in fill.keys:
            if self.in_flight.get(k) == fill_id:
                del self.in_flight[k]
        self._prune()
        return fill.keys

    def finish(self, fill: Pending) -> list[tuple[BaseKey, list[Row] | None]]:
        """Patch a ready fill: per base key the rows to install, or None to re-issue it
        (prefetched keys that cannot be patched are left out: a replay fetches them)."""
        del self.pending[fill.fill_id]
        for k in fill.keys:
            if self.in_flight.get(k) == fill.fill_id:
                del self.in_flight[k]
        assert fill.rows is not None
        snap = fill.snapshot
        stale = snap is not None and any(not snap.visible(x) for x in self.lost)
        out: list[tuple[BaseKey, list[Row] | None]] = []
        fetched = {(r.table.oid, r.columns, r.key): rows
                   for r, rows in zip(fill.requests, fill.rows, strict=True) if r.via is None}
        for nid, req, rows in zip(fill.nids, fill.requests, fill.rows, strict=True):
            span = span_of(req.key) if req.via is None else None
            if span is not None:  # patched over the interval the fetch filled
                bk: BaseKey = (nid, req.columns, req.key)
                done = FillRequest(req.table, req.columns,
                                   (*req.key[:-1], filled_span(span, req.columns[-1], rows)))
                self.installed_as[bk] = done.key
                out.append((bk, None if stale else patch(rows, done, snap, self.log)))
            elif req.via is None:
                out.append(((nid, req.columns, req.key),
                            None if stale else patch(rows, req, snap, self.log)))
            elif not stale:
                out.extend(self._prefetched(nid, req, rows, fetched, snap))
        self._prune()
        return out

    def _prefetched(self, nid: int, req: FillRequest, rows: tuple[Row, ...],
                    fetched: dict[tuple[int, tuple[int, ...], Row], tuple[Row, ...]],
                    snap: Snapshot | None) -> list[tuple[BaseKey, list[Row] | None]]:
        """One present key per join value the semi-join saw (under the same snapshot)."""
        via = req.via
        assert via is not None
        source = fetched.get((via.table.oid, via.columns, via.key), ())
        js = {key_of(r, via.join_columns) for r in source}
        by_j: dict[Row, list[Row]] = {}
        for r in rows:
            by_j.setdefault(key_of(r, req.columns), []).append(r)
        out: list[tuple[BaseKey, list[Row] | None]] = []
        for j in js:
            if None in j:
                continue
            one = FillRequest(req.table, req.columns, j)
            patched = patch(tuple(by_j.get(j, ())), one, snap, self.log)
            if patched is not None:
                out.append(((nid, req.columns, j), patched))
        return out

    def _prune(self) -> None:
        # (the oldest pending fill is the first: ``issue`` inserts in ``issued`` order and
        # nothing reorders ``pending``; a min over all of them cost O(pending) per prune)
        floor = next(iter(self.pending.values())).issued if self.pending else None
        usable = [a for a in self.arrivals if floor is None or a[0] < floor]
        if not usable:
            return
        # arrival order is not snapshot order (a fill's snapshot may arrive after a later
        # probe's): an entry visible in any usable snapshot goes; the newest one is kept
        snaps = [a[1] for a in usable]
        if self.log:  # (empty while nothing upstream changed the cached tables)
            self.log = deque(t for t in self.log if not any(sn.visible(t.xid) for sn in snaps))
        if self.lost:
            self.lost = {x for x in self.lost if not any(sn.visible(x) for sn in snaps)}
        newest = max(usable, key=lambda a: (a[1].xmin, a[1].xmax))
        # (the others are those at or after the floor: sequence numbers are unique, so this
        # is "not in usable" without comparing each arrival with each usable one)
        self.arrivals = [newest] + ([] if floor is None
                                    else [a for a in self.arrivals if a[0] >= floor])
        # lost entries follow the same rule (not cleared when no fill is pending: a fill
        # re-issued for a stale snapshot is issued after this, and its snapshot may lag too)


def patch(rows: tuple[Row, ...], req: FillRequest, snap: Snapshot | None,
          log: Iterable[Transaction]) -> list[Row] | None:
    """``rows`` (fetched under ``snap``) brought forward by the applied transactions of ``log``
    that ``snap`` does not see; None when a row cannot be completed. ``snap`` None: the rows
    are as of the applied position already (local bases), nothing to bring forward."""
    if snap is None:
        return list(rows)
    table, cols, key = req.table, req.columns, req.key
    pk = table.primary_key
    current: dict[Row, Row] = {}
    extra: Counter[Row] = Counter()  # tables without a primary key: a bag of whole rows
    for r in rows:
        if pk:
            current[key_of(r, pk)] = r
        else:
            extra[r] += 1
    for txn in log:
        if snap.visible(txn.xid):
            continue
        for ch in txn.changes:
            if ch.table_oid == table.oid and not _apply(ch, pk, cols, key, current, extra):
                return None
    return list(current.values()) if pk else list(extra.elements())


def _matches(row: Row, cols: tuple[int, ...], key: Row) -> bool | None:
    values = key_of(row, cols)
    if any(v is UNCHANGED_TOAST for v in values):
        return None
    span = span_of(key)
    if span is not None:  # an interval fill: the equality values match, the value lies in it
        return values[:-1] == key[:-1] and span.holds(values[-1])
    return values == key


def filled_span(span: Span, col: int, rows: Sequence[Row]) -> Span:
    """The interval a span fill's fetched rows (as of its snapshot) fill exactly: with
    ``first = k`` and at least k rows, up to the largest value fetched (its ties were
    fetched with it; ``from_top``: down to the smallest); otherwise the whole span. A NULL
    fetched is the point past every value (a span with ``nulls``): the largest, all NULL
    rows fetched as its ties (the whole span), or the smallest (only the NULL point)."""
    if span.first is None or len(rows) < span.first:
        return dataclasses.replace(span, first=None, from_top=False)
    order = [span.point(r[col]) for r in rows]
    if span.from_top:
        low = rows[order.index(min(order))][col]
        if low is None:  # (the k-th from the top is NULL: only the NULL point)
            return dataclasses.replace(span, lo=None, lo_incl=False, only_nulls=True,
                                       first=None, from_top=False)
        return dataclasses.replace(span, lo=low, lo_incl=True, first=None, from_top=False)
    top = rows[order.index(max(order))][col]
    if top is None:  # (the k-th is NULL: every NULL came as its tie, the whole span)
        return dataclasses.replace(span, first=None)
    return dataclasses.replace(span, hi=top, hi_incl=True, first=None, nulls=False)


def _apply(ch: RowChange, pk: tuple[int, ...], cols: tuple[int, ...], key: Row,
           current: dict[Row, Row], extra: Counter[Row]) -> bool:
    if ch.kind is ChangeKind.TRUNCATE:
        current.clear()
        extra.clear()
        return True
    prev: Row | None = None
    if ch.kind is not ChangeKind.INSERT:
        old = ch.old if ch.old is not None else ch.new
        assert old is not None
        if pk:
            prev = current.pop(key_of(old, pk), None)
        elif extra[old] > 0:
            extra[old] -= 1
            prev = old
    if ch.kind is ChangeKind.DELETE:
        return True
    new = ch.new
    assert new is not None
    if any(v is UNCHANGED_TOAST for v in new) and prev is not None:
        new = tuple(prev[i] if v is UNCHANGED_TOAST else v for i, v in enumerate(new))
    match = _matches(new, cols, key)
    if match is None:
        return False
    if match:
        if any(v is UNCHANGED_TOAST for v in new):
            return False
        if pk:
            current[key_of(new, pk)] = new
        else:
            extra[new] += 1
    return True
