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
    reads with no stamped answer that pass lanes forwarded lately: a read not among them is
    a key's first, which admission refuses (``proxy.fillqueue.Admission``), so the lane
    only counts it; while ``strict`` (admission's, told by the proxy) a second read moves
    to ``twice`` and is only counted too (admission refuses it then), and the third passes;
    the contract is ``proxy.lane_misses.Doorkeeper``'s (its pure twin)."""
    unordered_set[uint64_t] seen
    unordered_set[uint64_t] twice
    size_t capacity  # 0: off (every read goes to the proxy: ``--admission always``)
    bint strict


cdef inline bint _kept(Door* d, uint64_t h) noexcept nogil:
    """Whether the read ``h`` is only counted (a first read, or while strict a second: then
    remembered; the sets start over when the first is full) rather than passed on."""
    if d.capacity == 0:
        return False
    if d.twice.count(h):
        d.twice.erase(h)
        return False
    if d.seen.count(h):
        if not d.strict:
            return False
        d.seen.erase(h)
        d.twice.insert(h)
        return True
    if d.seen.size() >= d.capacity:
        d.seen.clear()
        d.twice.clear()
    d.seen.insert(h)
    return True


cdef inline bint _would_keep(Door* d, uint64_t h) noexcept nogil:
    """Whether :func:`_kept` would keep the read ``h`` now (changes nothing): a key's first
    read (while strict, its second too), which costs the proxy only a count. While the event
    loop falls behind (``Lanes.open_misses(False)``) lanes still forward those: closing the
    lanes to them sends each through the event loop, which costs it more."""
    if d.capacity == 0 or d.twice.count(h):
        return False
    return not d.seen.count(h) or d.strict


cdef inline bint _seen_before(Door* d, uint64_t h) noexcept nogil:
    """Whether the read ``h`` is among those seen lately (it goes by :func:`_kept` too)."""
    cdef bint before = d.capacity > 0 and (d.seen.count(h) > 0 or d.twice.count(h) > 0)
    _kept(d, h)
    return before


cdef class Doorkeeper:
    """``Door`` as a Python object: the twin of ``proxy.lane_misses.Doorkeeper``."""
    cdef Door door

    def __cinit__(self, size_t capacity):
        self.door.capacity = capacity
        self.door.strict = False

    @property
    def strict(self):
        return self.door.strict

    @strict.setter
    def strict(self, bint value):
        self.door.strict = value

    def kept(self, uint64_t h):
        """Whether the read ``h`` (never 0) is only counted (then remembered)."""
        return _kept(&self.door, h)

    def would_keep(self, uint64_t h):
        """Whether :meth:`kept` would say so now (nothing remembered)."""
        return _would_keep(&self.door, h)
