"""The Prometheus collector: weir's state as metric families, built on each scrape.

Owns: ``WeirCollector``, which turns the server's state (the sessions, the engine's and the
lanes' own statistics, the replication stream's) and the counters of ``proxy.metrics`` into
metric families when ``/metrics`` is scraped (``proxy.health`` registers it). Nothing here
runs on a hot path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy.metrics import (
    ADMIN,
    FORWARDS,
    OWN_ERRORS,
    UPSTREAM_CONNECT,
    UPSTREAM_ERRORS,
    UPSTREAM_STATEMENTS,
)
from proxy.server import Server


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
