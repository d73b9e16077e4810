# cython: language_level=3
"""Twins of the hot encoders in proxy.wire.backend (same contracts; see that module).

``encode_data_row(values)``: a whole DataRow message; each value bytes, bytearray or None.
``encode_row_description(fields)``: a whole RowDescription (FieldDescription-like objects).
``encode_command_complete(tag)``: a whole CommandComplete message.
Out-of-range numbers and NUL in strings raise ValueError, as the pure versions do.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy


cdef inline void _put32(unsigned char* p, unsigned long v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


def encode_data_row(values):
    cdef Py_ssize_t ncols = len(values)
    cdef Py_ssize_t total = 7, i, size
    cdef object value
    cdef bytes out
    cdef unsigned char* w
    cdef Py_buffer view
    if ncols > 32767:
        raise ValueError(f"a DataRow holds at most 32767 values, not {ncols}")
    values = tuple(values)
    for i in range(ncols):
        value = values[i]
        if value is None:
            total += 4
        elif type(value) is bytes:
            total += 4 + PyBytes_GET_SIZE(value)
        else:
            total += 4 + len(memoryview(value).cast("B"))
    if total - 1 > 0x7FFFFFFF:
        raise ValueError("DataRow too large")
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    w[0] = 68  # 'D'
    _put32(w + 1, <unsigned long>(total - 1))
    w[5] = (ncols >> 8) & 0xFF
    w[6] = ncols & 0xFF
    w += 7
    for i in range(ncols):
        value = values[i]
        if value is None:
            _put32(w, 0xFFFFFFFF)
            w += 4
        elif type(value) is bytes:
            size = PyBytes_GET_SIZE(value)
            _put32(w, <unsigned long>size)
            memcpy(w + 4, PyBytes_AS_STRING(value), size)
            w += 4 + size
        else:
            PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
            try:
                _put32(w, <unsigned long>view.len)
                memcpy(w + 4, view.buf, view.len)
                w += 4 + view.len
            finally:
                PyBuffer_Release(&view)
    return out


cdef inline void _put16(unsigned char* p, unsigned int v) noexcept:
    p[0] = (v >> 8) & 0xFF
    p[1] = v & 0xFF


cdef inline bytes _cstring(object text):
    cdef bytes data = text.encode("utf-8")
    if b"\x00" in data:
        raise ValueError(f"string for the wire contains NUL: {text!r}")
    return data


cdef inline unsigned long _ranged(object value, long long low, long long high) except? 0:
    if not (low <= value <= high):
        raise ValueError(f"{value} is out of range for the wire field")
    return <unsigned long>(<long long>value)


def encode_command_complete(tag):
    cdef bytes data = _cstring(tag)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size + 6)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(out)
    w[0] = 67  # 'C'
    _put32(w + 1, <unsigned long>(size + 5))
    memcpy(w + 5, PyBytes_AS_STRING(data), size)
    w[5 + size] = 0
    return out


def encode_row_description(fields):
    cdef Py_ssize_t nfields = len(fields)
    cdef Py_ssize_t total = 7, i, size
    cdef list names = []
    cdef bytes name, out
    cdef unsigned char* w
    if nfields > 32767:
        raise ValueError(f"a RowDescription holds at most 32767 fields, not {nfields}")
    fields = tuple(fields)
    for f in fields:
        name = _cstring(f.name)
        names.append(name)
        total += PyBytes_GET_SIZE(name) + 19
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    w[0] = 84  # 'T'
    _put32(w + 1, <unsigned long>(total - 1))
    _put16(w + 5, <unsigned int>nfields)
    w += 7
    for i in range(nfields):
        f = fields[i]
        name = <bytes>names[i]
        size = PyBytes_GET_SIZE(name)
        memcpy(w, PyBytes_AS_STRING(name), size)
        w[size] = 0
        w += size + 1
        _put32(w, _ranged(f.table_oid, 0, 0xFFFFFFFF))
        _put16(w + 4, <unsigned int>_ranged(f.column_attr, -32768, 32767))
        _put32(w + 6, _ranged(f.type_oid, 0, 0xFFFFFFFF))
        _put16(w + 10, <unsigned int>_ranged(f.type_size, -32768, 32767))
        _put32(w + 12, _ranged(f.type_modifier, -2147483648, 2147483647))
        _put16(w + 16, <unsigned int>_ranged(f.format, -32768, 32767))
        w += 18
    return out
