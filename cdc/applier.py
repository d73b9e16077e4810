"""The applier: pgoutput messages in, committed transactions out to a TransactionSink.

Owns: grouping each upstream transaction (Begin .. Commit) and handing it to the sink as one
batch at Commit; text -> canonical values (``engine.values``) per column type; replica
identity DEFAULT/INDEX (old key) and FULL (old row); unchanged-TOAST substitution from a full
old row; TRUNCATE; schema changes (a Relation whose columns or types differ from the known one
resets only that table, just before its transaction is applied, whose changes are all still
delivered); exactly-once (a transaction whose commit LSN is <= the applied commit
LSN is skipped); barrier markers (transactional ``weir`` messages) reported after their
transaction is applied.

Invariants: the sink sees transactions in commit order, each exactly once, never a partial
transaction; ``applied_end_lsn`` only moves forward and only after the sink applied the
transaction (it is what the stream may confirm upstream). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cdc.events import (
    UNCHANGED_TOAST,
    ChangeKind,
    ColumnSchema,
    Row,
    RowChange,
    TableSchema,
    Transaction,
    TransactionSink,
)
from cdc.pgoutput import UNCHANGED_TOAST as UNSENT
from cdc.pgoutput import (
    Begin,
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
)
from engine import TextValue, extend_xid, parser_for

BARRIER_PREFIX = "weir"


class ApplierError(Exception):
    """The message stream broke the protocol's transaction structure."""


@dataclass(slots=True)
class _Table:
    schema: TableSchema
    parsers: tuple[Callable[[str], Any], ...]


@dataclass(slots=True)
class _Open:
    begin: Begin
    skip: bool
    changes: list[RowChange] = field(default_factory=list)
    barriers: list[str] = field(default_factory=list)
    reset: dict[int, TableSchema] = field(default_factory=dict)


def _schema(rel: Relation) -> TableSchema:
    cols = tuple(ColumnSchema(c.name, c.type_oid, c.type_modifier, c.is_key) for c in rel.columns)
    return TableSchema(rel.oid, rel.namespace, rel.name, rel.replica_identity, cols)


def _same_shape(a: TableSchema, b: TableSchema) -> bool:
    return [(c.name, c.type_oid, c.type_modifier) for c in a.columns] == [
        (c.name, c.type_oid, c.type_modifier) for c in b.columns
    ]


