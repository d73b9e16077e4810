"""Local bases inside ``weir serve``: the store fed by weir's own replication stream, and
fills answered from it.

Owns :class:`LocalBases`: opening the store (``weir bootstrap`` + ``weir bases load``), or
loading it from one snapshot (:mod:`cdc.bases.snapshot_load`) when the directory holds none
and tables are named; the stream's ``tap`` (every decoded pgoutput message, before the applier
sees it: a Commit is applied to the store inside an open LMDB write transaction, the batch, so
store and engine change in the same synchronous step); ``durable_lsn`` (commits the batch - one
fsync for about a second of transactions - and returns what the stream may confirm upstream:
after a crash the store is exactly as of some applied transaction at or after it); ``check``
(before each replication session: the slot still exists, kept its WAL and was not confirmed
past the durable position - else :class:`~cdc.bases.follow.BasesLost`) and ``load`` (again);
the shape checks (a local table's columns, names or types, changed upstream: seen in a
Relation message, ``tap``, or against the catalog, ``changed_columns``; either makes the bases
stale: a type change rewrites every row's text and the stream carries none of it); bases in
memory (``--local-bases memory``: an LMDB without fsync in a directory on a tmpfs, loaded at
every start, removed with its slot at close); secondary indexes (``build_indexes``); and
``rows(run)``: a fill's rows read from the store (through the open batch), decoded as the
applier decodes pgoutput text, when every table it reads is local (None otherwise: the fill
goes upstream).

Why a local fill needs no snapshot, marker or patch: between two stream messages the store
holds exactly the transactions the engine has applied (both change at the same Commit, in one
event-loop step, and nothing else writes the store), so rows read from it are the table as of
the applied position, which is what an upstream fill reaches only after patching.

Lookups: equality on the whole primary key (integer or text key columns) is one LMDB get;
equality on other integer or text columns is a secondary index's range when one is built
(a lookup on a table of more than ``SCAN_ROWS`` rows without one goes upstream and asks for
it: ``build_indexes`` builds it a slice a heartbeat, inside the batch, while every applied
change keeps it); a whole table, or other columns of a table of at most ``SCAN_ROWS`` rows,
is a scan; other lookups go upstream.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc.bases.follow import BasesLost, check_slot
from cdc.bases.store import BaseStore
from cdc.bootstrap import copytext
from cdc.bootstrap.errors import BootstrapError
from cdc.bootstrap.plan import TableSpec, quote_ident, table_from_json
from cdc.bootstrap.replay import Replica
from cdc.bootstrap.snapshot import drop_slot
from cdc.connection import ConnectParams, PgConnection
from cdc.pgoutput import Commit, PgoutputMessage, Relation
from engine import FillRequest, Row, RunFill, decode_text, span_of

log = logging.getLogger("weir.bases")

#: ``--local-bases`` value for bases in memory
MEMORY = "memory"
#: largest local table a lookup on other columns than its key may scan (in the event loop)
SCAN_ROWS = 10_000
#: seconds of index building per heartbeat (in the event loop)
INDEX_SECONDS = 0.02
#: the local tables' columns upstream now ($1: their SQL names), in the order of
#: :meth:`LocalBases.changed_columns`'s argument
COLUMNS_QUERY = """
    SELECT n, a.attname::text, a.atttypid::int8, a.atttypmod, format_type(a.atttypid, a.atttypmod)
    FROM unnest($1::text[]) WITH ORDINALITY AS t(n, i)
    JOIN pg_attribute a ON a.attrelid = to_regclass(t.n)
    WHERE a.attnum > 0 AND NOT a.attisdropped ORDER BY t.i, a.attnum"""
#: key column types whose engine value's ``str`` is PostgreSQL's text output
_DIRECT_KEY_TYPES = frozenset({20, 21, 23, 25, 1043})


@dataclass(frozen=True, slots=True)
class _Base:
    """One local table, as the engine's ``TableRef`` names its columns."""

    spec: TableSpec
    db: Any
    by_name: dict[str, int]  # column name -> position in the store's rows
    #: column name -> type oid of the rows' text in the store (0: not recorded)
    type_oids: dict[str, int]


