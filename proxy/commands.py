"""weir's own SQL commands run: their answers as PostgreSQL would send them.

Owns: :func:`result_set` (a text result: RowDescription, DataRows, CommandComplete),
:func:`create` (CREATE CACHE and EXPLAIN CREATE CACHE) and :func:`show` (SHOW CACHES,
PROXIED QUERIES, SUPPORTED QUERIES, TABLES, WEIR STATUS). The grammar is ``proxy.admin``'s;
:func:`run` runs one (serializing those that change caches) and turns errors into
ErrorResponses; it needs of the cache service only :class:`AdminHost`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from cdc import format_lsn
from pgwire import backend as be
from proxy import identity
from proxy.admin import CreateCache, DropCache, Show
from proxy.hitpath import HitMemos
from proxy.lanes import HitLanes
from proxy.limits import fd_limit
from proxy.metrics import ADMIN, own_error
from proxy.registry import AdminError, Registry, masked
from proxy.router import Route, SessionContext, session_zone
from proxy.settings import Settings, UpstreamAddress

log = logging.getLogger("weir.commands")

TEXT_OID = 25
#: the SHOW commands a non-admin may run: they list only the statements it sent itself
#: (the caches: those over a statement it sent)
OWN_STATEMENTS = ("proxied", "supported", "caches")
#: how long an admin command waits for caching to start: creating the replication slot waits
#: for every open transaction that has written (PostgreSQL's rule), the sender's own other
#: connections' too, which may be waiting for this answer; then the command fails with
#: :data:`STARTING` while the start goes on
STARTING_WAIT = 10.0
STARTING = ("caching is starting: its replication slot waits for the open transactions that "
            "have written to end (see pg_stat_activity); try again")


def result_set(columns: Sequence[str], rows: Sequence[Sequence[str | None]], tag: str) -> bytes:
    """RowDescription (text columns) + DataRows + CommandComplete."""
    fields = tuple(be.FieldDescription(name=c, type_oid=TEXT_OID) for c in columns)
    out = [be.RowDescription(fields).encode()]
    out.extend(be.encode_data_row([None if v is None else v.encode("utf-8", "replace")
                                   for v in row]) for row in rows)
    out.append(be.CommandComplete(tag).encode())
    return b"".join(out)



async def create(registry: Registry, cmd: CreateCache, ctx: SessionContext) -> bytes:
    """CREATE CACHE (or its EXPLAIN): the answer; the caller refreshes what names caches."""
    if cmd.explain_only:
        await registry.reload_catalog()
        qid, text, supported = registry.explain(cmd.source, ctx.search_path,
                                                session_zone(ctx.parameters or {}))
        return result_set(["query_id", "query", "supported"], [(qid, text, supported)],
                          "SELECT 1")
    await registry.create(cmd.source, ctx.search_path, cmd.name,
                          timezone=session_zone(ctx.parameters or {}))
    return be.CommandComplete("CREATE CACHE").encode()

def show(registry: Registry, cmd: Show, lanes: HitLanes | None, hits: HitMemos,
         upstream: UpstreamAddress, sender: str | None = None) -> bytes:
    """SHOW CACHES | PROXIED QUERIES | SUPPORTED QUERIES | TABLES | WEIR STATUS
    (``sender``: only the statements that login role sent, for a non-admin)."""
    host = registry.host
    what = cmd.what
    if what == "caches":
        memory = host.engine.memory_by_cache()
        rows: list[tuple[str, ...]] = [
            (e.name, e.query_id,
             e.text if cmd.literals else masked(registry.classify(e.text, e.search_path)),
             str(memory.get(e.name, 0)))
            for e in registry.caches.values()
            if sender is None or sender in getattr(registry.proxied.get(e.query_id), "roles", ())]
        return result_set(["name", "query_id", "query", "memory_bytes"], rows,
                          f"SELECT {len(rows)}")
    if what in ("proxied", "supported"):
        if lanes is not None:
            lanes.settle()  # what pass sessions' lanes relayed counts too
        items = [p for p in registry.proxied.values()
                 if (what == "proxied" or not p.supported.startswith("unsupported"))
                 and (sender is None or sender in p.roles)]
        rows = [(p.query_id, p.text if cmd.literals else p.shape, p.supported, str(p.count))
                for p in items]
        return result_set(["query_id", "query", "supported", "count"], rows,
                          f"SELECT {len(rows)}")
    if what == "tables":
        tables: dict[int, list[str]] = {}
        for e in registry.caches.values():
            for oid in e.query.plan.relations:
                tables.setdefault(oid, []).append(e.name)
        rows = []
        for oid, names in sorted(tables.items()):
            rel = registry.planner.catalog.by_oid(oid)
            label = rel.qualified if rel is not None else str(oid)
            rows.append((label, str(oid), ", ".join(sorted(names))))
        return result_set(["table", "oid", "caches"], rows, f"SELECT {len(rows)}")
    stats = host.stream.stats()
    emits = host.stream.barriers
    engine = host.engine
    lane_answers = lanes.core.stats()[0] if lanes is not None else 0
    addr = upstream
    pairs = [
        ("upstream", f"{addr.host}:{addr.port}"),
        ("replication", "connected" if stats.connected else "disconnected"),
        ("slot", stats.slot),
        ("applied_lsn", format_lsn(stats.applied_lsn)),
        ("lag_bytes", "" if stats.lag_bytes is None else str(stats.lag_bytes)),
        ("lag_seconds", "" if stats.lag_seconds is None else f"{stats.lag_seconds:.3f}"),
        ("caches", str(len(registry.caches))),
        ("memory_bytes", str(engine.memory_total())),
        ("hits", str(engine.stats.hits + lane_answers)),
        ("misses", str(engine.stats.misses)),
        ("fills", str(host.fills.done)),
        ("fill_transactions", str(host.fills.transactions)),
        ("fill_ms_avg", f"{1000 * host.fills.seconds / max(1, host.fills.done):.2f}"),
        ("fill_ms_p50", "" if (p50 := host.fills.p50()) is None else f"{1000 * p50:.2f}"),
        *((f"fill_{phase}_ms_avg", f"{1000 * spent / max(1, host.fills.done):.2f}")
          for phase, spent in host.fills.phases.items()),
        ("fill_failures", str(host.fills.failures)),
        ("fill_barriers", str(emits.waits_fell_back)),
        ("fill_positions_unflushed", str(host.fills.unflushed)),
        ("fill_rows", str(host.fills.rows)),
        ("fills_queued", str(len(host.fills.queue.waiting))),
        ("fills_not_admitted", str(host.fills.admission.refused)),
        ("fills_admitted_on_read", str(host.fills.admission.reads)),
        ("fills_admission_raised", str(host.fills.admission.raised)),
        ("fills_not_worth", str(engine.stats.not_worth)),
        ("fills_dropped_queue_full", str(host.fills.queue.dropped)),
        ("fills_held_back", str(host.fills.queue.held_back)),
        ("session_barriers", str(host.coverage.barriers)),
        ("session_barrier_ms_avg",
         f"{1000 * host.coverage.barrier_seconds / max(1, host.coverage.barriers):.2f}"),
        ("session_probes", str(emits.probes)),
        ("session_probes_fell_back", str(emits.probes_fell_back)),
        ("session_probes_at_answer", str(emits.probes_at_answer)),
        ("session_probe_answer_ms_avg",
         f"{1000 * emits.probe_answer_seconds / max(1, emits.probes):.2f}"),
        ("session_probe_stream_ms_avg",
         f"{1000 * emits.probe_stream_seconds / max(1, emits.probes_waited):.2f}"),
        ("barrier_emit_ms_avg", f"{1000 * emits.emit_seconds / max(1, emits.emitted):.2f}"),
        ("session_waits", str(host.coverage.waits)),
        ("session_wait_ms_avg",
         f"{1000 * host.coverage.wait_seconds / max(1, host.coverage.waits):.2f}"),
        ("session_waits_failed", str(host.coverage.waits_failed)),
        ("session_parks", str(host.coverage.parks)),
        ("session_parks_after_write", str(host.coverage.parks_after_write)),
        ("session_park_ms_avg",
         f"{1000 * host.coverage.park_seconds / max(1, host.coverage.parks):.2f}"),
        ("session_covered_by_fills", str(host.coverage.by_fills)),
        ("session_miss_positions", str(host.coverage.positions)),
        ("session_miss_positions_passed", str(host.coverage.positions_passed)),
        ("session_miss_positions_failed", str(host.coverage.positions_failed)),
        ("session_miss_positions_unflushed", str(host.coverage.positions_unflushed)),
        ("session_write_positions", str(host.coverage.write_positions)),
        ("session_write_positions_passed", str(host.coverage.write_positions_passed)),
        ("memory_budget", "" if engine.budget is None else str(engine.budget)),
        *([] if host.local is None else [  # --local-bases: fills answered from them
            ("local_fills", str(host.local.local_fills)),
            ("local_bases_loads", str(host.local.loads)),
            ("local_bases_path", str(host.local.path)),
            ("local_indexes", " ".join(f"{k}:{v}" for k, v in host.local.index_states().items())),
            ("local_bases_lsn", format_lsn(host.local.resume[1]))]),
        ("evictions", str(engine.stats.evictions)),
        ("memoized_answers", str(hits.served + lane_answers)),
        ("loop_memo_answers", str(hits.served)),  # (the event loop's share of them)
        ("memo_bytes", str(hits.bytes)),
        ("memo_forgotten", str(hits.forgotten)),  # (oldest answers, past the memos' bound)
        ("memo_from_fills", str(hits.from_fills)),  # (remembered as a fill installed them)
        ("fd_limit", str(fd_limit())),
    ]
    if lanes is not None:
        pairs.extend((k, str(v)) for k, v in lanes.stats().items())
    return result_set(["name", "value"], pairs, f"SELECT {len(pairs)}")


class AdminHost(Protocol):
    """What running a command needs of the cache service (``proxy.service.CacheService``)."""

    @property
    def mutating(self) -> asyncio.Lock: ...

    @property
    def lanes(self) -> HitLanes | None: ...

    @property
    def hits(self) -> HitMemos: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def admins(self) -> frozenset[str]: ...  # ``--admin-roles`` (``proxy.identity``)

    async def ensure(self) -> Registry: ...

    def refresh_names(self) -> None: ...


async def run(service: AdminHost, route: Route, ctx: SessionContext) -> bytes:
    """Run an admin command; errors become an ErrorResponse (the session goes on)."""
    ADMIN[0] += 1
    cmd = route.admin
    try:
        if isinstance(cmd, Show) and cmd.what == "last":
            return result_set(["destination", "reason"], [ctx.last], "SELECT 1")
        sender = None
        if not identity.is_admin(ctx, service.admins):
            if not (isinstance(cmd, Show) and cmd.what in OWN_STATEMENTS):
                return own_error("42501", identity.ADMIN_DENIED)
            sender = ctx.user  # a non-admin sees the statements its login role sent
        starting = asyncio.ensure_future(service.ensure())
        done, _ = await asyncio.wait({starting}, timeout=STARTING_WAIT)
        if not done:
            starting.add_done_callback(lambda t: t.cancelled() or t.exception())
            return own_error("55000", STARTING)
        registry = starting.result()
        async with service.mutating:
            if isinstance(cmd, CreateCache):
                answer = await create(registry, cmd, ctx)
                service.refresh_names()
                return answer
            if isinstance(cmd, DropCache):
                n = registry.drop(cmd.name)
                service.refresh_names()
                return be.CommandComplete(
                    "DROP CACHE" if cmd.name else f"DROP ALL CACHES {n}").encode()
        assert isinstance(cmd, Show)
        return show(registry, cmd, service.lanes, service.hits,
                    service.settings.upstream_address, sender)
    except AdminError as exc:
        return own_error("42000", str(exc))
    except Exception as exc:
        log.exception("admin command failed")
        return own_error("XX000", f"weir: {exc}")
