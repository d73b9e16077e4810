"""What the planner produces: the planned statement and the planned SELECT block.

Owns: ``PlannedQuery`` (``plan_select``'s result: a Reader, where its keys come from, the
host's steps after the lookup), ``Page`` (LIMIT / OFFSET set by parameters, cut by the
host), ``Block`` (one SELECT block as planned, before it becomes a Reader, a UNION branch,
a subquery or a LATERAL side) and ``RetryPinned`` (the signal to plan again with less
lifting).

Invariants:
- ``PlannedQuery.reader.key[i]`` takes its value from ``key_sources[i]``; ``lifted`` holds
  the literals moved into keys (the others are constants of the plan).
- ``Block.keys`` are (output position, source, type); hidden columns (ORDER BY, keys, range
  cuts) follow the ``visible`` ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.plan import ir
from engine.plan.ranges import RangeCut
from engine.plan.rules.keys import KeySource
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.setops import SetOpStep


@dataclass(frozen=True, slots=True)
class Page:
    """LIMIT / OFFSET set by statement parameters: the reader returns the key's rows sorted
    (no top-k) and the host cuts the page: ``rows[offset : offset + limit]``, each bound
    being a constant or the value of ``$n``."""

    limit: int | None = None
    limit_param: int | None = None
    offset: int = 0
    offset_param: int | None = None


@dataclass(frozen=True, slots=True)
class PlannedQuery:
    reader: ir.Reader
    key_sources: tuple[KeySource, ...]
    key_types: tuple[int, ...]
    lifted: frozenset[int]
    relations: tuple[int, ...]
    #: The one row to return when the reader has no row for a key (an aggregate without
    #: GROUP BY whose WHERE keys it: PostgreSQL still returns one row, e.g. count 0).
    empty_row: tuple[Any, ...] | None = None
    #: LIMIT/OFFSET from parameters, applied by the host after the lookup(s).
    page: Page | None = None
    #: Range parameters, cut by the host from the lookups' rows (``engine.plan.ranges``).
    cuts: tuple[RangeCut, ...] = ()
    #: Trailing reader output columns that exist only for the cuts (dropped by the host).
    hidden: int = 0
    #: The session TimeZone the plan computes in (``engine.plan.sessionzone``; None: the
    #: plan reads none): part of the cache's identity.
    timezone: str | None = None
    #: Aggregates without GROUP BY over range cuts (``engine.plan.range_aggs``): the host
    #: computes them from the cut rows (arguments: reader output columns); one result row.
    aggregates: tuple[ir.AggCall, ...] = ()
    #: Their groups: reader output columns (equality keys) the host groups the rows on.
    grouped: tuple[int, ...] = ()
    #: HAVING over the aggregates' values, and how many trailing aggregates only it reads.
    agg_having: ir.Expr | None = None
    agg_hidden: int = 0
    #: Then ORDER BY over them and constant LIMIT / OFFSET.
    agg_order: tuple[ir.SortKey, ...] = ()
    agg_limit: int | None = None
    agg_offset: int = 0
    #: The result columns when the select list computes over the aggregates (name and an
    #: expression over each result row of ``aggregates``, all of which are then hidden).
    agg_exprs: tuple[tuple[str, ir.Expr], ...] = ()
    #: LIMIT / OFFSET parameters over the aggregates' result rows (after ORDER BY).
    agg_page: Page | None = None
    #: A set operation the host finishes over the reader's rows (``engine.plan.setops``).
    setop: SetOpStep | None = None

    @property
    def columns(self) -> tuple[ir.Column, ...]:
        """The statement's result columns (the reader's, without the hidden ones)."""
        if self.agg_exprs:
            return tuple(ir.Column(name, e.type_oid) for name, e in self.agg_exprs)
        if self.aggregates:
            return tuple(ir.Column(a.name, a.type_oid)
                         for a in self.aggregates[: len(self.aggregates) - self.agg_hidden])
        cols = self.reader.columns
        return cols[: len(cols) - self.hidden]

    @property
    def param_types(self) -> dict[int, int]:
        """``$n`` -> the type PostgreSQL infers for it when the client leaves it unspecified:
        the key column's type, its array type for ``= ANY($n)``, int8 for LIMIT/OFFSET."""
        out: dict[int, int] = {}
        for src, type_oid in zip(self.key_sources, self.key_types, strict=True):
            for alt in src.alternatives or (src,):
                if alt.param is not None:
                    out.setdefault(alt.param, T.ARRAY_OF[type_oid] if alt.array else type_oid)
        for cut in self.cuts:
            out.setdefault(cut.param, cut.type_oid)
        for param, param_type in self.setop.param_types() if self.setop is not None else ():
            out.setdefault(param, param_type)
        for page in (self.page, self.agg_page):
            for number in (page.limit_param, page.offset_param) if page is not None else ():
                if number is not None:
                    out.setdefault(number, T.INT8)
        return out


class RetryPinned(Exception):
    """What was lifted into keys made the block inexact; plan again with less lifting."""


@dataclass
class Block:
    """A planned SELECT block before it becomes a Reader or a subquery."""

    rel: ir.Rel
    names: list[str]
    colls: list[str | None]
    visible: int
    keys: list[tuple[int, KeySource, int]]  # output position, source, type
    order: tuple[ir.SortKey, ...]
    limit: int | None
    offset: int = 0
    empty_row: tuple[Any, ...] | None = None
    page: Page | None = None
    cuts: list[RangeCut] = dataclasses.field(default_factory=list)  # column: block position
    windows: tuple[ir.Window, ...] = ()
    aggregates: tuple[ir.AggCall, ...] = ()  # host aggregates over range cuts
    grouped: tuple[int, ...] = ()  # and the columns they group on
    agg_having: ir.Expr | None = None  # HAVING over them
    agg_hidden: int = 0  # trailing aggregates only ORDER BY or HAVING reads
    agg_order: tuple[ir.SortKey, ...] = ()  # ORDER BY over them, then LIMIT / OFFSET
    agg_limit: int | None = None
    agg_offset: int = 0
    agg_exprs: tuple[tuple[str, ir.Expr], ...] = ()  # computed result columns over them
    agg_page: Page | None = None  # LIMIT / OFFSET parameters over them
    setop: SetOpStep | None = None  # a set operation the host finishes
