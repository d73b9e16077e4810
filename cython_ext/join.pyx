# cython: language_level=3
"""Twin of ``engine.dataflow.ops.join.join_deltas``: the join's delta loop (same contract,
parity-tested). Lookups go through the inputs' ``pull``/``count`` and a miss through the
node's ``_miss_rows``, exactly as in the pure loop - except that a lookup of a *present* key
of a base node's index or of an aggregate's state key reads their dictionaries directly
(``_Side``: what ``pull``/``count`` would return there, without their bookkeeping, which a
join's lookup of a present key does not do either).

Imports nothing from the project: ``configure`` receives the pull context class and the
base and aggregate node classes.
"""

cdef object PullCtx = None
cdef object BaseNode = None
cdef object AggregateNode = None
cdef object consolidate = None
cdef object _MISSING = object()


def configure(pull_ctx, base_node, aggregate_node, consolidate_fn):
    global PullCtx, BaseNode, AggregateNode, consolidate
    PullCtx, BaseNode, AggregateNode = pull_ctx, base_node, aggregate_node
    consolidate = consolidate_fn


cdef enum:
    GENERIC = 0
    BASE = 1
    AGGREGATE = 2


cdef class _Side:
    """One input's lookups by join value for one batch (``rows``: ``pull``, ``count``)."""
    cdef object node, ctx
    cdef tuple cols
    cdef int kind
    cdef set present
    cdef dict by_key, stored, outs, by_d
    cdef bint pk_index, has_pk
    cdef bint distinct  # the last ``rows`` had no repeated row

    def __init__(self, object node, tuple cols, object ctx):
        cdef object store, idx
        self.node, self.cols, self.ctx, self.kind = node, cols, ctx, GENERIC
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
            self.present, self.by_d, self.outs = node.present, node.by_d, node.outs

    cdef object rows(self, tuple j):
        cdef object entry, idents, ident, out
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
        if self.kind == AGGREGATE and j in self.present:
            if not self.by_d.get(j):
                return []
            out = self.outs.get(j, _MISSING)
            if out is not _MISSING:
                return [] if out is None else [out]
        found = self.node.pull(self.cols, j, self.ctx)
        self.distinct = found is None or len(found) < 2
        return found

    cdef object count(self, tuple j):
        cdef object entry, idents, ident, out
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
            if not self.by_d.get(j):
                return 0
            out = self.outs.get(j, _MISSING)
            if out is not _MISSING:
                return 0 if out is None else 1
        return self.node.count(self.cols, j, self.ctx)


cdef inline tuple _key(tuple row, tuple cols):
    cdef Py_ssize_t n = len(cols), i
    if n == 1:
        return (row[<Py_ssize_t>cols[0]],)
    cdef list out = [None] * n
    for i in range(n):
        out[i] = row[<Py_ssize_t>cols[i]]
    return tuple(out)


cdef inline bint _has_null(tuple j):
    cdef object v
    for v in j:
        if v is None:
            return True
    return False


def join_deltas(object node, list dl_all, list dr_all):
    cdef list out = [], evict = [], dl, dr, rrows, lrows
    cdef bint left_join = node.kind == "left"
    cdef dict by_j = {}
    cdef tuple lk = node.lk, rk = node.rk, pad = node.pad, row, j, lrow, rrow, sides
    cdef object w, lw, rw, r_new, found, ctx, left, right
    cdef bint merge = False  # the output may repeat a row: consolidate it
    for row, w in dl_all:
        j = _key(row, lk)
        if _has_null(j):
            if left_join:
                out.append((row + pad, w))
            continue
        sides = by_j.get(j)
        if sides is None:
            by_j[j] = ([(row, w)], [])
        else:
            (<list>sides[0]).append((row, w))
    for row, w in dr_all:
        j = _key(row, rk)
        if _has_null(j):
            continue
        sides = by_j.get(j)
        if sides is None:
            by_j[j] = ([], [(row, w)])
        else:
            (<list>sides[1]).append((row, w))
    if not by_j:
        return out, evict
    ctx = PullCtx(lookup=True)
    left, right = node.inputs
    cdef _Side lside = _Side(left, lk, ctx), rside = _Side(right, rk, ctx)
    for j, sides in by_j.items():
        dl = sides[0]
        dr = sides[1]
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
