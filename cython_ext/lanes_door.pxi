# Lanes, part 0: the doorkeeper of the misses pass lanes forward (``Core.door``), and its
# Python face for the parity test (``Doorkeeper``, twin of ``proxy.lane_misses.Doorkeeper``).
# Included by cython_ext/lanes.pyx (one extension module; see its docstring).

cdef extern from *:
    """
    #include <functional>
    static inline uint64_t weir_read_hash(const std::string& key) {
        return (uint64_t)std::hash<std::string>{}(key) | 1u;  /* (never 0) */
    }
    """
    uint64_t weir_read_hash(const string& key) nogil


cdef cppclass Door:
    """The hashes (lane table and Bind parameters, ``weir_read_hash``) of the held statements'
    reads with no stamped answer that pass lanes forwarded lately, with how many times each
    was kept: the first ``keep`` reads of one (admission's ``keep``, told by the proxy: it
    refuses those, ``proxy.fillqueue.Admission``) are only counted, later ones passed on;
    the map starts over when it holds ``capacity``; the contract is
    ``proxy.lane_misses.Doorkeeper``'s (its pure twin)."""
    unordered_map[uint64_t, uint8_t] reads
    size_t capacity  # 0: off (every read goes to the proxy: ``--admission always``)
    uint8_t keep


cdef inline bint _kept(Door* d, uint64_t h) noexcept nogil:
    """Whether the read ``h`` is only counted (one of its first ``keep``: then remembered;
    the map starts over when full) rather than passed on."""
    if d.capacity == 0:
        return False
    cdef unordered_map[uint64_t, uint8_t].iterator it = d.reads.find(h)
    if it == d.reads.end():
        if d.keep == 0:
            return False
        if d.reads.size() >= d.capacity:
            d.reads.clear()
        d.reads[h] = 1
        return True
    cdef uint8_t n = deref(it).second
    if n >= d.keep:
        return False
    d.reads[h] = n + 1
    return True


cdef inline bint _would_keep(Door* d, uint64_t h) noexcept nogil:
    """Whether :func:`_kept` would keep the read ``h`` now (changes nothing): one of a key's
    first ``keep`` reads, which costs the proxy only a count. While the event loop falls
    behind (``Lanes.open_misses(False)``) lanes still forward those: closing the lanes to
    them sends each through the event loop, which costs it more."""
    if d.capacity == 0:
        return False
    cdef unordered_map[uint64_t, uint8_t].iterator it = d.reads.find(h)
    if it == d.reads.end():
        return d.keep > 0
    return deref(it).second < d.keep


cdef inline bint _seen_before(Door* d, uint64_t h) noexcept nogil:
    """Whether the read ``h`` was kept before (it goes by :func:`_kept` too)."""
    cdef bint before = d.capacity > 0 and d.reads.count(h) > 0
    _kept(d, h)
    return before


cdef class Doorkeeper:
    """``Door`` as a Python object: the twin of ``proxy.lane_misses.Doorkeeper``."""
    cdef Door door

    def __cinit__(self, size_t capacity):
        self.door.capacity = capacity
        self.door.keep = 1

    @property
    def keep(self):
        return self.door.keep

    @keep.setter
    def keep(self, int value):
        self.door.keep = <uint8_t>min(max(value, 0), 255)

    def kept(self, uint64_t h):
        """Whether the read ``h`` (never 0) is only counted (then remembered)."""
        return _kept(&self.door, h)

    def would_keep(self, uint64_t h):
        """Whether :meth:`kept` would say so now (nothing remembered)."""
        return _would_keep(&self.door, h)

    def seen_before(self, uint64_t h):
        """Whether the read ``h`` was kept before (it goes by :meth:`kept` too)."""
        return _seen_before(&self.door, h)
