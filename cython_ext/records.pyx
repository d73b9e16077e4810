# cython: language_level=3
"""Twin of ``engine.dataflow.records`` kernels: exact_key, consolidate, key_of, row_size,
apply_bag.

Same contracts as the pure functions (parity-tested); imports nothing from the project.
"""

from decimal import Decimal

cdef object _NoneType = type(None)
cdef str _EXACT = "\x00exact"


cpdef tuple exact_key(tuple row):
    cdef object v, t
    for v in row:
        t = type(v)
        if t is float or t is Decimal:
            return tuple([(_EXACT, str(x)) if type(x) is Decimal else
                          (_EXACT, repr(x)) if type(x) is float else x for x in row])
    return row


cpdef list consolidate(object delta):
    cdef dict acc = {}
    cdef object row, w, k
    cdef list entry
    for row, w in delta:
        k = exact_key(row)
        entry = acc.get(k)
        if entry is None:
            acc[k] = [row, w]
        else:
            entry[1] = entry[1] + w
    return [(entry[0], entry[1]) for entry in acc.values() if entry[1]]


cpdef tuple key_of(object row, object cols):
    cdef Py_ssize_t n = len(cols), i
    if n == 1:
        return (row[cols[0]],)
    cdef list out = [None] * n
    for i in range(n):
        out[i] = row[cols[i]]
    return tuple(out)


cpdef Py_ssize_t row_size(tuple row) except -1:
    cdef Py_ssize_t size = 40 + 8 * len(row)
    cdef object v, t
    for v in row:
        t = type(v)
        if t is int:
            size += 32
        elif t is _NoneType or t is bool:
            pass
        elif t is str:
            size += 49 + len(<str>v)
        elif t is float:
            size += 24
        elif t is Decimal:
            size += 104
        elif t is bytes:
            size += 33 + len(<bytes>v)
        else:
            size += 64
    return size


cpdef Py_ssize_t apply_bag(dict state, dict answers, dict sizes, list delta,
                           object key_cols) except? -1:
    cdef Py_ssize_t total = 0, size, w
    cdef object row, k, x
    cdef dict bag
    cdef list entry
    for row, w in delta:
        k = key_of(row, key_cols)
        bag = state.get(k)
        if bag is None:
            continue
        x = exact_key(row)
        entry = bag.get(x)
        if entry is None:
            bag[x] = [row, w]
        elif <Py_ssize_t>entry[1] + w:
            entry[1] = entry[1] + w
        else:
            del bag[x]
        size = row_size(row) * w
        sizes[k] = sizes[k] + size
        total += size
        answers.pop(k, None)
    return total
