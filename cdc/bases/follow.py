"""Keeping local bases exact: the bootstrap's slot streamed into the store.

Owns the follower loop: a replication connection, ``START_REPLICATION`` of the manifest's slot
from the store's durable position, every pgoutput message fed to the store's
:class:`~cdc.bootstrap.replay.Replica` (which applies a transaction at its Commit, per
partition snapshot, and skips what was already applied), each Commit applied inside one LMDB
write transaction together with the new position, and standby status updates that confirm
(flush) exactly the durable position, never more: after ``kill -9`` the slot resends whatever
was not durable, and nothing is applied twice. A slot that is gone, lost its WAL, or was
confirmed past the durable position is reported (:class:`BasesLost`): the bases must be
reloaded from a new bootstrap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from cdc import slots
from cdc.bases.store import BaseStore
from cdc.bootstrap.errors import BootstrapError
from cdc.connection import ConnectParams, PgConnection
from cdc.pgoutput import (
    PG_EPOCH_UNIX,
    Commit,
    PrimaryKeepalive,
    decode_copy_data,
    decode_message,
    format_lsn,
    standby_status_update,
)

log = logging.getLogger("weir.bases")


def _now_pg() -> int:
    return int((time.time() - PG_EPOCH_UNIX) * 1_000_000)


class BasesLost(BootstrapError):
    """The slot cannot bring the bases up to date any more: they must be loaded again."""


async def check_slot(conn: PgConnection, slot: str, durable: int) -> None:
    """Raise :class:`BasesLost` when ``slot`` is gone, invalidated, or already confirmed past
    the bases' durable position (someone else consumed changes the bases never got)."""
    found = await slots.slot_exists(conn, slot)
    fix = "bootstrap again (weir bootstrap --restart ...) and reload (weir bases load)"
    if found is None or found.wal_status == "lost":
        state = "is gone" if found is None else "lost its WAL"
        raise BasesLost(f"replication slot {slot} {state}: the bases cannot be kept exact; "
                        f"{fix}")
    if found.confirmed_flush_lsn is not None and found.confirmed_flush_lsn > durable:
        raise BasesLost(f"replication slot {slot} was confirmed up to "
                        f"{format_lsn(found.confirmed_flush_lsn)}, past the bases' durable "
                        f"position {format_lsn(durable)}: changes were consumed elsewhere; "
                        f"{fix}")


async def follow(store: BaseStore, params: ConnectParams, status_interval: float = 1.0,
                 applied: asyncio.Event | None = None) -> None:
    """Stream until cancelled or the connection fails (the caller restarts it); raises
    :class:`BasesLost` when the slot can no longer keep the bases exact."""
    replica = store.replica()
    conn = await PgConnection.connect(params, replication=True)
    received = replica.lsn
    try:
        await check_slot(conn, replica.slot, replica.lsn)
        pub = replica.publication.replace("'", "''").replace('"', '""')
        await conn.start_copy_both(
            f"START_REPLICATION SLOT {slots.quote_ident(replica.slot)} LOGICAL "
            f"{format_lsn(replica.lsn)} (proto_version '1', publication_names '\"{pub}\"')")
        log.info("following slot %s from %s", replica.slot, format_lsn(replica.lsn))

        def status(ask: bool = False) -> None:
            durable = replica.lsn  # committed to LMDB before it is advanced past
            conn.send_copy_data(standby_status_update(
                max(received, durable), durable, durable, _now_pg(), ask))

        async def feedback() -> None:
            while True:
                await asyncio.sleep(status_interval)
                status(ask=True)

        ticker = asyncio.create_task(feedback())
        try:
            while True:
                payload = await conn.read_copy_data()
                if payload is None:
                    raise ConnectionError("the upstream ended the replication stream")
                msg = decode_copy_data(payload)
                if isinstance(msg, PrimaryKeepalive):
                    received = max(received, msg.wal_end)
                    if msg.reply_requested:
                        status()
                    continue
                received = max(received, msg.wal_end)
                decoded = decode_message(msg.data)
                if isinstance(decoded, Commit):
                    with store.write():
                        replica.feed(decoded)
                        store.save_position(replica)
                    if applied is not None:
                        applied.set()
                else:
                    replica.feed(decoded)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
    finally:
        await conn.close()
