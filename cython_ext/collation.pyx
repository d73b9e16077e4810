# cython: language_level=3
"""Compiled twin of ``engine.values.collation.CollKey``: a string's place in a libc
collation's order (``strcoll_l`` under a ``locale_t``, ties broken by bytes), the same
contract as the pure class (``CollKey_python``), without the ctypes call per comparison."""

from cpython.bytes cimport PyBytes_AS_STRING


cdef extern from "locale.h":
    ctypedef void *locale_t

cdef extern from "string.h":
    int strcoll_l(const char *a, const char *b, locale_t loc) nogil


cdef class CollKey:
    """``CollKey(text, handle)``: ``handle`` is the ``locale_t`` from ``newlocale``."""

    cdef readonly str text
    cdef readonly bytes raw
    cdef readonly size_t handle

    def __init__(self, str text, size_t handle):
        self.text = text
        self.raw = text.encode()
        self.handle = handle

    cdef int _cmp(self, CollKey other):
        if self.raw == other.raw:
            return 0
        cdef int found = strcoll_l(PyBytes_AS_STRING(self.raw), PyBytes_AS_STRING(other.raw),
                                   <locale_t>self.handle)
        if found:
            return found
        return -1 if self.raw < other.raw else 1

    def __richcmp__(self, other, int op):
        if not isinstance(other, CollKey):
            if op == 2:
                return False
            if op == 3:
                return True
            return NotImplemented
        if op == 2:
            return self.raw == (<CollKey>other).raw
        if op == 3:
            return self.raw != (<CollKey>other).raw
        cdef int c = self._cmp(<CollKey>other)
        if op == 0:
            return c < 0
        if op == 1:
            return c <= 0
        if op == 4:
            return c > 0
        return c >= 0

    def __hash__(self):
        return hash(self.raw)

    def __repr__(self):
        return f"CollKey({self.text!r})"
