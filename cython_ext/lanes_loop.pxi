# Lanes, part 4: the loop: taking and handing back sessions, moving them between lanes,
# watching sockets, and the epoll loop each lane thread runs (``_run``).
# Included by cython_ext/lanes.pyx (one extension module; see its docstring).

cdef inline int _upstream_fd(LSession* s) noexcept nogil:
    """The upstream socket a lane watches for ``s``: a pass session's, or the spare one of a
    hit session that may switch (-1: none)."""
    return s.ufd if s.ufd >= 0 else s.spare


cdef void _hand_back(Core* c, uint64_t token, LSession* s) noexcept nogil:
    """Stop watching ``s`` and queue it for the proxy (its pending bytes are set)."""
    cdef uint64_t one = 1
    cdef bint first
    epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, s.fd, NULL)
    if _upstream_fd(s) >= 0:
        epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, _upstream_fd(s), NULL)
    pthread_mutex_lock(&c.mu)
    s.state = HANDED
    if s.ufd < 0:
        c.leaves[s.why] += 1
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
        s.why = LEAVE_MOVE
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
    if _upstream_fd(s) >= 0:
        epoll_ctl(c.epfds[s.lane], EPOLL_CTL_DEL, _upstream_fd(s), NULL)
    pthread_mutex_lock(&c.mu)
    s.lane = s.move
    c.moved += 1
    pthread_mutex_unlock(&c.mu)
    s.move = -1
    ev.events = EPOLLIN
    ev.data.u64 = token << 1
    ok = epoll_ctl(c.epfds[s.lane], EPOLL_CTL_ADD, s.fd, &ev) == 0
    if ok and _upstream_fd(s) >= 0:
        ev.data.u64 = (token << 1) | 1
        ok = epoll_ctl(c.epfds[s.lane], EPOLL_CTL_ADD, _upstream_fd(s), &ev) == 0
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
        if data & 1:  # (a hit session that may switch: its upstream has something to say,
            s.why = LEAVE_UPSTREAM  # which is the event loop's)
            _hand_back(c, token, s)
            return False
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
