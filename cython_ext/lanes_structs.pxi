# Lanes, part 1: the C declarations (epoll, pthread, sockets), the states and sizes, the
# session (``LSession``), statement, entry and core structs, and the small byte helpers.
# Included by cython_ext/lanes.pyx (one extension module; see its docstring).

cdef extern from "<errno.h>" nogil:
    int errno
    int EAGAIN
    int EWOULDBLOCK
    int EINTR

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, const void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, const void*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_broadcast(pthread_cond_t*)

cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        void* ptr
        int fd
        uint32_t u32
        uint64_t u64
    struct epoll_event:
        uint32_t events
        epoll_data_t data
    int epoll_create1(int)
    int epoll_ctl(int, int, int, epoll_event*)
    int epoll_wait(int, epoll_event*, int, int)
    enum:
        EPOLLIN
        EPOLL_CTL_ADD
        EPOLL_CTL_DEL
        EPOLL_CLOEXEC

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int, int)
    enum:
        EFD_NONBLOCK
        EFD_CLOEXEC

cdef extern from "<sys/socket.h>" nogil:
    ctypedef unsigned int socklen_t
    ssize_t recv(int, void*, size_t, int)
    ssize_t send(int, const void*, size_t, int)
    int getsockopt(int, int, int, void*, socklen_t*)
    enum:
        MSG_DONTWAIT
        MSG_NOSIGNAL
        SOL_SOCKET
        SO_INCOMING_CPU

cdef extern from "<sched.h>" nogil:
    ctypedef struct cpu_set_t:
        pass
    int sched_yield()
    void CPU_ZERO(cpu_set_t*)
    void CPU_SET(int, cpu_set_t*)
    int sched_setaffinity(int, size_t, const cpu_set_t*)

cdef extern from "<fcntl.h>" nogil:
    int fcntl(int, int, ...)
    enum:
        F_DUPFD_CLOEXEC


#: session states
cdef enum:
    WATCHED = 0  # in its lane's epoll set, no thread working on it
    BUSY = 1  # its lane is reading or answering it
    HANDED = 2  # out of the epoll set, waiting in the hand-back queue
    READ_BUF = 65536
    EVENTS = 64
    #: which simple Queries a pass session forwards: none, those whose text is ASCII and
    #: plain (no registry), those that also name no cached relation (explicit caching)
    QUERIES_NONE = 0
    QUERIES_ASCII = 1
    QUERIES_UNNAMED = 2
    #: what a pass session's ``events`` record
    EV_BIND = 1
    EV_PARSE = 2
    EV_QUERY = 3
    EV_BARRIER = 4
    #: bytes a pass session buffers in either direction before it hands back (a large
    #: result or batch: the event loop streams it)
    PASS_BUFFER = 262144
    #: of a pass session's last 8 held statements' runs, how many without a stamped answer
    #: make it forward one with a stamped answer too (``LSession.recent``): amid misses,
    #: a hit's hand-back costs the client a seen(s) barrier's wait on the event loop
    MISS_RUN = 6
    #: misses a pass session forwards in one stay in a lane before it hands back: the
    #: event loop then answers what it has cached meanwhile (a key filled but not stamped
    #: yet: its hit stamps it), so a session does not forward a filled key's reads forever
    MISS_STINT = 1024
    #: what :func:`_read_ready` found
    READ_ANSWERED = 1
    READ_STOP = 2
    #: why a hit session was handed back (``Core.leaves``; ``LEAVE_NAMES`` in lanes.pyx)
    LEAVE_CLOSED = 0  # end of stream or a read error
    LEAVE_FRESH = 1  # past the freshness deadline
    LEAVE_MESSAGE = 2  # not a Bind [Describe] Execute Sync unit (or an incomplete one)
    LEAVE_STATEMENT = 3  # a statement the lane was not given
    LEAVE_GATE = 4  # past the statement's gate (its role's remembered privilege)
    LEAVE_UNSTAMPED = 5  # no stamped reply for these Bind bytes (never stamped, or dropped)
    LEAVE_EPOCH = 6  # a reply stamped before the last epoch bump
    LEAVE_SHORT_WRITE = 7  # the client socket took only part of the replies
    LEAVE_MOVE = 8  # could not be watched by another CPU's lane
    LEAVE_UPSTREAM = 9  # its upstream socket became readable (a session that may switch)
    LEAVE_N = 10


