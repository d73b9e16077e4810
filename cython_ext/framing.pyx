# cython: language_level=3
"""Twin of pgwire.framing.scan_messages (same contract; see that module).

Raises the error class bound with ``set_error_class`` (pgwire.framing binds
ProtocolViolation at import; ValueError until then), since this package imports nothing
from the project.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

cdef object _error = ValueError


def set_error_class(cls):
    """The exception class raised for an invalid length (ProtocolViolation)."""
    global _error
    _error = cls


def scan_messages(object buf, Py_ssize_t pos, Py_ssize_t max_length):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n, end
    cdef unsigned long length
    cdef list out = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        n = view.len
        while n - pos >= 5:
            length = ((<unsigned long>p[pos + 1] << 24) | (<unsigned long>p[pos + 2] << 16)
                      | (<unsigned long>p[pos + 3] << 8) | <unsigned long>p[pos + 4])
            if length < 4:
                raise _error(f"invalid message length {length}")
            if length > <unsigned long>max_length:
                raise _error(f"message of {length} bytes exceeds the limit of {max_length}")
            end = pos + 1 + <Py_ssize_t>length
            if end > n:
                break
            out.append((p[pos], pos + 5, end))
            pos = end
    finally:
        PyBuffer_Release(&view)
    return out, pos
