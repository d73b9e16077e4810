# cython: language_level=3
"""Twins of the hot encoders in pgwire.backend (same contracts; see that module).

``encode_data_row(values)``: a whole DataRow message; each value bytes, bytearray or None.
``encode_row_description(fields)``: a whole RowDescription (FieldDescription-like objects).
``encode_command_complete(tag)``: a whole CommandComplete message.
Out-of-range numbers and NUL in strings raise ValueError, as the pure versions do.
``decode_data_row_values(payload)``: the values of a DataRow payload; a malformed payload
raises the class bound with ``set_error_class`` (pgwire.backend binds ProtocolViolation).
``decode_bind_fields(payload)``: the five fields of a Bind payload (twin of
pgwire.frontend.decode_bind_fields), same error rule.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
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
    cdef bytes data = text.encode("utf-8", "surrogateescape")  # pgwire.codec.WIRE_ERRORS
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


cdef object _error = ValueError


def set_error_class(cls):
    """The exception class raised for a malformed payload (ProtocolViolation)."""
    global _error
    _error = cls


def decode_data_row_values(bytes payload not None):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(payload)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(payload)
    cdef Py_ssize_t ncols, i, pos = 2
    cdef long length
    cdef tuple out
    cdef object value
    if n < 2:
        raise _error("malformed DataRow message: truncated")
    ncols = <short>((p[0] << 8) | p[1])
    if ncols < 0:
        raise _error(f"malformed DataRow message: negative count {ncols}")
    out = PyTuple_New(ncols)
    for i in range(ncols):
        if pos + 4 > n:
            raise _error("malformed DataRow message: truncated")
        length = <int>((<unsigned int>p[pos] << 24) | (<unsigned int>p[pos + 1] << 16)
                       | (<unsigned int>p[pos + 2] << 8) | <unsigned int>p[pos + 3])
        pos += 4
        if length < 0:
            if length != -1:
                raise _error(f"malformed DataRow message: length {length}")
            value = None
        else:
            if pos + length > n:
                raise _error("malformed DataRow message: truncated")
            value = PyBytes_FromStringAndSize(<const char*>p + pos, length)
            pos += length
        Py_INCREF(value)
        PyTuple_SET_ITEM(out, i, value)
    if pos != n:
        raise _error("malformed DataRow message: unexpected trailing bytes")
    return out


cdef inline Py_ssize_t _cstring_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n) except -1:
    cdef Py_ssize_t i = pos
    while i < n:
        if p[i] == 0:
            return i
        i += 1
    raise _error("malformed Bind message: string not terminated")


cdef inline str _utf8(const unsigned char* p, Py_ssize_t start, Py_ssize_t end):
    try:
        return (<const char*>p)[start:end].decode("utf-8", "surrogateescape")
    except UnicodeDecodeError as exc:
        raise _error(f"malformed Bind message: invalid UTF-8 ({exc.reason})") from None


cdef inline int _get16(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n) except? -99999:
    if pos + 2 > n:
        raise _error("malformed Bind message: truncated")
    return <short>((p[pos] << 8) | p[pos + 1])


cdef tuple _int16s(const unsigned char* p, Py_ssize_t* pos, Py_ssize_t n):
    cdef int count = _get16(p, pos[0], n)
    cdef Py_ssize_t i
    cdef tuple out
    cdef object value
    if count < 0:
        raise _error(f"malformed Bind message: negative count {count}")
    pos[0] += 2
    if pos[0] + 2 * count > n:
        raise _error("malformed Bind message: truncated")
    out = PyTuple_New(count)
    for i in range(count):
        value = <short>((p[pos[0]] << 8) | p[pos[0] + 1])
        Py_INCREF(value)
        PyTuple_SET_ITEM(out, i, value)
        pos[0] += 2
    return out


def decode_bind_fields(bytes payload not None):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(payload)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(payload)
    cdef Py_ssize_t pos = 0, end, i
    cdef int count
    cdef long length
    cdef tuple params
    cdef object value
    end = _cstring_end(p, pos, n)
    portal = _utf8(p, pos, end)
    pos = end + 1
    end = _cstring_end(p, pos, n)
    statement = _utf8(p, pos, end)
    pos = end + 1
    param_formats = _int16s(p, &pos, n)
    count = _get16(p, pos, n)
    if count < 0:
        raise _error(f"malformed Bind message: negative count {count}")
    pos += 2
    params = PyTuple_New(count)
    for i in range(count):
        if pos + 4 > n:
            raise _error("malformed Bind message: truncated")
        length = <int>((<unsigned int>p[pos] << 24) | (<unsigned int>p[pos + 1] << 16)
                       | (<unsigned int>p[pos + 2] << 8) | <unsigned int>p[pos + 3])
        pos += 4
        if length < 0:
            if length != -1:
                raise _error(f"malformed Bind message: length {length}")
            value = None
        else:
            if pos + length > n:
                raise _error("malformed Bind message: truncated")
            value = PyBytes_FromStringAndSize(<const char*>p + pos, length)
            pos += length
        Py_INCREF(value)
        PyTuple_SET_ITEM(params, i, value)
    result_formats = _int16s(p, &pos, n)
    if pos != n:
        raise _error("malformed Bind message: unexpected trailing bytes")
    return portal, statement, param_formats, params, result_formats
