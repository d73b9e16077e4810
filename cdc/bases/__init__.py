"""Local replica bases: a bootstrap's tables kept on disk (LMDB) and exact by CDC.

Public API:
- ``cdc.bases.store.BaseStore``: ``create(path, manifest_dir)`` loads a finished bootstrap,
  ``open(path)`` reopens one (warm restart), ``replica()`` the tables as a
  :class:`cdc.bootstrap.replay.Replica` whose rows live in the store, ``write()`` one atomic
  LMDB transaction, ``durable_lsn``, ``checksums()``;
- ``cdc.bases.follow.follow(store, params)``: stream the bootstrap's slot from the durable
  position, apply each upstream transaction in one LMDB transaction together with its end LSN,
  and confirm to the upstream only what is durable;
- ``cdc.bases.local.LocalBases``: the bases inside ``weir serve --local-bases`` (fed by its
  replication stream, answering fills); ``cdc.bases.snapshot_load.load``: bases loaded by weir
  itself from one snapshot;
- ``python -m cdc.bases load|follow|checksum`` (also ``weir bases``).
"""
