# cython: language_level=3
"""The session core's compiled twin: its fields are declared in ``session_core.pxd`` (typed,
read from C by the relay core and the hit path); the pure twin and what each field means:
``proxy.session_core``."""

from collections import deque


cdef class SessionCore:
    def __init__(self, phase=None):
        self.phase = phase
        self.local_busy = False
        self.caching = False
        self.paused = set()
        self.waiting = []
        self.lane = 0
        self.hit_view = None
        self.transaction_status = "I"
        self.parameters = {}
        self.parameters_version = 0
        self.statements = {}
        self.portals = {}
        self.pending = deque()
        self.swallowing = 0
        self.discarded = 0
        self.uncertain = 0
        self.skipping = False
        self.replacement = b""
        self.on_settled = None
        self.last_parse = None
        self.last_bind = None
        self.held = {}
        self.held_portals = {}
        self.reasons = {}
        self.portal_statements = {}
        self.routes = {}
        self.last_reason = "not a cached query"
        self.last_route = None
        self.batch_upstream = False
        self.batch_local = False
        self.batch_failed = False
        self.upstream_since = 0.0
