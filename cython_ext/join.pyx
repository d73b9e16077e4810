# cython: language_level=3
"""Twin of ``engine.dataflow.ops.join.join_deltas``: the join's delta loop (same contract,
parity-tested). Lookups go through the inputs' ``pull``/``count`` and a miss through the
node's ``_miss_rows``, exactly as in the pure loop.

Imports nothing from the project: ``configure`` receives the pull context class.
"""

cdef object PullCtx = None


def configure(pull_ctx):
    global PullCtx
    PullCtx = pull_ctx


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
    ctx = PullCtx(lookup=True)
    left, right = node.inputs
    for j, sides in by_j.items():
        dl = sides[0]
        dr = sides[1]
        found = right.pull(rk, j, ctx) if dl else []
        r_new = 0
        if left_join and found is not None:
            r_new = len(found) if dl else right.count(rk, j, ctx)
        rrows = found
        lrows = left.pull(lk, j, ctx) if dr else []
        if rrows is None or lrows is None or r_new is None:
            evict.extend(node._miss_rows(j, dl, dr))
            continue
        for lrow, lw in dl:
            for rrow in rrows:
                out.append((lrow + rrow, lw))
        for rrow, rw in dr:
            for lrow in lrows:
                out.append((lrow + rrow, rw))
            for lrow, lw in dl:
                out.append((lrow + rrow, -lw * rw))
        if left_join:
            _padding(pad, dl, dr, lrows, r_new, out)
    return out, evict


cdef void _padding(tuple pad, list dl, list dr, list lrows, object r_new, list out) except *:
    cdef tuple lrow
    cdef object lw, w, r_old, n
    cdef dict old
    if not dr:
        if r_new == 0:
            for lrow, lw in dl:
                out.append((lrow + pad, lw))
        return
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
