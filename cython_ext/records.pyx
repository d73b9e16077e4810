# cython: language_level=3
"""Twin of ``engine.dataflow.records`` kernels: exact_key, row_key, same_print, consolidate,
key_of, row_size, bag_add, bag_rows, bag_size, apply_bag.

Same contracts as the pure functions (parity-tested); imports nothing from the project.
"""

from cpython.exc cimport PyErr_Occurred
from cpython.object cimport PyObject
from decimal import Decimal
from cython_ext.rowkeys cimport key_of as _key, same_cols as _same_cols

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


cdef extern from "Python.h":
    # CPython's dictionary operations with a precomputed hash: a bag update hashes its row
    # once (tuples do not cache their hash), not once for the lookup and once for the store
    PyObject* _PyDict_GetItem_KnownHash(object mp, object key, Py_hash_t hash)
    int _PyDict_SetItem_KnownHash(object mp, object key, object item, Py_hash_t hash) except -1
    int _PyDict_DelItem_KnownHash(object mp, object key, Py_hash_t hash) except -1


cdef Py_ssize_t SMALL_BAG = 8


cdef inline bint _same_row(tuple x, tuple row, tuple k) except -1:
    if x is row:
        return True
    if k is row:
        return x == row and same_print(x, row)
    return row_key(x) == k and same_print(x, row)


cdef inline Py_ssize_t _find(list small, tuple row) except -2:
    """The position of ``row`` in a list bag, or -1: rows equal to it are tried first (no
    ``row_key`` needed); only a row that matches none of them and holds a NaN (so that it
    is not its own key) is compared by key."""
    cdef Py_ssize_t i, n = len(small)
    cdef tuple x, k
    if n == 0:
        return -1
    for i in range(0, n, 2):
        x = small[i]
        if x is row or (x == row and same_print(x, row)):
            return i
    k = row_key(row)
    if k is not row:
        for i in range(0, n, 2):
            if _same_row(<tuple>small[i], row, k):
                return i
    return -1


cpdef object bag_add(object bag, tuple row, object w):
    cdef list small, pairs
    cdef dict big
    cdef Py_ssize_t i, n
    cdef object m
    if type(bag) is list:
        small = bag
        n = len(small)
        i = _find(small, row)
        if i >= 0:
            m = small[i + 1] + w
            if m:
                small[i + 1] = m
            elif n == 2:
                small.clear()
            else:
                del small[i + 1]
                del small[i]
            return small
        if n < 2 * SMALL_BAG:
            small.append(row)
            small.append(w)
            return small
        big = {}
        for i in range(0, n, 2):
            _dict_add(big, <tuple>small[i], small[i + 1])
        _dict_add(big, row, w)
        return big
    _dict_add(<dict>bag, row, w)
    return bag


cdef int _dict_add(dict bag, tuple row, object w) except -1:
    cdef object k = row_key(row), n
    cdef Py_hash_t h = hash(k)
    cdef PyObject* found = _PyDict_GetItem_KnownHash(bag, k, h)
    cdef list entry
    cdef Py_ssize_t i
    if found == NULL:
        if PyErr_Occurred():
            return -1
        _PyDict_SetItem_KnownHash(bag, k, [row, w], h)
        return 0
    entry = <list>found
    for i in range(0, len(entry), 2):
        if same_print(entry[i], row):
            n = entry[i + 1] + w
            if n:
                entry[i + 1] = n
            elif len(entry) == 2:
                _PyDict_DelItem_KnownHash(bag, k, h)
            else:
                del entry[i:i + 2]
            return 0
    entry += [row, w]
    return 0


cpdef list bag_rows(object bag):
    cdef list rows = [], entry
    cdef Py_ssize_t i
    for entry in ([bag] if type(bag) is list else (<dict>bag).values()):
        for i in range(0, len(entry), 2):
            rows.extend([entry[i]] * entry[i + 1])
    return rows


cpdef Py_ssize_t bag_size(object bag) except? -1:
    cdef list entry
    cdef Py_ssize_t i, total = 0
    for entry in ([bag] if type(bag) is list else (<dict>bag).values()):
        for i in range(0, len(entry), 2):
            total += row_size(<tuple>entry[i]) * <Py_ssize_t>entry[i + 1]
    return total




cpdef Py_ssize_t apply_bag(dict state, dict answers, list delta, object key_cols) except? -1:
    cdef Py_ssize_t total = 0, w
    cdef object item, k = None, bag = None, new
    cdef tuple row, last = None
    cdef tuple cols = tuple(key_cols)
    for item in delta:
        row = (<tuple>item)[0]
        w = (<tuple>item)[1]
        if last is None or not _same_cols(row, last, cols):  # a run of one key (-old,
            # +new) looks it up once
            last = row
            k = _key(row, cols)
            bag = state.get(k)
            if bag is not None:
                answers.pop(k, None)
        if bag is None:
            continue
        new = bag_add(bag, row, w)
        if new is not bag:
            state[k] = new
            bag = new
        total += row_size(row) * w
    return total
