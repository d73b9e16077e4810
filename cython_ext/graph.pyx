# cython: language_level=3
"""Twin of ``engine.dataflow.graph``'s batch loop: ``emit`` (queue a node's output for its
children) and ``run`` (process the queued nodes in id order) - same contracts,
parity-tested. Nodes are processed through their own ``process``/``evict_rows``.

Imports nothing from the project: ``configure`` receives ``records.consolidate`` and
``records.dedupe``.
"""

from heapq import heapify, heappop, heappush

cdef object consolidate = None, dedupe = None


def configure(consolidate_fn, dedupe_fn):
    global consolidate, dedupe
    consolidate, dedupe = consolidate_fn, dedupe_fn


cpdef emit(object node, list delta, list evictions, dict pending, dict pending_ev):
    cdef object item, child
    cdef Py_ssize_t i
    if delta and not node.consolidated:
        delta = consolidate(delta)
    if evictions:
        evictions = dedupe(evictions)
    for item in <list>node.children:
        child = (<tuple>item)[0]
        i = (<tuple>item)[1]
        if delta:
            _put(pending, child, i, delta)
        if evictions:
            _put(pending_ev, child, i, evictions)


cdef int _put(dict pending, object child, Py_ssize_t i, list rows) except -1:
    cdef object nid = child.nid
    cdef list slots = pending.get(nid), cur
    cdef Py_ssize_t k, n
    if slots is None:
        n = len(child.inputs)
        slots = [None] * n
        for k in range(n):
            slots[k] = []
        pending[nid] = slots
    cur = slots[i]
    slots[i] = rows if not cur else cur + rows
    return 0


def run(dict nodes, dict pending, dict pending_ev):
    cdef list heap = list(set(pending) | set(pending_ev))
    cdef set queued
    cdef object nid, node, deltas, evs, out, ev, item, cnid
    heapify(heap)
    queued = set(heap)
    while heap:
        nid = heappop(heap)
        node = nodes[nid]
        deltas = pending.pop(nid, None)
        evs = pending_ev.pop(nid, None)
        if deltas is not None:
            out, ev = node.process(deltas)
        else:
            out, ev = [], []
        if evs is not None:
            ev = ev + node.evict_rows(evs)
        if not out and not ev:
            continue
        emit(node, out, ev, pending, pending_ev)
        for item in <list>node.children:
            cnid = (<tuple>item)[0].nid
            if cnid not in queued:
                queued.add(cnid)
                heappush(heap, cnid)
