"""The cache host's side of local bases (``--local-bases``): one stream, two consumers.

Owns wiring a :class:`cdc.LocalBases` into an ``EngineHost``: the stream follows the bases'
persistent slot and publication, its ``tap`` applies each Commit to the store just before the
applier hands the same transaction to the engine (one synchronous step), and it confirms to the
upstream no more than the store holds durably (``durable_lsn``; should the store fail to apply
a transaction, its open batch is dropped and the applier rewound to the durable position with
it, and the stream's failure resets the caches and resends from there); at start the store is opened
(or loaded from one snapshot, in a thread) and the applier resumes after its last transaction;
before every replication session the slot is checked, and a slot that is gone, lost its WAL
or was confirmed past the store is reported and the bases reloaded (every cache is reset);
fills whose tables are all local are answered from the store at once
(``Engine.fill_local``), others go upstream as before.

Local fills over a store opened from a bootstrap are allowed only once a barrier emitted after
it was opened has been applied (the host's first): a bootstrap resumed after a kill has
partitions read under later snapshots than the slot's start, which are exact at the applied
position only once the stream has passed them. A store loaded from one snapshot is exact at
the slot's start, so its fills are local at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

import asyncpg

from cdc import BasesLost, LocalBases, PgoutputMessage, ReplicationStream
from engine import Engine, RunFill
from proxy.publication import Publication

log = logging.getLogger("weir.cache")


class EngineHost(Protocol):
    """What of ``proxy.caching.EngineHost`` the local bases use."""

    stream: ReplicationStream
    publication: Publication

    @property
    def pool(self) -> asyncpg.Pool: ...

    def reset_all(self, reason: str) -> None: ...

#: relation oids of the local tables (to keep them in the publication)
_OIDS = "SELECT to_regclass(n)::oid::int8 FROM unnest($1::text[]) AS n"


def open_bases(path: str, upstream_url: str, tables: Sequence[str],
               names: tuple[str, str] | None) -> LocalBases:
    """The local bases in ``path`` (opened now if they are there); ``names``: the slot and
    publication a load from one snapshot creates (``--replication-slot``'s)."""
    slot, pub = names if names is not None else (None, None)
    return LocalBases(path, upstream_url, tables, slot=slot, publication=pub)


def attach(host: EngineHost, local: LocalBases) -> None:
    """Feed the store from the host's stream, cap confirmations at the store's durability,
    and check the slot before every session."""
    stream = host.stream
    stream.durable_lsn = local.durable_lsn

    def tap(msg: PgoutputMessage) -> None:
        try:
            local.tap(msg)
        except BaseException:  # the batch was dropped: the applier resumes where it ends
            _resume(host, local)
            raise

    stream.tap = tap

    async def before_slot() -> None:
        if not local.loaded or local.stale:  # a DDL, or a reload that failed (say the
            # upstream went away meanwhile)
            reason = local.stale or "the last load of the local bases did not finish"
            log.error("local bases: %s; reloading them from one snapshot", reason)
            await reload(host, local, reason)
        else:
            try:
                await local.check()
            except BasesLost as exc:
                log.error("local bases lost: %s; reloading them from one snapshot", exc)
                await reload(host, local, str(exc))
        await host.publication.ensure()

    stream.before_slot = before_slot


async def start(host: EngineHost, local: LocalBases) -> None:
    """Before the stream starts: the store loaded, the applier resuming after it, its tables
    kept in the publication."""
    if not local.loaded:
        await asyncio.to_thread(local.load)
    _resume(host, local)
    await _keep_published(host, local)


async def _keep_published(host: EngineHost, local: LocalBases) -> None:
    """Look up the local tables' relation oids; keep them in the publication."""
    oids = [r[0] for r in await host.pool.fetch(_OIDS, local.relation_names())]
    local.oids = frozenset(o for o in oids if o is not None)
    host.publication.keep_tables(local.oids)


def _resume(host: EngineHost, local: LocalBases) -> None:
    applier = host.stream.applier
    applier.applied_commit_lsn, applier.applied_end_lsn = local.resume


async def reload(host: EngineHost, local: LocalBases, reason: str) -> None:
    """Reload the bases from one snapshot of a new slot; the caches start over."""
    host.reset_all(f"local bases reloaded: {reason}")
    await asyncio.to_thread(local.load)
    # a barrier emitted before the new slot existed never comes through it: fail those now
    # (the heartbeat tries again at once) instead of letting them time out
    host.stream.barriers.lose_all(f"local bases reloaded: {reason}")
    _resume(host, local)
    await _keep_published(host, local)  # (a table dropped and created again has a new oid)


def fill(engine: Engine, local: LocalBases, run: RunFill) -> tuple[object, ...] | None:
    """The effects of installing ``run`` from the local bases, or None when it reads a table
    that is not local (or the bases are not usable now): it goes upstream."""
    try:
        rows = local.rows(run)
    except Exception:
        log.exception("local fill %d failed; it goes upstream", run.fill_id)
        return None
    return None if rows is None else engine.fill_local(run.fill_id, rows)
