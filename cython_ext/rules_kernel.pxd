# cython: language_level=3
"""The quiet-message and hidden-write rules, written once in C for the relay core
(``relay_scan.pyx``), the backend scan (``framing.pyx``), the lanes (``lanes.pyx``) and the
rules twin (``rules.pyx``, which exposes them to Python). Inline functions over raw bytes,
with word lists as C arrays, so that they run without the GIL; this header has no module of
its own. Their pure reference and the contract of each is ``proxy.rules`` (the message
classes: ``pgwire.classes``; parity: ``tests/unit/proxy/test_rules_parity.py``):

- ``query_head``: what the bytes of a simple Query payload say (``proxy.rules.query_head``);
- ``read_only_tag``: a CommandComplete tag that cannot have written anything
  (``proxy.rules.read_only_tag``);
- ``hides_write``: a Query text (ASCII, lower case) that may write behind a read-only tag
  (``proxy.rules.hides_write``);
- ``mentions``: a Query text (ASCII, lower case) containing one of the names of cached
  relations (``proxy.rules.plain_text``);
- ``request_class``: what a client message's type says (``pgwire.classes.request_class``);
- ``answer_class``: what a backend message says, a write included
  (``pgwire.classes.answer_class``); ``relay_quiet`` and ``lane_quiet``: which of those the relay
  core and the lanes pass without a look (``proxy.rules.RELAY_QUIET``, ``LANE_QUIET``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.string cimport memchr, memcmp, memcpy


cdef enum:
    MAX_WORDS = 32  # words a fixed array of word_arrays holds (WATCHED_WORDS, READ_ONLY_TAGS)


cdef inline Py_ssize_t word_arrays(tuple given, const unsigned char** words, Py_ssize_t* lens
                                   ) except -1:
    """Point ``words``/``lens`` (MAX_WORDS each) at the bytes of ``given`` (kept alive by the
    caller); their count."""
    cdef Py_ssize_t i = 0
    cdef bytes word
    if len(given) > MAX_WORDS:
        raise ValueError(f"at most {MAX_WORDS} words")
    for word in given:
        words[i] = <const unsigned char*>PyBytes_AS_STRING(word)
        lens[i] = PyBytes_GET_SIZE(word)
        i += 1
    return i


cdef inline bint _blank(unsigned char c) noexcept nogil:
    return c == 32 or (9 <= c <= 13)  # what bytes.strip() strips


cdef inline bint _has_identity_word(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether ``set_config`` (proxy.rules.IDENTITY_WORD) occurs in p[:n] in any ASCII case:
    its ``_`` found by ``memchr``, the ten bytes around it compared."""
    cdef const char* word = b"set_config"
    cdef const unsigned char* u
    cdef const unsigned char* last = p + n - 6  # past the last place its '_' can stand
    cdef Py_ssize_t i
    cdef unsigned char c
    if n < 10:
        return False
    u = <const unsigned char*>memchr(p + 3, 95, last - (p + 3))
    while u != NULL:
        for i in range(10):
            c = u[i - 3]
            if 65 <= c <= 90:
                c += 32
            if c != <unsigned char>word[i]:
                break
        else:
            return True
        u = <const unsigned char*>memchr(u + 1, 95, last - (u + 1))
    return False


