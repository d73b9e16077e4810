# cython: language_level=3
# Declarations of the accumulator twins (cython_ext/accumulators.pyx), so that the
# aggregate's twin (cython_ext/aggregate.pyx) calls them without Python dispatch.

cpdef Py_ssize_t decimal_scale(object value) except -1


cdef class CountStar:
    cdef public object n
    cdef public int oid
    cpdef add(self, object value, object weight)
    cpdef value(self)


cdef class Count(CountStar):
    cpdef add(self, object value, object weight)


cdef class IntSum:
    cdef public object total
    cdef public object nonnull
    cdef public int oid
    cpdef add(self, object value, object weight)
    cpdef value(self)


cdef class NumericSum:
    cdef public object total
    cdef public long long nonnull, finite, nan, pinf, ninf
    cdef public dict scales
    cdef public Py_ssize_t maxscale, seen
    cdef public bint max_ok
    cdef public int oid
    cpdef add(self, object value, object weight)
    cpdef exact_total(self)
    cpdef value(self)


cdef class NumericAvg(NumericSum):
    cpdef value(self)
