"""A TransactionSink that records everything (shared by unit and integration tests)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.events import TableSchema, Transaction


@dataclass
class RecordingSink:
    schemas: list[TableSchema] = field(default_factory=list)
    resets: list[tuple[int, str]] = field(default_factory=list)
    reset_alls: list[str] = field(default_factory=list)
    transactions: list[Transaction] = field(default_factory=list)
    events: list[tuple[str, object]] = field(default_factory=list)
    barriers: list[tuple[str, int]] = field(default_factory=list)

    def barrier(self, barrier_id: str, lsn: int) -> None:
        """An ``on_barrier`` callback for the applier."""
        self.barriers.append((barrier_id, lsn))

    def table_schema(self, schema: TableSchema) -> None:
        self.schemas.append(schema)
        self.events.append(("schema", schema.name))

    def reset_table(self, schema: TableSchema, reason: str) -> None:
        self.resets.append((schema.oid, reason))
        self.events.append(("reset", schema.name))

    def reset_all(self, reason: str) -> None:
        self.reset_alls.append(reason)
        self.events.append(("reset_all", reason))

    def apply(self, txn: Transaction) -> None:
        self.transactions.append(txn)
        self.events.append(("apply", txn.xid))
