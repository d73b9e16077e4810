# cython: language_level=3
"""Twin of proxy.rules (same contracts; see that module; ``answer_class`` and
``request_class``: pgwire.classes): the C rules of ``rules_kernel.pxd`` for Python callers. Word lists arrive as tuples of bytes (``str`` for
``hides_write``/``plain_text``) and are turned into C arrays once per tuple (the callers pass
the same tuples again). ``hides_write`` and ``plain_text`` of a text that is not ASCII are
answered by the pure references given to :func:`configure` (the C rules are ASCII ones)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdlib cimport free, malloc

from cython_ext.rules_kernel cimport (
    ANSWER_STATE,
    answer_class as _answer_class,
    hides_write as _hides_write,
    lane_quiet as _lane_quiet,
    mentions as _mentions,
    query_head as _query_head,
    read_only_tag as _read_only_tag,
    relay_quiet as _relay_quiet,
    request_class as _request_class,
)

cdef object _pure_hides_write = None
cdef object _pure_plain_text = None


cdef class _Words:
    """A tuple of words (bytes, or str as UTF-8) as C arrays; keeps the bytes alive."""

    cdef tuple source  # the tuple these were made from (compared by identity)
    cdef list keep
    cdef const unsigned char** at
    cdef Py_ssize_t* lens
    cdef Py_ssize_t count

    def __cinit__(self, tuple words):
        cdef Py_ssize_t i
        cdef bytes data
        self.source = words
        self.count = len(words)
        self.keep = [w.encode() if isinstance(w, str) else bytes(w) for w in words]
        self.at = <const unsigned char**>malloc(max(1, self.count) * sizeof(char*))
        self.lens = <Py_ssize_t*>malloc(max(1, self.count) * sizeof(Py_ssize_t))
        if self.at == NULL or self.lens == NULL:
            raise MemoryError()
        for i in range(self.count):
            data = self.keep[i]
            self.at[i] = <const unsigned char*>PyBytes_AS_STRING(data)
            self.lens[i] = PyBytes_GET_SIZE(data)

    def __dealloc__(self):
        free(self.at)
        free(self.lens)


cdef dict _made = {}  # id(tuple) -> _Words (bounded; the tuples are few and long-lived)
cdef _Words _telling = _Words(())


cdef _Words _words(tuple words):
    cdef object found = _made.get(id(words))
    if found is not None and (<_Words>found).source is words:
        return <_Words>found
    if len(_made) >= 64:
        _made.clear()
    made = _Words(words)
    _made[id(words)] = made
    return made


def configure(hides_write_python, plain_text_python, tuple write_words):
    """The pure references (for texts that are not ASCII) and proxy.rules.WRITE_WORDS."""
    global _pure_hides_write, _pure_plain_text, _telling
    _pure_hides_write, _pure_plain_text = hides_write_python, plain_text_python
    _telling = _Words(write_words)


def query_head(bytes raw, Py_ssize_t start, Py_ssize_t end, tuple watched):
    cdef _Words w = _words(watched)
    return _query_head(<const unsigned char*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw),
                       start, end, w.at, w.lens, w.count)


def read_only_tag(bytes payload, tuple tags):
    cdef _Words w = _words(tags)
    return _read_only_tag(<const unsigned char*>PyBytes_AS_STRING(payload),
                          PyBytes_GET_SIZE(payload), w.at, w.lens, w.count)


def hides_write(str lowered, tuple hiding):
    cdef _Words w
    cdef bytes text
    if not hiding:
        return False
    if not lowered.isascii():
        return _pure_hides_write(lowered, hiding)
    w = _words(hiding)
    text = lowered.encode("ascii")
    return _hides_write(<const unsigned char*>PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text),
                        w.at, w.lens, w.count, _telling.at, _telling.lens, _telling.count)


def plain_text(str lowered, tuple names, tuple hiding):
    cdef _Words n, h
    cdef bytes text
    if not lowered.isascii():
        return _pure_plain_text(lowered, names, hiding)
    n = _words(names)
    h = _words(hiding)
    text = lowered.encode("ascii")
    return not _mentions(<const unsigned char*>PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text),
                         n.at, n.lens, n.count) and \
        not _hides_write(<const unsigned char*>PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text),
                         h.at, h.lens, h.count, _telling.at, _telling.lens, _telling.count)


def answer_class(int mtype, bytes payload, tuple tags):
    cdef _Words w = _words(tags)
    if not 0 <= mtype <= 255:
        raise ValueError("a message type is a byte")
    return _answer_class(<unsigned char>mtype, <const unsigned char*>PyBytes_AS_STRING(payload),
                         PyBytes_GET_SIZE(payload), w.at, w.lens, w.count)


def request_class(int mtype):
    if not 0 <= mtype <= 255:
        raise ValueError("a message type is a byte")
    return _request_class(<unsigned char>mtype)


def quiet_classes():
    """The answer classes the C rules call quiet: (for the relay core, for the lanes), each a
    frozenset (proxy.rules.RELAY_QUIET and LANE_QUIET)."""
    return (frozenset(c for c in range(ANSWER_STATE + 1) if _relay_quiet(c)),
            frozenset(c for c in range(ANSWER_STATE + 1) if _lane_quiet(c)))
