# cython: language_level=3
"""Row-key helpers shared by the engine's twins (inline, so this header has no module of its
own): the key tuple of a row's columns and the equality of two rows' keys, with the
semantics of ``tuple(row[c] for c in cols)`` and of comparing two such tuples."""


cdef inline tuple key_of(tuple row, tuple cols):
    """``tuple(row[c] for c in cols)``."""
    cdef Py_ssize_t n = len(cols), i
    if n == 1:
        return (row[<Py_ssize_t>cols[0]],)
    cdef list out = [None] * n
    for i in range(n):
        out[i] = row[<Py_ssize_t>cols[i]]
    return tuple(out)


cdef inline bint same_cols(tuple a, tuple b, tuple cols) except -1:
    """``a`` and ``b`` have equal values in ``cols`` (equal keys)."""
    cdef object x, y
    cdef Py_ssize_t c
    for c in cols:
        x = a[c]
        y = b[c]
        if x is not y and not (x == y):
            return False
    return True
