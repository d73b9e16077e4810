# cython: language_level=3
"""Twin of ``engine.dataflow.ops.join.join_deltas``: the join's delta loop (same contract,
parity-tested). Lookups go through the inputs' ``pull``/``count`` and a miss through the
node's ``_miss_rows``, exactly as in the pure loop - except that a lookup of a *present* key
of a base node's index or of an aggregate's state key reads their dictionaries directly
(``_Side``: what ``pull``/``count`` would return there, without their bookkeeping, which a
join's lookup of a present key does not do either).

Imports nothing from the project: ``configure`` receives the pull context class, the base
and aggregate node classes, ``records.consolidate`` and the aggregate's ``STALE`` marker.
"""

from cython_ext.rowkeys cimport key_of as _key, same_cols as _same_cols

cdef object PullCtx = None
cdef object BaseNode = None
cdef object AggregateNode = None
cdef object consolidate = None
cdef object STALE = None


def configure(pull_ctx, base_node, aggregate_node, consolidate_fn, stale):
    global PullCtx, BaseNode, AggregateNode, consolidate, STALE
    PullCtx, BaseNode, AggregateNode = pull_ctx, base_node, aggregate_node
    consolidate, STALE = consolidate_fn, stale


cdef enum:
    GENERIC = 0
    BASE = 1
    AGGREGATE = 2


cdef class _Side:
    """One input's lookups by join value (``rows``: ``pull``, ``count``). Kept on the join
    node between batches (``JoinNode.lookups``): the dictionaries and sets it reads are
    never replaced while the node lives (a base index, once created, keeps its sets; a keyed
    node clears its own). A generic side looks again at the start of every batch (an index
    may have been created since); ``ctx`` is made per batch, when a lookup needs it."""
    cdef object node, ctx
    cdef tuple cols
    cdef int kind
    cdef set present
    cdef dict by_key, stored, groups
    cdef bint pk_index, has_pk
    cdef bint distinct  # the last ``rows`` had no repeated row

    def __init__(self, object node, tuple cols):
        self.node, self.cols, self.kind = node, cols, GENERIC
        self.setup()

    cdef setup(self):
        cdef object store, idx, node = self.node
        cdef tuple cols = self.cols
        if type(node) is BaseNode:
            store = node.store
            idx = (<dict>store.indexes).get(cols)
            if idx is not None:
                self.kind = BASE
                self.present, self.by_key, self.stored = idx.present, idx.by_key, store.rows
                self.has_pk = len(<tuple>store.pk) > 0
                self.pk_index = self.has_pk and store.pk == cols
        elif type(node) is AggregateNode and node.d_is_g and node.key_out == cols \
                and not node.full:
            self.kind = AGGREGATE
            self.present, self.groups = node.present, node.groups

    cdef object rows(self, tuple j):
        cdef object entry, idents, ident, out, st
        cdef list found
        self.distinct = True
        if self.kind == BASE and j in self.present:
            self.distinct = self.has_pk  # one row per identity
            if self.pk_index:  # the identity is the key: at most one row
                entry = self.stored.get(j)
                return [] if entry is None else [(<list>entry)[0]]
            idents = self.by_key.get(j)
            if not idents:
                return []
            found = []
            if self.has_pk:
                for ident in <set>idents:
                    found.append((<list>self.stored[ident])[0])
            else:
                for ident in <set>idents:
                    entry = self.stored[ident]
                    found.extend([(<list>entry)[0]] * <Py_ssize_t>(<list>entry)[1])
            return found
        if self.kind == AGGREGATE and j in self.present:  # the group is the key
            st = self.groups.get(j)
            if st is None:
                return []
            out = (<list>st)[2]  # the output row, unless STALE
            if out is not STALE:
                return [] if out is None else [out]
        found = self.node.pull(self.cols, j, self._ctx())
        self.distinct = found is None or len(found) < 2
        return found

    cdef object count(self, tuple j):
        cdef object entry, idents, ident, out, st
        cdef Py_ssize_t n
        if self.kind == BASE and j in self.present:
            if self.pk_index:
                return 1 if j in self.stored else 0
            idents = self.by_key.get(j)
            if not idents:
                return 0
            if self.has_pk:
                return len(<set>idents)
            n = 0
            for ident in <set>idents:
                n += <Py_ssize_t>(<list>self.stored[ident])[1]
            return n
        if self.kind == AGGREGATE and j in self.present:
            st = self.groups.get(j)
            if st is None:
                return 0
            out = (<list>st)[2]
            if out is not STALE:
                return 0 if out is None else 1
        return self.node.count(self.cols, j, self._ctx())

    cdef object _ctx(self):
        if self.ctx is None:
            self.ctx = PullCtx(lookup=True)
        return self.ctx