cdef cppclass Entry:
    uint64_t epoch
    bint touched  # answered since the proxy last asked (``Core.touched``)
    string plain  # the reply without a Describe of the portal
    string described  # the reply with it


cdef cppclass Stmt:
    int64_t table
    double gate  # answer only until this time.monotonic()


cdef cppclass LSession:
    int fd  # the client socket (a duplicate)
    int ufd  # pass sessions: the upstream socket (a duplicate); hit sessions: -1
    # hit sessions that may switch to a pass session at a miss (``Lanes.enter``'s ``switch``;
    # see :func:`_switch`): the upstream socket (a duplicate), watched only to hand the
    # session back when anything arrives; -1: none (or switched: then it is ``ufd``)
    int spare
    uint64_t hits  # a switched session: the answers it gave before it switched
    int lane
    int move  # the lane the session moves to when it is watched again (-1: none)
    int state
    unordered_map[string, Stmt] stmts
    uint64_t served  # answers given (hit sessions), cycles relayed (pass sessions)
    int64_t last_table
    string pending_in  # client bytes not handled
    string pending_out  # bytes for the client not sent
    string reply  # hit sessions: the answers read at this wake-up, sent after every read
    int why  # hit sessions: LEAVE_* of the unit the lane stopped at
    # -- pass sessions (see _pass_client and _pass_upstream)
    uint64_t gen  # the routing generation the session entered at
    int queries  # which simple Queries are plain: QUERIES_NONE, _ASCII or _UNNAMED
    unordered_map[string, int] binds  # Bind names (portal, statement, NULs) -> index
    unordered_map[string, int] parses  # Parse payload -> index
    vector[uint64_t] bind_runs  # per Bind index: runs in relayed cycles
    vector[uint64_t] bind_used  # per Bind index: sequence number of its last relayed run
    vector[uint64_t] parse_used  # per Parse index: the same
    uint64_t seq
    uint64_t queried  # sequence number of the last relayed simple Query (0: none)
    int batch  # Extended.batch_upstream after the last relayed cycle
    int sent_batch  # the same after everything sent upstream
    string upstream_in  # upstream bytes not relayed
    string upstream_out  # bytes for the upstream not sent
    string inflight  # what went upstream whose cycle is not relayed yet
    vector[int64_t] events  # what ``inflight`` holds: EV_* << 32 | index, in order
    vector[size_t] barriers  # the end in ``inflight`` of each Sync or Query
    vector[double] sent_at  # when each of them went upstream (monotonic seconds)
    vector[int] batches  # ``sent_batch`` after each of them
    # the whole answers read at this wake-up (``upstream_in`` up to ``relay_cut``), relayed
    # after every read, and whether the session is handed back then
    Py_ssize_t relay_cut
    Py_ssize_t relay_cycles
    bint relay_stop
    # held statements whose unanswered reads the lane forwards (a miss at pass-through
    # cost): Bind names (portal "", statement, NULs) -> the statement's lane table; the
    # Bind messages so forwarded, not yet taken by the proxy (guarded by ``Core.mu``)
    unordered_map[string, int64_t] held
    string missed
    # the last 8 held statements' runs, a bit each (1: no stamped answer, forwarded); while
    # MISS_RUN of them were, a run with a stamped answer is forwarded too (not handed back)
    uint32_t recent
    Py_ssize_t stint  # held statements' reads it forwarded in this stay (``MISS_STINT``)
    # of those with no stamped answer, the first reads the doorkeeper kept (``Core.door``:
    # counted here, their Binds not kept for the proxy; guarded by ``Core.mu``)
    uint64_t screened


ctypedef pair[uint64_t, LSession*] Reply  # a session (token, session) with bytes to send


cdef cppclass Words:
    """Words for the rules of ``rules_kernel.pxd``: their bytes, and pointers and lengths
    (``at``/``lens``, set again whenever ``held`` changes; see ``_set_words``)."""
    vector[string] held
    vector[const unsigned char*] at
    vector[Py_ssize_t] lens


