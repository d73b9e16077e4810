# cython: language_level=3
"""Twin of proxy.wire.framing.scan_backend (same contract; see that module).

Two passes over the message headers: the first finds the end of the complete messages,
checks their lengths and finds the cut (the last well-formed ReadyForQuery before any special
message); the second builds the statuses up to the cut and the marks after it. Raises the
error class bound with ``set_error_class`` (ValueError until then), since this package
imports nothing from the project.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcmp

cdef object _error = ValueError


def set_error_class(cls):
    """The exception class raised for an invalid length (ProtocolViolation)."""
    global _error
    _error = cls


cdef inline bint _quiet(const unsigned char* payload, Py_ssize_t size, tuple tags):
    """Whether payload[:8] starts with one of ``tags``."""
    cdef Py_ssize_t window = size if size < 8 else 8
    cdef bytes tag
    for tag in tags:
        if PyBytes_GET_SIZE(tag) <= window and memcmp(
                payload, PyBytes_AS_STRING(tag), PyBytes_GET_SIZE(tag)) == 0:
            return True
    return False


def scan_backend(object buf, Py_ssize_t pos, Py_ssize_t max_length, tuple quiet_tags,
                 bint bulk):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n, end, start = pos, cut = pos, nready = 0, i = 0
    cdef unsigned long length
    cdef unsigned char t, s
    cdef bint clean = bulk
    cdef list marks = []
    cdef bytes statuses
    cdef char* out
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
            t = p[pos]
            if clean:
                if t == 90:  # Z
                    s = p[pos + 5] if length == 5 else 0
                    if s == 73 or s == 84 or s == 69:  # I T E
                        nready += 1
                        cut = end
                    else:
                        clean = False
                elif t == 69 or t == 83:  # E S
                    clean = False
                elif t == 67 and not _quiet(p + pos + 5, <Py_ssize_t>length - 4, quiet_tags):
                    clean = False
            pos = end
        statuses = PyBytes_FromStringAndSize(NULL, nready)
        out = PyBytes_AS_STRING(statuses)
        end = start
        while end < cut:
            length = ((<unsigned long>p[end + 1] << 24) | (<unsigned long>p[end + 2] << 16)
                      | (<unsigned long>p[end + 3] << 8) | <unsigned long>p[end + 4])
            if p[end] == 90:
                out[i] = <char>p[end + 5]
                i += 1
            end += 1 + <Py_ssize_t>length
        while end < pos:
            length = ((<unsigned long>p[end + 1] << 24) | (<unsigned long>p[end + 2] << 16)
                      | (<unsigned long>p[end + 3] << 8) | <unsigned long>p[end + 4])
            t = p[end]
            if t != 68 and t != 100:  # D d
                marks.append((t, end + 5, end + 1 + <Py_ssize_t>length))
            end += 1 + <Py_ssize_t>length
    finally:
        PyBuffer_Release(&view)
    return pos, statuses, marks


cdef inline bint _blank(unsigned char c):
    return c == 32 or (9 <= c <= 13)  # what bytes.strip() strips


def query_head(bytes raw, Py_ssize_t start, Py_ssize_t end, tuple watched):
    """Twin of proxy.forwarding.query_head (same contract; see that module)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), i, h, k, size
    cdef unsigned char c
    cdef bytes word
    cdef const unsigned char* w
    if start < 0 or end <= start or end > n:
        return 0
    for i in range(start, end - 1):
        if p[i] == 0:
            return 0
    if p[end - 1] != 0:
        return 0
    h = start
    while h < end - 1 and _blank(p[h]):
        h += 1
    size = end - 1 - h
    if size > 10:
        size = 10
    if size == 0 or not ((65 <= p[h] <= 90) or (97 <= p[h] <= 122)):
        return 0
    for i in range(size):
        if p[h + i] >= 128:
            return 0
    for word in watched:
        k = PyBytes_GET_SIZE(word)
        if k > size:
            continue
        w = <const unsigned char*>PyBytes_AS_STRING(word)
        for i in range(k):
            c = p[h + i]
            if 97 <= c <= 122:
                c -= 32
            if c != w[i]:
                break
        else:
            return 0
    for i in range(h + size, end - 1):
        if p[i] >= 128:
            return 2
    return 1
