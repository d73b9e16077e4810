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
    only counts it; the contract is ``proxy.lane_misses.Doorkeeper``'s (its pure twin)."""
    unordered_set[uint64_t] seen
    size_t capacity  # 0: off (every read goes to the proxy: ``--admission always``)


cdef inline bint _first_read(Door* d, uint64_t h) noexcept nogil:
    """Whether ``h`` is new (then remembered; the set starts over when full)."""
    if d.capacity == 0 or d.seen.count(h):
        return False
    if d.seen.size() >= d.capacity:
        d.seen.clear()
    d.seen.insert(h)
    return True


cdef class Doorkeeper:
    """``Door`` as a Python object: the twin of ``proxy.lane_misses.Doorkeeper``."""
    cdef Door door

    def __cinit__(self, size_t capacity):
        self.door.capacity = capacity

    def first(self, uint64_t h):
        """Whether ``h`` (never 0) is a first read (then remembered)."""
        return _first_read(&self.door, h)
