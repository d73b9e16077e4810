"""The coordinator: the one snapshot every partition of a run reads under, held open.

Owns: creating the bootstrap's persistent logical slot with ``EXPORT_SNAPSHOT`` on a
replication connection (its consistent point is the LSN from which the slot streams exactly the
transactions the exported snapshot does not see), and, for a resumed run whose first snapshot
died with its connection, a fresh ``pg_export_snapshot()`` in a REPEATABLE READ transaction.
Either is valid only while this connection stays open and idle, so the driver holds it for
the whole Spark job and closes it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq

from cdc.bootstrap import catalog
from cdc.bootstrap.errors import BootstrapError, explain
from cdc.bootstrap.plan import quote_ident
from cdc.pgoutput import parse_lsn


@dataclass(slots=True)
class HeldSnapshot:
    """An exported snapshot and the connection that keeps it alive."""

    name: str
    conn: psycopg.Connection[Any]
    lsn: int | None = None  # the slot's consistent point, for a snapshot a slot exported

    def close(self) -> None:
        self.conn.close()


def create_slot(dsn: str, slot: str) -> HeldSnapshot:
    """Create persistent pgoutput slot ``slot`` exporting its snapshot."""
    conn = catalog.connect(dsn, replication="database")
    cmd = f"CREATE_REPLICATION_SLOT {quote_ident(slot)} LOGICAL pgoutput EXPORT_SNAPSHOT"
    result = conn.pgconn.exec_(cmd.encode())
    if result.status != pq.ExecStatus.TUPLES_OK:
        sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        message = (result.error_message or b"").decode().strip()
        conn.close()
        if sqlstate == "53400":
            raise BootstrapError(
                f"replication slot limit reached creating slot {slot}: {message}; drop unused "
                "slots (weir slots list / weir slots drop) or raise max_replication_slots")
        if sqlstate == "42710":
            raise BootstrapError(f"replication slot {slot} already exists: choose another "
                                 "--slot or drop it (weir slots drop)")
        if sqlstate == "42501":
            raise BootstrapError(f"no privilege to create replication slot {slot}: {message}")
        raise BootstrapError(f"cannot create replication slot {slot}: {message} "
                             f"(SQLSTATE {sqlstate})")
    lsn = parse_lsn((result.get_value(0, 1) or b"0/0").decode())
    name = (result.get_value(0, 2) or b"").decode()
    return HeldSnapshot(name, conn, lsn)


def export_snapshot(dsn: str) -> HeldSnapshot:
    """A new exported snapshot (for a resumed run)."""
    conn = catalog.connect(dsn)
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    except psycopg.Error as exc:
        conn.close()
        raise explain(exc, "exporting a snapshot") from None
    assert row is not None
    return HeldSnapshot(str(row[0]), conn)


def drop_slot(dsn: str, slot: str) -> bool:
    """Drop ``slot`` if it exists; True if it did."""
    with catalog.connect(dsn) as conn:
        row = conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM"
                           " pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
        return row is not None
