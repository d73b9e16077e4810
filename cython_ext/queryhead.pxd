# cython: language_level=3
"""The head check of a simple Query, shared by the relay core and the lanes (inline, so this
header has no module of its own): proxy.forwarding.query_head over raw bytes, with the
watched words as C arrays so that it runs without the GIL."""

from libc.string cimport memchr


cdef inline bint _blank(unsigned char c) noexcept nogil:
    return c == 32 or (9 <= c <= 13)  # what bytes.strip() strips


cdef inline int query_head(const unsigned char* p, Py_ssize_t n, Py_ssize_t start,
                           Py_ssize_t end, const unsigned char* const* words,
                           const Py_ssize_t* lens, Py_ssize_t nwords) noexcept nogil:
    """proxy.forwarding.query_head of p[start:end] (``n`` bytes at ``p``), ``words`` being
    the upper-case watched words (``lens`` their lengths): 0, 1 or 2 as documented there."""
    cdef Py_ssize_t i, h, k, size, w
    cdef unsigned char c
    if start < 0 or end <= start or end > n:
        return 0
    if memchr(p + start, 0, end - 1 - start) != NULL or p[end - 1] != 0:
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
    for w in range(nwords):
        k = lens[w]
        if k > size:
            continue
        for i in range(k):
            c = p[h + i]
            if 97 <= c <= 122:
                c -= 32
            if c != words[w][i]:
                break
        else:
            return 0
    for i in range(h + size, end - 1):
        if p[i] >= 128:
            return 2
    return 1
