# cython: language_level=3
# distutils: language = c++
"""Lanes: threads that answer memoized cached reads of quiet sessions, and relay the requests
and answers of quiet pass-through sessions, without the GIL.

Owns: the lane threads (each an epoll loop run with the GIL released), the sessions handed
to them (a duplicate of the client socket's descriptor and the statements the session holds
that name a lane table), the lane tables (a memoized reply per (table, Bind bytes after the
statement name), stamped with the epoch it was validated at) and the queue of sessions the
lanes hand back.

A lane reads a session's socket, answers each leading run of ``Bind`` (unnamed portal, a
statement it knows) [``Describe`` portal] ``Execute`` (all rows) ``Sync`` whose entry is
stamped with the current epoch, within the session's gate and the freshness deadline, with
one ``send``; at the first thing it cannot answer (another message, a stale or missing entry,
an incomplete message, a short write, end of stream) it stops watching the socket and hands
the session back with the unanswered bytes and the unsent reply bytes. A pass session's lane
reads both its sockets and relays whole request/answer cycles (see "pass sessions" below).
What a lane sends to clients at one wake-up goes out after it read every ready socket. Lanes
may be pinned one to a CPU, each serving the sessions whose bytes arrive on its CPU. The
proxy (``proxy.lanes``) owns every decision about what may be answered: it stamps entries,
sets the gates and bumps the epoch before any change that could make a stamped entry wrong.

Every field a lane reads is guarded by one mutex, except a session's own fields, which only
the thread that marked the session BUSY touches. Imports nothing from the project.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp
from libcpp.string cimport npos, string
from libcpp.unordered_map cimport unordered_map
from libcpp.utility cimport pair
from libcpp.vector cimport vector
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, dup, read, write

from cython_ext.queryhead cimport query_head


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
    #: what :func:`_read_ready` found
    READ_ANSWERED = 1
    READ_STOP = 2


cdef cppclass Entry:
    uint64_t epoch
    string plain  # the reply without a Describe of the portal
    string described  # the reply with it


cdef cppclass Stmt:
    int64_t table
    double gate  # answer only until this time.monotonic()


cdef cppclass LSession:
    int fd  # the client socket (a duplicate)
    int ufd  # pass sessions: the upstream socket (a duplicate); hit sessions: -1
    int lane
    int move  # the lane the session moves to when it is watched again (-1: none)
    int state
    unordered_map[string, Stmt] stmts
    uint64_t served  # answers given (hit sessions), cycles relayed (pass sessions)
    int64_t last_table
    string pending_in  # client bytes not handled
    string pending_out  # bytes for the client not sent
    string reply  # hit sessions: the answers read at this wake-up, sent after every read
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
    vector[int] batches  # ``sent_batch`` after each of them
    # the whole answers read at this wake-up (``upstream_in`` up to ``relay_cut``), relayed
    # after every read, and whether the session is handed back then
    Py_ssize_t relay_cut
    Py_ssize_t relay_cycles
    bint relay_stop


ctypedef pair[uint64_t, LSession*] Reply  # a session (token, session) with bytes to send


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
    vector[string] names  # relation names of the caches (lower case; QUERIES_UNNAMED)
    #: whole words that make a Query hide a write, and the first words that tell one
    #: (proxy.forwarding.hides_write; QUERIES_UNNAMED)
    vector[string] hiding
    vector[string] telling
    vector[string] watched  # proxy.forwarding.WATCHED_WORDS
    vector[const unsigned char*] watched_at  # their bytes and lengths, for query_head
    vector[Py_ssize_t] watched_len
    vector[string] read_only  # CommandComplete tags that cannot have written anything
    uint64_t relayed  # cycles relayed by pass sessions
    uint64_t moved  # sessions moved to the lane of another CPU


# small accessors (Cython cannot always spell ``it->second.field`` on C++ iterators)
cdef extern from *:
    """
    template <class It> static inline auto it_second(It it) -> decltype(it->second) {
        return it->second;
    }
    template <class It> static inline auto& stmt_of(It it) { return it->second; }
    template <class It> static inline auto& entry_of(It it) { return it->second; }
    template <class It> static inline int index_of(It it) { return it->second; }
    """
    LSession* it_second(unordered_map[uint64_t, LSession*].iterator) nogil
    Stmt& stmt_of(unordered_map[string, Stmt].iterator) nogil
    Entry& entry_of(unordered_map[string, Entry].iterator) nogil
    int index_of(unordered_map[string, int].iterator) nogil


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


cdef void _hand_back(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """Stop watching ``s`` and queue it for the proxy (its pending bytes are set)."""
    cdef uint64_t one = 1
    cdef bint first
    epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, s.fd, NULL)
    if s.ufd >= 0:
        epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, s.ufd, NULL)
    pthread_mutex_lock(&c.mu)
    s.state = HANDED
    first = c.handed.empty()
    c.handed.push_back(token)
    pthread_cond_broadcast(&c.cv)
    pthread_mutex_unlock(&c.mu)
    if first:
        write(c.notify_fd, &one, 8)


cdef LSession* _take(Core* c, uint64_t token) noexcept nogil:
    """Mark the session of ``token`` BUSY if it is WATCHED (NULL otherwise)."""
    cdef LSession* s = NULL
    cdef unordered_map[uint64_t, LSession*].iterator it
    pthread_mutex_lock(&c.mu)
    it = c.sessions.find(token)
    if it != c.sessions.end() and it_second(it).state == WATCHED:
        s = it_second(it)
        s.state = BUSY
    pthread_mutex_unlock(&c.mu)
    return s


cdef int _lane_of(Core* c, int fd, int lane) noexcept nogil:
    """The lane for a session whose client socket is ``fd``: pinned lanes take the sessions
    whose packets arrive on their CPU (the client thread's, on loopback); ``lane`` otherwise."""
    cdef int cpu = -1
    cdef socklen_t size = sizeof(int)
    if c.cpus.empty() or getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &size) < 0:
        return lane
    if 0 <= cpu < <int>c.lane_of_cpu.size() and c.lane_of_cpu[cpu] >= 0:
        return c.lane_of_cpu[cpu]
    return lane


