# cython: language_level=3
# distutils: language = c++
"""Hit lanes: threads that answer memoized cached reads of quiet sessions without the GIL.

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
the session back with the unanswered bytes and the unsent reply bytes. The proxy
(``proxy.lanes``) owns every decision about what may be answered: it stamps entries, sets
the gates and bumps the epoch before any change that could make a stamped entry wrong.

Every field a lane reads is guarded by one mutex, except a session's own fields, which only
the thread that marked the session BUSY touches. Imports nothing from the project.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr
from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from libcpp.utility cimport pair
from libcpp.vector cimport vector
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, dup, read, write


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
    ssize_t recv(int, void*, size_t, int)
    ssize_t send(int, const void*, size_t, int)
    enum:
        MSG_DONTWAIT
        MSG_NOSIGNAL

cdef extern from "<sched.h>" nogil:
    int sched_yield()

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


cdef cppclass Entry:
    uint64_t epoch
    string plain  # the reply without a Describe of the portal
    string described  # the reply with it


cdef cppclass Stmt:
    int64_t table
    double gate  # answer only until this time.monotonic()


cdef cppclass LSession:
    int fd
    int lane
    int state
    unordered_map[string, Stmt] stmts
    uint64_t served
    int64_t last_table
    string pending_in
    string pending_out


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


# small accessors (Cython cannot always spell ``it->second.field`` on C++ iterators)
cdef extern from *:
    """
    template <class It> static inline auto it_second(It it) -> decltype(it->second) {
        return it->second;
    }
    template <class It> static inline auto& stmt_of(It it) { return it->second; }
    template <class It> static inline auto& entry_of(It it) { return it->second; }
    """
    LSession* it_second(unordered_map[uint64_t, LSession*].iterator) nogil
    Stmt& stmt_of(unordered_map[string, Stmt].iterator) nogil
    Entry& entry_of(unordered_map[string, Entry].iterator) nogil


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
    pthread_mutex_lock(&c.mu)
    s.state = HANDED
    first = c.handed.empty()
    c.handed.push_back(token)
    pthread_cond_broadcast(&c.cv)
    pthread_mutex_unlock(&c.mu)
    if first:
        write(c.notify_fd, &one, 8)


cdef void _serve(Core* c, uint64_t token, char* buf, string* out) noexcept nogil:
    """One readable session: answer what can be answered, hand back the rest."""
    cdef LSession* s
    cdef unordered_map[uint64_t, LSession*].iterator it
    cdef unordered_map[string, Stmt].iterator st
    cdef unordered_map[string, Entry].iterator en
    cdef ssize_t n, sent
    cdef Py_ssize_t pos = 0, size, name_at, name_end, rest_end
    cdef bint described
    cdef double now
    cdef string name, key
    cdef const unsigned char* p = <const unsigned char*>buf
    pthread_mutex_lock(&c.mu)
    it = c.sessions.find(token)
    if it == c.sessions.end() or it_second(it).state != WATCHED:
        pthread_mutex_unlock(&c.mu)
        return
    s = it_second(it)
    s.state = BUSY
    pthread_mutex_unlock(&c.mu)
    n = recv(s.fd, buf, READ_BUF, MSG_DONTWAIT)
    if n < 0 and (errno == EAGAIN or errno == EWOULDBLOCK or errno == EINTR):
        pthread_mutex_lock(&c.mu)
        s.state = WATCHED
        pthread_cond_broadcast(&c.cv)
        pthread_mutex_unlock(&c.mu)
        return
    if n <= 0:  # end of stream or an error: the proxy's transport will see it itself
        s.pending_in.clear()
        _hand_back(c, token, s)
        return
    out.clear()
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
    if out.size():
        sent = send(s.fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
        if sent < 0:
            # would block: all of it is pending; a broken socket: the transport will see it
            sent = 0 if errno == EAGAIN or errno == EWOULDBLOCK or errno == EINTR \
                else <ssize_t>out.size()
        if <size_t>sent < out.size():
            s.pending_out.assign(out.data() + sent, out.size() - sent)
    if pos < n or s.pending_out.size():
        s.pending_in.assign(buf + pos, n - pos)
        _hand_back(c, token, s)
        return
    pthread_mutex_lock(&c.mu)
    s.state = WATCHED
    pthread_cond_broadcast(&c.cv)
    pthread_mutex_unlock(&c.mu)


cdef void _run(Core* c, int lane) noexcept nogil:
    cdef epoll_event events[EVENTS]
    cdef int epfd = c.epfds[lane], ready, i
    cdef char* buf = <char*>malloc(READ_BUF)
    cdef string out
    if buf == NULL:
        return
    cdef double until
    while True:
        ready = epoll_wait(epfd, events, EVENTS, 0)
        if ready == 0 and c.spin > 0:  # poll a while before sleeping (see Lanes.__cinit__)
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
        for i in range(ready):
            if events[i].data.u64 == 0:  # the stop signal
                free(buf)
                return
            _serve(c, events[i].data.u64, buf, &out)
    free(buf)


cdef class Lanes:
    """``lanes`` lane threads' shared state; the proxy runs ``run(i)`` in thread ``i``."""

    cdef Core* c
    cdef readonly int lanes
    cdef bint closed

    def __cinit__(self, int lanes, double spin=0.0):
        cdef epoll_event ev
        cdef int i, fd
        if lanes < 1:
            raise ValueError("at least one lane")
        self.c = new Core()
        self.lanes = lanes
        pthread_mutex_init(&self.c.mu, NULL)
        pthread_cond_init(&self.c.cv, NULL)
        self.c.epoch = 1
        self.c.fresh_until = -1e300
        self.c.entry_bytes = 0
        self.c.served = 0
        self.c.spin = spin
        self.c.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
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
        cdef pair[uint64_t, LSession*] item
        if self.c == NULL:
            return
        for item in self.c.sessions:
            close(item.second.fd)
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
        """Hand a session to lane ``token % lanes``: ``fd`` is its client socket (duplicated
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
        s.lane = token % self.lanes
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
        ev.data.u64 = token
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
            pthread_mutex_unlock(&self.c.mu)
        if s == NULL:
            return None
        close(s.fd)
        result = (s.served, s.last_table,
                  PyBytes_FromStringAndSize(s.pending_in.data(), s.pending_in.size()),
                  PyBytes_FromStringAndSize(s.pending_out.data(), s.pending_out.size()))
        del s
        return result

    def handed(self):
        """The tokens of the sessions handed back since the last call (drains the notice)."""
        cdef uint64_t count
        cdef vector[uint64_t] tokens
        read(self.c.notify_fd, &count, 8)
        pthread_mutex_lock(&self.c.mu)
        tokens.swap(self.c.handed)
        pthread_mutex_unlock(&self.c.mu)
        return [t for t in tokens]

    def stats(self):
        """``(answers given, entries, entry bytes, sessions in lanes)``."""
        pthread_mutex_lock(&self.c.mu)
        result = (self.c.served, self.c.entries.size(), self.c.entry_bytes,
                  self.c.sessions.size())
        pthread_mutex_unlock(&self.c.mu)
        return result