cdef cppclass Core:
    pthread_mutex_t mu
    pthread_cond_t cv  # a session stopped being BUSY
    uint64_t epoch
    double fresh_until
    unordered_map[string, Entry] entries
    size_t entry_bytes
    unordered_map[uint64_t, LSession*] sessions
    vector[uint64_t] handed
    vector[int] epfds
    vector[int] stops
    int notify_fd
    uint64_t served
    double spin  # seconds a lane polls before it sleeps
    vector[int] cpus  # the CPU each lane runs on (empty: lanes are not pinned)
    vector[int] lane_of_cpu  # CPU -> the lane pinned to it, or -1
    uint64_t gen  # the routing generation (pass sessions hand back when it moved)
    Words names  # relation names of the caches (lower case; QUERIES_UNNAMED)
    #: whole words that make a Query hide a write, and the first words that tell one
    #: (proxy.rules.hides_write; QUERIES_UNNAMED)
    Words hiding
    Words telling
    Words watched  # proxy.rules.WATCHED_WORDS
    Words read_only  # CommandComplete tags that cannot have written anything
    uint64_t relayed  # cycles relayed by pass sessions
    # how long relayed cycles took upstream (from the Sync or Query to its ReadyForQuery):
    # counts per bucket of ``lat_bounds`` (proxy.metrics.LATENCY_BOUNDS; one more: +Inf)
    vector[double] lat_bounds
    vector[uint64_t] lat_counts
    double lat_sum
    # answers given per lane table (proxy.lanes maps a table to its cache)
    unordered_map[int64_t, uint64_t] table_served
    uint64_t moved  # sessions moved to the lane of another CPU
    vector[uint64_t] leaves  # LEAVE_N counts: hit sessions handed back, by LEAVE_* reason
    vector[string] touched  # keys of the entries answered since the proxy last asked
    uint64_t dropped  # entries dropped one by one (``Lanes.drop``)
    uint64_t misses  # held statements' reads pass sessions forwarded (no stamped answer)
    uint64_t hits_forwarded  # ... and those with one, forwarded amid misses (``recent``)
    bint misses_open  # lanes may forward misses (``Lanes.open_misses``: the event loop keeps up)
    Door door  # first reads of misses, counted by the lanes alone (``Lanes.screen_misses``)
    uint64_t switched  # hit sessions that switched to pass sessions at a miss (``_switch``)


# small accessors (Cython cannot always spell ``it->second.field`` on C++ iterators)
cdef extern from *:
    """
    template <class It> static inline auto it_second(It it) -> decltype(it->second) {
        return it->second;
    }
    template <class It> static inline auto& stmt_of(It it) { return it->second; }
    template <class It> static inline auto& entry_of(It it) { return it->second; }
    template <class It> static inline int index_of(It it) { return it->second; }
    template <class It> static inline int64_t table_of(It it) { return it->second; }
    """
    LSession* it_second(unordered_map[uint64_t, LSession*].iterator) nogil
    Stmt& stmt_of(unordered_map[string, Stmt].iterator) nogil
    Entry& entry_of(unordered_map[string, Entry].iterator) nogil
    int index_of(unordered_map[string, int].iterator) nogil
    int64_t table_of(unordered_map[string, int64_t].iterator) nogil


cdef inline double _monotonic() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline string _table_key(int64_t table) noexcept nogil:
    cdef string key
    key.append(<const char*>&table, sizeof(int64_t))
    return key


cdef Py_ssize_t _unit(const unsigned char* p, Py_ssize_t n, Py_ssize_t* name_at,
                      Py_ssize_t* name_end, Py_ssize_t* rest_end, bint* described) noexcept nogil:
    """The length of the whole unit at ``p`` — Bind(portal "", statement, rest), optionally
    Describe(portal ""), Execute(portal "", no limit), Sync — or -1 (not one, or incomplete).
    Sets the statement name's span, the end of the Bind and whether the Describe is there."""
    cdef Py_ssize_t pos, length
    cdef const unsigned char* nul
    if n < 5 or p[0] != b'B':
        return -1
    length = _u32(p + 1)
    if length < 6 or 1 + length > n or p[5] != 0:
        return -1
    nul = <const unsigned char*>memchr(p + 6, 0, length - 5)
    if nul == NULL:
        return -1
    name_at[0] = 6
    name_end[0] = nul - p
    rest_end[0] = 1 + length
    pos = 1 + length
    described[0] = False
    if pos + 7 <= n and p[pos] == b'D':
        if _u32(p + pos + 1) != 6 or p[pos + 5] != b'P' or p[pos + 6] != 0:
            return -1
        described[0] = True
        pos += 7
    if pos + 10 > n or p[pos] != b'E' or _u32(p + pos + 1) != 9 or p[pos + 5] != 0 \
            or _u32(p + pos + 6) != 0:
        return -1
    pos += 10
    if pos + 5 > n or p[pos] != b'S' or _u32(p + pos + 1) != 4:
        return -1
    return pos + 5
