"""weir's Prometheus metrics: read on scrape from counters weir already keeps.

Owns: the few counters the edges of the proxy bump where nothing counted before (upstream
errors by SQLSTATE class, upstream forwards by reason, admin commands, upstream connection
and fill latencies in fixed buckets: plain integer and dict updates, no locks), the
classification of forwarding reasons into a small label set, and ``WeirCollector``, which
turns the server's state (the engine's and the lanes' own statistics, the replication
stream's, the sessions) into metric families when ``/metrics`` is scraped. The hot paths
(lanes, the hit path) count in their own structures (the lanes in C); nothing here runs on
them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from pgwire.errors import error_response
from pgwire.framing import ProtocolViolation

if TYPE_CHECKING:
    from proxy.server import Server

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
    ("inside a transaction", "transaction"),
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


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _labelled(family: CounterMetricFamily | GaugeMetricFamily, label_values: dict[str, Any]
              ) -> CounterMetricFamily | GaugeMetricFamily:
    for label, value in sorted(label_values.items()):
        family.add_metric([label], value)
    return family


class WeirCollector:
    """Metric families from a running ``Server``, built on each scrape (on its loop)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def describe(self) -> list[Metric]:
        return []  # (no eager collection at registration)

    def collect(self) -> Iterator[Metric]:
        server = self.server
        service = server.service
        sessions = list(server.sessions)
        yield _gauge("weir_client_connections", "client sessions open", len(sessions))
        yield _gauge("weir_upstream_connections", "relayed sessions' upstream connections open",
                     sum(1 for s in sessions if s.upstream is not None
                         and not s.upstream.is_closing()))
        yield _gauge("weir_draining", "1 while weir drains after SIGTERM", int(server.draining))
        yield _labelled(CounterMetricFamily(
            "weir_upstream_errors", "ErrorResponses from the upstream by SQLSTATE class",
            labels=["sqlstate_class"]), UPSTREAM_ERRORS)
        yield _labelled(CounterMetricFamily(
            "weir_errors", "ErrorResponses weir sent itself (refusals, protocol violations, "
            "its own failures), by SQLSTATE class", labels=["sqlstate_class"]), OWN_ERRORS)
        yield _labelled(CounterMetricFamily(
            "weir_upstream_forwards", "statements weir routed upstream, by reason",
            labels=["reason"]), FORWARDS)
        yield UPSTREAM_CONNECT.family("weir_upstream_connect_seconds",
                                      "time to open a session's upstream connection")
        lanes = service.lanes
        statements = UPSTREAM_STATEMENTS if lanes is None \
            else UPSTREAM_STATEMENTS.plus(*lanes.upstream_latency())
        yield statements.family(
            "weir_upstream_statement_seconds", "time from a request sent upstream (a simple "
            "Query or an extended-protocol batch up to its Sync) to its ReadyForQuery")
        lane_answers = 0
        if lanes is not None:
            stats = lanes.stats()
            lane_answers = int(stats["lane_answers"])
            for key, value in stats.items():
                if isinstance(value, int):
                    yield _gauge(f"weir_{key}", f"hit lanes: {key} (SHOW WEIR STATUS)", value)
        destinations = {"upstream": sum(FORWARDS.values()), "admin": ADMIN[0]}
        yield from self._caching(lane_answers, destinations)
        yield _labelled(CounterMetricFamily(
            "weir_queries", "statements by destination (cache: answered from a cache; "
            "upstream: routed upstream; admin: weir's own commands)",
            labels=["destination"]), destinations)

    def _caching(self, lane_answers: int, destinations: dict[str, Any]) -> Iterator[Metric]:
        service = self.server.service
        host = service.host
        yield _gauge("weir_caching_running", "1 once the cache host runs", int(host is not None))
        memo_answers = service.hits.served + lane_answers
        yield _counter("weir_memoized_answers", "reads answered from memoized encoded answers",
                       memo_answers)
        yield _gauge("weir_memo_bytes", "bytes of memoized answers", service.hits.bytes)
        if host is None or service.registry is None:
            destinations["cache"] = memo_answers
            return
        engine = host.engine
        stats = host.stream.stats()
        hits = engine.stats.hits + lane_answers  # (as SHOW WEIR STATUS counts them)
        destinations["cache"] = hits
        yield _counter("weir_cache_hits", "cache lookups answered (the engine's, the memoized "
                       "answers' checks, the lanes' answers)", hits)
        yield _counter("weir_cache_misses", "cached reads whose key was missing",
                       engine.stats.misses)
        yield _counter("weir_cache_fill_failures", "fill transactions that failed",
                       host.fill_failures)
        yield _counter("weir_cache_misses_not_admitted",
                       "misses not filled: the key's first read (--admission second)",
                       host.admission.refused)
        yield _counter("weir_cache_fills", "fills completed", host.fills_done)
        yield _counter("weir_cache_fill_transactions", "snapshot transactions run for fills",
                       host.fill_transactions)
        if host.local is not None:
            yield _counter("weir_cache_local_fills", "fills answered from local bases "
                           "(--local-bases)", host.local.local_fills)
        yield host.fill_latency.family("weir_cache_fill_seconds",
                                       "time from a fill's request to its rows")
        yield _counter("weir_cache_evictions", "cached entries evicted", engine.stats.evictions)
        yield _gauge("weir_caches", "caches defined", len(service.registry.caches))
        yield _gauge("weir_memory_bytes", "bytes of cached state", engine.memory_total())
        yield _labelled(GaugeMetricFamily("weir_cache_memory_bytes", "bytes of cached state "
                                          "per cache", labels=["cache"]),
                        engine.memory_by_cache())
        by_cache = dict(engine.hits_by_cache)
        if service.lanes is not None:
            for cache, n in service.lanes.served_by_cache().items():
                if cache in by_cache:
                    by_cache[cache] += n
        yield _labelled(CounterMetricFamily(
            "weir_cache_queries", "cache lookups answered, by cache (the engine's, the "
            "memoized answers' checks, the lanes' answers)", labels=["cache"]), by_cache)
        yield _gauge("weir_replication_connected", "1 while the replication stream runs",
                     int(stats.connected))
        yield _gauge("weir_replication_applied_lsn", "last WAL position applied to the caches "
                     "(bytes)", stats.applied_lsn)
        if stats.lag_bytes is not None:
            yield _gauge("weir_replication_lag_bytes", "WAL bytes behind the upstream "
                         "(from the last barrier)", stats.lag_bytes)
        if stats.lag_seconds is not None:
            yield _gauge("weir_replication_lag_seconds", "seconds behind the upstream "
                         "(from the last barrier)", stats.lag_seconds)
