# cython: language_level=3
"""Twin of proxy.hitpath.try_answer (same contract, same side effects; see that module).

Works on the session's Python objects by attribute, as the pure version does, except the
session core (``cython_ext/session_core.pxd``), whose declared fields it reads as C members;
what it saves is the interpreter's work between them and, with ``_View``, the reads of the
session's parts that never change. Imports nothing from the project.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from cython_ext.session_core cimport SessionCore

cdef int T_BIND = ord("B")
cdef int T_DESCRIBE = ord("D")
cdef int T_EXECUTE = ord("E")
cdef int T_SYNC = ord("S")
cdef int T_QUERY = ord("Q")
cdef int T_PARSE = ord("P")
cdef bytes READY_IDLE = b"Z\x00\x00\x00\x05I"
cdef bytes BIND_COMPLETE = b"2\x00\x00\x00\x04"
cdef bytes DEAD = b""  # proxy.hitpath.DEAD: the key marking a dropped memo


cdef inline bint _is(const unsigned char* p, Py_ssize_t start, Py_ssize_t end,
                     const char* want, Py_ssize_t n):
    """Whether p[start:end] equals the n bytes at want."""
    cdef Py_ssize_t i
    if end - start != n:
        return False
    for i in range(n):
        if p[start + i] != <unsigned char>want[i]:
            return False
    return True


cdef int _tail(const unsigned char* p, list index, Py_ssize_t at):
    """1: [Describe portal ""] Execute("", all) Sync with the Describe, 0 without, -1 else."""
    cdef Py_ssize_t count = len(index) - at
    cdef tuple m
    cdef int describe = 0
    if count == 3:
        m = index[at]
        if m[0] != T_DESCRIBE or not _is(p, m[1], m[2], b"P\x00", 2):
            return -1
        describe = 1
    elif count != 2:
        return -1
    m = index[len(index) - 2]
    if m[0] != T_EXECUTE or not _is(p, m[1], m[2], b"\x00\x00\x00\x00\x00", 5):
        return -1
    m = index[len(index) - 1]
    if m[0] != T_SYNC or m[1] != m[2]:
        return -1
    return describe


cdef inline double _monotonic() noexcept:
    """time.monotonic() (CLOCK_MONOTONIC, as CPython reads it on Linux)."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef class _View:
    """The parts of a READY session the hit path reads, taken once: none of them is replaced
    for the session's life (the session's ``extended``, its core ``state``, ``ctx``, the
    cache service, its ``settings``, ``hits`` and ``grants``, the core's ``held`` and
    ``held_portals`` and the client transport's ``write``); kept in the core's
    ``hit_view``. What changes (the host, its engine, every gate's value) is still read on
    every answer."""

    cdef object ext, ctx, service, settings, hits, write
    cdef SessionCore state
    cdef dict held, portals, grants


cdef _View _view(object session, object ctx):
    cdef SessionCore core = session.state
    cdef _View v = core.hit_view
    if v is None:
        v = _View()
        v.ext = session.extended
        v.state = core
        v.ctx = ctx
        v.service = session.server.service
        v.settings = v.service.settings
        v.hits = v.service.hits
        v.grants = v.service.gates.grants
        v.write = session.client.write
        v.held = core.held
        v.portals = core.held_portals
        core.hit_view = v
    return v


cdef bint _may_serve(_View v):
    cdef SessionCore state = v.state
    ctx = v.ctx
    # SessionState.caught_up: what is outstanding (if anything) is weir's own, discarded
    if state.batch_upstream or state.batch_local or state.batch_failed \
            or len(state.pending) != state.discarded or state.skipping \
            or state.transaction_status != "I" or not ctx.defaults_applied \
            or ctx.tainted is not None:
        return False
    settings = v.settings
    host = v.service.host
    if host is None:
        return False
    if settings.read_your_writes == "on":  # seen(s): proxy.seen.may_serve
        seen = ctx.seen
        if seen.pending or <double>seen.at > <double>host.coverage.covered:
            return False
    return host is not None and host.stream.up \
        and _monotonic() - <double>host.fresh_as_of <= <double>settings.staleness_bound


