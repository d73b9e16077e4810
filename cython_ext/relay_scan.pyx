# cython: language_level=3
"""``Relay``, the relay core of a session (its twin is the session's own Python path; see
the class). The quiet-message rules it runs are ``rules_kernel.pxd``'s (pure reference:
proxy.rules); the backend scan of the session's Python path is ``framing.pyx``'s. This
package imports nothing from the project: ``configure`` hands the core what it calls.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from cython_ext.rules_kernel cimport (
    ANSWER_BLOCK,
    ANSWER_IDLE,
    ANSWER_WRITE,
    MAX_WORDS,
    REQUEST_FREE,
    REQUEST_OTHER,
    REQUEST_QUERY,
    REQUEST_SEEN,
    REQUEST_SYNC,
    answer_class,
    query_head as _query_head,
    relay_quiet,
    request_class,
    word_arrays,
)
from cython_ext.session_core cimport SessionCore


cdef inline double _monotonic() noexcept nogil:
    """``time.monotonic()`` (the same clock) without the call."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


# -- the relay core -----------------------------------------------------------------------------
#
# ``Relay`` is what a READY session's transports deliver data to (proxy.relay.relay_entries).
# Its pure-Python twin is the session's own path (``Session.client_data`` and
# ``Session.upstream_data``), to which it hands every chunk it does not fully handle, before
# changing anything: a chunk is either handled here whole or not at all.

cdef object _try_answer = None  # proxy.hitpath.try_answer
cdef object _ready_phase = None  # Phase.READY
cdef object _violation = ValueError  # ProtocolViolation
cdef object _plain_query = None  # proxy.forwarding.plain_query (when a registry runs)
cdef tuple _watched = ()  # proxy.rules.WATCHED_WORDS (its bytes: _wwords, _wlens)
cdef const unsigned char* _wwords[MAX_WORDS]
cdef Py_ssize_t _wlens[MAX_WORDS]
cdef Py_ssize_t _nwatched = 0
cdef tuple _read_only_tags = ()  # CommandComplete tags that cannot have written anything
cdef const unsigned char* _rwords[MAX_WORDS]
cdef Py_ssize_t _rlens[MAX_WORDS]
cdef Py_ssize_t _nread_only = 0
#: SessionState's shared queue items of the requests whose success changes nothing: the
#: simple Query's, and by message type those of the content-free ones (proxy.rules.CONTENT_FREE;
#: NULL: none), kept alive by ``_plain``
cdef object _describe = None, _execute = None, _sync = None, _query = None
cdef dict _plain = None
cdef PyObject* _free_items[256]
cdef bint _configured = False
#: Binds and Parses per chunk the core observes (more: the Python path does)
cdef enum:
    MAX_FOUND = 64


def configure(try_answer, ready_phase, violation, dict plain, tuple read_only_tags,
              tuple watched, plain_query, dict content_free):
    """Hand the core what it uses from the project (this package imports none of it)."""
    global _try_answer, _ready_phase, _violation, _plain_query, _watched, _read_only_tags
    global _plain, _describe, _execute, _sync, _query, _configured, _nwatched, _nread_only
    cdef int t
    for t in range(256):
        _free_items[t] = NULL
        kind = request_class(t)
        if (kind == REQUEST_FREE or kind == REQUEST_SYNC) and not content_free.get(t):
            raise ValueError(f"no request for the content-free message type {t}")
    for t, name in content_free.items():
        if name:
            _free_items[t] = <PyObject*>plain[name]
    _try_answer, _ready_phase, _violation, _plain_query = (try_answer, ready_phase, violation,
                                                           plain_query)
    _nwatched = word_arrays(watched, _wwords, _wlens)
    _nread_only = word_arrays(read_only_tags, _rwords, _rlens)
    _watched, _read_only_tags = watched, read_only_tags
    _plain = plain
    _describe, _execute = plain["describe"], plain["execute"]
    _sync, _query = plain["sync"], plain["query"]
    _configured = True


#: a write's answer observed in C (``configure_writes``): ``proxy.router.wrote`` and
#: ``proxy.aftermiss.answered``; None: writes' answers take the Python path
cdef object _wrote = None, _answered = None


