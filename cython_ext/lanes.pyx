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

import sys

from cython.operator cimport dereference as deref
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr, memcmp
from libcpp.string cimport npos, string
from libcpp.unordered_map cimport unordered_map
from libcpp.utility cimport pair
from libcpp.vector cimport vector
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, dup, read, write

from cython_ext.rules_kernel cimport (
    REQUEST_FLUSH,
    REQUEST_FREE,
    REQUEST_QUERY,
    REQUEST_SEEN,
    REQUEST_SYNC,
    answer_class,
    hides_write,
    lane_quiet,
    mentions,
    query_head,
    request_class,
)


include "lanes_door.pxi"
include "lanes_structs.pxi"
include "lanes_hit.pxi"
include "lanes_pass.pxi"
include "lanes_loop.pxi"


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
        self.c.lat_sum = 0
        self.c.dropped = 0
        self.c.misses = 0
        self.c.hits_forwarded = 0
        self.c.switched = 0
        self.c.misses_open = True
        self.c.door.capacity, self.c.door.keep = 0, 1
        self.c.leaves.assign(LEAVE_N, 0)
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
            if item.second.spare >= 0:
                close(item.second.spare)
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
            e.touched = False
        e.plain.assign(PyBytes_AS_STRING(plain), PyBytes_GET_SIZE(plain))
        e.described.assign(PyBytes_AS_STRING(described), PyBytes_GET_SIZE(described))
        e.epoch = self.c.epoch
        self.c.entry_bytes += e.plain.size() + e.described.size()
        if self.c.touched.size() > 2 * self.c.entries.size() + 4096:
            _compact_touched(self.c)
        pthread_mutex_unlock(&self.c.mu)

    def clear(self):
        """Forget every entry."""
        pthread_mutex_lock(&self.c.mu)
        self.c.entries.clear()
        self.c.touched.clear()
        self.c.entry_bytes = 0
        pthread_mutex_unlock(&self.c.mu)

    def drop(self, list keys not None):
        """Forget the entries of ``keys`` (``(table, rest)`` pairs, as given to ``put``)
        at once: no lane answers them after this returns."""
        cdef string key
        cdef unordered_map[string, Entry].iterator en
        cdef int64_t table
        cdef bytes rest
        pthread_mutex_lock(&self.c.mu)
        for table, rest in keys:
            key = _table_key(table)
            key.append(PyBytes_AS_STRING(rest), PyBytes_GET_SIZE(rest))
            en = self.c.entries.find(key)
            if en != self.c.entries.end():
                self.c.entry_bytes -= key.size() + entry_of(en).plain.size() \
                    + entry_of(en).described.size()
                self.c.entries.erase(en)
                self.c.dropped += 1
        pthread_mutex_unlock(&self.c.mu)

    def touched(self):
        """The ``(table, rest)`` of the entries answered since the last call (each once),
        that are still there."""
        cdef vector[string] keys
        cdef string key
        cdef unordered_map[string, Entry].iterator en
        cdef list out = []
        pthread_mutex_lock(&self.c.mu)
        keys.swap(self.c.touched)
        for key in keys:
            en = self.c.entries.find(key)
            if en != self.c.entries.end():
                entry_of(en).touched = False
                out.append(key)
        pthread_mutex_unlock(&self.c.mu)
        return [(int.from_bytes(k[:8], _ORDER, signed=True), k[8:]) for k in out]

    def leaves(self):
        """``{reason: hit sessions handed back for it}`` (``LEAVE_NAMES``) and entries
        dropped one by one."""
        cdef int i
        pthread_mutex_lock(&self.c.mu)
        counts = [self.c.leaves[i] for i in range(LEAVE_N)]
        dropped = self.c.dropped
        pthread_mutex_unlock(&self.c.mu)
        return dict(zip(LEAVE_NAMES, counts)), dropped

    def enter(self, uint64_t token, int fd, list stmts not None, tuple switch=None):
        """Hand a session to a lane (see the class): ``fd`` is its client socket (duplicated
        here; the caller keeps its own), ``stmts`` its (name bytes, table, gate) triples.
        ``token`` is unique for the life of this object and never 0. ``switch``: ``(ufd,
        binds, parses, queries, held, recent)``, the session may switch to a pass session
        at a miss (``_switch``): ``ufd`` is its upstream socket (duplicated here; the caller
        stops reading it: anything arriving there hands the session back), the next four as
        ``enter_pass``'s, ``recent`` its last 8 held statements' runs (a bit each, 1: no
        stamped answer); ``leave`` then returns a pass session's result if it switched."""
        cdef LSession* s
        cdef Stmt st
        cdef epoll_event ev
        cdef bytes name
        cdef int spare = -1, err = 0
        if token == 0:
            raise ValueError("token 0 is reserved")
        newfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        if newfd < 0:
            raise OSError(errno, "dup")
        if switch is not None:
            spare = fcntl(switch[0], F_DUPFD_CLOEXEC, 0)
            if spare < 0:
                err = errno
                close(newfd)
                raise OSError(err, "dup")
        s = new LSession()
        s.fd = newfd
        s.ufd = -1
        s.spare = spare
        s.hits = 0
        s.recent = 0
        s.lane = _lane_of(self.c, newfd, token % self.lanes)
        s.move = -1
        # BUSY (this thread's) until its sockets are watched (as ``enter_pass``)
        s.state = WATCHED if spare < 0 else BUSY
        s.served = 0
        s.last_table = -1
        if switch is not None:
            _pass_fields(s, switch[1], switch[2], switch[3], switch[4])
            s.recent = <uint32_t>switch[5]
        for name, table, gate in stmts:
            st.table = table
            st.gate = gate
            s.stmts[string(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))] = st
        pthread_mutex_lock(&self.c.mu)
        if self.c.sessions.count(token):
            pthread_mutex_unlock(&self.c.mu)
            close(newfd)
            if spare >= 0:
                close(spare)
            del s
            raise ValueError("token in use")
        s.gen = self.c.gen
        self.c.sessions[token] = s
        pthread_mutex_unlock(&self.c.mu)
        ev.events = EPOLLIN
        ev.data.u64 = token << 1
        if epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_ADD, newfd, &ev) < 0:
            err = errno
        elif spare >= 0:
            ev.data.u64 = (token << 1) | 1
            if epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_ADD, spare, &ev) < 0:
                err = errno
                epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_DEL, newfd, NULL)
        if err:
            pthread_mutex_lock(&self.c.mu)
            self.c.sessions.erase(token)
            pthread_mutex_unlock(&self.c.mu)
            close(newfd)
            if spare >= 0:
                close(spare)
            del s
            raise OSError(err, "epoll_ctl")
        if spare >= 0:
            _watch(self.c, s)

    def leave(self, uint64_t token):
        """Take a session back (waiting while its lane works on it): ``(served, last_table,
        unanswered bytes, unsent reply bytes)``, a pass session's result (``_pass_result``:
        also a hit session that switched), or None for an unknown token."""
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
                    if _upstream_fd(s) >= 0:
                        epoll_ctl(self.c.epfds[s.lane], EPOLL_CTL_DEL, _upstream_fd(s), NULL)
            pthread_mutex_unlock(&self.c.mu)
        if s == NULL:
            return None
        close(s.fd)
        if s.spare >= 0:
            close(s.spare)
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

    def set_latency_bounds(self, tuple bounds not None):
        """The upper bounds (seconds, ascending) of the buckets that count how long relayed
        cycles took upstream; resets the counts."""
        pthread_mutex_lock(&self.c.mu)
        self.c.lat_bounds.clear()
        for bound in bounds:
            self.c.lat_bounds.push_back(<double>bound)
        self.c.lat_counts.assign(len(bounds) + 1, 0)
        self.c.lat_sum = 0
        pthread_mutex_unlock(&self.c.mu)

    def upstream_latency(self):
        """``(counts per bucket, the last one +Inf; sum of seconds)`` of the cycles pass
        sessions relayed, from each Sync or Query sent to its ReadyForQuery relayed."""
        pthread_mutex_lock(&self.c.mu)
        result = (tuple(self.c.lat_counts), self.c.lat_sum)
        pthread_mutex_unlock(&self.c.mu)
        return result

    def served_by_table(self, bint reset=False):
        """``{table: answers given}`` for every lane table that answered (since the last
        ``reset``, which empties the counts in the same step)."""
        cdef pair[int64_t, uint64_t] item
        cdef vector[pair[int64_t, uint64_t]] copied
        pthread_mutex_lock(&self.c.mu)
        for item in self.c.table_served:
            copied.push_back(item)
        if reset:
            self.c.table_served.clear()
        pthread_mutex_unlock(&self.c.mu)
        return {item.first: item.second for item in copied}

    # -- pass sessions ----------------------------------------------------------------------

    def set_words(self, tuple watched not None, tuple read_only not None):
        """The first words that make a simple Query not plain (upper case) and the
        CommandComplete tags that cannot have written anything."""
        pthread_mutex_lock(&self.c.mu)
        _set_words(&self.c.watched, watched)
        _set_words(&self.c.read_only, read_only)
        pthread_mutex_unlock(&self.c.mu)

    def routing(self, tuple names not None, tuple hiding=(), tuple telling=()):
        """The routing state changed (caches were created or dropped, functions that may
        write changed): every pass session hands back before it forwards anything more;
        ``names`` are the relations the caches read, ``hiding`` and ``telling`` the words
        of ``proxy.rules.hides_write`` (all lower case bytes; no ``hiding``: no Query
        hides a write)."""
        pthread_mutex_lock(&self.c.mu)
        self.c.gen += 1
        _set_words(&self.c.names, names)
        _set_words(&self.c.hiding, hiding)
        _set_words(&self.c.telling, telling)
        pthread_mutex_unlock(&self.c.mu)

    def enter_pass(self, uint64_t token, int fd, int ufd, list binds not None,
                   list parses not None, int queries, list held=None, uint32_t recent=0):
        """Hand a pass session to a lane (see the class): ``fd`` and ``ufd`` are its client
        and upstream sockets (duplicated here), ``binds`` the Bind names and ``parses`` the
        Parse payloads it may send again, ``queries`` which simple Queries it forwards
        (QUERIES_*); ``held``: (Bind names, lane table) of held statements whose reads with
        no stamped answer it forwards too, each a whole Bind [Describe] Execute Sync run
        (their Bind messages: :meth:`take_missed`; a Parse then hands back); ``recent``: its
        last 8 held statements' runs before (a bit each, 1: no stamped answer). The session
        must be idle: nothing outstanding upstream."""
        cdef LSession* s
        cdef epoll_event ev
        cdef int err
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
        s.served = 0
        s.last_table = -1
        s.spare = -1
        s.hits = 0
        s.recent = recent
        _pass_fields(s, binds, parses, queries, held)
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


    def take_missed(self):
        """(token, Bind messages, first reads) of each pass session that forwarded held
        statements' reads with no stamped answer since the last call (``enter_pass``'s
        ``held``), taken: the Binds of those the doorkeeper passed (:meth:`screen_misses`),
        and how many it kept (a key's first read, only counted)."""
        cdef pair[uint64_t, LSession*] item
        cdef vector[pair[uint64_t, string]] taken
        cdef vector[uint64_t] screened
        cdef Py_ssize_t i
        with nogil:
            pthread_mutex_lock(&self.c.mu)
            for item in self.c.sessions:
                if item.second.missed.size() or item.second.screened:
                    taken.push_back(pair[uint64_t, string](item.first, item.second.missed))
                    screened.push_back(item.second.screened)
                    item.second.missed.clear()
                    item.second.screened = 0
            pthread_mutex_unlock(&self.c.mu)
        return [(taken[i].first, _bytes(taken[i].second), screened[i])
                for i in range(<Py_ssize_t>taken.size())]

    def screen_misses(self, size_t capacity):
        """Keep the first reads of keys (no stamped answer, never forwarded among the last
        ``capacity`` distinct ones) from :meth:`take_missed`'s Binds, only counted (0: every
        read is taken; admission ``always``); the kept ones are forgotten."""
        pthread_mutex_lock(&self.c.mu)
        self.c.door.reads.clear()
        self.c.door.capacity = capacity
        pthread_mutex_unlock(&self.c.mu)

    def screen_keep(self, int keep):
        """Keep the first ``keep`` reads of a key (admission's ``keep``: a key is admitted on
        the read after those; 1 while fills pay)."""
        pthread_mutex_lock(&self.c.mu)
        self.c.door.keep = <uint8_t>min(max(keep, 0), 255)
        pthread_mutex_unlock(&self.c.mu)

    def seen_read(self, int64_t table, bytes rest not None):
        """A miss of the Bind ``rest`` (after the names) in ``table`` read on the event loop
        goes by the doorkeeper too: whether it saw that read before (else it remembers it)."""
        cdef string key = _table_key(table)
        cdef bint before
        key.append(PyBytes_AS_STRING(rest), PyBytes_GET_SIZE(rest))
        pthread_mutex_lock(&self.c.mu)
        before = _seen_before(&self.c.door, weir_read_hash(key))
        pthread_mutex_unlock(&self.c.mu)
        return before

    def open_misses(self, bint open_):
        """Whether pass sessions may forward held statements' reads (``enter_pass``'s
        ``held``) from now on; closed, each hands back at its next such read (the event
        loop, which counts them and runs the fills, is falling behind), except a read the
        doorkeeper keeps (``_would_keep``: only counted, no work for the event loop)."""
        self.c.misses_open = open_

    def misses(self):
        """Held statements' reads pass sessions forwarded since the start: (those with no
        stamped answer, those with one forwarded amid misses)."""
        return self.c.misses, self.c.hits_forwarded

    def switched(self):
        """Hit sessions that switched to pass sessions at a miss since the start."""
        return self.c.switched


QUERIES = {"none": QUERIES_NONE, "ascii": QUERIES_ASCII, "unnamed": QUERIES_UNNAMED}
#: the names of the LEAVE_* reasons, in order (``Lanes.leaves``)
LEAVE_NAMES = ("closed", "fresh", "message", "statement", "gate", "unstamped", "epoch",
               "short_write", "move", "upstream")
_ORDER = sys.byteorder  # (``_table_key`` copies an int64_t's bytes as they are)


cdef inline bytes _bytes(const string& data):
    return PyBytes_FromStringAndSize(data.data(), data.size())

