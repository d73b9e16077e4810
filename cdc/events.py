"""What the CDC applier hands to the engine: committed transactions, schemas and resets.

Owns: the schema dataclasses and the :class:`TransactionSink` protocol the engine (or a
test) implements. Transactions and row changes are the engine's own input types
(``engine.changes``: ``Transaction``, ``RowChange``, ``ChangeKind``, ``UNCHANGED_TOAST``),
produced exactly per that module's contract: 64-bit xids, rows of canonical values in column
order; for update/delete ``old`` is None when the upstream sent no old tuple, carries the key
columns with the others ``UNCHANGED_TOAST`` under REPLICA IDENTITY DEFAULT/INDEX, or the whole
row (``old_full``) under FULL. Unchanged TOAST columns of ``new`` are filled from a full old
row when there is one, so they stay ``UNCHANGED_TOAST`` only when the state must supply them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine import UNCHANGED_TOAST, ChangeKind, Row, RowChange, Transaction

__all__ = [
    "UNCHANGED_TOAST",
    "ChangeKind",
    "ColumnSchema",
    "Row",
    "RowChange",
    "TableSchema",
    "Transaction",
    "TransactionSink",
]


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


class TransactionSink(Protocol):
    def table_schema(self, schema: TableSchema) -> None:
        """A table's (new or first-seen) schema; called before changes that use it."""

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        """The table's columns or types changed: drop every state derived from it.

        Called just before ``apply`` of the transaction that carried the new schema. That
        transaction's changes are still delivered (the engine's recent-transaction log needs
        them for fills whose snapshot does not yet see the transaction); each row has the
        columns of the schema in force when it was changed, which is the new one except for
        rows changed before the DDL in the same transaction.
        """

    def reset_all(self, reason: str) -> None:
        """Continuity with the upstream was lost: drop every cached state."""

    def apply(self, txn: Transaction) -> None:
        """Apply one committed transaction atomically (in commit order)."""
