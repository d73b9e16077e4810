"""The durable store of local replica bases: one LMDB environment per weir.

Owns the layout (a ``meta`` database with the bootstrap's manifest, the applied position
``lsn`` (end of the last applied upstream transaction) and ``commit`` (its commit LSN, what a
replication stream resuming after it skips up to), the xid reference and a ``complete`` flag;
one database per table mapping the COPY text line of a row's key to the COPY text line of the
row), loading a manifest's Parquet (or any row source: ``build``) into it (marked complete only
at the end, so a half-loaded store is refused on open), and the row mapping the
:class:`~cdc.bootstrap.replay.Replica` applies changes through. Rows and position change in
the same LMDB write transaction, which LMDB makes durable (fsync) at commit: after a crash the
store is exactly as of some applied upstream transaction, and its ``lsn`` says which.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb

from cdc.bootstrap import copytext
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.plan import TableSpec, table_from_json
from cdc.bootstrap.replay import Replica, Text, parquet_rows, read_manifest

#: Default LMDB map size (the most the store may grow to; address space, not disk).
MAP_SIZE = 64 << 30
_META = b"meta"
_BATCH = 20_000
_DONE = b"done"


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


@dataclass(frozen=True, slots=True)
class Index:
    """A secondary index of one table: the COPY text line of ``columns``' values (at
    ``positions`` in a row) -> the key lines of the rows holding them (an LMDB database with
    sorted duplicates). Kept by every change of the table's rows from its creation on; it
    answers lookups only once a build has also passed every row that was there before
    (the ``meta`` entry ``name`` says how far: the next key line to index, or ``done``)."""

    name: bytes
    db: Any
    columns: tuple[str, ...]
    positions: tuple[int, ...]

    def entry(self, row: Text) -> bytes:
        return copytext.format_line([row[p] for p in self.positions])

    def line_entry(self, line: bytes) -> bytes:
        fields = line.split(b"\t")
        return b"\t".join([fields[p] for p in self.positions])


def index_name(qualified: str, columns: Iterable[str]) -> bytes:
    return f"ix {qualified}({','.join(columns)})".encode()


class StoreRows(MutableMapping[Text, Text]):
    """One table's rows in the store, through the store's current LMDB transaction (its
    secondary indexes kept with them)."""

    def __init__(self, store: BaseStore, db: Any, key_positions: tuple[int, ...] = (),
                 indexes: list[Index] | None = None) -> None:
        self.store, self.db, self.key_positions = store, db, key_positions
        self.indexes = [] if indexes is None else indexes

    @property
    def _txn(self) -> Any:
        if self.store.txn is None:
            raise RuntimeError("store rows used outside BaseStore.write() or read()")
        return self.store.txn

    def __getitem__(self, key: Text) -> Text:
        found = self._txn.get(copytext.format_line(key), db=self.db)
        if found is None:
            raise KeyError(key)
        return copytext.parse_line(bytes(found))

    def __setitem__(self, key: Text, row: Text) -> None:
        line = copytext.format_line(key)
        if self.indexes:
            self._unindex(line)
            for ix in self.indexes:
                self._txn.put(ix.entry(row), line, db=ix.db)
        self._txn.put(line, copytext.format_line(row), db=self.db)

    def __delitem__(self, key: Text) -> None:
        line = copytext.format_line(key)
        if self.indexes:
            self._unindex(line)
        if not self._txn.delete(line, db=self.db):
            raise KeyError(key)

    def _unindex(self, line: bytes) -> None:
        """Remove the index entries of the row stored under key ``line`` (if any)."""
        old = self._txn.get(line, db=self.db)
        if old is not None:
            for ix in self.indexes:
                self._txn.delete(ix.line_entry(bytes(old)), line, db=ix.db)

    def __iter__(self) -> Iterator[Text]:
        with self._txn.cursor(db=self.db) as cur:
            for key in cur.iternext(keys=True, values=False):
                yield copytext.parse_line(bytes(key))

    def __len__(self) -> int:
        return int(self._txn.stat(self.db)["entries"])

    def lines(self) -> Iterator[bytes]:
        """Every row's COPY text line (for checksums without parsing)."""
        with self._txn.cursor(db=self.db) as cur:
            for value in cur.iternext(keys=False, values=True):
                yield bytes(value)


