# cython: language_level=3
"""Twin of ``engine.dataflow.records`` kernels: consolidate, key_of, row_size, apply_bag.

Same contracts as the pure functions (parity-tested); imports nothing from the project.
"""

from decimal import Decimal

cdef object _NoneType = type(None)


cpdef list consolidate(object delta):
    cdef dict acc = {}
    cdef object row, w, prev
    for row, w in delta:
        prev = acc.get(row)
        acc[row] = w if prev is None else prev + w
    return [(row, w) for row, w in acc.items() if w]


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
    cdef Py_ssize_t total = 0, size, n, w
    cdef object row, k, prev
    cdef dict bag
    for row, w in delta:
        k = key_of(row, key_cols)
        bag = state.get(k)
        if bag is None:
            continue
        prev = bag.get(row)
        n = (0 if prev is None else <Py_ssize_t>prev) + w
        if n:
            bag[row] = n
        else:
            del bag[row]
        size = row_size(row) * w
        sizes[k] = sizes[k] + size
        total += size
        answers.pop(k, None)
    return total