class Applier:
    """Feed decoded pgoutput messages with :meth:`feed`; the sink receives the results."""

    def __init__(
        self,
        sink: TransactionSink,
        applied_commit_lsn: int = 0,
        on_barrier: Callable[[str, int], None] | None = None,
    ) -> None:
        self.sink = sink
        self.applied_commit_lsn = applied_commit_lsn
        self.applied_end_lsn = 0
        #: The latest 64-bit xid seen (or the upstream's next xid): extends 32-bit xids.
        self.xid_reference = 0
        self.on_barrier = on_barrier
        self.tables: dict[int, _Table] = {}
        self.skipped = 0
        self.applied = 0
        self._open: _Open | None = None
        self._handlers: dict[type, Callable[[Any], None]] = {
            Begin: self._begin, Commit: self._commit, Relation: self._relation,
            Insert: self._insert, Update: self._update, Delete: self._delete,
            Truncate: self._truncate, Message: self._message, Origin: self._ignore,
            Type: self._ignore,
        }

    @property
    def in_transaction(self) -> bool:
        return self._open is not None

    def feed(self, msg: PgoutputMessage) -> None:
        self._handlers[type(msg)](msg)

    def connection_lost(self) -> None:
        """Forget a transaction cut off by a disconnect (the upstream resends it whole)."""
        self._open = None

    # -- transaction structure --------------------------------------------------------------

    def _begin(self, msg: Begin) -> None:
        if self._open is not None:
            raise ApplierError(f"Begin of xid {msg.xid} inside xid {self._open.begin.xid}")
        self._open = _Open(msg, skip=msg.final_lsn <= self.applied_commit_lsn)

    def _tx(self, what: str) -> _Open:
        if self._open is None:
            raise ApplierError(f"{what} outside a transaction")
        return self._open

    def _commit(self, msg: Commit) -> None:
        tx = self._tx("Commit")
        self._open = None
        if tx.skip:
            self.skipped += 1
        else:
            for schema in tx.reset.values():
                self.sink.reset_table(schema, f"schema of {schema.namespace}.{schema.name} changed")
            changes = tuple(tx.changes)
            xid = extend_xid(tx.begin.xid, self.xid_reference)
            self.xid_reference = max(self.xid_reference, xid)
            self.sink.apply(Transaction(xid, msg.commit_lsn, changes))
            self.applied += 1
            self.applied_commit_lsn = msg.commit_lsn
        self.applied_end_lsn = max(self.applied_end_lsn, msg.end_lsn)
        if self.on_barrier is not None:
            for barrier in tx.barriers:
                self.on_barrier(barrier, msg.end_lsn)

    def _ignore(self, msg: Origin | Type) -> None:
        return None

    def _message(self, msg: Message) -> None:
        if msg.prefix != BARRIER_PREFIX:
            return
        content = msg.content.decode("utf-8", "replace")
        if msg.transactional:
            self._tx("transactional Message").barriers.append(content)
        elif self.on_barrier is not None:
            self.on_barrier(content, msg.lsn)

    # -- schemas ------------------------------------------------------------------------------

    def _relation(self, msg: Relation) -> None:
        schema = _schema(msg)
        known = self.tables.get(msg.oid)
        parsers = tuple(parser_for(c.type_oid) for c in schema.columns)
        self.tables[msg.oid] = _Table(schema, parsers)
        if known is not None and known.schema == schema:
            return
        tx = self._open
        if (known is not None and not _same_shape(known.schema, schema) and tx is not None
                and not tx.skip):
            tx.reset[msg.oid] = schema
        # always: the upstream sends a Relation once per session, maybe in a skipped transaction
        self.sink.table_schema(schema)

    # -- row changes --------------------------------------------------------------------------

    def _table(self, oid: int) -> _Table:
        table = self.tables.get(oid)
        if table is None:
            raise ApplierError(f"change for relation {oid} before its Relation message")
        return table

    def _values(self, table: _Table, data: TupleData) -> Row:
        parsers = table.parsers
        if len(data) != len(parsers):
            raise ApplierError(
                f"{table.schema.name}: tuple of {len(data)} columns, relation has {len(parsers)}"
            )
        try:
            return tuple([parse(raw) if raw.__class__ is str else
                          (UNCHANGED_TOAST if raw is UNSENT else raw)
                          for parse, raw in zip(parsers, data, strict=False)])
        except ValueError:
            return self._values_lenient(table, data)

    def _values_lenient(self, table: _Table, data: TupleData) -> Row:
        """Values that fail to parse stay text (``TextValue``) instead of failing the stream."""
        out: list[object] = []
        for parse, raw, col in zip(table.parsers, data, table.schema.columns, strict=True):
            if isinstance(raw, str):
                try:
                    out.append(parse(raw))
                except ValueError:
                    out.append(TextValue(col.type_oid, raw))
            else:
                out.append(UNCHANGED_TOAST if raw is UNSENT else raw)
        return tuple(out)

    def _add(self, change: RowChange) -> None:
        tx = self._tx("row change")
        if not tx.skip:
            tx.changes.append(change)

    def _old(self, table: _Table, kind: str, data: TupleData) -> Row:
        """The old row: whole under 'O'; key columns only under 'K' (others UNCHANGED_TOAST)."""
        old = self._values(table, data)
        if kind == "O":
            return old
        keys = set(table.schema.key_indexes)
        return tuple(v if i in keys else UNCHANGED_TOAST for i, v in enumerate(old))

    def _insert(self, msg: Insert) -> None:
        table = self._table(msg.relation_oid)
        if self._tx("Insert").skip:
            return
        self._add(RowChange(msg.relation_oid, ChangeKind.INSERT, None,
                            self._values(table, msg.new)))

    def _update(self, msg: Update) -> None:
        table = self._table(msg.relation_oid)
        if self._tx("Update").skip:
            return
        new = self._values(table, msg.new)
        old: Row | None = None
        if msg.old is not None:
            old = self._old(table, msg.old_kind, msg.old)
            if msg.old_kind == "O" and UNCHANGED_TOAST in new:
                new = tuple(o if n is UNCHANGED_TOAST else n for o, n in zip(old, new, strict=True))
        self._add(RowChange(msg.relation_oid, ChangeKind.UPDATE, old, new, msg.old_kind == "O"))

    def _delete(self, msg: Delete) -> None:
        table = self._table(msg.relation_oid)
        if self._tx("Delete").skip:
            return
        old = self._old(table, msg.old_kind, msg.old)
        self._add(RowChange(msg.relation_oid, ChangeKind.DELETE, old, None, msg.old_kind == "O"))

    def _truncate(self, msg: Truncate) -> None:
        tx = self._tx("Truncate")
        for oid in msg.relation_oids:
            self._table(oid)
            if not tx.skip:
                tx.changes.append(RowChange(oid, ChangeKind.TRUNCATE, None, None))