def configure_writes(wrote, answered):
    """Hand the core what a writing CommandComplete of INSERT, UPDATE, DELETE or MERGE calls
    (``Session._observe_upstream`` and ``relay_from_upstream`` call the same)."""
    global _wrote, _answered
    _wrote, _answered = wrote, answered


#: a learnt write's run with its position read (``proxy.write_position.append``) and that
#: read's answer (``proxy.missfast_position.arrived``), in C; None: both take the Python path
cdef object _write_append = None, _position_arrived = None


def configure_write_position(append, arrived):
    """Hand the core ``proxy.write_position.append`` and ``proxy.missfast_position.arrived``
    (``Session.forward_client`` and ``Session.relay_from_upstream`` call the same)."""
    global _write_append, _position_arrived
    _write_append, _position_arrived = append, arrived


cdef inline bint _dml_tag(const unsigned char* payload, Py_ssize_t size) noexcept nogil:
    """A CommandComplete tag of INSERT, UPDATE, DELETE or MERGE (none a privilege change:
    ``proxy.gates.PRIVILEGE_TAGS``, whose tags take the Python path)."""
    if size >= 6 and (memcmp(payload, b"INSERT", 6) == 0 or memcmp(payload, b"UPDATE", 6) == 0
                      or memcmp(payload, b"DELETE", 6) == 0):
        return True
    return size >= 5 and memcmp(payload, b"MERGE", 5) == 0


def configured():
    """Whether :func:`configure` was called."""
    return _configured


cdef inline str _status(unsigned char status):
    """A ReadyForQuery's transaction status as the session core keeps it."""
    return "I" if status == 73 else "T" if status == 84 else "E"


cdef inline Py_ssize_t _length(const unsigned char* p, Py_ssize_t pos):
    return <Py_ssize_t>((<unsigned long>p[pos + 1] << 24) | (<unsigned long>p[pos + 2] << 16)
                        | (<unsigned long>p[pos + 3] << 8) | <unsigned long>p[pos + 4])


cdef list _frame(bytes raw, Py_ssize_t max_length):
    """``(type, payload_start, payload_end)`` of each message if ``raw`` is whole, valid
    typed messages (at least one); None otherwise (the session's framer decides then)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), pos = 0, length, end
    cdef list index = []
    while n - pos >= 5:
        length = _length(p, pos)
        if length < 4 or length > max_length:
            return None
        end = pos + 1 + length
        if end > n:
            return None
        index.append((p[pos], pos + 5, end))
        pos = end
    return index if pos == n and pos else None


cdef bint _utf8(const unsigned char* p, Py_ssize_t size):
    try:
        PyUnicode_DecodeUTF8(<const char*>p, size, NULL)
    except UnicodeDecodeError:
        return False
    return True


cdef Py_ssize_t _bind_names(const unsigned char* p, Py_ssize_t start, Py_ssize_t end):
    """Where proxy.forwarding.bind_names of p[start:end] ends (-1 for b"")."""
    cdef const void* found = memchr(p + start, 0, end - start)
    if found == NULL:
        return -1
    found = memchr(<const unsigned char*>found + 1, 0,
                   end - (<const unsigned char*>found + 1 - p))
    if found == NULL:
        return -1
    return <const unsigned char*>found - p + 1


cdef inline bytes _same_or_new(bytes last, const unsigned char* p, Py_ssize_t start,
                               Py_ssize_t end):
    """``last`` if it holds the bytes p[start:end] (its hash is kept), else those bytes."""
    cdef Py_ssize_t size = end - start
    if last is not None and PyBytes_GET_SIZE(last) == size \
            and memcmp(PyBytes_AS_STRING(last), p + start, size) == 0:
        return last
    return PyBytes_FromStringAndSize(<const char*>p + start, size)


cdef inline bint _after_cached_read(object ctx) except -1:
    """``proxy.write_position.after_cached_read`` of the session's previous statement."""
    if ctx is None:
        return False
    last = ctx.last
    return last is not None and last[0] == "cache"


