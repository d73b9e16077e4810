# cython: language_level=3
"""What other twins cimport from ``cython_ext.records`` (called through its C API)."""

cpdef Py_ssize_t row_size(tuple row) except -1
