# cython: language_level=3
# The session core's declared fields (pure twin: proxy.session_core.SessionCore_python, which
# lists the same names in its __slots__; tests/unit/proxy/test_session_core_parity.py holds the
# two to each other). The relay core (relay_scan.pyx) and the hit path (hitpath.pyx) cimport
# this class and read its fields as C struct members.

cdef class SessionCore:
    # -- the phase and the hot flags of the session (proxy.relay.Session) --------------------
    cdef public object phase  # pgwire.events.Phase
    cdef public bint local_busy  # weir is answering locally: client messages wait
    cdef public bint caching  # weir answers some statements itself
    cdef public set paused  # why reading from the client is paused
    cdef public list waiting  # client messages waiting behind a local answer
    cdef public long lane  # the token of the lane reading the client, or 0
    cdef public object hit_view  # what the compiled hit path took of the session
    # -- the request ledger (proxy.session.SessionState) -------------------------------------
    cdef public str transaction_status
    cdef public dict parameters
    cdef public long parameters_version
    cdef public dict statements  # the prepared statements the upstream holds
    cdef public dict portals  # the portals the upstream holds: name -> statement
    cdef public object pending  # deque of outstanding requests
    cdef public int swallowing
    cdef public int discarded  # swallowed requests whose answers weir discards whole
    cdef public int uncertain
    cdef public bint skipping
    cdef public bytes replacement
    cdef public object on_settled
    cdef public object last_parse
    cdef public object last_bind
    # -- held statements and local portals (proxy.extended.Extended) -------------------------
    cdef public dict held  # statements weir holds: name -> HeldStatement
    cdef public dict held_portals  # portals bound from them: name -> LocalPortal
    cdef public dict reasons  # why each statement the upstream holds went there
    cdef public dict portal_statements  # which statement each upstream portal runs
    cdef public dict routes  # statements parsed upstream that routing classified
    cdef public str last_reason
    cdef public object last_route
    cdef public bint batch_upstream  # something of the current batch went upstream
    cdef public bint batch_local  # weir answered something of the current batch
    cdef public bint batch_failed  # weir answered an error: skip the batch until Sync
    # -- timing ------------------------------------------------------------------------------
    cdef public double upstream_since  # when the oldest unanswered request went upstream
