"""A finished bootstrap brought up to date: its Parquet loaded and the slot's changes applied.

Owns: :class:`Replica` (the manifest's tables as text rows by key, each partition with the
snapshot it was read under), applying decoded pgoutput transactions to it with the
per-partition rule (a transaction changes a partition's rows iff the partition's snapshot does
not see it), :func:`catch_up` (the slot's changes read with ``pg_logical_slot_peek_binary_
changes``, which does not consume them), and :func:`upstream_checksum` (the same row checksum
computed from the upstream table itself). Tests use it to prove a load exact; it is the
reference the local replica bases of ``weir serve`` follow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.bootstrap import catalog, copytext, manifest
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.plan import TableSpec, quote_ident, table_from_json
from cdc.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    PgoutputMessage,
    Relation,
    Truncate,
    Update,
    decode_message,
    parse_lsn,
)
from engine import Snapshot, extend_xid

Text = tuple[str | None, ...]


@dataclass(slots=True)
class LoadedTable:
    """One table's rows by key (a dict, or a mapping over a durable store)."""

    spec: TableSpec
    snapshots: list[Snapshot]
    rows: MutableMapping[Text, Text] = field(default_factory=dict)

    def key(self, row: tuple[Any, ...]) -> Text:
        return tuple(row[i] for i in self.spec.key_positions)

    def sees(self, row: tuple[Any, ...], xid: int) -> bool:
        """Whether the partition holding ``row``'s key already saw transaction ``xid``."""
        return self.snapshots[self.spec.partition_of_row(row)].visible(xid)

    def checksum(self) -> tuple[int, int]:
        return len(self.rows), copytext.checksum(map(copytext.row_hash, self.rows.values()))


def _text(kind: str, value: object) -> str | None:
    if value is None:
        return None
    if kind == "bool":
        return "t" if value else "f"
    return str(value)


@dataclass(slots=True)
class Replica:
    tables: dict[str, LoadedTable]
    slot: str
    publication: str
    lsn: int  # end of the last applied transaction (at first: the slot's consistent point)
    xid_reference: int
    applied: int = 0
    skipped: int = 0
    commit_lsn: int = 0  # commit LSN of the last applied transaction (0: none yet)
    _relations: dict[int, str] = field(default_factory=dict)
    _open: tuple[int, list[PgoutputMessage]] | None = None

    @classmethod
    def load(cls, out: str | Path) -> Replica:
        """The manifest's tables in memory, at the slot's consistent point."""
        data = read_manifest(out)
        replica = cls.empty(data)
        for t in data["tables"]:
            loaded = replica.tables[str(t["qualified"])]
            for row in parquet_rows(out, t):
                loaded.rows[loaded.key(row)] = row
        return replica

    @classmethod
    def empty(cls, data: dict[str, Any],
              rows: Callable[[TableSpec], MutableMapping[Text, Text]] | None = None) -> Replica:
        """A replica of the manifest ``data``'s tables with no rows yet (``rows``: the
        mapping each table keeps its rows in; default a dict)."""
        tables = {}
        for t in data["tables"]:
            spec = table_from_json(t)
            tables[spec.qualified] = LoadedTable(
                spec, [Snapshot.from_text(p["snapshot"]) for p in t["partitions"]],
                rows(spec) if rows else {})
        first = Snapshot.from_text(str(data["snapshot"]))
        return cls(tables, str(data["slot"]), str(data["publication"]),
                   parse_lsn(str(data["lsn"])), first.xmin)

    def feed(self, msg: PgoutputMessage) -> None:
        """One decoded pgoutput message, in stream order."""
        if isinstance(msg, Relation):
            self._relations[msg.oid] = f"{msg.namespace}.{msg.name}"
        elif isinstance(msg, Begin):
            self._open = (extend_xid(msg.xid, self.xid_reference), [])
        elif isinstance(msg, Commit):
            assert self._open is not None, "Commit without Begin"
            xid, changes = self._open
            self._open = None
            if msg.end_lsn <= self.lsn:  # already applied (a restart re-sent it)
                self.skipped += 1
                return
            for change in changes:
                self._apply(xid, change)
            self.applied += 1
            self.lsn, self.commit_lsn = msg.end_lsn, msg.commit_lsn
            self.xid_reference = max(self.xid_reference, xid)
        elif isinstance(msg, Insert | Update | Delete | Truncate) and self._open is not None:
            self._open[1].append(msg)

    def _table(self, oid: int) -> LoadedTable | None:
        return self.tables.get(self._relations.get(oid, ""))

    def _apply(self, xid: int, msg: PgoutputMessage) -> None:
        if isinstance(msg, Truncate):
            for oid in msg.relation_oids:
                t = self._table(oid)
                if t is not None:
                    for k in [k for k, r in t.rows.items() if not t.sees(r, xid)]:
                        del t.rows[k]
            return
        assert isinstance(msg, Insert | Update | Delete)
        t = self._table(msg.relation_oid)
        if t is None:
            return
        old = None if isinstance(msg, Insert) else msg.old
        if old is not None and not t.sees(old, xid):
            t.rows.pop(t.key(old), None)
        if isinstance(msg, Insert | Update):
            new = msg.new
            if not t.sees(new, xid):
                key = t.key(new)
                if UNCHANGED_TOAST in new:
                    prior = t.rows[t.key(old) if old is not None else key]
                    new = tuple(p if v is UNCHANGED_TOAST else v
                                for v, p in zip(new, prior, strict=True))
                t.rows[key] = new  # type: ignore[assignment]


def read_manifest(out: str | Path) -> dict[str, Any]:
    data = manifest.load_manifest(out)
    if data is None:
        raise BootstrapError(f"{out} has no manifest: the bootstrap is not finished")
    return data


def parquet_rows(out: str | Path, table: dict[str, Any]) -> Iterator[Text]:
    """The rows of one manifest table's Parquet files as text tuples."""
    import pyarrow.parquet as pq  # the [spark] extra: only bootstrapped bases need it

    spec = table_from_json(table)
    kinds = [c.kind for c in spec.columns]
    for p in table["partitions"]:
        cols = pq.read_table(Path(out) / spec.qualified / p["file"]).to_pydict()
        values = [[_text(k, v) for v in cols[c.name]]
                  for k, c in zip(kinds, spec.columns, strict=True)]
        yield from zip(*values, strict=True)


def catch_up(replica: Replica, dsn: str) -> int:
    """Apply every change the slot holds (up to the server's current end); returns how many
    transactions were applied. Does not consume the slot."""
    with catalog.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL,"
            " 'proto_version', '1', 'publication_names', %s)",
            (replica.slot, replica.publication)).fetchall()
    before = replica.applied
    for (data,) in rows:
        replica.feed(decode_message(bytes(data)))
    return replica.applied - before


def upstream_checksum(dsn: str, spec: TableSpec) -> tuple[int, int]:
    """(rows, checksum) of the upstream table now, computed like the bootstrap's."""
    cols = ", ".join(quote_ident(c.name) for c in spec.columns)
    rows, total, rest = 0, 0, b""
    with catalog.connect(dsn) as conn, conn.cursor() as cur, \
            cur.copy(f"COPY (SELECT {cols} FROM {spec.sql_name}) TO STDOUT") as copy:
        for chunk in copy:
            lines, rest = copytext.split_lines(rest, bytes(chunk))
            rows += len(lines)
            total += copytext.lines_checksum(lines)
    return rows, total & copytext.MASK64