cdef class Relay:
    """One session's relay core: ``client_data`` and ``upstream_data`` do what the session's
    methods of those names do (same contract), handling here the quiet cases of a READY
    session — a chunk of whole messages with nothing waiting in the framer:

    - from the client: after the hit path declined (``try_answer``, called exactly as
      ``Session._process_client`` does), a chunk whose every message the quiet loop of
      ``Session.forward_client`` would observe without decoding (content-free messages,
      Binds and Parses seen before, plain simple Queries, CopyData), with nothing held
      locally (or, with statements held, a run of a statement prepared upstream:
      ``Extended.passing``) and the routing state unchanged: the same observations, then
      one write;
    - from the upstream: a run of messages ending with ReadyForQuery with no special message
      (``scan_backend``; a write's INSERT, UPDATE, DELETE or MERGE tag is not one once
      ``configure_writes`` was called) and nothing swallowed: ``SessionState.ready`` in C
      (and ``router.wrote`` per write), then one write.
    """

    cdef object session
    #: the session core (``proxy.session_core``): its declared fields are read as C members
    cdef SessionCore core
    cdef bint bound
    cdef object state, pending, append, popleft, ctx, upstream_write, client_write
    cdef object ext, memos, service, routing
    cdef dict binds, parses, held, portals, reasons, routes, portal_statements, state_portals
    #: the cache service's routing state last seen equal to the memos' (see _forward_quiet)
    cdef object seen_registry, seen_names
    #: the last Bind names and Parse payload looked up in the memos (a repeated one is not
    #: copied nor hashed again)
    cdef bytes bind_key, parse_key
    #: the last two queue items with effects answered, their effect and whether each ends a
    #: batch (a Parse's and a Bind's, repeated, are the same objects each time)
    cdef list items, applies
    cdef bint barriers[2]
    cdef int next_slot
    cdef Py_ssize_t cmax, umax
    #: the framers' buffers (never replaced; empty exactly when nothing waits, since a
    #: framer's read position never passes the end of its buffer)
    cdef bytearray cbuf, ubuf
    #: the lanes' ``offer_pass`` (None without lanes), and the quiet answers to relay before
    #: calling it again
    cdef object offer_pass
    cdef long offer_wait
    #: the session's statements whose runs wrote (``proxy.write_position``: a run of one
    #: takes the Python path, which reads the write's position after it)
    cdef dict writers

    def __init__(self, session):
        self.session = session
        self.core = session.state
        self.items, self.applies = [None, None], [None, None]

    cdef bint _bind(self) except -1:
        """Take the session's parts once it is READY (none of them is replaced after)."""
        s = self.session
        core = self.core
        if core.phase is not _ready_phase or s.upstream is None:
            return False
        self.state = core  # (its methods: proxy.session.SessionState)
        self.pending = core.pending
        self.append = self.pending.append
        self.popleft = self.pending.popleft
        self.state_portals = core.portals
        self.ctx = s.ctx
        self.upstream_write = s.upstream.write
        self.client_write = s.client.write
        self.ext = s.extended
        self.held, self.portals = core.held, core.held_portals
        self.reasons, self.routes = core.reasons, core.routes
        self.portal_statements = core.portal_statements
        self.memos = s.memos
        self.binds, self.parses = self.memos.binds, self.memos.parses
        self.service = s.server.service
        self.routing = s.routing  # (proxy.routing.Routing: the routing state)
        lanes = self.service.lanes
        self.offer_pass = lanes.offer_pass if lanes is not None else None
        self.writers = s.writers
        cframer, uframer = s.cframer, s.uframer
        self.cmax, self.umax = cframer.max_length, uframer.max_length
        self.cbuf, self.ubuf = cframer.buf, uframer.buf
        self.bound = True
        return True

    # -- client -> upstream ---------------------------------------------------------------------

    cdef inline bint _ready_now(self, bint client) except -1:
        """READY (and, for the client side, not answering locally), parts taken."""
        if not self.bound and not self._bind():
            return False
        return self.core.phase is _ready_phase and (not client or not self.core.local_busy)

    def client_data(self, data):
        s = self.session
        if type(data) is not bytes or not self._ready_now(True):
            return s.client_data(data)
        index = None if len(self.cbuf) else _frame(data, self.cmax)
        if index is None:
            return s.client_data(data)
        try:
            ctx = self.ctx
            if ctx is not None and _try_answer(s, data, index):  # hit path first
                lanes = self.service.lanes
                if lanes is not None:
                    lanes.offer(s, data)
                return
            if not self._forward_quiet(data, ctx, index):
                s.forward_client(data, index)
        except _violation as exc:
            s.client_violation(exc)

    cdef bint _forward_quiet(self, bytes raw, object ctx, object index) except -1:
        """Observe and forward ``raw`` if every message in it is quiet; False (nothing
        done) otherwise. (A pass session's lane forwards a subset of what is quiet here,
        ``cython_ext.lanes._pass_client``: a new quiet case here is not one there until
        mirrored.)"""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), pos = 0, end
        cdef int kind
        cdef bint local = self.core.caching and ctx is not None
        cdef PyObject* found[MAX_FOUND]  # the chunk's Binds and Parses seen before (owned)
        cdef Py_ssize_t nfound = 0, i, names_end
        cdef bint write_run = False  # a learnt write's run after a cached read
        memos = self.memos
        if ctx is not None and ctx.who is not None and ctx.who.block is not None:
            return False  # a block's identity record to settle first (identity.unsettled)
        if local:
            routing = self.routing
            registry, names = routing.registry, routing.cached_names
            # the memos take the routing state only (ForwardMemos.current): while it is the one
            # last seen equal to theirs, theirs has not changed either
            if registry is not self.seen_registry or names is not self.seen_names:
                if registry is not memos.registry_seen or names is not memos.names_seen:
                    return False  # the routing state changed (ForwardMemos.current, Extended.adopt)
                self.seen_registry, self.seen_names = memos.registry_seen, memos.names_seen
        if self.portals or self.core.batch_local or self.core.swallowing:
            return False  # not quiet (or an outcome awaited: SessionState.uncertain)
        # with statements held, only a run of a statement prepared upstream (Extended.passing)
        held = len(self.held) != 0
        if held and (self.core.uncertain or self.ext.wait_settle):
            return False
        last = None
        try:
            while pos < n:  # look: all or nothing
                kind = request_class(p[pos])
                end = pos + 1 + _length(p, pos)
                if kind == REQUEST_SEEN:  # B, P: seen before (the memo's decoded message)
                    msg = None
                    if p[pos] == 80:
                        if held:
                            return False
                        self.parse_key = _same_or_new(self.parse_key, p, pos + 5, end)
                        msg = self.parses.get(self.parse_key)
                    else:
                        names_end = _bind_names(p, pos + 5, end)
                        if names_end >= 0:
                            self.bind_key = _same_or_new(self.bind_key, p, pos + 5, names_end)
                            msg = self.binds.get(self.bind_key)
                            if held and msg is not None and msg.statement in self.held:
                                return False
                            if self.writers and msg is not None \
                                    and msg.statement in self.writers \
                                    and _after_cached_read(ctx):
                                if _write_append is None:
                                    return False  # (Session.forward_client reads it)
                                write_run = True  # (its position read after it, below)
                    if msg is None or nfound == MAX_FOUND:
                        return False
                    Py_INCREF(msg)
                    found[nfound] = <PyObject*>msg
                    nfound += 1
                elif kind == REQUEST_QUERY:
                    if held:
                        return False
                    if local:
                        last = memos.plain_last
                        if last is None:
                            return False
                    if not self._plain(raw, p, pos + 5, end):
                        return False
                elif kind == REQUEST_OTHER:  # (the others are content-free, or CopyData)
                    return False
                elif held and p[pos] == 68 and (end - pos < 6 or p[pos + 5] != 80):
                    return False  # a Describe of a statement may name a held one (of a
                    # portal: local portals are none while passing)
                pos = end
            prior = ctx.last if write_run else None  # (before the run's Bind sets it)
            self._observe(p, n, found, local, ctx, last)
        finally:
            for i in range(nfound):
                Py_XDECREF(found[i])
        if write_run:  # (proxy.write_position: as Session.forward_client sends it)
            raw = _write_append(self.session, raw, index, prior)
        self.upstream_write(raw)
        if self.core.upstream_since == 0.0:
            self.core.upstream_since = _monotonic()
        if ctx is not None:
            ctx.seen.pending = True  # its answer moves seen(s) (proxy.seen)
        return True

    cdef int _observe(self, const unsigned char* p, Py_ssize_t n, PyObject** found, bint local,
                      object ctx, object last) except -1:
        """What ``Session.forward_client``'s quiet loop observes for these messages."""
        cdef Py_ssize_t pos = 0, i = 0
        cdef int kind
        cdef int batch = -1  # Extended.batch_upstream at the end (-1: unchanged)
        append = self.append
        while pos < n:
            kind = request_class(p[pos])
            if kind == REQUEST_FREE or kind == REQUEST_SYNC:
                append(<object>_free_items[p[pos]])
                batch = kind == REQUEST_FREE
            elif kind == REQUEST_SEEN:
                if p[pos] == 66:  # B
                    self._bind_seen(<object>found[i], ctx if local else None)
                else:
                    self._parse_seen(<object>found[i])
                i += 1
                batch = 1
            elif kind == REQUEST_QUERY:
                if local:
                    ctx.last = last
                append(_query)
            pos += 1 + _length(p, pos)
        if batch >= 0:
            self.core.batch_upstream = batch == 1
        return 0

    cdef bint _plain(self, bytes raw, const unsigned char* p, Py_ssize_t start,
                     Py_ssize_t end) except -1:
        """proxy.forwarding.plain_query (its rules: proxy.rules, rules_kernel.pxd)."""
        cdef int head = _query_head(p, PyBytes_GET_SIZE(raw), start, end, _wwords, _wlens,
                                    _nwatched)
        if head == 0:
            return False
        if self.routing.registry is None:
            return head == 1 or _utf8(p + start, end - 1 - start)
        return _plain_query(raw, start, end, self.routing)

    cdef int _bind_seen(self, object msg, object ctx) except -1:
        """SessionState.frontend and Extended.observe_forwarded for a Bind seen before."""
        last = self.core.last_bind
        if last is not None and (<tuple>last)[0] is msg:
            self.append((<tuple>last)[1])
        else:
            self.state.frontend(msg)
        portal, statement = msg.portal, msg.statement
        if self.portals:
            self.portals.pop(portal, None)
        self.portal_statements[portal] = statement
        if ctx is not None:  # Extended._note_upstream
            ctx.last = ("upstream", self.reasons.get(statement, "not a cached query"))
        if self.routes:
            self.ext.count_runs(statement)
        return 0

    cdef int _parse_seen(self, object msg) except -1:
        """SessionState.frontend and Extended.observe_forwarded for a Parse seen before."""
        cdef SessionCore core = self.core
        last = core.last_parse
        if last is not None and (<tuple>last)[0] is msg:
            self.append((<tuple>last)[1])
        else:
            self.state.frontend(msg)
        name = msg.name
        if self.held:
            self.held.pop(name, None)
        self.reasons[name] = core.last_reason
        route = core.last_route  # Extended._note_proxied
        if route is not None:
            core.last_route = None
        if route is not None and route.classified is not None:
            self.routes[name] = route
        elif self.routes:
            self.routes.pop(name, None)
        return 0

    # -- upstream -> client ---------------------------------------------------------------------

    def upstream_data(self, data):
        s = self.session
        if self.core.lane:
            s.server.service.lanes.reclaim(s)
        if type(data) is not bytes or not self._ready_now(False):
            return s.upstream_data(data)
        if self.core.swallowing:
            return self._after_position(data)
        cdef int ran = 0 if len(self.ubuf) else self._ready_run(data)
        if not ran:
            return s.upstream_data(data)
        self.client_write(data)
        if ran == 2:  # a write's answer: seen(s) settles now, and no pass offer, as on the
            if self.ctx.seen.missed:  # Python path (Session.relay_from_upstream)
                _answered(s)
            return
        if self.offer_pass is not None and not len(self.pending):
            if self.offer_wait:
                self.offer_wait -= 1
            else:  # the lanes may relay this session from here on (proxy.lanes)
                self.offer_wait = self.offer_pass(s)

    cdef object _after_position(self, bytes data):
        """``upstream_data`` while a write's position read is outstanding and nothing else is
        swallowed (``proxy.write_position``): the read's answer cut out (``Tail.feed``), the
        rest relayed as ``_ready_run`` does when it can, else by the Python path (which does
        not cut it again, ``Session.relay_fed``); then as ``Session.relay_from_upstream``."""
        s = self.session
        tail = s.miss_tail
        if _position_arrived is None or tail is None or not tail.write \
                or self.core.swallowing != 1 or len(self.ubuf):
            return s.upstream_data(data)  # (anything else swallowed: message by message)
        out = tail.feed(data)
        if out:
            if not self._ready_run(out):
                return s.relay_fed(out, tail)
            self.client_write(out)
        if tail.done:
            _position_arrived(s, tail)
        if self.ctx is not None and self.ctx.seen.missed:
            _answered(s)

    cdef int _ready_run(self, bytes raw) except -1:
        """If ``raw`` is whole messages ending with ReadyForQuery, none special (see
        ``scan_backend``) but a write's CommandComplete of INSERT, UPDATE, DELETE or MERGE
        (``_dml_tag``; with ``configure_writes`` and a session context): observe them
        (``SessionState.ready``; each write's ``proxy.router.wrote`` with the transaction
        status before the ReadyForQuery after it, as ``Session._observe_upstream`` does) and
        return 1, or 2 when a write was among them; 0 (nothing done) otherwise. (A pass
        session's lane relays a subset of these, ``cython_ext.lanes._quiet_upstream``.)"""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(raw), pos = 0, length, end
        cdef unsigned char status = 0
        cdef int answer
        cdef bint writes = False
        cdef bint may_write = _wrote is not None and self.ctx is not None
        while n - pos >= 5:
            length = _length(p, pos)
            if length < 4 or length > self.umax:
                return 0
            end = pos + 1 + length
            if end > n:
                return 0
            answer = answer_class(p[pos], p + pos + 5, length - 4, _rwords, _rlens,
                                  _nread_only)
            if not relay_quiet(answer):
                if answer != ANSWER_WRITE or not may_write \
                        or not _dml_tag(p + pos + 5, length - 4):
                    return 0
                writes = True
            status = p[pos + 5] if answer == ANSWER_IDLE or answer == ANSWER_BLOCK else 0
            pos = end
        if pos != n or status == 0:
            return 0
        pos = 0
        while pos < n:
            if p[pos] == 90:
                self._ready(p[pos + 5])
                if writes:  # (the status a later write's wrote() reads)
                    self.core.transaction_status = _status(p[pos + 5])
            elif writes and p[pos] == 67 and answer_class(
                    67, p + pos + 5, _length(p, pos) - 4, _rwords, _rlens,
                    _nread_only) == ANSWER_WRITE:
                _wrote(self.ctx, self.core.transaction_status,
                       PyBytes_FromStringAndSize(<const char*>p + pos + 5,
                                                 min(8, _length(p, pos) - 4)))
            pos += 1 + _length(p, pos)
        self.core.transaction_status = _status(status)
        if self.core.upstream_since != 0.0:
            self.state.answered()
        return 2 if writes else 1

    cdef int _ready(self, unsigned char status) except -1:
        """SessionState.ready for one ReadyForQuery."""
        cdef int slot
        pending, popleft = self.pending, self.popleft
        while len(pending):
            item = popleft()
            if item is _sync or item is _query:
                break
            if item is _execute or item is _describe:
                continue
            if item is self.items[0]:
                slot = 0
            elif item is self.items[1]:
                slot = 1
            else:  # items are frozen: what they hold is read once (a repeated Parse's or
                slot = self.next_slot  # Bind's item is the same object each time)
                self.next_slot = 1 - slot
                kind = item.kind
                self.items[slot], self.applies[slot] = item, item.apply
                self.barriers[slot] = kind == "sync" or kind == "query"
            apply = self.applies[slot]
            if apply is not None:
                apply()
            if self.barriers[slot]:
                break
        if status == 73 and self.state_portals:  # the transaction ended, its portals too
            self.state_portals.clear()
        return 0
