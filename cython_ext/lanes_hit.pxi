# Lanes, part 2: serving memoized cached reads (``_serve`` a run of Bind/Execute/Sync units,
# ``_reply`` send what was answered).
# Included by cython_ext/lanes.pyx (one extension module; see its docstring).

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
        s.why = LEAVE_CLOSED
        _hand_back(c, token, s)
        return False
    out.clear()
    _arrived(c, s)
    pthread_mutex_lock(&c.mu)
    now = _monotonic()
    s.why = LEAVE_FRESH
    if now <= c.fresh_until:
        while pos < n:
            size = _unit(p + pos, n - pos, &name_at, &name_end, &rest_end, &described)
            if size < 0:
                s.why = LEAVE_MESSAGE
                break
            name.assign(buf + pos + name_at, name_end - name_at)
            st = s.stmts.find(name)
            if st == s.stmts.end():
                s.why = LEAVE_STATEMENT
                break
            if now > stmt_of(st).gate:
                s.why = LEAVE_GATE
                break
            key = _table_key(stmt_of(st).table)
            key.append(buf + pos + name_end + 1, rest_end - name_end - 1)
            en = c.entries.find(key)
            if en == c.entries.end():
                s.why = LEAVE_UNSTAMPED
                break
            if entry_of(en).epoch != c.epoch:
                s.why = LEAVE_EPOCH
                break
            if not entry_of(en).touched:  # (the proxy tells the engine's recency)
                entry_of(en).touched = True
                c.touched.push_back(key)
            if described:
                out.append(entry_of(en).described)
            else:
                out.append(entry_of(en).plain)
            s.served += 1
            s.recent = s.recent << 1  # (a held run with a stamped answer: ``_switch``)
            s.last_table = stmt_of(st).table
            c.served += 1
            c.table_served[s.last_table] += 1
            pos += size
    pthread_mutex_unlock(&c.mu)
    if pos == 0 and (s.why == LEAVE_UNSTAMPED or s.why == LEAVE_EPOCH) \
            and _switch(c, token, s, buf, n, name_end, key):
        return False
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
        s.why = LEAVE_SHORT_WRITE
    if s.pending_in.size() or s.pending_out.size():
        _hand_back(c, token, s)
    else:
        _rewatch(c, token, s)


cdef bint _switch(Core* c, uint64_t token, LSession* s, const char* buf, ssize_t n,
                  Py_ssize_t name_end, const string& stamp) noexcept nogil:
    """A hit session that may switch (``spare``: ``Lanes.enter``'s ``switch``) has no stamped
    answer for the first run it read (``buf``, ``n`` bytes; its statement name ends at
    ``name_end``): while its reads are mostly misses lately (``MISS_RUN`` of its last 8 held
    statements' runs had no stamped answer) and lanes forward this miss (``stamp``: its lane
    table and Bind bytes; while the event loop is behind, only a read the doorkeeper keeps,
    ``_would_keep``), it becomes a pass
    session that forwards misses (as ``Lanes.enter_pass`` with ``held``) and forwards the run
    upstream itself, instead of handing the session back for the event loop to forward it;
    whether it did. It answers nothing from stamps from then on (what it relays moves seen(s)
    when it comes back, ``proxy.lanes``); ``hits`` keeps the answers it gave before."""
    cdef string key
    cdef bint forwarded
    if s.spare < 0 or _popcount8(s.recent) < MISS_RUN:
        return False
    pthread_mutex_lock(&c.mu)
    forwarded = c.misses_open or _would_keep(&c.door, weir_read_hash(stamp))
    pthread_mutex_unlock(&c.mu)
    if not forwarded:
        return False
    key.assign(buf + 5, name_end + 1 - 5)  # (portal "", the statement's name, NULs)
    if s.held.find(key) == s.held.end():
        return False  # (a statement whose misses the event loop reads itself)
    s.ufd = s.spare
    s.spare = -1
    s.hits = s.served
    s.served = 0
    s.pending_in.clear()
    pthread_mutex_lock(&c.mu)
    c.switched += 1
    pthread_mutex_unlock(&c.mu)
    _pass_bytes(c, token, s, buf, n)
    return True