cdef object _settings_id(_View v):
    cdef SessionCore state = v.state
    ctx = v.ctx
    known = ctx.output
    if known is not None and known[0] == state.parameters_version \
            and known[1] == ctx.settings_version:
        return known[2][1]
    return v.service.reads.output_settings_id(state, ctx)[1]


cdef bint _current(_View v, dict memo, bytes key, object hit):
    user = v.ctx.user
    engine = v.service.host.engine
    cdef dict grants = v.grants
    cdef double now = _monotonic()
    cdef tuple verdict
    try:
        for cache, k, answer in hit.reads:
            verdict = grants.get((user, cache))
            if verdict is None or not verdict[0] or now > <double>verdict[1]:
                return False
            if not engine.current(cache, k, answer):
                del memo[key]
                return False
    except Exception:
        memo.pop(key, None)
        return False
    return True


cdef inline void _serve(_View v, object hit, bytes reply):
    hits = v.hits
    hits.served += 1
    v.ctx.last = hit.last
    v.write(reply)


cdef bint _prepared(_View v, bytes raw, list index):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef int describe = _tail(p, index, 1)
    cdef tuple first = index[0]
    cdef Py_ssize_t bs = first[1], be = first[2], name_end
    if describe < 0 or p[bs] != 0:
        return False
    cdef const unsigned char* nul = <const unsigned char*>memchr(p + bs + 1, 0, be - bs - 1)
    if nul == NULL:
        return False
    name_end = nul - p
    held = v.held.get(PyUnicode_DecodeUTF8(<const char*>p + bs + 1, name_end - bs - 1,
                                           "replace"))
    if held is None or held.route.cache is None or not _may_serve(v):
        return False
    sid = _settings_id(v)
    memo_ = held.memo  # HitMemos.statement_memo, its usual case inline
    if memo_ is None or held.memo_sid != sid or DEAD in <dict>memo_:
        memo_ = v.hits.statement_memo(held, sid)
    cdef bytes rest = raw[name_end + 1 : be]
    cdef dict memo = memo_
    hit = memo.get(rest)
    if hit is None or not _current(v, memo, rest, hit):
        return False
    v.portals.pop("", None)
    _serve(v, hit, (<tuple>hit.replies)[describe])
    return True


cdef bint _batch(_View v, bytes raw, list index):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(raw)
    cdef int describe = 0
    cdef tuple m0, m1
    if v.service.host is None:
        return False
    m0 = index[0]
    if m0[0] == T_PARSE:
        describe = _tail(p, index, 2)
        if describe < 0:
            return False
        m1 = index[1]
        if p[<Py_ssize_t>m0[1]] != 0 or m1[0] != T_BIND or p[<Py_ssize_t>m1[1]] != 0 \
                or p[<Py_ssize_t>m1[1] + 1] != 0:
            return False
    elif len(index) != 1:
        return False
    if not _may_serve(v):
        return False
    sid = _settings_id(v)
    ctx = v.ctx
    cdef dict memo = v.hits.batches(ctx.database, ctx.search_path, sid)
    hit = memo.get(raw)
    if hit is None:
        if m0[0] == T_PARSE:
            v.ext.recording = (raw, bool(describe))
        return False
    if not _current(v, memo, raw, hit):
        return False
    statement = hit.statement
    if statement is not None:
        v.held[""] = type(statement)(statement.parse, statement.route)
        v.portals.pop("", None)
    else:  # a simple Query drops the unnamed statement
        v.ext.simple_query(True)
    _serve(v, hit, (<tuple>hit.replies)[0])
    return True


def try_answer(object session, bytes raw not None, list index not None):
    cdef int first = (<tuple>index[0])[0]
    if first != T_BIND and first != T_QUERY and first != T_PARSE:
        return False
    ctx = session.ctx
    if ctx is None:
        return False
    cdef _View v = _view(session, ctx)
    cdef bint done = _prepared(v, raw, index) if first == T_BIND else _batch(v, raw, index)
    if done:  # a hit lately, as the pure twin's ``_serve`` marks it: not mostly misses
        session.lane_miss_run = 0  # (proxy.aftermiss), a 0 shifted in (proxy.lane_switch)
        session.lane_recent = (session.lane_recent << 1) & 0xFF
    return done
