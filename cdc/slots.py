"""Publications, replication slots and the server settings logical replication needs.

Owns: IDENTIFY_SYSTEM; creating a publication when absent (FOR ALL TABLES or a table
list; the proxy manages its own, see ``proxy.publication``); dropping weir's orphaned
publications; creating temporary or persistent pgoutput slots; listing and dropping weir's
persistent slots (by name prefix); checking ``wal_level``, ``max_replication_slots`` and
``max_wal_senders`` and saying how to fix them.

All functions take an open :class:`~cdc.connection.PgConnection` (a ``replication=database``
connection accepts both replication commands and SQL).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.connection import ConnectParams, PgConnection
from cdc.pgoutput import parse_lsn

SLOT_PREFIX = "weir_"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class SystemInfo:
    systemid: str
    timeline: int
    xlogpos: int
    dbname: str


@dataclass(frozen=True, slots=True)
class SlotInfo:
    name: str
    temporary: bool
    active: bool
    confirmed_flush_lsn: int | None
    wal_status: str | None
    database: str | None


async def identify_system(conn: PgConnection) -> SystemInfo:
    row = (await conn.query("IDENTIFY_SYSTEM")).rows[0]
    return SystemInfo(str(row[0]), int(row[1] or 0), parse_lsn(row[2] or "0/0"), row[3] or "")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    wal_level: str
    max_replication_slots: int
    max_wal_senders: int
    slots_in_use: int
    senders_in_use: int


def settings_warnings(found: ServerSettings, slots_needed: int = 1) -> list[str]:
    """Warnings (each with its fix) when the upstream cannot serve weir's stream."""
    warnings = []
    if found.wal_level != "logical":
        warnings.append(
            f"wal_level is {found.wal_level!r}; logical replication needs 'logical': run "
            "ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL")
    if found.max_replication_slots - found.slots_in_use < slots_needed:
        warnings.append(
            f"max_replication_slots is {found.max_replication_slots} with "
            f"{found.slots_in_use} in use; weir needs {slots_needed} more: ALTER SYSTEM SET "
            f"max_replication_slots = {found.slots_in_use + slots_needed + 4}; "
            "and restart PostgreSQL")
    if found.max_wal_senders - found.senders_in_use < slots_needed:
        warnings.append(
            f"max_wal_senders is {found.max_wal_senders} with {found.senders_in_use} in use; "
            f"weir needs {slots_needed} more: ALTER SYSTEM SET max_wal_senders = "
            f"{found.senders_in_use + slots_needed + 4}; and restart PostgreSQL")
    return warnings


async def check_settings(conn: PgConnection, slots_needed: int = 1) -> list[str]:
    """Read the upstream's replication settings and return :func:`settings_warnings`."""
    row = (await conn.query(
        "SELECT current_setting('wal_level'), current_setting('max_replication_slots')::int,"
        " current_setting('max_wal_senders')::int,"
        " (SELECT count(*) FROM pg_replication_slots),"
        " (SELECT count(*) FROM pg_stat_replication)"
    )).rows[0]
    found = ServerSettings(str(row[0]), int(row[1] or 0), int(row[2] or 0), int(row[3] or 0),
                           int(row[4] or 0))
    return settings_warnings(found, slots_needed)


async def ensure_publication(
    conn: PgConnection, name: str, tables: tuple[str, ...] | None = None
) -> bool:
    """Create publication ``name`` unless it exists; True if it was created."""
    found = await conn.query(f"SELECT 1 FROM pg_publication WHERE pubname = {quote_literal(name)}")
    if found.rows:
        return False
    target = "ALL TABLES" if tables is None else "TABLE " + ", ".join(tables)
    await conn.query(f"CREATE PUBLICATION {quote_ident(name)} FOR {target}")
    return True


async def create_slot(conn: PgConnection, name: str, temporary: bool) -> int:
    """Create a pgoutput slot; returns its consistent point (the LSN streaming starts at)."""
    temp = " TEMPORARY" if temporary else ""
    result = await conn.query(
        f"CREATE_REPLICATION_SLOT {quote_ident(name)}{temp} LOGICAL pgoutput NOEXPORT_SNAPSHOT"
    )
    return parse_lsn(result.rows[0][1] or "0/0")


async def list_slots(conn: PgConnection, prefix: str = SLOT_PREFIX) -> list[SlotInfo]:
    """weir's slots (by name prefix) in the whole cluster."""
    result = await conn.query(
        "SELECT slot_name, temporary, active, confirmed_flush_lsn, wal_status, database"
        " FROM pg_replication_slots WHERE plugin = 'pgoutput'"
        f" AND starts_with(slot_name, {quote_literal(prefix)}) ORDER BY slot_name"
    )
    return [
        SlotInfo(str(r[0]), r[1] == "t", r[2] == "t", parse_lsn(r[3]) if r[3] else None,
                 r[4], r[5])
        for r in result.rows
    ]


async def slot_exists(conn: PgConnection, name: str) -> SlotInfo | None:
    for slot in await list_slots(conn, prefix=""):
        if slot.name == name:
            return slot
    return None


async def terminate_slot_holder(conn: PgConnection, name: str) -> bool:
    """End the session that still holds slot ``name`` (a previous weir connection the server
    has not noticed is dead). True if one was terminated."""
    result = await conn.query(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
        f" WHERE slot_name = {quote_literal(name)} AND active_pid IS NOT NULL"
        " AND active_pid <> pg_backend_pid()")
    return any(r[0] == "t" for r in result.rows)


async def drop_slot(conn: PgConnection, name: str) -> None:
    await conn.query(f"SELECT pg_drop_replication_slot({quote_literal(name)})")


#: the name prefix of weir's publications (one per weir process, see ``proxy.publication``)
PUBLICATION_PREFIX = "weir_pub_"


async def drop_orphan_publications(conn: PgConnection,
                                   prefix: str = PUBLICATION_PREFIX) -> list[str]:
    """Drop weir's publications in the connection's database when no weir slot there is
    active (a weir that stopped cleanly dropped its own; these are left by weir processes
    that were killed). A publication of a live weir is never dropped: while any weir streams
    from this database, none is."""
    active = await conn.query(
        "SELECT 1 FROM pg_replication_slots WHERE active AND plugin = 'pgoutput'"
        f" AND starts_with(slot_name, {quote_literal(SLOT_PREFIX)})"
        " AND database = current_database()")
    if active.rows:
        return []
    found = await conn.query(
        "SELECT pubname FROM pg_publication"
        f" WHERE starts_with(pubname, {quote_literal(prefix)}) ORDER BY pubname")
    names = [str(r[0]) for r in found.rows]
    for name in names:
        await conn.query(f"DROP PUBLICATION IF EXISTS {quote_ident(name)}")
    return names


async def drop_weir_slots(params: ConnectParams, prefix: str = SLOT_PREFIX,
                          include_active: bool = False) -> list[str]:
    """The admin command: drop weir's persistent slots (inactive ones unless told otherwise),
    then its publications in the connection's database once no weir slot there is active."""
    conn = await PgConnection.connect(params)
    try:
        dropped = []
        for slot in await list_slots(conn, prefix):
            if slot.temporary or (slot.active and not include_active):
                continue
            await drop_slot(conn, slot.name)
            dropped.append(slot.name)
        return dropped + [f"publication {name}" for name in await drop_orphan_publications(conn)]
    finally:
        await conn.close()