class BaseStore:
    def __init__(self, env: Any, manifest: dict[str, Any]) -> None:
        self.env = env
        self.manifest = manifest
        self.meta = env.open_db(_META)
        self.txn: Any = None
        self.dbs = {t["qualified"]: env.open_db(str(t["qualified"]).encode())
                    for t in manifest["tables"]}
        #: secondary indexes by table (the lists the tables' StoreRows keep)
        self.indexes: dict[str, list[Index]] = {name: [] for name in self.dbs}
        self._open_indexes()

    def _open_indexes(self) -> None:
        """The indexes created earlier (their ``meta`` entries), kept from now on."""
        with self.env.begin() as txn, txn.cursor(db=self.meta) as cur:
            names = [bytes(k) for k in cur.iternext(keys=True, values=False)
                     if bytes(k).startswith(b"ix ")]
        for name in names:
            qualified, _, cols = name[3:].decode().rstrip(")").partition("(")
            spec = next((table_from_json(t) for t in self.manifest["tables"]
                         if t["qualified"] == qualified), None)
            if spec is not None:
                self._add_index(spec, tuple(cols.split(",")), name)

    def _add_index(self, spec: TableSpec, columns: tuple[str, ...], name: bytes) -> Index:
        names = [c.name for c in spec.columns]
        ix = Index(name, self.env.open_db(name, dupsort=True), columns,
                   tuple(names.index(c) for c in columns))
        self.indexes[spec.qualified].append(ix)
        return ix

    def create_index(self, spec: TableSpec, columns: tuple[str, ...]) -> Index:
        """A new (empty, unbuilt) index of ``spec``'s ``columns``, kept from now on; no write
        transaction may be open (LMDB creates the database in its own)."""
        name = index_name(spec.qualified, columns)
        ix = self._add_index(spec, columns, name)
        with self.env.begin(write=True) as txn:
            txn.put(name, b"", db=self.meta)
        return ix

    def build_index(self, ix: Index, table: str, seconds: float) -> bool:
        """Index the rows from where the build stopped, for about ``seconds`` (inside
        :meth:`write`: the position is saved with the entries); True once done."""
        txn = self.txn
        start = bytes(txn.get(ix.name, b"", db=self.meta))
        if start == _DONE:
            return True
        deadline = time.monotonic() + seconds
        with txn.cursor(db=self.dbs[table]) as cur:
            more = cur.set_range(start) if start else cur.first()
            count = 0
            while more:
                key, line = bytes(cur.key()), bytes(cur.value())
                if count % 256 == 0 and count and time.monotonic() > deadline:
                    txn.put(ix.name, key, db=self.meta)
                    return False
                txn.put(ix.line_entry(line), key, db=ix.db)
                count += 1
                more = cur.next()
        txn.put(ix.name, _DONE, db=self.meta)
        return True

    @staticmethod
    def _env(path: str | Path, map_size: int, durable: bool = True) -> Any:
        """``durable=False``: no fsync at commit (bases in memory, on a tmpfs)."""
        Path(path).mkdir(parents=True, exist_ok=True)
        return lmdb.open(str(path), map_size=map_size, max_dbs=256, subdir=True,
                         sync=durable, metasync=durable)

    @classmethod
    def create(cls, path: str | Path, manifest_dir: str | Path,
               map_size: int = MAP_SIZE) -> BaseStore:
        """Load a finished bootstrap into a new store at ``path``."""
        return cls.build(path, read_manifest(manifest_dir),
                         lambda t: parquet_rows(manifest_dir, t), map_size)

    @classmethod
    def build(cls, path: str | Path, data: dict[str, Any],
              rows_of: Callable[[dict[str, Any]], Iterable[Text | bytes]],
              map_size: int = MAP_SIZE, durable: bool = True) -> BaseStore:
        """A new store at ``path`` holding manifest ``data``'s tables, each table's rows from
        ``rows_of(its manifest entry)`` (text tuples, or COPY text lines as PostgreSQL writes
        them, stored as they are); marked complete only once every row is in."""
        env = cls._env(path, map_size, durable)
        meta = env.open_db(_META)
        with env.begin() as txn:
            if txn.get(b"complete", db=meta) is not None:
                raise BootstrapError(f"{path} already holds local bases; remove it first")
        store = cls(env, data)
        replica = store.replica(fresh=True)
        for t in data["tables"]:
            rows = replica.tables[t["qualified"]]
            batch: list[Text | bytes] = []
            for row in rows_of(t):
                batch.append(row)
                if len(batch) >= _BATCH:
                    store._put(rows.rows, rows.key, batch)
            store._put(rows.rows, rows.key, batch)
        with store.write():
            store.txn.put(b"manifest", json.dumps(data).encode(), db=store.meta)
            store.save_position(replica)
            store.txn.put(b"complete", b"1", db=store.meta)
        return store

    def _put(self, rows: MutableMapping[Text, Text], key: Any, batch: list[Text | bytes]
             ) -> None:
        assert isinstance(rows, StoreRows)
        positions = rows.key_positions
        with self.write():
            for row in batch:
                if isinstance(row, bytes):  # a COPY line: its key's line is its key fields
                    fields = row.split(b"\t")
                    self.txn.put(b"\t".join([fields[i] for i in positions]), row, db=rows.db)
                else:
                    rows[key(row)] = row
        batch.clear()

    @classmethod
    def open(cls, path: str | Path, map_size: int = MAP_SIZE) -> BaseStore:
        """Reopen a store (a warm restart): refused if its load never completed."""
        if not (Path(path) / "data.mdb").exists():
            raise BootstrapError(f"{path} holds no local bases: load a bootstrap first")
        env = cls._env(path, map_size)
        meta = env.open_db(_META)
        with env.begin() as txn:
            if txn.get(b"complete", db=meta) is None:
                raise BootstrapError(f"{path}: loading the bases never finished; load again")
            data = json.loads(bytes(txn.get(b"manifest", db=meta)))
        return cls(env, data)

    def replica(self, fresh: bool = False) -> Replica:
        """The tables as a Replica whose rows are this store's (at the durable position)."""
        replica = Replica.empty(self.manifest, rows=self._rows)
        if not fresh:
            with self.env.begin() as txn:
                replica.lsn = int.from_bytes(txn.get(b"lsn", db=self.meta), "big")
                replica.xid_reference = int.from_bytes(txn.get(b"xid", db=self.meta), "big")
                replica.commit_lsn = int.from_bytes(txn.get(b"commit", db=self.meta)
                                                    or _u64(0), "big")
        return replica

    def _rows(self, spec: TableSpec) -> StoreRows:
        return StoreRows(self, self.dbs[spec.qualified], spec.key_positions,
                         self.indexes[spec.qualified])

    @contextmanager
    def write(self) -> Iterator[None]:
        """One LMDB write transaction: committed (durably) when the block ends normally."""
        with self.env.begin(write=True) as txn:
            self.txn = txn
            try:
                yield
            finally:
                self.txn = None

    @contextmanager
    def read(self) -> Iterator[None]:
        with self.env.begin() as txn:
            self.txn = txn
            try:
                yield
            finally:
                self.txn = None

    def save_position(self, replica: Replica) -> None:
        """Record the replica's applied position (inside :meth:`write`)."""
        self.txn.put(b"lsn", _u64(replica.lsn), db=self.meta)
        self.txn.put(b"xid", _u64(replica.xid_reference), db=self.meta)
        self.txn.put(b"commit", _u64(replica.commit_lsn), db=self.meta)

    @property
    def durable_lsn(self) -> int:
        with self.env.begin() as txn:
            return int.from_bytes(txn.get(b"lsn", db=self.meta) or _u64(0), "big")

    def checksums(self) -> dict[str, tuple[int, int]]:
        """(rows, checksum) per table, as of one consistent read."""
        found = {}
        with self.read():
            for name, db in self.dbs.items():
                rows = StoreRows(self, db)
                found[name] = (len(rows), copytext.lines_checksum(rows.lines()))
        return found

    def close(self) -> None:
        self.env.close()