cdef inline bint _ascii(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether p[:n] is all ASCII (eight bytes at a time)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t eight
    while i + 8 <= n:
        memcpy(&eight, p + i, 8)
        if eight & 0x8080808080808080ULL:
            return False
        i += 8
    while i < n:
        if p[i] >= 128:
            return False
        i += 1
    return True


cdef inline int query_head(const unsigned char* p, Py_ssize_t n, Py_ssize_t start,
                           Py_ssize_t end, const unsigned char* const* words,
                           const Py_ssize_t* lens, Py_ssize_t nwords) noexcept nogil:
    """proxy.rules.query_head of p[start:end] (``n`` bytes at ``p``), ``words`` being
    the upper-case watched words (``lens`` their lengths): 0, 1 or 2 as documented there."""
    cdef Py_ssize_t i, h, k, size, w
    cdef unsigned char c
    cdef unsigned char head[10]  # the first word's bytes, upper case
    cdef const unsigned char* semicolon
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
        c = p[h + i]
        if c >= 128:
            return 0
        head[i] = c - 32 if 97 <= c <= 122 else c
    for w in range(nwords):  # (few share the first letter: the rest compared inline)
        k = lens[w]
        if k <= size and words[w][0] == head[0]:
            i = 1
            while i < k and words[w][i] == head[i]:
                i += 1
            if i == k:
                return 0
    semicolon = <const unsigned char*>memchr(p + h, 59, end - 1 - h)  # a second statement?
    if semicolon != NULL:
        for k in range(semicolon - p + 1, end - 1):
            if p[k] != 59 and not _blank(p[k]):
                return 0
    if _has_identity_word(p + h, end - 1 - h):
        return 0
    return 1 if _ascii(p + h + size, end - 1 - h - size) else 2



cdef inline bint read_only_tag(const unsigned char* tag, Py_ssize_t size,
                               const unsigned char* const* tags, const Py_ssize_t* lens,
                               Py_ssize_t ntags) noexcept nogil:
    """Whether the first 8 bytes of a CommandComplete payload (``size`` bytes at ``tag``)
    start with one of ``tags`` (``lens`` their lengths)."""
    cdef Py_ssize_t i, window = size if size < 8 else 8
    for i in range(ntags):
        if lens[i] <= window and memcmp(tag, tags[i], lens[i]) == 0:
            return True
    return False


cdef inline bint _word_char(unsigned char ch) noexcept nogil:
    return (97 <= ch <= 122) or (48 <= ch <= 57) or ch == 95 or ch == 36 or (65 <= ch <= 90)


cdef inline bint _found(const unsigned char* text, Py_ssize_t n, const unsigned char* word,
                        Py_ssize_t k, bint whole) noexcept nogil:
    """Whether ``word`` occurs in ``text`` (as a whole word with ``whole``)."""
    cdef Py_ssize_t at
    if k == 0:
        return not whole
    for at in range(n - k + 1):
        if text[at] == word[0] and memcmp(text + at, word, k) == 0:
            if not whole:
                return True
            if (at == 0 or not _word_char(text[at - 1])) and \
                    (at + k >= n or not _word_char(text[at + k])):
                return True
    return False


cdef inline bint hides_write(const unsigned char* text, Py_ssize_t n,
                             const unsigned char* const* hiding, const Py_ssize_t* hlens,
                             Py_ssize_t nhiding, const unsigned char* const* telling,
                             const Py_ssize_t* tlens, Py_ssize_t ntelling) noexcept nogil:
    """proxy.rules.hides_write for an ASCII text in lower case: its first word is none of
    ``telling`` (the write words, whose tag tells) and one of ``hiding`` is in it as a whole
    word."""
    cdef Py_ssize_t i = 0, first, k
    if nhiding == 0:
        return False
    while i < n and _blank(text[i]):
        i += 1
    first = i
    while i < n and ((97 <= text[i] <= 122) or text[i] == 95):
        i += 1
    for k in range(ntelling):
        if tlens[k] == i - first and memcmp(text + first, telling[k], tlens[k]) == 0:
            return False
    for k in range(nhiding):
        if _found(text, n, hiding[k], hlens[k], True):
            return True
    return False


cdef inline bint mentions(const unsigned char* text, Py_ssize_t n,
                          const unsigned char* const* names, const Py_ssize_t* lens,
                          Py_ssize_t nnames) noexcept nogil:
    """Whether one of ``names`` occurs in ``text`` (anywhere: a substring)."""
    cdef Py_ssize_t k
    for k in range(nnames):
        if _found(text, n, names[k], lens[k], False):
            return True
    return False


# -- message classes (pgwire.classes: the same values) -------------------------------------------

cdef enum:
    REQUEST_OTHER = 0  # decoded and observed one by one
    REQUEST_FREE = 1  # Execute, Describe: content-free, the cycle goes on
    REQUEST_FLUSH = 2  # Flush: content-free; no ReadyForQuery ends what it asks for
    REQUEST_SYNC = 3  # Sync: content-free, ends a cycle
    REQUEST_SEEN = 4  # Bind, Parse: quiet when the session sent the same before
    REQUEST_QUERY = 5  # simple Query: quiet when plain (query_head); ends a cycle
    REQUEST_COPY = 6  # CopyData: relayed without a look


cdef inline int request_class(unsigned char t) noexcept nogil:
    """pgwire.classes.request_class(t)."""
    if t == 69 or t == 68:  # E D
        return REQUEST_FREE
    if t == 83:  # S
        return REQUEST_SYNC
    if t == 66 or t == 80:  # B P
        return REQUEST_SEEN
    if t == 81:  # Q
        return REQUEST_QUERY
    if t == 72:  # H
        return REQUEST_FLUSH
    if t == 100:  # d
        return REQUEST_COPY
    return REQUEST_OTHER


cdef enum:
    ANSWER_OTHER = 0  # nothing the session state reads (COPY, ...): relay-quiet only
    ANSWER_ROW = 1  # rows, descriptions, completions of the extended protocol, notices
    ANSWER_READ = 2  # CommandComplete whose tag cannot have written anything
    ANSWER_IDLE = 3  # ReadyForQuery, idle
    ANSWER_BLOCK = 4  # ReadyForQuery in a transaction block (or a failed one)
    ANSWER_WRITE = 5  # CommandComplete that may have written (read-your-writes)
    ANSWER_STATE = 6  # ErrorResponse, ParameterStatus, a malformed ReadyForQuery


cdef inline int answer_class(unsigned char t, const unsigned char* payload, Py_ssize_t size,
                             const unsigned char* const* tags, const Py_ssize_t* lens,
                             Py_ssize_t ntags) noexcept nogil:
    """pgwire.classes.answer_class of a backend message of type ``t`` whose payload is ``size``
    bytes at ``payload``, ``tags`` being the read-only tags (``lens`` their lengths)."""
    if t == 68 or t == 49 or t == 50 or t == 51 or t == 110 or t == 116 or t == 84 \
            or t == 73 or t == 115 or t == 78 or t == 65:  # D 1 2 3 n t T I s N A
        return ANSWER_ROW
    if t == 67:  # C
        return ANSWER_READ if read_only_tag(payload, size, tags, lens, ntags) else ANSWER_WRITE
    if t == 90:  # Z
        if size == 1:
            if payload[0] == 73:  # I
                return ANSWER_IDLE
            if payload[0] == 84 or payload[0] == 69:  # T E
                return ANSWER_BLOCK
        return ANSWER_STATE
    if t == 69 or t == 83:  # E S
        return ANSWER_STATE
    return ANSWER_OTHER


cdef inline bint relay_quiet(int answer) noexcept nogil:
    """proxy.rules.RELAY_QUIET: the relay core observes a run of these in one step."""
    return answer < ANSWER_WRITE


cdef inline bint lane_quiet(int answer) noexcept nogil:
    """proxy.rules.LANE_QUIET: a pass session's lane relays these (idle sessions only)."""
    return ANSWER_ROW <= answer <= ANSWER_IDLE