class LocalBases:
    """See the module docstring. ``tables``: SQL names loaded from one snapshot when ``path``
    holds no complete store (and on reload when the store's own list is unknown)."""

    def __init__(self, path: str, upstream_url: str, tables: Sequence[str] = (),
                 slot: str | None = None, publication: str | None = None) -> None:
        #: ``path`` MEMORY: the bases live in memory (a fresh LMDB on a tmpfs, no fsync),
        #: loaded from one snapshot at every start and removed at close
        self.memory = path == MEMORY
        self.upstream_url = upstream_url
        self.tables = tuple(tables)
        # in memory, a directory and slot of fixed names: a weir killed with them is
        # replaced at the next start (a load empties the directory and drops a slot of its
        # name first) instead of leaving them behind
        tag = _memory_tag(upstream_url, self.tables, slot) if self.memory \
            else uuid.uuid4().hex[:12]
        self.path = _memory_dir(tag) if self.memory else Path(path)
        self.store: BaseStore | None = None
        self.replica: Replica | None = None
        #: local fills allowed (after a load from one snapshot at once; a bootstrap's store
        #: once the host's first barrier passed)
        self.ready = False
        self.local_fills = 0
        #: why the bases must be loaded again before they are followed (set by a DDL)
        self.stale: str | None = None
        #: the local tables' relation oids upstream (set by the host once it looked them up)
        self.oids: frozenset[int] = frozenset()
        self.loads = 0  # loads from one snapshot (the first, and reloads)
        #: secondary indexes lookups wanted ((table, sorted columns) -> table), built a slice
        #: a heartbeat by ``build_indexes`` (again after a reload)
        self.wanted: dict[tuple[str, tuple[str, ...]], TableSpec] = {}
        self._bases: dict[tuple[str, str], _Base] = {}
        self._batch: Any = None  # the open LMDB write transaction of applied transactions
        self._durable = (0, 0, 0)  # (lsn, commit LSN, xid reference) of the last flush
        self._batch_thread = 0
        if self.memory and not self.tables:
            raise BootstrapError("--local-bases memory: name the tables to load from one "
                                 "snapshot (--local-tables)")
        try:
            if not self.memory:
                self._attach(BaseStore.open(self.path))
        except BootstrapError as exc:
            if not self.tables:
                raise BootstrapError(f"--local-bases {path}: {exc}; or name tables to load "
                                     "from one snapshot (--local-tables)") from None
            log.info("local bases %s: %s; they are loaded from one snapshot", path, exc)
        if self.memory:
            log.info("local bases in memory at %s: loaded from one snapshot", self.path)
        manifest: dict[str, Any] = self.store.manifest if self.store is not None else {}
        self.slot = str(manifest.get("slot") or slot or f"weir_bases_{tag}")
        self.publication = str(manifest.get("publication") or publication
                               or f"weir_pub_bases_{tag}")

    def _attach(self, store: BaseStore) -> None:
        self.store, self.replica = store, store.replica()
        r = self.replica
        self._durable = (r.lsn, r.commit_lsn, r.xid_reference)
        self.tables = self.tables or tuple(
            f"{quote_ident(t['schema'])}.{quote_ident(t['name'])}"
            for t in store.manifest["tables"])
        self._bases = {}
        for t in store.manifest["tables"]:
            spec = table_from_json(t)
            self._bases[(spec.schema, spec.name)] = _Base(
                spec, store.dbs[spec.qualified],
                {c.name: i for i, c in enumerate(spec.columns)},
                {c.name: c.type_oid for c in spec.columns})

    # -- loading ------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self.store is not None

    def load(self) -> None:
        """(Re)load every table from one snapshot of a new slot named ``slot`` (blocking: run
        it in a thread). The old store's files are removed first; a load cut short leaves a
        store that is never marked complete, so the next start loads again."""
        from cdc.bases import snapshot_load

        self.ready = False
        self.abort()
        if self.store is not None:
            self.store.close()
            self.store = self.replica = None
        for name in ("data.mdb", "lock.mdb"):  # the store's files only, not the directory
            (self.path / name).unlink(missing_ok=True)
        self._attach(snapshot_load.load(self.path, self.upstream_url, self.tables, self.slot,
                                        self.publication, durable=not self.memory))
        self.stale = None
        self.ready = True  # exact at the slot's consistent point, where the stream starts
        self.loads += 1

    def relation_names(self) -> list[str]:
        """The local tables' SQL names (to look up their relation oids)."""
        return [f"{quote_ident(s)}.{quote_ident(n)}" for s, n in self._bases]

    async def check(self) -> None:
        """Raise ``BasesLost`` if the slot can no longer bring the store up to date."""
        self.flush()
        assert self.replica is not None
        conn = await PgConnection.connect(ConnectParams.from_url(self.upstream_url),
                                          replication=True)
        try:
            await check_slot(conn, self.slot, self.replica.lsn)
        finally:
            await conn.close()

    # -- following ----------------------------------------------------------------------------

    @property
    def resume(self) -> tuple[int, int]:
        """(commit LSN, end LSN) of the last transaction durably in the store."""
        return self._durable[1], self._durable[0]

    def durable_lsn(self) -> int:
        """Commit the open batch (fsync) and return the end of the last upstream transaction
        the store now holds durably: the stream calls it for each status update, so nothing
        is confirmed upstream before it is on disk, and a batch stays open about a second."""
        self.flush()
        return self._durable[0]

    def flush(self) -> None:
        """Commit the open batch of applied transactions, durably (only from the thread that
        applies them: the event loop's; a call from elsewhere, a metrics scrape say, leaves
        the batch to it)."""
        txn, store = self._batch, self.store
        if txn is None or store is None or self.replica is None \
                or threading.get_ident() != self._batch_thread:
            return
        self._batch = store.txn = None
        txn.commit()
        r = self.replica
        self._durable = (r.lsn, r.commit_lsn, r.xid_reference)

    def tap(self, msg: PgoutputMessage) -> None:
        """One decoded message, before the applier: a Commit's changes are applied to the
        store inside the open batch (an LMDB write transaction that ``flush`` commits), which
        local fills read through, so they see it at once."""
        store, replica = self.store, self.replica
        assert store is not None and replica is not None
        if isinstance(msg, Relation):
            self._check_shape(msg)
        if not isinstance(msg, Commit):
            replica.feed(msg)
            return
        if self._batch is None:
            self._batch = store.txn = store.env.begin(write=True)
            self._batch_thread = threading.get_ident()
        try:
            replica.feed(msg)
            store.save_position(replica)
        except BaseException:  # the batch may hold part of it: drop back to the durable state
            self.abort()
            raise

    def _check_shape(self, rel: Relation) -> None:
        """A local table whose columns changed (DDL: a column added, dropped or renamed, or
        its type changed) cannot be kept by the store, whose rows are texts of the old
        types: drop the batch, stop local fills and fail the stream; the next session
        reloads the bases."""
        base = self._bases.get((rel.namespace, rel.name))
        if base is None:
            return
        cols = base.spec.columns
        same = [c.name for c in rel.columns] == [c.name for c in cols] and all(
            c.type_oid == 0 or (c.type_oid, c.typmod) == (r.type_oid, r.type_modifier)
            for c, r in zip(cols, rel.columns, strict=True))
        if same:
            return
        self.abort()
        self.mark_stale(f"the columns of {rel.namespace}.{rel.name} changed")
        raise BasesLost(f"{self.stale}: the bases are loaded again")

    def mark_stale(self, reason: str) -> None:
        """The store no longer describes the upstream's tables: no local fill until a load."""
        self.ready = False
        self.stale = reason

    def changed_columns(self, found: Sequence[tuple[str, str, int, int, str]]) -> str | None:
        """Why the store's tables differ from ``found`` (the upstream catalog's rows of
        :data:`COLUMNS_QUERY`: table, column, type oid, typmod, ``format_type``), or None when
        they agree. Types compare by oid and typmod when the manifest recorded them (the text
        of ``format_type`` depends on the search_path), else by that text."""
        for name, base in zip(self.relation_names(), self._bases.values(), strict=True):
            now = [f[1:] for f in found if f[0] == name]
            cols = base.spec.columns
            same = len(now) == len(cols) and all(
                c.name == column and ((c.type_oid, c.typmod) == (oid, typmod) if c.type_oid
                                      else c.type == type_text)
                for c, (column, oid, typmod, type_text) in zip(cols, now, strict=True))
            if not same:
                kept = [(c.name, c.type) for c in cols]
                what = f"now {[(f[0], f[3]) for f in now]}, stored {kept}" if now else "gone"
                return f"the columns of {base.spec.qualified} changed ({what})"
        return None

    def abort(self) -> None:
        """Forget the open batch: the store and its position are the durable ones again (the
        stream must resume from ``resume``)."""
        txn = self._batch
        if txn is not None and self.store is not None:
            self._batch = self.store.txn = None
            txn.abort()
        if self.replica is not None:
            r = self.replica
            r.lsn, r.commit_lsn, r.xid_reference = self._durable

    def close(self) -> None:
        if self.store is not None:
            self.flush()
            self.store.close()
            self.store = self.replica = None
        if self.memory:  # nothing to resume from: the slot would only hold WAL back
            shutil.rmtree(self.path, ignore_errors=True)
            try:
                drop_slot(self.upstream_url, self.slot)
            except Exception as exc:  # the upstream is gone: the next start drops it
                log.warning("local bases in memory: slot %s not dropped: %s", self.slot, exc)

    def covers(self, relations: Collection[int]) -> bool:
        """Whether every relation in ``relations`` (oids) is a local table."""
        return bool(relations) and self.oids.issuperset(relations)

    # -- fills --------------------------------------------------------------------------------

    def rows(self, run: RunFill) -> list[list[Row]] | None:
        """Every request's rows from the store (as of the applied position), or None when a
        table is not local or a lookup would be too costly here."""
        if not self.ready or self.store is None:
            return None
        if self._batch is not None:  # the applied transactions not yet durable are in it
            return self._read(self._batch, run)
        with self.store.env.begin() as txn:
            return self._read(txn, run)

    def _read(self, txn: Any, run: RunFill) -> list[list[Row]] | None:
        out: list[list[Row]] = []
        for req in run.requests:
            found = self._request(txn, req)
            if found is None:
                return None
            out.append(found)
        self.local_fills += 1
        return out

    def _request(self, txn: Any, req: FillRequest) -> list[Row] | None:
        via = req.via
        if span_of(req.key) is not None:
            return None  # an interval fill: the store has no ordered index (upstream)
        if via is None:
            return self._lookup(txn, req.table, req.columns, req.key)
        source = self._lookup(txn, via.table, via.columns, via.key)
        if source is None:
            return None
        rows: list[Row] = []
        for j in dict.fromkeys(tuple(r[i] for i in via.join_columns) for r in source):
            found = self._lookup(txn, req.table, req.columns, j)
            if found is None:
                return None
            rows.extend(found)
        return rows

    def _lookup(self, txn: Any, table: Any, columns: Sequence[int], key: Row
                ) -> list[Row] | None:
        base = self._bases.get((table.schema, table.name))
        if base is None:
            return None
        try:
            positions = [base.by_name[c.name] for c in table.columns]
        except KeyError:  # a column the store does not have (the table changed)
            return None
        if any(base.type_oids[c.name] not in (0, c.type_oid) for c in table.columns):
            return None  # the store's texts are of another type (changed upstream): reload
        decode = _decoder(positions, [c.type_oid for c in table.columns])
        if any(v is None for v in key):
            return []  # SQL equality: a NULL key value matches nothing
        names = [table.columns[i].name for i in columns]
        if sorted(names) == sorted(base.spec.key) and all(
                table.columns[i].type_oid in _DIRECT_KEY_TYPES for i in columns):
            value = dict(zip(names, key, strict=True))
            line = txn.get(copytext.format_line([str(value[k]) for k in base.spec.key]),
                           db=base.db)
            return [] if line is None else [decode(copytext.parse_line(bytes(line)))]
        direct = all(table.columns[i].type_oid in _DIRECT_KEY_TYPES for i in columns)
        if direct and names and len(set(names)) == len(names):
            found = self._by_index(txn, base, dict(zip(names, key, strict=True)), decode)
            if found is not None:
                return found
        if columns and int(txn.stat(base.db)["entries"]) > SCAN_ROWS:
            if direct and len(set(names)) == len(names):  # build an index for next time
                self.wanted.setdefault((base.spec.qualified, tuple(sorted(names))), base.spec)
            return None
        rows = []
        with txn.cursor(db=base.db) as cur:
            for line in cur.iternext(keys=False, values=True):
                row = decode(copytext.parse_line(bytes(line)))
                if all(row[c] == v for c, v in zip(columns, key, strict=True)):
                    rows.append(row)
        return rows


    def _by_index(self, txn: Any, base: _Base, value: dict[str, Any],
                  decode: Callable[[tuple[Any, ...]], Row]) -> list[Row] | None:
        """The rows whose indexed columns hold ``value``, through a built index of exactly
        those columns (None: there is none)."""
        assert self.store is not None
        columns = tuple(sorted(value))
        ix = next((i for i in self.store.indexes[base.spec.qualified]
                   if i.columns == columns), None)
        if ix is None or txn.get(ix.name, db=self.store.meta) != b"done":
            return None
        rows = []
        with txn.cursor(db=ix.db) as cur:
            if cur.set_key(copytext.format_line([str(value[c]) for c in columns])):
                for key in cur.iternext_dup():
                    line = txn.get(key, db=base.db)
                    if line is not None:
                        rows.append(decode(copytext.parse_line(bytes(line))))
        return rows

    def index_states(self) -> dict[str, str]:
        """Each secondary index: ``done``, or ``building`` (durable state, for status)."""
        store = self.store
        if store is None:
            return {}
        with store.env.begin() as txn:
            return {ix.name.decode()[3:]: "done" if txn.get(ix.name, db=store.meta) == b"done"
                    else "building" for ixs in store.indexes.values() for ix in ixs}

    def build_indexes(self, seconds: float = INDEX_SECONDS) -> None:
        """Go on building the secondary indexes lookups wanted (run by every heartbeat, on
        the thread that applies transactions: the build writes inside the open batch, so it
        sees every applied change, and changes keep the index from its creation on)."""
        store = self.store
        if store is None or self.stale or (
                self._batch is not None and threading.get_ident() != self._batch_thread):
            return
        for (qualified, columns), spec in list(self.wanted.items()):
            if not any(i.columns == columns for i in store.indexes[qualified]):
                self.flush()  # LMDB creates a database in a write transaction of its own
                store.create_index(spec, columns)
                log.info("local bases: indexing %s(%s)", qualified, ", ".join(columns))
        for qualified, indexes in store.indexes.items():
            for ix in indexes:
                if self._batch is not None:
                    state = self._batch.get(ix.name, db=store.meta)
                else:
                    with store.env.begin() as txn:
                        state = txn.get(ix.name, db=store.meta)
                if state == b"done":
                    continue
                if self._batch is None:
                    self._batch = store.txn = store.env.begin(write=True)
                    self._batch_thread = threading.get_ident()
                if store.build_index(ix, qualified, seconds):
                    log.info("local bases: index %s built", ix.name.decode())
                return  # one slice a heartbeat


def _memory_dir(tag: str) -> Path:
    shm = Path("/dev/shm")
    return (shm if shm.is_dir() else Path(tempfile.gettempdir())) / f"weir-bases-{tag}"


def _memory_tag(upstream_url: str, tables: Sequence[str], slot: str | None) -> str:
    """The same for the same tables of the same database (host, port, database) and slot."""
    p = ConnectParams.from_url(upstream_url)
    text = "\x1f".join([p.host, str(p.port), p.dbname, slot or "", *sorted(tables)])
    return "mem_" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _decoder(positions: list[int], type_oids: list[int]) -> Callable[[tuple[Any, ...]], Row]:
    pairs = list(zip(positions, type_oids, strict=True))

    def decode(text: tuple[Any, ...]) -> Row:
        return tuple([None if text[p] is None else decode_text(oid, text[p])
                      for p, oid in pairs])
    return decode


__all__ = ["BasesLost", "LocalBases"]
