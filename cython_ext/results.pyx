# cython: language_level=3
"""Twin of ``proxy.results.encode_rows`` (same contract; see that module).

``encode_rows(rows, encoders)``: the concatenated DataRow messages of ``rows`` (sequences of
values, None for NULL), one ``encoders[i]`` per column with attributes ``encode`` (value ->
bytes) and ``kind`` (an int). Kinds 1-14 are conversions done here without calling
``encode`` when the value has the exact expected Python type and fits (datetimes: naive
for timestamp, tzinfo ``datetime.timezone.utc`` for timestamptz; Decimals already at the
column's ``scale`` attribute, None when unconstrained; timestamptz ISO text rotated into
the column's ``zone`` attribute); otherwise, and for
kind 0, ``encode(value)`` is called, so its exceptions propagate unchanged. The kinds must
stay in step with ``proxy.results.rows`` (KIND_*).
"""

from cpython.datetime cimport (
    PyDateTime_CheckExact,
    datetime_day,
    datetime_hour,
    datetime_microsecond,
    datetime_minute,
    datetime_month,
    datetime_second,
    datetime_tzinfo,
    datetime_year,
    import_datetime,
    timedelta_days,
    timedelta_microseconds,
    timedelta_seconds,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

import datetime as _dt
from decimal import Decimal as _Decimal

import_datetime()
cdef object _UTC = _dt.timezone.utc

cdef enum:
    KIND_CALL = 0
    KIND_TEXT_INT = 1
    KIND_UTF8 = 2
    KIND_BIN_INT2 = 3
    KIND_BIN_INT4 = 4
    KIND_BIN_INT8 = 5
    KIND_TEXT_BOOL = 6
    KIND_BIN_FLOAT8 = 7
    KIND_BIN_TIMESTAMP = 8
    KIND_BIN_TIMESTAMPTZ = 9
    KIND_TEXT_TIMESTAMP_ISO = 10
    KIND_TEXT_TIMESTAMPTZ_ISO_UTC = 11
    KIND_TEXT_NUMERIC = 12
    KIND_BIN_NUMERIC = 13
    KIND_TEXT_TIMESTAMPTZ_ISO = 14


cdef struct Buf:
    unsigned char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int _reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.size + extra
    cdef Py_ssize_t cap
    cdef unsigned char* grown
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < need:
        cap *= 2
    grown = <unsigned char*>PyMem_Realloc(b.data, cap)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.cap = cap
    return 0


cdef inline void _put32(unsigned char* p, uint64_t v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put64(unsigned char* p, uint64_t v) noexcept:
    _put32(p, v >> 32)
    _put32(p + 4, v & 0xFFFFFFFF)


cdef int _append(Buf* b, const char* src, Py_ssize_t n) except -1:
    if n > 0x7FFFFFFF:
        raise ValueError("value too large for a DataRow")
    _reserve(b, 4 + n)
    _put32(b.data + b.size, <uint64_t>n)
    memcpy(b.data + b.size + 4, src, n)
    b.size += 4 + n
    return 0


cdef int _append_object(Buf* b, object data) except -1:
    cdef const unsigned char[:] view
    if type(data) is bytes:
        return _append(b, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    view = memoryview(data).cast("B")
    if view.shape[0] == 0:
        return _append(b, "", 0)
    return _append(b, <const char*>&view[0], view.shape[0])


cdef int _text_int(Buf* b, long long v) except -1:
    cdef char tmp[24]
    cdef int pos = 24
    cdef unsigned long long u = <unsigned long long>(-(v + 1)) + 1 if v < 0 else <unsigned long long>v
    while True:
        pos -= 1
        tmp[pos] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if v < 0:
        pos -= 1
        tmp[pos] = 45  # '-'
    return _append(b, tmp + pos, 24 - pos)


cdef int _fixed(Buf* b, uint64_t v, int width) except -1:
    _reserve(b, 4 + width)
    _put32(b.data + b.size, <uint64_t>width)
    if width == 8:
        _put64(b.data + b.size + 4, v)
    elif width == 4:
        _put32(b.data + b.size + 4, v)
    else:
        b.data[b.size + 4] = (v >> 8) & 0xFF
        b.data[b.size + 5] = v & 0xFF
    b.size += 4 + width
    return 0


cdef inline long long _days2000(long long y, long long m, long long d) noexcept:
    """PostgreSQL's date2j(y, m, d) - date2j(2000, 1, 1) for years >= 1."""
    cdef long long century, julian
    if m > 2:
        m += 1
        y += 4800
    else:
        m += 13
        y += 4799
    century = y // 100
    julian = y * 365 - 32167 + y // 4 - century + century // 4 + 7834 * m // 256 + d
    return julian - 2451545


cdef inline char* _digits(char* p, long long v, int width) noexcept:
    cdef int i
    for i in range(width - 1, -1, -1):
        p[i] = <char>(48 + v % 10)
        v //= 10
    return p + width


cdef char* _clock(char* p, object value) noexcept:
    """YYYY-MM-DD HH:MM:SS[.ffffff without trailing zeros] of a datetime."""
    cdef long long frac
    p = _digits(p, datetime_year(value), 4)
    p[0] = 45
    p = _digits(p + 1, datetime_month(value), 2)
    p[0] = 45
    p = _digits(p + 1, datetime_day(value), 2)
    p[0] = 32
    p = _digits(p + 1, datetime_hour(value), 2)
    p[0] = 58
    p = _digits(p + 1, datetime_minute(value), 2)
    p[0] = 58
    p = _digits(p + 1, datetime_second(value), 2)
    frac = datetime_microsecond(value)
    if frac:
        p[0] = 46
        p = _digits(p + 1, frac, 6)
        while (p - 1)[0] == 48:
            p -= 1
    return p


cdef int _zoned(Buf* b, object value, object zone) except -1:
    """ISO text of an aware datetime in the session's zone (0: let ``encode`` do it)."""
    cdef char tmp[48]
    cdef char* p
    cdef long long off, hours, minutes, seconds
    if not PyDateTime_CheckExact(value) or <object>datetime_tzinfo(value) is None:
        return 0
    try:
        local = value.astimezone(zone)
    except OverflowError:
        return 0
    delta = local.utcoffset()
    if delta is None or timedelta_microseconds(delta) != 0:
        return 0
    off = <long long>timedelta_days(delta) * 86400 + timedelta_seconds(delta)
    p = _clock(tmp, local)
    p[0] = 45 if off < 0 else 43
    off = -off if off < 0 else off
    hours = off // 3600
    minutes = off // 60 % 60
    seconds = off % 60
    p = _digits(p + 1, hours, 2)
    if minutes or seconds:
        p[0] = 58
        p = _digits(p + 1, minutes, 2)
    if seconds:
        p[0] = 58
        p = _digits(p + 1, seconds, 2)
    _append(b, tmp, p - tmp)
    return 1


cdef int _stamp(Buf* b, object value, int kind) except -1:
    """Return 1 if the datetime was written, 0 to call ``encode`` instead."""
    cdef object tz
    cdef long long usec, frac
    cdef char tmp[40]
    cdef char* p = tmp
    if not PyDateTime_CheckExact(value):
        return 0
    tz = <object>datetime_tzinfo(value)
    if kind == KIND_BIN_TIMESTAMP or kind == KIND_TEXT_TIMESTAMP_ISO:
        if tz is not None:
            return 0
    elif tz is not _UTC:
        return 0
    if kind == KIND_BIN_TIMESTAMP or kind == KIND_BIN_TIMESTAMPTZ:
        usec = _days2000(datetime_year(value), datetime_month(value), datetime_day(value))
        usec = ((usec * 24 + datetime_hour(value)) * 60 + datetime_minute(value)) * 60
        usec = (usec + datetime_second(value)) * 1000000 + datetime_microsecond(value)
        _fixed(b, <uint64_t>usec, 8)
        return 1
    p = _clock(p, value)
    if kind == KIND_TEXT_TIMESTAMPTZ_ISO_UTC:
        p[0] = 43
        p[1] = 48
        p[2] = 48
        p += 3
    _append(b, tmp, p - tmp)
    return 1


cdef int _numeric(Buf* b, object value, object scale) except -1:
    """Decimal text as numeric_out prints it when no rounding or sign fix is needed."""
    cdef const char* t
    cdef Py_ssize_t size, i, dot = -1
    cdef bint nonzero = False
    if type(value) is not _Decimal:
        return 0
    text = format(value, "f")
    t = PyUnicode_AsUTF8AndSize(text, &size)
    if t[0] == 78 or t[0] == 73:  # NaN, Infinity
        _append(b, t, size)
        return 1
    if t[0] == 45 and size > 1 and t[1] == 73:  # -Infinity
        _append(b, t, size)
        return 1
    for i in range(size):
        if t[i] == 46:
            dot = i
        elif 49 <= t[i] <= 57:
            nonzero = True
        elif not (t[i] == 48 or (i == 0 and t[i] == 45)):
            return 0  # sNaN, -NaN: let the Python encoder decide
    if t[0] == 45 and not nonzero:
        return 0  # negative zero prints without its sign
    if scale is not None and (size - dot - 1 if dot >= 0 else 0) != <Py_ssize_t>scale:
        return 0  # needs rounding to the declared scale
    _append(b, t, size)
    return 1


cdef inline int _digit(const char* t, Py_ssize_t k, Py_ssize_t start, Py_ssize_t int_len,
                       Py_ssize_t frac_len, Py_ssize_t pad) noexcept:
    """Digit k of the integer digits, then the fraction digits, left-padded with ``pad``
    zeros (0 past the end)."""
    k -= pad
    if k < 0 or k >= int_len + frac_len:
        return 0
    if k < int_len:
        return t[start + k] - 48
    return t[start + int_len + 1 + (k - int_len)] - 48


cdef int _numeric_binary(Buf* b, object value, object scale) except -1:
    """numeric_send of a finite Decimal already at its column's scale (else return 0)."""
    cdef const char* t
    cdef Py_ssize_t size, i, start, dot = -1, int_len, frac_len, pad, ngroups, first, last
    cdef Py_ssize_t weight, g, k, m
    cdef bint nonzero = False
    cdef unsigned int group
    cdef unsigned char* w
    if type(value) is not _Decimal:
        return 0
    text = format(value, "f")
    t = PyUnicode_AsUTF8AndSize(text, &size)
    start = 1 if t[0] == 45 else 0
    for i in range(start, size):
        if t[i] == 46:
            dot = i
        elif 49 <= t[i] <= 57:
            nonzero = True
        elif t[i] != 48:
            return 0  # NaN, Infinity: the Python encoder
    int_len = (dot if dot >= 0 else size) - start
    frac_len = size - dot - 1 if dot >= 0 else 0
    if scale is not None and frac_len != <Py_ssize_t>scale:
        return 0
    if frac_len > 0x3FFF:
        return 0
    if not nonzero:
        _reserve(b, 12)
        _put32(b.data + b.size, 8)
        _put32(b.data + b.size + 4, 0)
        b.data[b.size + 8] = 0
        b.data[b.size + 9] = 0
        b.data[b.size + 10] = (frac_len >> 8) & 0xFF
        b.data[b.size + 11] = frac_len & 0xFF
        b.size += 12
        return 1
    pad = (4 - int_len % 4) % 4
    ngroups = (pad + int_len + frac_len + 3) // 4
    first = -1
    last = -1
    for g in range(ngroups):
        group = 0
        for k in range(4 * g, 4 * g + 4):
            group = group * 10 + _digit(t, k, start, int_len, frac_len, pad)
        if group:
            if first < 0:
                first = g
            last = g
    weight = (pad + int_len) // 4 - 1 - first
    if weight < -32768 or weight > 32767:
        return 0
    m = last - first + 1
    _reserve(b, 12 + 2 * m)
    w = b.data + b.size
    _put32(w, <uint64_t>(8 + 2 * m))
    w[4] = (m >> 8) & 0xFF
    w[5] = m & 0xFF
    w[6] = (<unsigned int>weight >> 8) & 0xFF
    w[7] = <unsigned int>weight & 0xFF
    w[8] = 0x40 if start else 0
    w[9] = 0
    w[10] = (frac_len >> 8) & 0xFF
    w[11] = frac_len & 0xFF
    w += 12
    for g in range(first, last + 1):
        group = 0
        for k in range(4 * g, 4 * g + 4):
            group = group * 10 + _digit(t, k, start, int_len, frac_len, pad)
        w[0] = (group >> 8) & 0xFF
        w[1] = group & 0xFF
        w += 2
    b.size += 12 + 2 * m
    return 1


cdef int _fast(Buf* b, int kind, object value, object scale, object zone) except -1:
    """Encode ``value`` inline; return 1 if done, 0 if ``encode`` must be called."""
    cdef long long n
    cdef int overflow = 0
    cdef const char* utf8
    cdef Py_ssize_t size
    cdef double d
    cdef uint64_t bits
    if kind == KIND_UTF8:
        if type(value) is not str:
            return 0
        try:
            utf8 = PyUnicode_AsUTF8AndSize(value, &size)
        except UnicodeEncodeError:
            return 0  # the Python encoder refuses it
        _append(b, utf8, size)
        return 1
    if kind == KIND_TEXT_BOOL:
        if type(value) is not bool:
            return 0
        _append(b, "t" if value is True else "f", 1)
        return 1
    if kind == KIND_BIN_FLOAT8:
        if type(value) is not float:
            return 0
        d = value
        memcpy(&bits, &d, 8)
        _fixed(b, bits, 8)
        return 1
    if kind == KIND_TEXT_NUMERIC:
        return _numeric(b, value, scale)
    if kind == KIND_BIN_NUMERIC:
        return _numeric_binary(b, value, scale)
    if kind == KIND_TEXT_TIMESTAMPTZ_ISO:
        return _zoned(b, value, zone)
    if kind >= KIND_BIN_TIMESTAMP:
        return _stamp(b, value, kind)
    if type(value) is not int:
        return 0
    n = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow:
        return 0
    if kind == KIND_TEXT_INT:
        _text_int(b, n)
    elif kind == KIND_BIN_INT8:
        _fixed(b, <uint64_t>n, 8)
    elif kind == KIND_BIN_INT4:
        if n < -2147483648 or n > 2147483647:
            return 0
        _fixed(b, <uint64_t>n, 4)
    elif kind == KIND_BIN_INT2:
        if n < -32768 or n > 32767:
            return 0
        _fixed(b, <uint64_t>n, 2)
    else:
        return 0
    return 1


cdef int _row(Buf* b, object row, Py_ssize_t ncols, list fns, int* kinds,
              list scales, list zones) except -1:
    cdef Py_ssize_t start, i
    cdef object value
    if type(row) is not tuple:
        row = tuple(row)
    if PyTuple_GET_SIZE(row) != ncols:
        raise ValueError(f"row has {PyTuple_GET_SIZE(row)} values, expected {ncols}")
    _reserve(b, 7)
    start = b.size
    b.data[start] = 68  # 'D'
    b.data[start + 5] = (ncols >> 8) & 0xFF
    b.data[start + 6] = ncols & 0xFF
    b.size += 7
    for i in range(ncols):
        value = <object>PyTuple_GET_ITEM(row, i)
        if value is None:
            _reserve(b, 4)
            _put32(b.data + b.size, 0xFFFFFFFF)
            b.size += 4
        elif kinds[i] == KIND_CALL or not _fast(b, kinds[i], value, scales[i], zones[i]):
            _append_object(b, fns[i](value))
    if b.size - start - 1 > 0x7FFFFFFF:
        raise ValueError("DataRow too large")
    _put32(b.data + start + 1, <uint64_t>(b.size - start - 1))
    return 0


def encode_rows(rows, encoders):
    cdef Py_ssize_t ncols = len(encoders), i
    cdef list fns = [e.encode for e in encoders]
    cdef list scales = [e.scale for e in encoders]
    cdef list zones = [e.zone for e in encoders]
    cdef Buf b
    cdef int* kinds
    if ncols > 32767:
        raise ValueError(f"a DataRow holds at most 32767 values, not {ncols}")
    kinds = <int*>PyMem_Malloc(sizeof(int) * (ncols + 1))
    if kinds == NULL:
        raise MemoryError()
    b.data = NULL
    b.size = 0
    b.cap = 0
    try:
        for i in range(ncols):
            kinds[i] = encoders[i].kind
        for row in rows:
            _row(&b, row, ncols, fns, kinds, scales, zones)
        return PyBytes_FromStringAndSize(<char*>b.data, b.size)
    finally:
        PyMem_Free(kinds)
        PyMem_Free(b.data)
