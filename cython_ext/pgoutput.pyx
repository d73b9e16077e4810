# cython: language_level=3
"""Twin of cdc.pgoutput.tuples.decode_tuple_data (same contract; see that module)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE


def decode_tuple_data(bytes buf, Py_ssize_t pos, object unchanged):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t ncols, i
    cdef long long length
    cdef unsigned char kind
    if pos < 0 or pos + 2 > n:
        raise ValueError(f"truncated TupleData column count at offset {pos}")
    ncols = (p[pos] << 8) | p[pos + 1]
    pos += 2
    out = [None] * ncols
    for i in range(ncols):
        if pos >= n:
            raise ValueError(f"truncated TupleData at offset {pos}")
        kind = p[pos]
        pos += 1
        if kind == 0x6E:
            out[i] = None
        elif kind == 0x75:
            out[i] = unchanged
        elif kind == 0x74 or kind == 0x62:
            if pos + 4 > n:
                raise ValueError(f"truncated TupleData value length at offset {pos}")
            length = <int>(((<unsigned int>p[pos]) << 24) | (p[pos + 1] << 16)
                           | (p[pos + 2] << 8) | p[pos + 3])
            pos += 4
            if length < 0 or pos + length > n:
                raise ValueError(f"TupleData value of length {length} overruns at offset {pos}")
            if kind == 0x74:
                out[i] = (<const char*>p)[pos:pos + length].decode("utf-8")
            else:
                out[i] = (<const char*>p)[pos:pos + length]
            pos += length
        else:
            raise ValueError(f"unknown TupleData column kind {kind:#04x} at offset {pos - 1}")
    return tuple(out), pos
