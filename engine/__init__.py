"""The dataflow engine: pure (no asyncio, sockets or wall clock).

Public face: the names in ``__all__`` are all that other packages (``proxy``, ``cdc``, tests
aside) may import from ``engine``; ``tests/unit/test_layering.py`` checks it.

- the facade ``Engine`` and its effects ``ReadReady``, ``ReadFailed``, ``TakeSnapshot``,
  ``RunFill`` (with its ``FillRequest``) and the SQL of a fill, ``fill_query``;
- upstream changes: ``Transaction``, ``RowChange``, ``ChangeKind``, ``Snapshot``, ``Row``,
  ``UNCHANGED_TOAST``, ``extend_xid``;
- planning: ``QueryPlanner``, ``Classified``, ``CachedQuery``, ``merge_lookups``, the
  reader of a cache ``Reader`` and its output ``Column``; ``Unsupported`` (why a statement is
  not cacheable); the schema ``Catalog`` with ``CATALOG_QUERY`` and ``effective_search_path``;
- values: ``decode_text``, ``encode_text``, ``parser_for``, ``TextValue``, ``Interval``, ``oids``,
  ``format_float4``, ``format_float8``, ``format_array``.
"""

from __future__ import annotations

from engine.api import Engine, ReadFailed, ReadReady, TakeSnapshot
from engine.changes import (
    UNCHANGED_TOAST,
    ChangeKind,
    Row,
    RowChange,
    Snapshot,
    Transaction,
    extend_xid,
)
from engine.dataflow.fills import FillRequest, RunFill
from engine.dataflow.state.intervals import span_of
from engine.plan.fill_sql import fill_query
from engine.plan.ir import Column, Reader
from engine.plan.queries import CachedQuery, Classified, QueryPlanner, merge_lookups
from engine.sql.cacheable import Unsupported
from engine.sql.catalog import CATALOG_QUERY, Catalog, effective_search_path
from engine.values import Interval, TextValue, decode_text, encode_text, oids, parser_for
from engine.values.arrays import format_array
from engine.values.scalars import format_float4, format_float8

__all__ = [
    "CATALOG_QUERY",
    "UNCHANGED_TOAST",
    "CachedQuery",
    "Catalog",
    "ChangeKind",
    "Classified",
    "Column",
    "Engine",
    "FillRequest",
    "Interval",
    "QueryPlanner",
    "ReadFailed",
    "ReadReady",
    "Reader",
    "Row",
    "RowChange",
    "RunFill",
    "Snapshot",
    "TakeSnapshot",
    "TextValue",
    "Transaction",
    "Unsupported",
    "decode_text",
    "effective_search_path",
    "encode_text",
    "extend_xid",
    "fill_query",
    "format_array",
    "format_float4",
    "format_float8",
    "merge_lookups",
    "oids",
    "parser_for",
    "span_of",
]
