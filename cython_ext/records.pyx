# cython: language_level=3
"""Twin of ``engine.dataflow.records`` kernels: exact_key, row_key, same_print, consolidate,
key_of, row_size, bag_add, bag_rows, apply_bag.

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


cdef object _is_nan = Decimal.is_nan  # the unbound method: no attribute lookup per value


cpdef tuple row_key(tuple row):
    cdef object v, t
    for v in row:
        t = type(v)
        if t is float:
            if v != v:
                return exact_key(row)
        elif t is Decimal and _is_nan(v):
            return exact_key(row)
    return row


cdef inline bint _inexact(object v):
    cdef object t = type(v)
    return t is float or t is Decimal


cpdef bint same_print(tuple a, tuple b) except -1:
    cdef Py_ssize_t i, n = len(a)
    cdef object x, y
    if a is b:
        return True
    if len(b) != n:
        raise ValueError("rows of different widths")
    for i in range(n):
        x = a[i]
        y = b[i]
        if x is not y and (_inexact(x) or _inexact(y)) and exact_key((x,)) != exact_key((y,)):
            return False
    return True


cpdef list consolidate(object delta):
    cdef list items = delta if type(delta) is list else list(delta)
    cdef dict acc = {}
    cdef object row, w, k
    cdef list entry
    for row, w in items:
        k = row_key(row)
        entry = acc.get(k)
        if entry is None:
            acc[k] = [row, w]
        elif same_print(entry[0], row):
            entry[1] = entry[1] + w
        else:
            return _consolidate_exact(items)
    return [(entry[0], entry[1]) for entry in acc.values() if entry[1]]


cdef list _consolidate_exact(list items):
    cdef dict acc = {}
    cdef object row, w, k
    cdef list entry
    for row, w in items:
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


cpdef bag_add(dict bag, tuple row, object w):
    cdef object k = row_key(row), n
    cdef list entry = bag.get(k)
    cdef Py_ssize_t i
    if entry is None:
        bag[k] = [row, w]
        return
    for i in range(0, len(entry), 2):
        if same_print(entry[i], row):
            n = entry[i + 1] + w
            if n:
                entry[i + 1] = n
            elif len(entry) == 2:
                del bag[k]
            else:
                del entry[i:i + 2]
            return
    entry += [row, w]


cpdef list bag_rows(dict bag):
    cdef list rows = [], entry
    cdef Py_ssize_t i
    for entry in bag.values():
        for i in range(0, len(entry), 2):
            rows.extend([entry[i]] * entry[i + 1])
    return rows


cpdef Py_ssize_t apply_bag(dict state, dict answers, list delta, object key_cols) except? -1:
    cdef Py_ssize_t total = 0, w
    cdef object row, k, last = None
    cdef dict bag = None
    for row, w in delta:
        k = key_of(row, key_cols)
        if last is None or k != last:  # runs of one key (-old, +new) look it up once
            last = k
            bag = state.get(k)
            if bag is not None:
                answers.pop(k, None)
        if bag is None:
            continue
        bag_add(bag, row, w)
        total += row_size(row) * w
    return total
