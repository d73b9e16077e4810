# Lanes, part 3: relaying the request/answer cycles of quiet pass-through sessions.
# Included by cython_ext/lanes.pyx (one extension module; see its docstring).

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
# Which messages are quiet is said once, by the message classes of ``rules_kernel.pxd``
# (``request_class``, ``answer_class`` and ``lane_quiet``; pure reference: ``proxy.rules``).


cdef inline bint _quiet_upstream(Core* c, const unsigned char* p, Py_ssize_t length
                                 ) noexcept nogil:
    """Whether a backend message (type at ``p``, payload after 5 bytes) needs no look
    (``rules_kernel.lane_quiet``)."""
    return lane_quiet(answer_class(p[0], p + 5, length - 4, c.read_only.at.data(),
                                   c.read_only.lens.data(), c.read_only.at.size()))


cdef inline int _popcount8(uint32_t bits) noexcept nogil:
    """How many of the low 8 bits are set."""
    cdef int n = 0
    bits &= 0xff
    while bits:
        n += bits & 1
        bits >>= 1
    return n


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
    the event loop can tell (non-ASCII text); the rules are ``rules_kernel.pxd``'s."""
    cdef Py_ssize_t i, size
    cdef string lowered
    cdef const unsigned char* text
    if s.queries == QUERIES_NONE:
        return False
    if query_head(p, end, start, end, c.watched.at.data(), c.watched.lens.data(),
                  c.watched.at.size()) != 1:
        return False
    if s.queries == QUERIES_ASCII or (c.names.at.empty() and c.hiding.at.empty()):
        return True
    size = end - 1 - start
    lowered.assign(<const char*>p + start, size)
    for i in range(size):
        if 65 <= <unsigned char>lowered[i] <= 90:
            lowered[i] = lowered[i] + 32
    text = <const unsigned char*>lowered.data()
    return not mentions(text, size, c.names.at.data(), c.names.lens.data(), c.names.at.size()) \
        and not hides_write(text, size, c.hiding.at.data(), c.hiding.lens.data(),
                            c.hiding.at.size(), c.telling.at.data(), c.telling.lens.data(),
                            c.telling.at.size())


cdef void _pass_client(Core* c, uint64_t token, LSession* s, char* buf) noexcept nogil:
    """The client of a pass session is readable: forward whole quiet cycles upstream."""
    cdef ssize_t n = recv(s.fd, buf, READ_BUF, MSG_DONTWAIT)
    if n < 0 and _again():
        _watch(c, s)
        return
    if n <= 0:  # end of stream or an error: the proxy's transport will see it itself
        _hand_back(c, token, s)
        return
    _arrived(c, s)
    _pass_bytes(c, token, s, buf, n)


