"""Sans-I/O pgoutput (protocol 1) decoding and the streaming replication CopyData messages.

Public API: :func:`decode_message` (payload -> message dataclass), the message classes,
:data:`UNCHANGED_TOAST`, :class:`PgoutputError`, :func:`decode_copy_data`,
:func:`standby_status_update`, LSN helpers. Imports no asyncio, socket, ssl or clock.
"""

from __future__ import annotations

from cdc.pgoutput.copyboth import (
    PrimaryKeepalive,
    XLogData,
    decode_copy_data,
    standby_status_update,
)
from cdc.pgoutput.decoder import PgoutputError, decode_message
from cdc.pgoutput.messages import (
    PG_EPOCH_UNIX,
    REPLICA_IDENTITY_DEFAULT,
    REPLICA_IDENTITY_FULL,
    REPLICA_IDENTITY_INDEX,
    REPLICA_IDENTITY_NOTHING,
    UNCHANGED_TOAST,
    Begin,
    Column,
    ColumnValue,
    Commit,
    Delete,
    Insert,
    Message,
    Origin,
    PgoutputMessage,
    Relation,
    Truncate,
    TupleData,
    Type,
    Update,
    format_lsn,
    parse_lsn,
    pg_timestamp,
)

__all__ = [
    "PG_EPOCH_UNIX",
    "REPLICA_IDENTITY_DEFAULT",
    "REPLICA_IDENTITY_FULL",
    "REPLICA_IDENTITY_INDEX",
    "REPLICA_IDENTITY_NOTHING",
    "UNCHANGED_TOAST",
    "Begin",
    "Column",
    "ColumnValue",
    "Commit",
    "Delete",
    "Insert",
    "Message",
    "Origin",
    "PgoutputError",
    "PgoutputMessage",
    "PrimaryKeepalive",
    "Relation",
    "Truncate",
    "TupleData",
    "Type",
    "Update",
    "XLogData",
    "decode_copy_data",
    "decode_message",
    "format_lsn",
    "parse_lsn",
    "pg_timestamp",
    "standby_status_update",
]
