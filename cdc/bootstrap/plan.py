"""What a bootstrap loads: tables, their columns and keys, and the partitions of each table.

Owns: the frozen description of one bootstrap (``Plan``: upstream identity, slot, publication,
consistent point, first snapshot, ``TableSpec`` per table), how a table is cut into partitions
(``Partitioning``: ``range`` over an integer leading key column, ``hash`` of the key's text
otherwise), the SQL predicate of each partition, the partition a key belongs to (computed from
the key's text values, so rows patched from the replication stream are placed exactly as the
upstream query placed them), and the JSON form of all of it. No I/O.

Partitions are predicates on the key, never ctid ranges: an update moves a row to another block,
so a block range is not a property of the row and could not be patched per partition.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Any

#: Arrow/Parquet column kinds by PostgreSQL type. Every other type (floats and numerics
#: included) is kept as its exact PostgreSQL text: a float's text does not round-trip through
#: a binary double into the same digits PostgreSQL prints.
KINDS = {"smallint": "int16", "integer": "int32", "bigint": "int64", "boolean": "bool"}
INTEGER_TYPES = frozenset({"smallint", "integer", "bigint"})
#: Separator of key columns in the hash partitioning (cannot occur in PostgreSQL text output
#: of the types a key is made of in practice; a key containing it still hashes consistently).
KEY_SEPARATOR = "\x1f"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # format_type() of the column
    kind: str  # an Arrow kind from KINDS, or "text"
    #: pg_attribute's atttypid and atttypmod (what a pgoutput Relation message says of the
    #: column; 0 when unknown: manifests written before they were recorded)
    type_oid: int = 0
    typmod: int = -1


@dataclass(frozen=True, slots=True)
class Partitioning:
    """``range``: ``bounds`` split ``column`` (an integer) into len(bounds)+1 ranges;
    ``hash``: ``count`` buckets of the MD5 of the key's text values."""

    kind: str
    count: int
    column: str | None = None
    bounds: tuple[int, ...] = ()

    def predicate(self, index: int, key: tuple[str, ...]) -> str:
        if self.count == 1:
            return "TRUE"
        if self.kind == "range":
            col = quote_ident(self.column or "")
            parts = []
            if index > 0:
                parts.append(f"{col} >= {self.bounds[index - 1]}")
            if index < len(self.bounds):
                parts.append(f"{col} < {self.bounds[index]}")
            return " AND ".join(parts)
        text = ", ".join(f"{quote_ident(k)}::text" for k in key)
        return (f"('x' || substr(md5(concat_ws(E'\\x1f', {text})), 1, 8))::bit(32)::bigint"
                f" % {self.count} = {index}")

    def partition_of(self, key_values: tuple[str | None, ...], key_index: int = 0) -> int:
        """The partition holding the row whose key columns' text values are ``key_values``
        (``key_index``: position of the range column among them)."""
        if self.count == 1:
            return 0
        if self.kind == "range":
            return bisect.bisect_right(self.bounds, int(key_values[key_index] or 0))
        joined = KEY_SEPARATOR.join(v or "" for v in key_values)
        digest = hashlib.md5(joined.encode("utf-8"), usedforsecurity=False).hexdigest()
        return int(digest[:8], 16) % self.count


def even_bounds(low: int, high: int, count: int) -> tuple[int, ...]:
    """``count - 1`` bounds cutting [low, high] into ``count`` ranges of equal width."""
    width = high - low + 1
    if count <= 1 or width <= 1:
        return ()
    count = min(count, width)
    return tuple(low + width * i // count for i in range(1, count))


@dataclass(frozen=True, slots=True)
class TableSpec:
    schema: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    partitioning: Partitioning
    estimated_rows: int

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def sql_name(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    @property
    def key_positions(self) -> tuple[int, ...]:
        names = [c.name for c in self.columns]
        return tuple(names.index(k) for k in self.key)

    def partition_of_row(self, row: tuple[str | None, ...]) -> int:
        key = tuple(row[i] for i in self.key_positions)
        column = self.partitioning.column
        return self.partitioning.partition_of(key, self.key.index(column) if column else 0)

    def select_sql(self, index: int) -> str:
        cols = ", ".join(quote_ident(c.name) for c in self.columns)
        where = self.partitioning.predicate(index, self.key)
        return f"SELECT {cols} FROM {self.sql_name} WHERE {where}"


@dataclass(frozen=True, slots=True)
class Plan:
    """One bootstrap, fixed at its first run (a resumed run reloads it)."""

    system_identifier: str
    database: str
    slot: str
    publication: str
    lsn: int  # the slot's consistent point: CDC for these tables starts here
    snapshot_name: str  # the exported snapshot of the first run
    snapshot: str  # pg_current_snapshot() text of the first run
    tables: tuple[TableSpec, ...] = field(default_factory=tuple)

    def table(self, qualified: str) -> TableSpec:
        for t in self.tables:
            if t.qualified == qualified:
                return t
        raise KeyError(qualified)

    def tasks(self) -> list[tuple[str, int]]:
        return [(t.qualified, i) for t in self.tables for i in range(t.partitioning.count)]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "system_identifier": self.system_identifier,
            "database": self.database,
            "slot": self.slot,
            "publication": self.publication,
            "lsn": self.lsn,
            "snapshot_name": self.snapshot_name,
            "snapshot": self.snapshot,
            "tables": [table_to_json(t) for t in self.tables],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        if data.get("version") != 1:
            raise ValueError(f"unknown bootstrap plan version {data.get('version')!r}")
        return cls(
            str(data["system_identifier"]), str(data["database"]), str(data["slot"]),
            str(data["publication"]), int(data["lsn"]), str(data["snapshot_name"]),
            str(data["snapshot"]), tuple(table_from_json(t) for t in data["tables"]),
        )


def table_to_json(t: TableSpec) -> dict[str, Any]:
    p = t.partitioning
    return {
        "schema": t.schema, "name": t.name,
        "columns": [{"name": c.name, "type": c.type, "kind": c.kind, "oid": c.type_oid,
                     "typmod": c.typmod} for c in t.columns],
        "key": list(t.key),
        "partitioning": {"kind": p.kind, "count": p.count, "column": p.column,
                         "bounds": list(p.bounds)},
        "estimated_rows": t.estimated_rows,
    }


def table_from_json(d: dict[str, Any]) -> TableSpec:
    p = d["partitioning"]
    return TableSpec(
        str(d["schema"]), str(d["name"]),
        tuple(Column(str(c["name"]), str(c["type"]), str(c["kind"]), int(c.get("oid", 0)),
                     int(c.get("typmod", -1))) for c in d["columns"]),
        tuple(str(k) for k in d["key"]),
        Partitioning(str(p["kind"]), int(p["count"]), p.get("column"),
                     tuple(int(b) for b in p.get("bounds", ()))),
        int(d["estimated_rows"]),
    )