cdef void _pass_bytes(Core* c, uint64_t token, LSession* s, const char* buf, ssize_t n
                      ) noexcept nogil:
    """:func:`_pass_client` with the ``n`` bytes just read from the client in ``buf`` (also
    a hit session that switched at a miss, :func:`_switch`)."""
    cdef Py_ssize_t size, pos = 0, cut = 0, flushed = 0, end, length, names_end, sent, base, i
    cdef double now
    cdef const unsigned char* p
    cdef unsigned char t
    cdef vector[int64_t] found
    cdef unordered_map[string, int].iterator it
    cdef unordered_map[string, int64_t].iterator hk
    cdef unordered_map[string, Entry].iterator en
    cdef vector[Py_ssize_t] misses  # (start, end) of each held statement's Bind forwarded
    cdef vector[uint64_t] hashes  # ... and its read's hash (0: it had a stamped answer)
    cdef uint64_t h
    cdef Py_ssize_t name_at, name_end, rest_end
    cdef bint described
    cdef string key, stamp
    cdef int batch, kind
    cdef uint64_t gen
    cdef uint32_t recent = s.recent
    cdef Py_ssize_t hits = 0
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
        kind = request_class(p[pos])
        if kind == REQUEST_SYNC or kind == REQUEST_QUERY:
            cut = end
        elif kind != REQUEST_FREE and kind != REQUEST_SEEN:
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
        kind = request_class(t)
        end = pos + 1 + _u32(p + pos + 1)
        if kind == REQUEST_SEEN and t == b'B':
            names_end = _names_end(p, pos + 5, end)
            if names_end < 0:
                break
            key.assign(<const char*>p + pos + 5, names_end - pos - 5)
            it = s.binds.find(key)
            if it == s.binds.end():
                break
            hk = s.held.find(key)
            if hk != s.held.end():  # a held statement's read: forwarded when not stamped
                if s.stint + <Py_ssize_t>misses.size() // 2 >= MISS_STINT:
                    break  # (this stay forwarded enough)
                if _unit(p + pos, cut - pos, &name_at, &name_end, &rest_end, &described) < 0:
                    break  # (not the drivers' Bind [Describe] Execute Sync run: the loop's)
                stamp = _table_key(table_of(hk))
                stamp.append(<const char*>p + names_end, end - names_end)
                en = c.entries.find(stamp)
                if en != c.entries.end() and entry_of(en).epoch == c.epoch:
                    if not c.misses_open or _popcount8(recent) < MISS_RUN:
                        break  # answered from its stamp (the loop checks the session first)
                    recent = recent << 1  # amid misses: forwarded too (module docstring)
                    hits += 1
                    hashes.push_back(0)
                else:
                    h = weir_read_hash(stamp)
                    if not c.misses_open and not _would_keep(&c.door, h):
                        break  # (the event loop is behind: only reads that cost it nothing)
                    recent = (recent << 1) | 1
                    hashes.push_back(h)
                misses.push_back(pos)
                misses.push_back(end)
            found.push_back((<int64_t>EV_BIND << 32) | index_of(it))
        elif kind == REQUEST_SEEN:  # a Parse
            if not s.held.empty():
                break  # (it could name a held statement: the event loop observes that)
            key.assign(<const char*>p + pos + 5, end - pos - 5)
            it = s.parses.find(key)
            if it == s.parses.end():
                break
            found.push_back((<int64_t>EV_PARSE << 32) | index_of(it))
        elif kind == REQUEST_QUERY:
            if not _plain(c, s, p, pos + 5, end):
                break
            found.push_back(<int64_t>EV_QUERY << 32)
        elif kind != REQUEST_FREE and kind != REQUEST_SYNC and kind != REQUEST_FLUSH:
            break
        pos = end
    pthread_mutex_unlock(&c.mu)
    if pos < cut or gen != s.gen:
        _hand_back(c, token, s)
        return
    if misses.size():  # the proxy counts them (admission, fills; ``Lanes.take_missed``)
        s.recent = recent
        s.stint += misses.size() // 2
        pthread_mutex_lock(&c.mu)
        for i in range(0, <Py_ssize_t>misses.size(), 2):
            h = hashes[i // 2]
            if h == 0:  # a stamped answer's read: a hit, nothing for the proxy to count
                continue
            if _kept(&c.door, h):  # a key's first read (or second, strict): refused anyway
                s.screened += 1
                continue
            s.missed.append(<const char*>p + misses[i], misses[i + 1] - misses[i])
        c.misses += misses.size() // 2 - hits
        c.hits_forwarded += hits
        pthread_mutex_unlock(&c.mu)
    base = s.inflight.size()
    now = _monotonic()
    s.inflight.append(<const char*>p, cut)
    batch = s.sent_batch
    pos = 0
    n = 0
    while pos < cut:  # what the relay core observes (its _observe), in ``events``
        kind = request_class(p[pos])
        end = pos + 1 + _u32(p + pos + 1)
        if kind == REQUEST_SEEN or kind == REQUEST_QUERY:
            s.events.push_back(found[n])
            n += 1
        if kind == REQUEST_FREE or kind == REQUEST_SEEN:
            batch = 1
        elif kind == REQUEST_SYNC:
            batch = 0
        if kind == REQUEST_SYNC or kind == REQUEST_QUERY:
            s.events.push_back(<int64_t>EV_BARRIER << 32)
            s.barriers.push_back(base + end)
            s.sent_at.push_back(now)
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
    cdef double now
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
    now = _monotonic()
    for i in range(<Py_ssize_t>s.barriers.size()):
        s.barriers[i] -= cut
    s.inflight.erase(0, cut)
    s.served += cycles
    pthread_mutex_lock(&c.mu)
    c.relayed += cycles
    for i in range(cycles):
        _observe_latency(c, now - s.sent_at[i])
    pthread_mutex_unlock(&c.mu)
    s.sent_at.erase(s.sent_at.begin(), s.sent_at.begin() + cycles)


cdef inline void _observe_latency(Core* c, double seconds) noexcept nogil:
    """Count one relayed cycle's time upstream (``c.mu`` held)."""
    cdef size_t i = 0, n = c.lat_bounds.size()
    while i < n and seconds > c.lat_bounds[i]:
        i += 1
    if i < c.lat_counts.size():
        c.lat_counts[i] += 1
    c.lat_sum += seconds


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


cdef tuple _pass_result(LSession* s):
    """What ``leave`` returns for a pass session (see ``proxy.lanes``); its last three: the
    answers it gave as a hit session before it switched (:func:`_switch`; else 0), the lane
    table of the last of them, and its last 8 held statements' runs (``recent``)."""
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
            _bytes(s.inflight), _bytes(s.missed), s.screened, s.hits, s.last_table, s.recent)


# -- helpers of the Lanes wrapper (lanes.pyx) -------------------------------------------------

cdef void _pass_fields(LSession* s, list binds, list parses, int queries, held):
    """A pass session's fields (``enter_pass``'s arguments; also a hit session that may
    switch, ``enter``'s ``switch``)."""
    cdef bytes key
    cdef int i
    cdef int64_t table
    s.seq = 0
    s.queries = queries
    s.queried = 0
    s.batch = s.sent_batch = 0
    s.stint = 0
    s.screened = 0
    for i, key in enumerate(binds):
        s.binds[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = i
    i = len(binds)
    for key, table in held or ():
        s.binds[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = i
        s.held[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = table
        i += 1
    s.bind_runs.resize(i, 0)
    s.bind_used.resize(i, 0)
    for i, key in enumerate(parses):
        s.parses[string(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))] = i
    s.parse_used.resize(len(parses), 0)


cdef void _set_words(Words* w, tuple words):
    """Replace the words of ``w`` (bytes each); its pointers follow the strings' new place."""
    cdef bytes word
    cdef size_t i
    w.held.clear()
    w.at.clear()
    w.lens.clear()
    for word in words:
        w.held.push_back(string(PyBytes_AS_STRING(word), PyBytes_GET_SIZE(word)))
    for i in range(w.held.size()):  # (the strings stay where they are now)
        w.at.push_back(<const unsigned char*>w.held[i].data())
        w.lens.push_back(w.held[i].size())


cdef void _compact_touched(Core* c) noexcept nogil:
    """Keep in ``c.touched`` only the keys of entries still there and marked, once each
    (dropped entries leave their keys behind; the proxy may not ask for a long time)."""
    cdef vector[string] kept
    cdef string key
    cdef unordered_map[string, Entry].iterator en
    for key in c.touched:
        en = c.entries.find(key)
        if en != c.entries.end() and entry_of(en).touched:
            entry_of(en).touched = False  # (kept once)
            kept.push_back(key)
    for key in kept:
        entry_of(c.entries.find(key)).touched = True
    c.touched.swap(kept)
