"""The replication stream: a logical replication session kept alive, feeding the applier.

Owns: the session lifecycle (connect with ``replication=database``, IDENTIFY_SYSTEM, settings
warnings, publication, slot, START_REPLICATION ... LOGICAL with proto_version '1',
publication_names and messages 'true'), the CopyBoth loop (XLogData -> pgoutput ->
applier; keepalives answered when asked; standby status updates every ``status_interval``),
reconnect with exponential backoff, and continuity: a new temporary slot, a lost or
invalidated persistent slot, or a changed system identifier resets every cache.

Local bases (``tap``, ``durable_lsn``) see every decoded message just before the applier.

Invariants: status updates report as flushed/applied only ``Applier.applied_end_lsn`` (and
never more than ``durable_lsn()`` when given), or, while no transaction is open, the server's
own keepalive position (nothing unapplied precedes it); with a persistent slot, nothing is
lost or applied twice across reconnects (the applier skips commit LSN <= applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cdc import slots
from cdc.applier import Applier
from cdc.barrier import BarrierResult, Barriers
from cdc.connection import ConnectParams, PgConnection, UpstreamError
from cdc.events import TransactionSink
from cdc.pgoutput import (
    PG_EPOCH_UNIX,
    PgoutputError,
    PgoutputMessage,
    PrimaryKeepalive,
    decode_copy_data,
    decode_message,
    format_lsn,
    standby_status_update,
)
from pgwire.framing import ProtocolViolation

log = logging.getLogger("weir.cdc")

#: SQLSTATEs of a slot that is gone or unusable (undefined_object,
#: object_not_in_prerequisite_state).
_SLOT_GONE = {"42704", "55000"}


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """How to stream. ``tables`` None publishes FOR ALL TABLES (needs a superuser to create);
    otherwise SQL table names as written (``public.users``). ``slot`` None generates
    ``weir_<random>``; ``temporary`` False keeps the slot across restarts (durable bases);
    ``status_interval`` is seconds between standby status updates (each asks the server for a
    keepalive); ``receive_timeout`` is how long a silent upstream is trusted before the
    connection is dropped and re-established; backoff is in seconds."""

    connect: ConnectParams
    publication: str = "weir_pub"
    tables: tuple[str, ...] | None = None
    create_publication: bool = True
    slot: str | None = None
    temporary: bool = True
    status_interval: float = 1.0
    receive_timeout: float = 30.0
    backoff_initial: float = 0.05
    backoff_max: float = 5.0


@dataclass(frozen=True, slots=True)
class StreamStats:
    """A snapshot for /metrics and SHOW WEIR STATUS."""

    connected: bool
    slot: str
    sessions: int
    transactions_applied: int
    transactions_skipped: int
    received_lsn: int
    applied_lsn: int
    flushed_lsn: int
    lag_bytes: int | None
    lag_seconds: float | None
    warnings: tuple[str, ...]


def _new_slot_name() -> str:
    return f"{slots.SLOT_PREFIX}{uuid.uuid4().hex[:12]}"


def _now_pg() -> int:
    return int((time.time() - PG_EPOCH_UNIX) * 1_000_000)


class ReplicationStream:
    """Run with :meth:`start`; stop with :meth:`stop`. ``barrier()`` waits for freshness.

    ``on_marker(content, lsn)`` is called for every transactional ``weir`` logical message
    right after its transaction was applied and before the next one is: the host uses it for
    fill markers (DESIGN §6 step 3). Barrier markers are ``<pid>-<hex>-<n>``; use another
    shape (e.g. ``fill-<id>``) for the host's own markers.

    ``resume_lsn``: the commit LSN of the last transaction already in durable state (replica
    bases) - streaming resumes there and nothing at or before it is applied again.
    ``durable_lsn()``: how far that durable state reaches now (caps what is confirmed).
    """

    def __init__(self, config: StreamConfig, sink: TransactionSink,
                 durable_lsn: Callable[[], int] | None = None,
                 on_marker: Callable[[str, int], None] | None = None,
                 resume_lsn: int = 0) -> None:
        self.config = config
        self.sink = sink
        self.durable_lsn = durable_lsn
        self.slot_name = config.slot or _new_slot_name()
        self.barriers = Barriers(config.connect, self.position)
        self.on_marker = on_marker
        #: awaited in every session before its slot is created (the host makes its
        #: publication whole there)
        self.before_slot: Callable[[], Awaitable[None]] | None = None
        #: sees every decoded pgoutput message just before the applier does (local bases
        #: apply a Commit there, in the same synchronous step as the applier)
        self.tap: Callable[[PgoutputMessage], None] | None = None
        self.applier = Applier(sink, applied_commit_lsn=resume_lsn, on_barrier=self._marker)
        self.applier.applied_end_lsn = resume_lsn
        self.system: slots.SystemInfo | None = None
        self.warnings: list[str] = []
        self.received_lsn = 0
        self.confirmed_lsn = 0
        self.sessions = 0
        self.connected = asyncio.Event()
        #: ``connected.is_set()`` as a plain attribute (read on every cached answer)
        self.up = False
        #: called with ``up`` whenever it changes
        self.on_state: Callable[[bool], None] | None = None
        self.last_error: BaseException | None = None
        self._conn: PgConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def _marker(self, marker: str, lsn: int) -> None:
        """A 'weir' logical message was applied: a barrier of ours, or the host's (fills)."""
        self.barriers.passed(marker, lsn)
        if self.on_marker is not None:
            self.on_marker(marker, lsn)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        """Start streaming in the background; return once the first session streams."""
        self._task = asyncio.create_task(self._run(), name=f"weir-cdc-{self.slot_name}")
        waiter = asyncio.create_task(self.connected.wait())
        done, _ = await asyncio.wait({waiter, self._task}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            if self._task in done:
                self._task.result()
            raise TimeoutError(f"replication did not start: {self.last_error!r}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()
        await self.barriers.close()

    async def barrier(self, timeout: float = 30.0) -> BarrierResult:
        return await self.barriers.barrier(timeout)

    def kill_connection(self) -> None:
        """Drop the current replication connection abruptly (fault tests)."""
        if self._conn is not None:
            self._conn.abort()

    async def _run(self) -> None:
        delay = self.config.backoff_initial
        while True:
            before = self.sessions
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, UpstreamError, TimeoutError, PgoutputError,
                    ProtocolViolation) as exc:
                self.last_error = exc
                log.warning("replication stream interrupted (%s); reconnecting in %.2fs",
                            exc, delay)
            except Exception as exc:  # the applier or the sink failed: state is suspect
                self.last_error = exc
                log.exception("applying the replication stream failed")
                self._lose_continuity(f"applying the stream failed: {exc!r}")
            finally:
                self.connected.clear()
                self.up = False
                if self.on_state is not None:
                    self.on_state(False)
                self.applier.connection_lost()
                await self._close()
            if self.sessions > before:
                delay = self.config.backoff_initial
            await asyncio.sleep(delay)
            delay = min(self.config.backoff_max, delay * 2)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    # -- one session --------------------------------------------------------------------------

    async def _session(self) -> None:
        cfg = self.config
        conn = self._conn = await PgConnection.connect(cfg.connect, replication=True)
        system = await slots.identify_system(conn)
        if self.system is not None and system.systemid != self.system.systemid:
            self._lose_continuity("the upstream's system identifier changed")
            self.applier.applied_commit_lsn = 0
            self.applier.applied_end_lsn = 0
        self.system = system
        if self.applier.xid_reference == 0:
            row = (await conn.query(
                "SELECT pg_snapshot_xmax(pg_current_snapshot())::text")).rows[0]
            self.applier.xid_reference = int(row[0] or 0)
        self.warnings = await slots.check_settings(conn, 0 if self.sessions else 1)
        for warning in self.warnings:
            log.warning("%s", warning)
        if cfg.create_publication:
            await slots.ensure_publication(conn, cfg.publication, cfg.tables)
        if self.before_slot is not None:
            await self.before_slot()
        await self._prepare_slot(conn)
        await self._start_replication(conn)
        self.sessions += 1
        self.last_error = None
        self.connected.set()
        self.up = True
        if self.on_state is not None:
            self.on_state(True)
        feedback = asyncio.create_task(self._feedback_loop(conn))
        try:
            await self._stream(conn)
        finally:
            feedback.cancel()

    def _lose_continuity(self, reason: str) -> None:
        log.warning("replication continuity lost: %s; resetting every cache", reason)
        self.barriers.lose_all(reason)
        self.sink.reset_all(reason)

    async def _prepare_slot(self, conn: PgConnection) -> None:
        if self.config.temporary:
            if self.sessions and self.config.slot is None:
                # a fresh name: the old session's slot may linger until its walsender notices
                self.slot_name = _new_slot_name()
            start = await slots.create_slot(conn, self.slot_name, temporary=True)
            self.confirmed_lsn = max(self.confirmed_lsn, start)
            if self.sessions:
                self._lose_continuity("a new temporary slot was created after a reconnect")
            return
        existing = await slots.slot_exists(conn, self.slot_name)
        if existing is not None and existing.wal_status == "lost":
            await slots.drop_slot(conn, self.slot_name)
            existing = None
        if existing is None:
            start = await slots.create_slot(conn, self.slot_name, temporary=False)
            if self.sessions or self.applier.applied_end_lsn:
                self._lose_continuity(f"replication slot {self.slot_name} was lost")
        else:
            start = existing.confirmed_flush_lsn or 0
        self.confirmed_lsn = max(self.confirmed_lsn, start)

    async def _start_replication(self, conn: PgConnection) -> None:
        pub = self.config.publication.replace("'", "''").replace('"', '""')
        sql = (f"START_REPLICATION SLOT {slots.quote_ident(self.slot_name)} LOGICAL "
               f"{format_lsn(self.applier.applied_end_lsn)} (proto_version '1', "
               f"publication_names '\"{pub}\"', messages 'true')")
        try:
            await conn.start_copy_both(sql)
        except UpstreamError as exc:
            if exc.sqlstate in _SLOT_GONE and not self.config.temporary:
                await slots.drop_slot(conn, self.slot_name)
            elif exc.sqlstate == "55006" and await slots.terminate_slot_holder(
                    conn, self.slot_name):
                log.warning("slot %s was held by a stale session; terminated it",
                            self.slot_name)
            raise

    async def _stream(self, conn: PgConnection) -> None:
        applier = self.applier
        barriers = self.barriers
        while True:
            payload = await conn.read_copy_data()
            if payload is None:
                raise ConnectionError("the upstream ended the replication stream")
            msg = decode_copy_data(payload)
            if isinstance(msg, PrimaryKeepalive):
                self._keepalive(conn, msg)
                continue
            if msg.wal_end > self.received_lsn:
                self.received_lsn = msg.wal_end
            decoded = decode_message(msg.data)
            if self.tap is not None:
                self.tap(decoded)
            applier.feed(decoded)
            if applier.applied_end_lsn >= barriers.probe_floor:  # (a commit: probes passed)
                barriers.reached(self.position())

    def _keepalive(self, conn: PgConnection, msg: PrimaryKeepalive) -> None:
        self.received_lsn = max(self.received_lsn, msg.wal_end)
        if not self.applier.in_transaction:
            self.confirmed_lsn = max(self.confirmed_lsn, msg.wal_end)
            if self.confirmed_lsn >= self.barriers.probe_floor:
                self.barriers.reached(self.position())
        if msg.reply_requested:
            self._send_status(conn)

    def stats(self) -> StreamStats:
        last = self.barriers.last
        return StreamStats(
            self.connected.is_set(), self.slot_name, self.sessions, self.applier.applied,
            self.applier.skipped, self.received_lsn, self.position(), self.flush_lsn(),
            None if last is None else last.lag_bytes,
            None if last is None else last.lag_seconds, tuple(self.warnings))

    def position(self) -> int:
        """The upstream WAL position up to which every transaction has been applied."""
        return max(self.applier.applied_end_lsn, self.confirmed_lsn)

    def flush_lsn(self) -> int:
        """The position weir may confirm upstream: applied (and durable), never beyond."""
        lsn = max(self.applier.applied_end_lsn, self.confirmed_lsn)
        if self.durable_lsn is not None:
            lsn = min(lsn, self.durable_lsn())
        return lsn

    def _send_status(self, conn: PgConnection, ask_reply: bool = False) -> None:
        flushed = self.flush_lsn()
        conn.send_copy_data(standby_status_update(
            max(self.received_lsn, flushed), flushed, flushed, _now_pg(), ask_reply))

    async def _feedback_loop(self, conn: PgConnection) -> None:
        """Status every ``status_interval`` (asking for a reply, so a live upstream is never
        silent); a connection silent for ``receive_timeout`` is dropped (network partition)."""
        while True:
            await asyncio.sleep(self.config.status_interval)
            silent = time.monotonic() - conn.last_receive
            if silent > self.config.receive_timeout:
                log.warning("the upstream has been silent for %.1fs; reconnecting", silent)
                conn.abort()
                return
            self._send_status(conn, ask_reply=True)