cdef inline void _arrived(Core* c, LSession* s) noexcept nogil:
    """Bytes from a session's client were read: with pinned lanes, note the lane of the CPU
    they arrived on (the session moves there when it is watched again)."""
    if not c.cpus.empty():
        s.move = _lane_of(c, s.fd, s.lane)


cdef void _rewatch(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """A BUSY session is watched again, by the lane its client's bytes last arrived at (or
    handed back if it cannot be watched there)."""
    if s.move >= 0 and s.move != s.lane and not _move(c, token, s):
        _hand_back(c, token, s)
        return
    _watch(c, s)


cdef bint _move(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """Move a BUSY session's sockets to lane ``s.move``'s epoll set (while the session is
    BUSY, only this thread reads ``s.lane``; ``leave`` reads it once the session is not);
    whether both are watched there."""
    cdef epoll_event ev
    cdef bint ok
    epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, s.fd, NULL)
    if s.ufd >= 0:
        epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, s.ufd, NULL)
    pthread_mutex_lock(&c.mu)
    s.lane = s.move
    c.moved += 1
    pthread_mutex_unlock(&c.mu)
    s.move = -1
    ev.events = EPOLLIN
    ev.data.u64 = token << 1
    ok = epoll_ctl(c.epfds[s.lane], EPOLL_CTL_ADD, s.fd, &ev) == 0
    if ok and s.ufd >= 0:
        ev.data.u64 = (token << 1) | 1
        ok = epoll_ctl(c.epfds[s.lane], EPOLL_CTL_ADD, s.ufd, &ev) == 0
    return ok


cdef void _watch(Core* c, LSession* s) noexcept nogil:
    """A BUSY session is WATCHED again."""
    pthread_mutex_lock(&c.mu)
    s.state = WATCHED
    pthread_cond_broadcast(&c.cv)
    pthread_mutex_unlock(&c.mu)


cdef inline bint _again() noexcept nogil:
    return errno == EAGAIN or errno == EWOULDBLOCK or errno == EINTR


cdef Py_ssize_t _send(int fd, const char* data, Py_ssize_t size) noexcept nogil:
    """Bytes of ``data`` sent now (all of them when the socket is broken: its transport will
    see that itself)."""
    cdef ssize_t sent = send(fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL)
    if sent < 0:
        return 0 if _again() else size
    return sent


cdef bint _serve(Core* c, uint64_t token, LSession* s, char* buf) noexcept nogil:
    """One readable hit session: compose the answers to what can be answered in ``s.reply``
    and keep the rest in ``s.pending_in``; whether there is a reply, which leaves the session
    BUSY for :func:`_reply` (otherwise it is watched again or handed back here)."""
    cdef unordered_map[string, Stmt].iterator st
    cdef unordered_map[string, Entry].iterator en
    cdef ssize_t n
    cdef Py_ssize_t pos = 0, size, name_at, name_end, rest_end
    cdef bint described
    cdef double now
    cdef string name, key
    cdef string* out = &s.reply
    cdef const unsigned char* p = <const unsigned char*>buf
    n = recv(s.fd, buf, READ_BUF, MSG_DONTWAIT)
    if n < 0 and _again():
        _watch(c, s)
        return False
    if n <= 0:  # end of stream or an error: the proxy's transport will see it itself
        s.pending_in.clear()
        _hand_back(c, token, s)
        return False
    out.clear()
    _arrived(c, s)
    pthread_mutex_lock(&c.mu)
    now = _monotonic()
    if now <= c.fresh_until:
        while pos < n:
            size = _unit(p + pos, n - pos, &name_at, &name_end, &rest_end, &described)
            if size < 0:
                break
            name.assign(buf + pos + name_at, name_end - name_at)
            st = s.stmts.find(name)
            if st == s.stmts.end() or now > stmt_of(st).gate:
                break
            key = _table_key(stmt_of(st).table)
            key.append(buf + pos + name_end + 1, rest_end - name_end - 1)
            en = c.entries.find(key)
            if en == c.entries.end() or entry_of(en).epoch != c.epoch:
                break
            if described:
                out.append(entry_of(en).described)
            else:
                out.append(entry_of(en).plain)
            s.served += 1
            s.last_table = stmt_of(st).table
            c.served += 1
            pos += size
    pthread_mutex_unlock(&c.mu)
    s.pending_in.assign(buf + pos, n - pos)
    if out.size():
        return True
    _hand_back(c, token, s)  # the first unit is not one the lane answers
    return False


