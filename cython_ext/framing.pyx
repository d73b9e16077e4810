# cython: language_level=3
"""Twins of pgwire.framing.scan_messages and scan_backend (same contracts; see that module).
Which backend messages ``scan_backend`` calls special is said by ``rules_kernel.pxd``'s
``answer_class`` (pure reference: proxy.rules).

``scan_backend`` makes two passes over the message headers: the first finds the end of the
complete messages, checks their lengths and finds the cut (the last well-formed ReadyForQuery
before any special message); the second builds the statuses up to the cut and the marks after
it.

Both raise the error class bound with ``set_error_class`` (pgwire.framing binds
ProtocolViolation at import; ValueError until then), since this package imports nothing
from the project.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

from cython_ext.rules_kernel cimport (
    ANSWER_BLOCK,
    ANSWER_IDLE,
    ANSWER_WRITE,
    MAX_WORDS,
    answer_class,
    word_arrays,
)

cdef object _error = ValueError


def set_error_class(cls):
    """The exception class raised for an invalid length (ProtocolViolation)."""
    global _error
    _error = cls


cdef inline Py_ssize_t _length(const unsigned char* p, Py_ssize_t pos) noexcept nogil:
    """The length field of the message at ``pos``."""
    return <Py_ssize_t>((<unsigned long>p[pos + 1] << 24) | (<unsigned long>p[pos + 2] << 16)
                        | (<unsigned long>p[pos + 3] << 8) | <unsigned long>p[pos + 4])


cdef int _invalid(Py_ssize_t length, Py_ssize_t max_length) except -1:
    """Raise for a length field that scan_messages documents as invalid (the cold path, kept
    out of line)."""
    if length < 4:
        raise _error(f"invalid message length {length}")
    raise _error(f"message of {length} bytes exceeds the limit of {max_length}")


cdef inline Py_ssize_t _whole(const unsigned char* p, Py_ssize_t n, Py_ssize_t pos,
                              Py_ssize_t max_length) except? -1:
    """The end of the message at ``pos`` of the ``n`` bytes at ``p``, its length checked as
    scan_messages documents, or -1 when it is not whole yet: the step both scans take. (-1
    with an exception set: an invalid length; a scan meets -1 once, so telling them apart is
    cheap.)"""
    cdef Py_ssize_t length, end
    if n - pos < 5:
        return -1
    length = _length(p, pos)
    if length < 4 or length > max_length:
        _invalid(length, max_length)
    end = pos + 1 + length
    return end if end <= n else -1


def scan_messages(object buf, Py_ssize_t pos, Py_ssize_t max_length):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n, end
    cdef list out = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        n = view.len
        while True:
            end = _whole(p, n, pos, max_length)
            if end == -1:
                break
            out.append((p[pos], pos + 5, end))
            pos = end
    finally:
        PyBuffer_Release(&view)
    return out, pos


#: the tags ``scan_backend`` was last given (callers pass the same tuple), as C arrays
cdef tuple _qtags = None
cdef const unsigned char* _qwords[MAX_WORDS]
cdef Py_ssize_t _qlens[MAX_WORDS]
cdef Py_ssize_t _nq = 0


cdef inline int _quiet_tags(tuple tags) except -1:
    global _qtags, _nq
    if tags is not _qtags:
        _nq = word_arrays(tags, _qwords, _qlens)
        _qtags = tags
    return 0


def scan_backend(object buf, Py_ssize_t pos, Py_ssize_t max_length, tuple quiet_tags,
                 bint bulk):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n, end, start = pos, cut = pos, nready = 0, i = 0, length
    cdef unsigned char t
    cdef int answer
    cdef bint clean = bulk
    cdef list marks = []
    cdef bytes statuses
    cdef char* out
    _quiet_tags(quiet_tags)
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        n = view.len
        while True:
            end = _whole(p, n, pos, max_length)
            if end == -1:
                break
            if clean:
                answer = answer_class(p[pos], p + pos + 5, end - pos - 5, _qwords,
                                      _qlens, _nq)
                if answer == ANSWER_IDLE or answer == ANSWER_BLOCK:
                    nready += 1
                    cut = end
                elif answer >= ANSWER_WRITE:  # special (a write, or one the state decodes)
                    clean = False
            pos = end
        statuses = PyBytes_FromStringAndSize(NULL, nready)
        out = PyBytes_AS_STRING(statuses)
        end = start
        while end < cut:
            length = _length(p, end)
            if p[end] == 90:
                out[i] = <char>p[end + 5]
                i += 1
            end += 1 + length
        while end < pos:
            length = _length(p, end)
            t = p[end]
            if t != 68 and t != 100:  # D d
                marks.append((t, end + 5, end + 1 + length))
            end += 1 + length
    finally:
        PyBuffer_Release(&view)
    return pos, statuses, marks
