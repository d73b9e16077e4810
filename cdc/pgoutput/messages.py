"""pgoutput protocol 1 messages as frozen dataclasses, named as in PostgreSQL's
"Logical Replication Message Formats" chapter.

Owns: the message and column types and the tuple-data value conventions:
- a column value is ``None`` (SQL NULL, 'n'), :data:`UNCHANGED_TOAST` ('u': an unchanged
  TOASTed value that was not sent; this package's own sentinel, which the applier turns into
  the engine's),
  ``str`` (text format 't', decoded as UTF-8) or ``bytes`` (binary format 'b', only with the
  ``binary`` option, which weir does not request);
- LSNs are unsigned 64-bit ints; timestamps are microseconds since 2000-01-01 UTC (PostgreSQL's
  epoch), kept as ints so this layer needs no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final


class UnchangedToast:
    """The single marker for a column value pgoutput did not send ('u')."""

    __slots__ = ()
    _instance: UnchangedToast | None = None

    def __new__(cls) -> UnchangedToast:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "pgoutput.UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = UnchangedToast()

#: One tuple-data column value (see module docstring).
ColumnValue = str | bytes | None | UnchangedToast
TupleData = tuple[ColumnValue, ...]

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: PostgreSQL's epoch in Unix seconds.
PG_EPOCH_UNIX = 946_684_800


def pg_timestamp(micros: int) -> datetime:
    """A PostgreSQL wire timestamp (µs since 2000-01-01 UTC) as an aware datetime."""
    return PG_EPOCH + timedelta(microseconds=micros)


def format_lsn(lsn: int) -> str:
    """``X/Y`` text form of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    commit_time: int
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int


@dataclass(frozen=True, slots=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class Column:
    flags: int
    name: str
    type_oid: int
    type_modifier: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


#: Replica identity settings as sent in Relation.replica_identity.
REPLICA_IDENTITY_DEFAULT = "d"
REPLICA_IDENTITY_NOTHING = "n"
REPLICA_IDENTITY_FULL = "f"
REPLICA_IDENTITY_INDEX = "i"


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Type:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    relation_oid: int
    new: TupleData


@dataclass(frozen=True, slots=True)
class Update:
    """``old_kind`` is 'K' (old key columns), 'O' (whole old row) or '' (no old tuple sent)."""

    relation_oid: int
    old_kind: str
    old: TupleData | None
    new: TupleData


@dataclass(frozen=True, slots=True)
class Delete:
    """``old_kind`` is 'K' (key columns only, the others None) or 'O' (the whole old row)."""

    relation_oid: int
    old_kind: str
    old: TupleData


TRUNCATE_CASCADE = 1
TRUNCATE_RESTART_IDENTITY = 2


@dataclass(frozen=True, slots=True)
class Truncate:
    options: int
    relation_oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Message:
    """A logical decoding message (``pg_logical_emit_message``)."""

    flags: int
    lsn: int
    prefix: str
    content: bytes

    @property
    def transactional(self) -> bool:
        return bool(self.flags & 1)


PgoutputMessage = (
    Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate | Message
)