cdef void _reply(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """Send what :func:`_serve` composed; the session is watched again, or handed back with
    what it could not answer or send."""
    cdef Py_ssize_t sent = _send(s.fd, s.reply.data(), s.reply.size())
    if <size_t>sent < s.reply.size():
        s.pending_out.assign(s.reply.data() + sent, s.reply.size() - sent)
    if s.pending_in.size() or s.pending_out.size():
        _hand_back(c, token, s)
    else:
        _rewatch(c, token, s)


# -- pass sessions ----------------------------------------------------------------------------
#
# A pass session's lane relays whole request/answer cycles between the client and the
# upstream: client messages up to a Sync or simple Query, when every one of them is one the
# relay core forwards without a look (Execute, Sync, Flush, Describe, Binds and Parses the
# session sent before, plain simple Queries), and upstream answers up to a ReadyForQuery
# (idle), when none of them is one the session state must observe (ErrorResponse,
# ParameterStatus, a CommandComplete that may have written, another transaction status, the
# start of a COPY, anything unknown). What it relays is summed up for the proxy (runs per Bind,
# the last use of each Bind and Parse, whether a Query went by); what went upstream whose
# answer did not come back yet is kept (``inflight``) for the proxy to observe on hand-back.


cdef bint _quiet_upstream(Core* c, const unsigned char* p, Py_ssize_t length) noexcept nogil:
    """Whether a backend message (type at ``p``, payload after 5 bytes) needs no look."""
    cdef unsigned char t = p[0]
    if t == b'D' or t == b'1' or t == b'2' or t == b'3' or t == b'n' or t == b't' \
            or t == b'T' or t == b'I' or t == b's' or t == b'N' or t == b'A':
        return True
    if t == b'Z':
        return length == 5 and p[5] == b'I'
    if t == b'C':
        return _read_only(c, p + 5, length - 4)
    return False


cdef bint _read_only(Core* c, const unsigned char* tag, Py_ssize_t size) noexcept nogil:
    """A CommandComplete tag that cannot have written anything (``set_words``)."""
    cdef Py_ssize_t i, k
    for i in range(<Py_ssize_t>c.read_only.size()):
        k = c.read_only[i].size()
        if k <= size and memcmp(tag, c.read_only[i].data(), k) == 0:
            return True
    return False


cdef Py_ssize_t _names_end(const unsigned char* p, Py_ssize_t start, Py_ssize_t end
                           ) noexcept nogil:
    """Where a Bind's portal and statement names (payload p[start:end]) end, or -1."""
    cdef const unsigned char* nul = <const unsigned char*>memchr(p + start, 0, end - start)
    if nul == NULL:
        return -1
    nul = <const unsigned char*>memchr(nul + 1, 0, end - (nul + 1 - p))
    return -1 if nul == NULL else nul - p + 1


cdef bint _plain(Core* c, LSession* s, const unsigned char* p, Py_ssize_t start,
                 Py_ssize_t end) noexcept nogil:
    """proxy.forwarding.plain_query for the Query payload p[start:end], or False where only
    the event loop can tell (non-ASCII text)."""
    cdef Py_ssize_t i, size
    cdef string lowered
    if s.queries == QUERIES_NONE:
        return False
    if query_head(p, end, start, end, c.watched_at.data(), c.watched_len.data(),
                  c.watched_at.size()) != 1:
        return False
    if s.queries == QUERIES_ASCII or (c.names.empty() and c.hiding.empty()):
        return True
    size = end - 1 - start
    lowered.assign(<const char*>p + start, size)
    for i in range(size):
        if 65 <= <unsigned char>lowered[i] <= 90:
            lowered[i] = lowered[i] + 32
    for i in range(<Py_ssize_t>c.names.size()):
        if lowered.find(c.names[i]) != npos:
            return False
    return not _hides_write(c, lowered)


cdef inline bint _word_char(unsigned char ch) noexcept nogil:
    return (97 <= ch <= 122) or (48 <= ch <= 57) or ch == 95 or ch == 36 or (65 <= ch <= 90)


cdef bint _hides_write(Core* c, const string& lowered) noexcept nogil:
    """proxy.forwarding.hides_write for an ASCII Query text in lower case."""
    cdef size_t i = 0, first, at, n = lowered.size(), k
    if c.hiding.empty():
        return False
    while i < n and (lowered[i] == 32 or 9 <= <unsigned char>lowered[i] <= 13):
        i += 1
    first = i
    while i < n and ((97 <= <unsigned char>lowered[i] <= 122) or lowered[i] == 95):
        i += 1
    for k in range(c.telling.size()):
        if lowered.compare(first, i - first, c.telling[k]) == 0:
            return False
    for k in range(c.hiding.size()):
        at = lowered.find(c.hiding[k])
        while at != npos:
            if (at == 0 or not _word_char(<unsigned char>lowered[at - 1])) and \
                    (at + c.hiding[k].size() >= n
                     or not _word_char(<unsigned char>lowered[at + c.hiding[k].size()])):
                return True
            at = lowered.find(c.hiding[k], at + 1)
    return False


cdef void _pass_client(Core* c, uint64_t token, LSession* s, char* buf) noexcept nogil:
    """The client of a pass session is readable: forward whole quiet cycles upstream."""
    cdef ssize_t n
    cdef Py_ssize_t size, pos = 0, cut = 0, flushed = 0, end, length, names_end, sent, base
    cdef const unsigned char* p
    cdef unsigned char t
    cdef vector[int64_t] found
    cdef unordered_map[string, int].iterator it
    cdef string key
    cdef int batch
    cdef uint64_t gen
    n = recv(s.fd, buf, READ_BUF, MSG_DONTWAIT)
    if n < 0 and _again():
        _watch(c, s)
        return
    if n <= 0:  # end of stream or an error: the proxy's transport will see it itself
        _hand_back(c, token, s)
        return
    _arrived(c, s)
    s.pending_in.append(buf, n)
    p = <const unsigned char*>s.pending_in.data()
    size = s.pending_in.size()
    while size - pos >= 5:  # the end of the last whole Sync or Query
        length = _u32(p + pos + 1)
        if length < 4:
            _hand_back(c, token, s)  # the proxy reports it
            return
        end = pos + 1 + length
        if end > size:
            break
        t = p[pos]
        if t == b'S' or t == b'Q':
            cut = end
        elif t == b'H' or (t != b'B' and t != b'P' and t != b'E' and t != b'D'):
            flushed = end  # (a Flush, a Terminate, ...: not one to wait for a Sync after)
        pos = end
    if flushed > cut:  # the client may wait for what no ReadyForQuery ends: the loop's
        _hand_back(c, token, s)
        return
    if cut == 0:
        if size > PASS_BUFFER:
            _hand_back(c, token, s)
        else:
            _rewatch(c, token, s)
        return
    pthread_mutex_lock(&c.mu)
    gen = c.gen
    pos = 0
    while pos < cut:  # look: all or nothing
        t = p[pos]
        end = pos + 1 + _u32(p + pos + 1)
        if t == b'B':
            names_end = _names_end(p, pos + 5, end)
            if names_end < 0:
                break
            key.assign(<const char*>p + pos + 5, names_end - pos - 5)
            it = s.binds.find(key)
            if it == s.binds.end():
                break
            found.push_back((<int64_t>EV_BIND << 32) | index_of(it))
        elif t == b'P':
            key.assign(<const char*>p + pos + 5, end - pos - 5)
            it = s.parses.find(key)
            if it == s.parses.end():
                break
            found.push_back((<int64_t>EV_PARSE << 32) | index_of(it))
        elif t == b'Q':
            if not _plain(c, s, p, pos + 5, end):
                break
            found.push_back(<int64_t>EV_QUERY << 32)
        elif t != b'E' and t != b'S' and t != b'H' and t != b'D':
            break
        pos = end
    pthread_mutex_unlock(&c.mu)
    if pos < cut or gen != s.gen:
        _hand_back(c, token, s)
        return
    base = s.inflight.size()
    s.inflight.append(<const char*>p, cut)
    batch = s.sent_batch
    pos = 0
    n = 0
    while pos < cut:  # what the relay core observes (its _observe), in ``events``
        t = p[pos]
        end = pos + 1 + _u32(p + pos + 1)
        if t == b'B' or t == b'P' or t == b'Q':
            s.events.push_back(found[n])
            n += 1
        if t == b'E' or t == b'D' or t == b'B' or t == b'P':
            batch = 1
        elif t == b'S':
            batch = 0
        if t == b'S' or t == b'Q':
            s.events.push_back(<int64_t>EV_BARRIER << 32)
            s.barriers.push_back(base + end)
            s.batches.push_back(batch)
        pos = end
    s.sent_batch = batch
    sent = _send(s.ufd, <const char*>p, cut)
    if sent < cut:
        s.upstream_out.assign(<const char*>p + sent, cut - sent)
    s.pending_in.erase(0, cut)
    if s.upstream_out.size() or s.pending_in.size() > PASS_BUFFER:
        _hand_back(c, token, s)
        return
    _rewatch(c, token, s)


cdef void _relayed(Core* c, LSession* s, Py_ssize_t cycles) noexcept nogil:
    """The answers of the first ``cycles`` cycles in ``inflight`` went to the client."""
    cdef Py_ssize_t i = 0, done = 0, kind, index
    cdef size_t cut = s.barriers[cycles - 1]
    while done < cycles:
        kind = s.events[i] >> 32
        index = s.events[i] & <int64_t>0xffffffff
        s.seq += 1
        if kind == EV_BIND:
            s.bind_runs[index] += 1
            s.bind_used[index] = s.seq
        elif kind == EV_PARSE:
            s.parse_used[index] = s.seq
        elif kind == EV_QUERY:
            s.queried = s.seq
        else:
            done += 1
        i += 1
    s.events.erase(s.events.begin(), s.events.begin() + i)
    s.batch = s.batches[cycles - 1]
    s.batches.erase(s.batches.begin(), s.batches.begin() + cycles)
    s.barriers.erase(s.barriers.begin(), s.barriers.begin() + cycles)
    for i in range(<Py_ssize_t>s.barriers.size()):
        s.barriers[i] -= cut
    s.inflight.erase(0, cut)
    s.served += cycles
    pthread_mutex_lock(&c.mu)
    c.relayed += cycles
    pthread_mutex_unlock(&c.mu)


cdef bint _pass_upstream(Core* c, uint64_t token, LSession* s, char* buf) noexcept nogil:
    """The upstream of a pass session is readable: find the whole quiet answers to relay to
    the client; whether there are any, which leaves the session BUSY for :func:`_relay`
    (otherwise it is watched again or handed back here)."""
    cdef ssize_t n
    cdef Py_ssize_t size, pos = 0, cut = 0, end, length, cycles = 0, seen = 0
    cdef const unsigned char* p
    cdef bint stop = False
    n = recv(s.ufd, buf, READ_BUF, MSG_DONTWAIT)
    if n < 0 and _again():
        _watch(c, s)
        return False
    if n <= 0:
        _hand_back(c, token, s)
        return False
    s.upstream_in.append(buf, n)
    p = <const unsigned char*>s.upstream_in.data()
    size = s.upstream_in.size()
    while size - pos >= 5:
        length = _u32(p + pos + 1)
        end = pos + 1 + length
        if length < 4 or end > size:
            stop = length < 4
            break
        if not _quiet_upstream(c, p + pos, length):
            stop = True
            break
        if p[pos] == b'Z':
            seen += 1
            cut = end
            cycles = seen
        pos = end
    if cycles > <Py_ssize_t>s.barriers.size():  # more answers than requests: the proxy sees
        _hand_back(c, token, s)
        return False
    s.relay_cut = cut
    s.relay_cycles = cycles
    s.relay_stop = stop
    if cycles:
        return True
    _relay(c, token, s)
    return False


cdef void _relay(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """Send the whole answers :func:`_pass_upstream` found to the client; the session is
    watched again or handed back."""
    cdef Py_ssize_t sent, cut = s.relay_cut
    if s.relay_cycles:
        sent = _send(s.fd, s.upstream_in.data(), cut)
        if sent < cut:
            s.pending_out.assign(s.upstream_in.data() + sent, cut - sent)
        s.upstream_in.erase(0, cut)
        _relayed(c, s, s.relay_cycles)
    # (what comes with no request outstanding — a notification, a notice, a parameter
    # status, the server going away — is the event loop's)
    if s.relay_stop or s.pending_out.size() or s.upstream_in.size() > PASS_BUFFER \
            or (s.upstream_in.size() and s.barriers.empty()):
        _hand_back(c, token, s)
        return
    _rewatch(c, token, s)


cdef bint _dispatch(Core* c, uint64_t data, char* buf,
                    vector[Reply]* replies) noexcept nogil:
    """An epoll event: ``data`` is a session's token << 1, plus 1 for its upstream socket;
    whether cached reads were answered. A session with answers to send (cached reads, or
    upstream answers to relay) is added to ``replies`` and stays BUSY until they are sent."""
    cdef uint64_t token = data >> 1
    cdef LSession* s = _take(c, token)
    if s == NULL:
        return False
    if s.ufd < 0:
        if _serve(c, token, s, buf):
            replies.push_back(Reply(token, s))
            return True
        return False
    if data & 1:
        if _pass_upstream(c, token, s, buf):
            replies.push_back(Reply(token, s))
    else:
        _pass_client(c, token, s, buf)
    return False


cdef int _read_ready(Core* c, epoll_event* events, int ready, char* buf,
                    vector[Reply]* replies) noexcept nogil:
    """Dispatch ``ready`` events: READ_STOP if the stop signal is among them, READ_ANSWERED if
    cached reads were answered, 0 otherwise."""
    cdef int i, found = 0
    for i in range(ready):
        if events[i].data.u64 == 0:  # the stop signal
            found = READ_STOP
        elif _dispatch(c, events[i].data.u64, buf, replies) and found == 0:
            found = READ_ANSWERED
    return found


cdef void _run(Core* c, int lane) noexcept nogil:
    cdef epoll_event events[EVENTS]
    cdef int epfd = c.epfds[lane], ready
    cdef char* buf = <char*>malloc(READ_BUF)
    cdef vector[Reply] replies
    cdef Reply item
    if buf == NULL:
        return
    cdef double until
    cdef bint answered = False  # cached reads were answered at the last wake-up
    cdef bint stop
    cdef int found
    cdef cpu_set_t cpus
    if not c.cpus.empty():
        CPU_ZERO(&cpus)
        CPU_SET(c.cpus[lane], &cpus)
        sched_setaffinity(0, sizeof(cpu_set_t), &cpus)
    while True:
        ready = epoll_wait(epfd, events, EVENTS, 0)
        # poll a while before sleeping after answering cached reads (``spin``: a lane that
        # does not sleep is not woken for the next read); relaying pass sessions waits for
        # the upstream, so polling then only takes CPU from it
        if ready == 0 and c.spin > 0 and answered:
            until = _monotonic() + c.spin
            while ready == 0 and _monotonic() < until:
                sched_yield()  # a task waiting for this CPU (the client, say) goes first
                ready = epoll_wait(epfd, events, EVENTS, 0)
        if ready == 0:
            ready = epoll_wait(epfd, events, EVENTS, -1)
        if ready < 0:
            if errno == EINTR:
                continue
            break
        found = _read_ready(c, events, ready, buf, &replies)
        # requests that came in meanwhile join them (a client thread that got several
        # answers at its last wake-up sends its next requests one after the other)
        if found == READ_ANSWERED:
            found = _read_ready(c, events, epoll_wait(epfd, events, EVENTS, 0), buf,
                                &replies) or READ_ANSWERED
        answered = found == READ_ANSWERED
        stop = found == READ_STOP
        # the answers of one wake-up go out together, after every read: a client thread
        # that owns several of the sessions finds them all when it wakes, instead of
        # waking once per answer (point lookup, A/B runs: +4-8% a step at 4 and 8 clients;
        # docs/benchmarks/hit.md)
        for item in replies:
            if item.second.ufd < 0:
                _reply(c, item.first, item.second)
            else:
                _relay(c, item.first, item.second)
        replies.clear()
        if stop:
            break
    free(buf)


cdef class Lanes:
    """``lanes`` lane threads' shared state; the proxy runs ``run(i)`` in thread ``i``.
    With ``cpus`` (one distinct CPU per lane), lane ``i`` runs on CPU ``cpus[i]`` only, and a
    session is served by the lane of the CPU its client's bytes arrive on (SO_INCOMING_CPU:
    on loopback the client thread's CPU, on a NIC its receive queue's), moving when that
    changes; without, sessions are spread over the lanes by token."""

    cdef Core* c
    cdef readonly int lanes
    cdef bint closed

    def __cinit__(self, int lanes, double spin=0.0, tuple cpus not None=()):
        cdef epoll_event ev
        cdef int i, fd, cpu
        if lanes < 1:
            raise ValueError("at least one lane")
        if cpus and (len(cpus) != lanes or len(set(cpus)) != lanes
                     or not all(0 <= cpu < 4096 for cpu in cpus)):
            raise ValueError(f"pinned lanes need one distinct CPU (0-4095) each, not {cpus}")
        self.c = new Core()
        self.lanes = lanes
        pthread_mutex_init(&self.c.mu, NULL)
        pthread_cond_init(&self.c.cv, NULL)
        self.c.epoch = 1
        self.c.fresh_until = -1e300
        self.c.entry_bytes = 0
        self.c.served = 0
        self.c.spin = spin
        self.c.gen = 1
        self.c.relayed = 0
        self.c.moved = 0
        self.c.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        for i, cpu in enumerate(cpus):
            self.c.cpus.push_back(cpu)
            if <int>self.c.lane_of_cpu.size() <= cpu:
                self.c.lane_of_cpu.resize(cpu + 1, -1)
            self.c.lane_of_cpu[cpu] = i
        for i in range(lanes):
            self.c.epfds.push_back(epoll_create1(EPOLL_CLOEXEC))
            fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
            self.c.stops.push_back(fd)
            ev.events = EPOLLIN
            ev.data.u64 = 0
            epoll_ctl(self.c.epfds[i], EPOLL_CTL_ADD, fd, &ev)
        if self.c.notify_fd < 0:
            raise OSError(errno, "eventfd")

    def __dealloc__(self):
        cdef Reply item
        if self.c == NULL:
            return
        for item in self.c.sessions:
            close(item.second.fd)
            if item.second.ufd >= 0:
                close(item.second.ufd)
            del item.second
        cdef int fd
        for fd in self.c.epfds:
            close(fd)
        for fd in self.c.stops:
            close(fd)
        close(self.c.notify_fd)
        del self.c
        self.c = NULL

    @property
    def notify_fd(self):
        """Readable when sessions were handed back (``handed()`` drains it)."""
        return self.c.notify_fd

    def run(self, int lane):
        """Thread ``lane``'s loop; returns after :meth:`stop`."""
        with nogil:
            _run(self.c, lane)

    def stop(self):
        """Make every lane's ``run`` return (sessions stay registered: ``leave`` them)."""
        cdef uint64_t one = 1
        cdef int fd
        for fd in self.c.stops:
            write(fd, &one, 8)

    def bump(self):
        """A change that may make stamped entries wrong is about to happen: none of them is
        answered again until stamped anew."""
        pthread_mutex_lock(&self.c.mu)
        self.c.epoch += 1
        pthread_mutex_unlock(&self.c.mu)

    def set_fresh_until(self, double deadline):
        """Answer nothing after ``deadline`` (``time.monotonic()``)."""
        pthread_mutex_lock(&self.c.mu)
        self.c.fresh_until = deadline
        pthread_mutex_unlock(&self.c.mu)

    def put(self, int64_t table, bytes rest not None, bytes plain not None,
            bytes described not None):
        """Stamp the reply for ``rest`` in ``table`` with the current epoch."""
        cdef string key = _table_key(table)
        key.append(PyBytes_AS_STRING(rest), PyBytes_GET_SIZE(rest))
        cdef Entry* e
        pthread_mutex_lock(&self.c.mu)
        e = &self.c.entries[key]
        self.c.entry_bytes -= e.plain.size() + e.described.size()
        if e.plain.size() == 0:
            self.c.entry_bytes += key.size()
        e.plain.assign(PyBytes_AS_STRING(plain), PyBytes_GET_SIZE(plain))
        e.described.assign(PyBytes_AS_STRING(described), PyBytes_GET_SIZE(described))
        e.epoch = self.c.epoch
        self.c.entry_bytes += e.plain.size() + e.described.size()
        pthread_mutex_unlock(&self.c.mu)

    def clear(self):
        """Forget every entry."""
        pthread_mutex_lock(&self.c.mu)
        self.c.entries.clear()
        self.c.entry_bytes = 0
        pthread_mutex_unlock(&self.c.mu)

    def enter(self, uint64_t token, int fd, list stmts not None):
        """Hand a session to a lane (see the class): ``fd`` is its client socket (duplicated
        here; the caller keeps its own), ``stmts`` its (name bytes, table, gate) triples.
        ``token`` is unique for the life of this object and never 0."""
        cdef LSession* s
        cdef Stmt st
        cdef epoll_event ev
        cdef bytes name
        if token == 0:
            raise ValueError("token 0 is reserved")
        newfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        if newfd < 0:
            raise OSError(errno, "dup")
        s = new LSession()
        s.fd = newfd
        s.ufd = -1
        s.lane = _lane_of(self.c, newfd, token % self.lanes)
        s.move = -1
        s.state = WATCHED
        s.served = 0
        s.last_table = -1
        for name, table, gate in stmts:
            st.table = table
            st.gate = gate
            s.stmts[string(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))] = st
        pthread_mutex_lock(&self.c.mu)
        if self.c.sessions.count(token):
            pthread_mutex_unlock(&self.c.mu)
            close(newfd)
            del s
            raise ValueError("token in use")
        self.c.sessions[token] = s
        pthread_mutex_unlock(&self.c.mu)
        ev.events = EPOLLIN
        ev.data.u64 = token << 1
        if epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_ADD, newfd, &ev) < 0:
            err = errno
            pthread_mutex_lock(&self.c.mu)
            self.c.sessions.erase(token)
            pthread_mutex_unlock(&self.c.mu)
            close(newfd)
            del s
            raise OSError(err, "epoll_ctl")

    def leave(self, uint64_t token):
        """Take a session back (waiting while its lane works on it): ``(served, last_table,
        unanswered bytes, unsent reply bytes)``, or None for an unknown token."""
        cdef LSession* s
        cdef unordered_map[uint64_t, LSession*].iterator it
        with nogil:
            pthread_mutex_lock(&self.c.mu)
            it = self.c.sessions.find(token)
            if it == self.c.sessions.end():
                s = NULL
            else:
                s = it_second(it)
                while s.state == BUSY:
                    pthread_cond_wait(&self.c.cv, &self.c.mu)
                self.c.sessions.erase(token)
                if s.state == WATCHED:
                    epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_DEL, s.fd, NULL)
                    if s.ufd >= 0:
                        epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_DEL, s.ufd, NULL)
            pthread_mutex_unlock(&self.c.mu)
        if s == NULL:
            return None
        close(s.fd)
        try:
            if s.ufd >= 0:
                close(s.ufd)
                return _pass_result(s)
            return (s.served, s.last_table, _bytes(s.pending_in), _bytes(s.pending_out))
        finally:
            del s

    def handed(self):
        """The tokens of the sessions handed back since the last call (drains the notice)."""
        cdef uint64_t count
        cdef vector[uint64_t] tokens
        read(self.c.notify_fd, &count, 8)
        pthread_mutex_lock(&self.c.mu)
        tokens.swap(self.c.handed)
        pthread_mutex_unlock(&self.c.mu)
        return [t for t in tokens]

    def lane_of(self, uint64_t token):
        """The lane serving a session (-1 for an unknown token)."""
        cdef unordered_map[uint64_t, LSession*].iterator it
        cdef int lane = -1
        pthread_mutex_lock(&self.c.mu)
        it = self.c.sessions.find(token)
        if it != self.c.sessions.end():
            lane = it_second(it).lane
        pthread_mutex_unlock(&self.c.mu)
        return lane

    @property
    def cpus(self):
        """The CPU each lane is pinned to (empty: not pinned)."""
        return tuple(self.c.cpus)

    def stats(self):
        """``(answers given, entries, entry bytes, sessions in lanes, cycles relayed, sessions
        moved to another CPU's lane)``."""
        pthread_mutex_lock(&self.c.mu)
        result = (self.c.served, self.c.entries.size(), self.c.entry_bytes,
                  self.c.sessions.size(), self.c.relayed, self.c.moved)
        pthread_mutex_unlock(&self.c.mu)
        return result

    # -- pass sessions ----------------------------------------------------------------------

    def set_words(self, tuple watched not None, tuple read_only not None):
        """The first words that make a simple Query not plain (upper case) and the
        CommandComplete tags that cannot have written anything."""
        cdef bytes word
        cdef size_t i
        pthread_mutex_lock(&self.c.mu)
        self.c.watched.clear()
        self.c.watched_at.clear()
        self.c.watched_len.clear()
        self.c.read_only.clear()
        for word in watched:
            self.c.watched.push_back(string(PyBytes_AS_STRING(word), PyBytes_GET_SIZE(word)))
        for i in range(self.c.watched.size()):  # (the strings stay where they are now)
            self.c.watched_at.push_back(<const unsigned char*>self.c.watched[i].data())
            self.c.watched_len.push_back(self.c.watched[i].size())
        for word in read_only:
            self.c.read_only.push_back(string(PyBytes_AS_STRING(word), PyBytes_GET_SIZE(word)))
        pthread_mutex_unlock(&self.c.mu)

    def routing(self, tuple names not None, tuple hiding=(), tuple telling=()):
        """The routing state changed (caches were created or dropped, functions that may
        write changed): every pass session hands back before it forwards anything more;
        ``names`` are the relations the caches read, ``hiding`` and ``telling`` the words
        of ``proxy.forwarding.hides_write`` (all lower case bytes; no ``hiding``: no Query
        hides a write)."""
        cdef bytes name
        pthread_mutex_lock(&self.c.mu)
        self.c.gen += 1
        self.c.names.clear()
        self.c.hiding.clear()
        self.c.telling.clear()
        for name in names:
            self.c.names.push_back(string(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)))
        for name in hiding:
            self.c.hiding.push_back(string(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)))
        for name in telling:
            self.c.telling.push_back(string(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)))
        pthread_mutex_unlock(&self.c.mu)

    def enter_pass(self, uint64_t token, int fd, int ufd, list binds not None,
                   list parses not None, int queries):
        """Hand a pass session to a lane (see the class): ``fd`` and ``ufd`` are its client
        and upstream sockets (duplicated here), ``binds`` the Bind names and ``parses`` the
        Parse payloads it may send again, ``queries`` which simple Queries it forwards
        (QUERIES_*). The session must be idle: nothing outstanding upstream."""
        cdef LSession* s
        cdef epoll_event ev
        cdef bytes key
        cdef int i, err
        if token == 0:
            raise ValueError("token 0 is reserved")
        cfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        if cfd < 0:
            raise OSError(errno, "dup")
        cufd = fcntl(ufd, F_DUPFD_CLOEXEC, 0)
        if cufd < 0:
            err = errno
            close(cfd)
            raise OSError(err, "dup")
        s = new LSession()
        s.fd, s.ufd = cfd, cufd
        s.lane = _lane_of(self.c, cfd, token % self.lanes)
        s.move = -1
        # BUSY (this thread's) until both sockets are watched: a lane that sees the first
        # one ready may not hand the session back before the second is in its epoll set
        s.state = BUSY
        s.served = s.seq = 0
        s.last_table = -1
        s.queries = queries
        s.queried = 0
        s.batch = s.sent_batch = 0
        for i, key in enumerate(binds):
            s.binds[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = i
        s.bind_runs.resize(len(binds), 0)
        s.bind_used.resize(len(binds), 0)
        for i, key in enumerate(parses):
            s.parses[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = i
        s.parse_used.resize(len(parses), 0)
        pthread_mutex_lock(&self.c.mu)
        if self.c.sessions.count(token):
            pthread_mutex_unlock(&self.c.mu)
            close(cfd)
            close(cufd)
            del s
            raise ValueError("token in use")
        s.gen = self.c.gen
        self.c.sessions[token] = s
        pthread_mutex_unlock(&self.c.mu)
        ev.events = EPOLLIN
        ev.data.u64 = token << 1
        err = 0
        if epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_ADD, cfd, &ev) < 0:
            err = errno
        else:
            ev.data.u64 = (token << 1) | 1
            if epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_ADD, cufd, &ev) < 0:
                err = errno
                epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_DEL, cfd, NULL)
        if err:
            pthread_mutex_lock(&self.c.mu)
            self.c.sessions.erase(token)
            pthread_mutex_unlock(&self.c.mu)
            close(cfd)
            close(cufd)
            del s
            raise OSError(err, "epoll_ctl")
        _watch(self.c, s)


QUERIES = {"none": QUERIES_NONE, "ascii": QUERIES_ASCII, "unnamed": QUERIES_UNNAMED}


cdef inline bytes _bytes(const string& data):
    return PyBytes_FromStringAndSize(data.data(), data.size())


cdef tuple _pass_result(LSession* s):
    """What ``leave`` returns for a pass session (see ``proxy.lanes``)."""
    cdef pair[string, int] item
    binds = []
    parses = []
    for item in s.binds:
        if s.bind_runs[item.second]:
            binds.append((s.bind_used[item.second], _bytes(item.first),
                          s.bind_runs[item.second]))
    for item in s.parses:
        if s.parse_used[item.second]:
            parses.append((s.parse_used[item.second], _bytes(item.first)))
    return (s.served, binds, parses, s.queried, s.batch == 1, _bytes(s.pending_in),
            _bytes(s.pending_out), _bytes(s.upstream_in), _bytes(s.upstream_out),
            _bytes(s.inflight))