cdef tuple _sides(object node):
    """The node's two ``_Side`` objects, ready for a batch."""
    cdef object sides = node.lookups
    cdef _Side side
    if sides is None or (<_Side>(<tuple>sides)[0]).node is not node.inputs[0] \
            or (<_Side>(<tuple>sides)[1]).node is not node.inputs[1]:
        sides = node.lookups = (_Side(node.inputs[0], node.lk), _Side(node.inputs[1], node.rk))
    for side in <tuple>sides:
        side.ctx = None
        if side.kind == GENERIC:
            side.setup()
    return <tuple>sides


cdef inline bint _has_null(tuple j):
    cdef object v
    for v in j:
        if v is None:
            return True
    return False


cdef list _NONE = []  # an empty side of a join value (never appended to)


cdef int _group(list items, tuple cols, Py_ssize_t side, dict by_j, list nulls) except -1:
    """Add ``items`` to their join value's ``[dl, dr]`` in ``by_j`` (first-seen order); rows
    with a NULL join value go to ``nulls``. A run of rows with one join value (an aggregate's
    -old, +new) is grouped without looking its value up again."""
    cdef tuple row, j, last = None
    cdef list sides, run = None
    cdef object item
    for item in items:
        row = (<tuple>item)[0]
        if last is not None and _same_cols(row, last, cols):
            run.append(item)
            continue
        j = _key(row, cols)
        if _has_null(j):
            nulls.append(item)
            last = None
            continue
        sides = by_j.get(j)
        if sides is None:
            run = [item]
            by_j[j] = [run, _NONE] if side == 0 else [_NONE, run]
        else:
            run = sides[side]
            if run is _NONE:
                run = sides[side] = [item]
            else:
                run.append(item)
        last = row
    return 0


def join_deltas(object node, list dl_all, list dr_all):
    cdef list out = [], evict = [], dl, dr, rrows, lrows, nulls = [], sides
    cdef bint left_join = node.kind == "left"
    cdef dict by_j = {}
    cdef tuple lk = node.lk, rk = node.rk, pad = node.pad, row, j, lrow, rrow
    cdef object w, lw, rw, r_new, found, item
    cdef bint merge = False  # the output may repeat a row: consolidate it
    if dl_all:
        _group(dl_all, lk, 0, by_j, nulls)
        if left_join:
            for item in nulls:
                out.append(((<tuple>item)[0] + pad, (<tuple>item)[1]))
    if dr_all:
        _group(dr_all, rk, 1, by_j, nulls)
    if not by_j:
        return out, evict
    cdef tuple both = _sides(node)
    cdef _Side lside = both[0], rside = both[1]
    for j, sides in by_j.items():
        dl = <list>sides[0]
        dr = <list>sides[1]
        found = rside.rows(j) if dl else []
        r_new = 0
        if left_join and found is not None:
            r_new = len(found) if dl else rside.count(j)
        rrows = found
        lrows = lside.rows(j) if dr else []
        if rrows is None or lrows is None or r_new is None:
            evict.extend(node._miss_rows(j, dl, dr))
            continue
        if dl and dr:
            merge = True
        elif not (rside.distinct if dl else lside.distinct):
            merge = True
        for lrow, lw in dl:
            for rrow in rrows:
                out.append((lrow + rrow, lw))
        for rrow, rw in dr:
            for lrow in lrows:
                out.append((lrow + rrow, rw))
            for lrow, lw in dl:
                out.append((lrow + rrow, -lw * rw))
        if left_join and _padding(pad, dl, dr, lrows, r_new, out):
            merge = True
    return (consolidate(out) if merge else out), evict


cdef bint _padding(tuple pad, list dl, list dr, list lrows, object r_new,
                   list out) except -1:
    """Emit the NULL-extended rows; True when both the new and the old padding were emitted
    (they cancel: the output needs consolidating)."""
    cdef tuple lrow
    cdef object lw, w, r_old, n
    cdef dict old
    if not dr:
        if r_new == 0:
            for lrow, lw in dl:
                out.append((lrow + pad, lw))
        return False
    r_old = r_new
    for _, w in dr:
        r_old = r_old - w
    if r_new == 0:
        for lrow in lrows:
            out.append((lrow + pad, 1))
    if r_old == 0:
        old = {}
        for lrow in lrows:
            old[lrow] = old.get(lrow, 0) + 1
        for lrow, lw in dl:
            old[lrow] = old.get(lrow, 0) - lw
        for lrow, n in old.items():
            if n:
                out.append((lrow + pad, -n))
    return r_new == 0 and r_old == 0
