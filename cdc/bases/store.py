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
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from cdc.bootstrap import copytext
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.plan import TableSpec
from cdc.bootstrap.replay import Replica, Text, parquet_rows, read_manifest

#: Default LMDB map size (the most the store may grow to; address space, not disk).
MAP_SIZE = 64 << 30
_META = b"meta"
_BATCH = 20_000


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


class StoreRows(MutableMapping[Text, Text]):
    """One table's rows in the store, through the store's current LMDB transaction."""

    def __init__(self, store: BaseStore, db: Any, key_positions: tuple[int, ...] = ()) -> None:
        self.store, self.db, self.key_positions = store, db, key_positions

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
        self._txn.put(copytext.format_line(key), copytext.format_line(row), db=self.db)

    def __delitem__(self, key: Text) -> None:
        if not self._txn.delete(copytext.format_line(key), db=self.db):
            raise KeyError(key)

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

    @staticmethod
    def _env(path: str | Path, map_size: int) -> Any:
        Path(path).mkdir(parents=True, exist_ok=True)
        return lmdb.open(str(path), map_size=map_size, max_dbs=256, subdir=True)

    @classmethod
    def create(cls, path: str | Path, manifest_dir: str | Path,
               map_size: int = MAP_SIZE) -> BaseStore:
        """Load a finished bootstrap into a new store at ``path``."""
        return cls.build(path, read_manifest(manifest_dir),
                         lambda t: parquet_rows(manifest_dir, t), map_size)

    @classmethod
    def build(cls, path: str | Path, data: dict[str, Any],
              rows_of: Callable[[dict[str, Any]], Iterable[Text | bytes]],
              map_size: int = MAP_SIZE) -> BaseStore:
        """A new store at ``path`` holding manifest ``data``'s tables, each table's rows from
        ``rows_of(its manifest entry)`` (text tuples, or COPY text lines as PostgreSQL writes
        them, stored as they are); marked complete only once every row is in."""
        env = cls._env(path, map_size)
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
        return StoreRows(self, self.dbs[spec.qualified], spec.key_positions)

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
