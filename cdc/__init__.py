"""Change data capture: pgoutput decoding, the replication stream and the applier.

Public API (what the proxy wires together):
- ``cdc.stream.ReplicationStream(StreamConfig, sink, durable_lsn=None)``: ``await start()``,
  ``await stop()``, ``await barrier(timeout) -> BarrierResult`` (lag in bytes and seconds),
  ``connected`` (asyncio.Event, cleared while the stream is down), ``position()`` (upstream LSN
  up to which everything is applied), ``warnings`` (settings problems with their fix).
- ``cdc.events.TransactionSink``: the four callbacks the engine implements (``table_schema``,
  ``reset_table``, ``reset_all``, ``apply(engine.changes.Transaction)``).
- ``cdc.connection.ConnectParams`` (``from_url``), ``cdc.connection.PgConnection``.
- ``cdc.slots``: publications, slots, ``list_slots``, ``drop_weir_slots``, ``check_settings``;
  ``python -m cdc.admin list|drop URL`` for slot hygiene.
- ``cdc.LocalBases``: local replica bases inside ``weir serve`` (``cdc.bases.local``), fed by
  the stream's ``tap``; ``BasesLost`` when its slot can no longer keep them exact;
  ``BASES_COLUMNS_QUERY``: the upstream catalog query ``LocalBases.changed_columns`` reads.
- ``cdc.pgoutput``: the sans-I/O decoder; ``cdc.applier.Applier``: the pure applier.

Public face: the names in ``__all__`` are all that other packages may import from ``cdc``
(``tests/unit/test_layering.py`` checks it).

Layering: ``cdc.pgoutput`` and ``cdc.applier`` do no I/O; ``cdc`` imports ``engine``'s public
face and the protocol library ``pgwire`` only.
"""

from __future__ import annotations

from cdc import admin
from cdc.barrier import PROBE_PATIENCE, UNFLUSHED_PATIENCE, BarrierResult
from cdc.bases import cli as bases_cli
from cdc.bases.local import COLUMNS_QUERY as BASES_COLUMNS_QUERY
from cdc.bases.local import BasesLost, LocalBases
from cdc.bootstrap import cli as bootstrap_cli
from cdc.connection import ConnectParams, PgConnection, UpstreamError
from cdc.events import ColumnSchema, TableSchema, TransactionSink
from cdc.pgoutput import PgoutputMessage, format_lsn, parse_lsn
from cdc.slots import PUBLICATION_PREFIX, SLOT_PREFIX, quote_ident
from cdc.stream import ReplicationStream, StreamConfig

__all__ = [
    "BASES_COLUMNS_QUERY",
    "PROBE_PATIENCE",
    "PUBLICATION_PREFIX",
    "SLOT_PREFIX",
    "UNFLUSHED_PATIENCE",
    "BarrierResult",
    "BasesLost",
    "ColumnSchema",
    "ConnectParams",
    "LocalBases",
    "PgConnection",
    "PgoutputMessage",
    "ReplicationStream",
    "StreamConfig",
    "TableSchema",
    "TransactionSink",
    "UpstreamError",
    "admin",
    "bases_cli",
    "bootstrap_cli",
    "format_lsn",
    "parse_lsn",
    "quote_ident",
]
