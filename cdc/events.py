"""What the CDC applier hands to the engine: committed transactions, schemas and resets.

Owns: the frozen dataclasses of the applier's output and the :class:`TransactionSink`
protocol the engine (or a test) implements. Wiring the engine in is one adapter implementing
these four methods.

Row conventions:
- ``RowChange.new`` and ``.old`` hold canonical values (see ``engine.values``) in the order of
  the table's columns as of that change; ``None`` is SQL NULL;
- :data:`UNCHANGED_TOAST` stands for a TOASTed column the upstream did not send (its value is
  unchanged by this update). The applier already substituted it from the old row when the
  upstream sent the whole old row (REPLICA IDENTITY FULL), so it only appears in ``new`` of an
  update under REPLICA IDENTITY DEFAULT/INDEX: the engine takes it from state or evicts;
- ``old_key_only`` is True when ``old`` carries only the replica identity key columns (the
  others are None): REPLICA IDENTITY DEFAULT/INDEX. For an update that did not change the key
  the upstream sends no old tuple; the applier then builds ``old`` from the new row's key
  columns (so ``old`` is never None for updates and deletes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from cdc.pgoutput import UNCHANGED_TOAST

__all__ = [
    "UNCHANGED_TOAST",
    "ColumnSchema",
    "RowChange",
    "TableSchema",
    "Transaction",
    "TransactionSink",
]

ChangeKind = Literal["insert", "update", "delete", "truncate"]
Row = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A published table as the latest Relation message described it."""

    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[ColumnSchema, ...]

    @property
    def key_indexes(self) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.columns) if c.is_key)


@dataclass(frozen=True, slots=True)
class RowChange:
    table_oid: int
    kind: ChangeKind
    old: Row | None
    new: Row | None
    old_key_only: bool = False


@dataclass(frozen=True, slots=True)
class Transaction:
    """One upstream transaction, applied as one batch. xid is the 32-bit upstream xid."""

    xid: int
    commit_lsn: int
    end_lsn: int
    commit_time: int
    changes: tuple[RowChange, ...]
    barriers: tuple[str, ...] = ()


class TransactionSink(Protocol):
    def table_schema(self, schema: TableSchema) -> None:
        """A table's (new or first-seen) schema; called before changes that use it."""

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        """The table's columns or types changed: drop every state derived from it.

        Called just before ``apply`` of the transaction that carried the new schema; that
        transaction's changes to this table are not delivered (state for the table is invalid
        as of that commit and must be refilled, or reloaded for a replica base).
        """

    def reset_all(self, reason: str) -> None:
        """Continuity with the upstream was lost: drop every cached state."""

    def apply(self, txn: Transaction) -> None:
        """Apply one committed transaction atomically (in commit order)."""
