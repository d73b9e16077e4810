"""The one dataflow graph shared by all caches: building, sharing, batches, evictions.

Owns: compiling a ``Reader`` plan into nodes (assigning every stateful node its state key by
tracing the reader's key down - key provenance - and giving each join input its join columns),
node reuse (a node is identified by its operator, its parameters, its state key and its input
nodes, so identical sub-plans share nodes and state), reference counts and removal on drop,
applying one upstream transaction as one batch in topological order, and propagating
evictions downstream.

Invariants: node ids increase from inputs to outputs, so processing nodes in id order is a
topological order; a batch is fully applied (every node processed) before ``apply`` returns;
deltas are consolidated on every edge (by ``consolidate``, or by construction where a node
says so); evictions travel after the deltas of the same batch; a node's ``process`` and
``evict_rows`` never change the lists they are given (one list goes to every child).
The batch loop (``emit``, ``run``) has a Cython twin (``cython_ext.graph``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import cython_ext
from engine.changes import RowChange, Transaction
from engine.dataflow.expr import walk
from engine.dataflow.node import Cols, Node, Runtime
from engine.dataflow.ops.aggregate import AggregateNode
from engine.dataflow.ops.base import BaseNode
from engine.dataflow.ops.distinct import DistinctNode, SetOpNode
from engine.dataflow.ops.filter import FilterNode
from engine.dataflow.ops.join import JoinNode
from engine.dataflow.ops.project import ProjectNode
from engine.dataflow.ops.reader import ReaderNode
from engine.dataflow.ops.span_reader import SpanReaderNode
from engine.dataflow.ops.topk import TopKNode
from engine.dataflow.ops.union import UnionNode
from engine.dataflow.reach import Targets, prune, targets
from engine.dataflow.records import Delta, Row, consolidate, dedupe
from engine.plan import ir

Pending = dict[int, list[Delta]]
PendingEv = dict[int, list[list[Row]]]


def _uniq(cols: Iterable[int]) -> Cols:
    return tuple(dict.fromkeys(cols))


def _has_param(rel: ir.Rel) -> bool:
    exprs: list[ir.Expr] = []
    if isinstance(rel, ir.Filter):
        exprs.append(rel.predicate)
    elif isinstance(rel, ir.Project):
        exprs.extend(rel.exprs)
    elif isinstance(rel, ir.Aggregate):
        exprs.extend(e for a in rel.aggs for e in a.exprs)
    if any(isinstance(sub, ir.Param) for e in exprs for sub in walk(e)):
        return True
    return any(_has_param(c) for c in ir.children(rel))


class Graph:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.nodes: dict[int, Node] = {}
        self.by_sig: dict[Hashable, Node] = {}
        self.sig_of: dict[int, Hashable] = {}
        self.bases: dict[int, BaseNode] = {}
        self.caches: dict[str, tuple[ReaderNode, frozenset[int]]] = {}
        #: per base table oid: its first stateful nodes below (``reach.targets``), computed on
        #: first use and forgotten whenever a node is added or removed
        self.reach: dict[int, Targets] = {}
        self._next = 1

    # ------------------------------------------------------------------ migrations
    def add_cache(self, name: str, plan: ir.Reader) -> ReaderNode:
        if name in self.caches:
            raise ValueError(f"cache {name!r} exists")
        if _has_param(plan.input):
            raise ValueError("a dataflow plan cannot contain parameters: bind them as reader keys")
        closure: list[int] = []
        source = self._build(plan.input, _uniq(plan.key), closure)
        kind = ReaderNode if plan.span is None else SpanReaderNode
        reader = self._node(("reader", plan, source.nid), closure,
                            lambda nid: kind(nid, source, plan, self.rt))
        assert isinstance(reader, ReaderNode)
        nids = frozenset(closure)
        for nid in nids:
            self.nodes[nid].refs += 1
        self.caches[name] = (reader, nids)
        return reader

    def drop_cache(self, name: str) -> None:
        _, nids = self.caches.pop(name)
        for nid in sorted(nids, reverse=True):
            node = self.nodes[nid]
            node.refs -= 1
            if node.refs == 0:
                self._remove(node)

    def _remove(self, node: Node) -> None:
        for source in node.inputs:
            source.children = [(c, i) for c, i in source.children if c is not node]
        node.clear()
        self.reach.clear()
        del self.nodes[node.nid]
        del self.by_sig[self.sig_of.pop(node.nid)]
        if isinstance(node, BaseNode):
            del self.bases[node.table.oid]

    def _node(self, sig: Hashable, closure: list[int], make: Callable[[int], Node]) -> Node:
        node = self.by_sig.get(sig)
        if node is None:
            nid, self._next = self._next, self._next + 1
            node = make(nid)
            self.reach.clear()
            self.nodes[nid] = self.by_sig[sig] = node
            self.sig_of[nid] = sig
            for i, source in enumerate(node.inputs):
                source.children.append((node, i))
        closure.append(node.nid)
        return node

    def _build(self, rel: ir.Rel, demand: Cols, closure: list[int]) -> Node:
        if isinstance(rel, ir.Scan):
            return self._base(rel.table, demand, closure)
        if isinstance(rel, ir.Filter):
            src = self._build(rel.input, demand, closure)
            return self._node(("filter", rel.predicate, src.nid), closure,
                              lambda nid: FilterNode(nid, src, rel.predicate))
        if isinstance(rel, ir.Project):
            mapped = _uniq(e.index for c in demand
                           if isinstance(e := rel.exprs[c], ir.ColumnRef))
            src = self._build(rel.input, mapped, closure)
            return self._node(("project", rel.exprs, src.nid), closure,
                              lambda nid: ProjectNode(nid, src, rel.exprs))
        if isinstance(rel, ir.Join):
            left = self._build(rel.left, _uniq(rel.left_keys), closure)
            right = self._build(rel.right, _uniq(rel.right_keys), closure)
            sig = ("join", rel.left_keys, rel.right_keys, rel.kind, left.nid, right.nid)
            return self._node(sig, closure, lambda nid: JoinNode(
                nid, left, right, rel.left_keys, rel.right_keys, rel.kind))
        if isinstance(rel, ir.UnionAll):
            srcs = [self._build(i, demand, closure) for i in rel.inputs]
            return self._node(("union", tuple(s.nid for s in srcs)), closure,
                              lambda nid: UnionNode(nid, srcs))
        return self._build_stateful(rel, demand, closure)

    def _build_stateful(self, rel: ir.Rel, demand: Cols, closure: list[int]) -> Node:
        if isinstance(rel, ir.Aggregate):
            kp = _uniq(c for c in demand if c < len(rel.group_by))
            src = self._build(rel.input, tuple(rel.group_by[i] for i in kp), closure)
            sig = ("aggregate", rel.group_by, rel.aggs, kp, src.nid)
            return self._node(sig, closure, lambda nid: AggregateNode(
                nid, src, rel.group_by, rel.aggs, kp, self.rt))
        if isinstance(rel, ir.Distinct):
            src = self._build(rel.input, demand, closure)
            kind = rel.setop
            if kind is not None:
                return self._node(("setop", kind, demand, src.nid), closure,
                                  lambda nid: SetOpNode(nid, src, demand, kind, self.rt))
            return self._node(("distinct", demand, src.nid), closure,
                              lambda nid: DistinctNode(nid, src, demand, self.rt))
        if isinstance(rel, ir.TopK):
            kp = tuple(i for i, g in enumerate(rel.group_by) if g in demand)
            src = self._build(rel.input, tuple(rel.group_by[i] for i in kp), closure)
            tsig: Hashable = ("topk", rel.group_by, rel.order_by, rel.limit, rel.offset, kp,
                              src.nid)
            return self._node(tsig, closure, lambda nid: TopKNode(
                nid, src, rel.group_by, rel.order_by, rel.limit, rel.offset, kp, self.rt))
        raise TypeError(f"not a relation: {rel!r}")

    def _base(self, table: ir.TableRef, demand: Cols, closure: list[int]) -> Node:
        existing = self.bases.get(table.oid)
        if existing is not None and existing.table != table:
            raise ValueError(f"table {table.name} (oid {table.oid}) is in the graph with a "
                             "different definition; drop its caches first")
        node = self._node(("base", table.oid), closure,
                          lambda nid: BaseNode(nid, table, self.rt))
        assert isinstance(node, BaseNode)
        self.bases[table.oid] = node
        node.store.index(demand)
        return node

    # ------------------------------------------------------------------ batches
    def apply(self, txn: Transaction) -> set[int]:
        """Apply one upstream transaction as one batch; the tables it changes."""
        oids = {c.table_oid for c in txn.changes}
        per_base: dict[int, Sequence[RowChange]]
        if len(oids) == 1:  # the common case: the changes of one table, in order
            per_base = {oid: txn.changes for oid in oids if oid in self.bases}
        else:
            lists: dict[int, list[RowChange]] = {}
            for change in txn.changes:
                if change.table_oid in self.bases:
                    lists.setdefault(change.table_oid, []).append(change)
            per_base = dict(lists)
        if not per_base:
            return oids
        pending: Pending = {}
        pending_ev: PendingEv = {}
        for oid, changes in per_base.items():
            base = self.bases[oid]
            delta, evictions = base.apply(changes)
            if evictions:  # (rows for keys no state below holds stop here: ``reach``)
                if oid not in self.reach:
                    self.reach[oid] = targets(base)
                evictions = prune(self.reach[oid], evictions)
            emit(base, delta, evictions, pending, pending_ev)
        run(self.nodes, pending, pending_ev)
        return oids

    def evict(self, nid: int, key: Hashable) -> None:
        """Make ``key`` missing at node ``nid`` and evict what depends on it downstream."""
        node = self.nodes.get(nid)
        if node is None:
            return
        rows = node.evict_key(key)
        pending: Pending = {}
        pending_ev: PendingEv = {}
        emit(node, [], rows, pending, pending_ev)
        run(self.nodes, pending, pending_ev)


def emit(node: Node, delta: Delta, evictions: list[Row], pending: Pending,
         pending_ev: PendingEv) -> None:
    """Queue ``node``'s output for its children: the delta (consolidated unless the node
    says it is) and the eviction rows (deduplicated), per child input. A list is shared by
    the children it goes to (``process`` and ``evict_rows`` never change their inputs)."""
    if delta and not node.consolidated:
        delta = consolidate(delta)
    if evictions:
        evictions = dedupe(evictions)
    for child, i in node.children:
        if delta:
            _put(pending, child, i, delta)
        if evictions:
            _put(pending_ev, child, i, evictions)


def _put(pending: Pending | PendingEv, child: Node, i: int, rows: list[Any]) -> None:
    slots = pending.get(child.nid)
    if slots is None:
        slots = pending[child.nid] = [[] for _ in child.inputs]
    slots[i] = rows if not slots[i] else slots[i] + rows


def run(nodes: dict[int, Node], pending: Pending, pending_ev: PendingEv) -> None:
    """Process the queued nodes in id (topological) order until nothing is queued; the
    batch loop (with a Cython twin)."""
    heap = list(set(pending) | set(pending_ev))
    heapq.heapify(heap)
    queued = set(heap)
    while heap:
        nid = heapq.heappop(heap)
        node = nodes[nid]
        deltas = pending.pop(nid, None)
        evs = pending_ev.pop(nid, None)
        out, ev = node.process(deltas) if deltas is not None else ([], [])
        if evs is not None:
            ev = ev + node.evict_rows(evs)
        if not out and not ev:
            continue
        emit(node, out, ev, pending, pending_ev)
        for child, _ in node.children:
            if child.nid not in queued:
                queued.add(child.nid)
                heapq.heappush(heap, child.nid)


#: The pure-Python kernels (the parity test compares the Cython twins with these).
#: the pure references of the compiled twin (``<name>_python``, see ``cython_ext``)
emit_python = emit
run_python = run

_fast = cython_ext.load("graph")
if _fast is not None:
    _fast.configure(consolidate, dedupe)
    emit = _fast.emit
    run = _fast.run
