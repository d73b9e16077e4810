"""weir's Prometheus metrics: read on scrape from counters weir already keeps.

Owns: the few counters the edges of the proxy bump where nothing counted before (upstream
errors by SQLSTATE class, upstream forwards by reason, admin commands, upstream connection
and fill latencies in fixed buckets: plain integer and dict updates, no locks), the
classification of forwarding reasons into a small label set. ``proxy.collector`` turns
them and the server's state into metric families when ``/metrics`` is scraped. The hot paths
(lanes, the hit path) count in their own structures (the lanes in C); nothing here runs on
them.
"""

from __future__ import annotations

import bisect

from prometheus_client.core import (
    HistogramMetricFamily,
)

from pgwire.errors import error_response
from pgwire.framing import ProtocolViolation

#: latency buckets in seconds: fills (a snapshot read) and upstream connections
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                  5.0, 10.0)


class Buckets:
    """A latency histogram in fixed buckets (observed on the event loop)."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.total += seconds

    def plus(self, counts: tuple[int, ...], total: float) -> Buckets:
        """A copy with ``counts`` (same bounds, then +Inf) and ``total`` seconds added."""
        both = Buckets(self.bounds)
        if len(counts) != len(self.counts):
            raise ValueError("bucket counts of other bounds")
        both.counts = [a + b for a, b in zip(self.counts, counts, strict=True)]
        both.count = self.count + sum(counts)
        both.total = self.total + total
        return both

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        cumulative, running = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            cumulative.append((bound, float(running)))
        return HistogramMetricFamily(name, doc, buckets=cumulative, sum_value=self.total)


#: upstream ErrorResponses by SQLSTATE class (the first two characters)
UPSTREAM_ERRORS: dict[str, int] = {}
#: ErrorResponses weir built itself (not relayed from the upstream), by SQLSTATE class
OWN_ERRORS: dict[str, int] = {}
#: statements weir sent upstream, by ``forward_label`` of their reason
FORWARDS: dict[str, int] = {}
#: weir's own commands answered (CREATE CACHE, SHOW CACHES, ...)
ADMIN = [0]
#: time to open a relayed session's upstream connection (TCP and TLS)
UPSTREAM_CONNECT = Buckets()
#: time from a request going upstream to its ReadyForQuery, for sessions on the event loop
#: (pass lanes count theirs in C: ``HitLanes.upstream_latency``)
UPSTREAM_STATEMENTS = Buckets()

#: a reason's first words -> its label (``Route.reason``, ``ReadOutcome`` texts)
_REASON_PREFIXES: tuple[tuple[str, str], ...] = (
    ("inside a ", "transaction"),  # a REPEATABLE READ / SERIALIZABLE block
    ("the transaction", "transaction"),  # proxy.transactions: wrote, locked, failed, ...
    ("database ", "other_database"),
    ("earlier statements", "pipelined"),
    ("unsupported", "unsupported"),
    ("no cache", "no_cache"),
    ("the session changed setting", "session_setting"),
    ("a literal", "key_value"),
    ("replication lag", "stale"),
    ("no heartbeat", "stale"),
    ("role ", "not_allowed"),
    ("caching is not running", "caching_off"),
    ("read-your-writes", "read_your_writes"),
    ("the cache fill took", "fill_timeout"),
    ("the cache could not", "cache_failed"),
    ("the cache was dropped", "cache_dropped"),
    ("the replication stream", "replication_down"),
)
_LABELS: dict[str, str] = {}


def forward_label(reason: str) -> str:
    """The metric label of a forwarding reason (a small, fixed set)."""
    label = _LABELS.get(reason)
    if label is None:
        lowered = reason.lower()
        label = next((lab for prefix, lab in _REASON_PREFIXES if lowered.startswith(prefix)),
                     "other")
        if len(_LABELS) < 4096:
            _LABELS[reason] = label
    return label


def count_forward(reason: str, times: int = 1) -> None:
    label = forward_label(reason)
    FORWARDS[label] = FORWARDS.get(label, 0) + times


def count_error(sqlstate: str) -> None:
    cls = sqlstate[:2] or "??"
    UPSTREAM_ERRORS[cls] = UPSTREAM_ERRORS.get(cls, 0) + 1


def own_error(sqlstate: str, message: str, severity: str = "ERROR", **extra: str) -> bytes:
    """An ErrorResponse weir itself sends (encoded), counted by SQLSTATE class."""
    cls = sqlstate[:2]
    OWN_ERRORS[cls] = OWN_ERRORS.get(cls, 0) + 1
    return error_response(sqlstate, message, severity, **extra).encode()


def own_violation(exc: ProtocolViolation) -> bytes:
    """The FATAL ErrorResponse for a protocol violation (``own_error``)."""
    return own_error(exc.sqlstate, exc.message, "FATAL")
