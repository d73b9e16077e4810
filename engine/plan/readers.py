"""A planned top-level block -> its Reader and the host's steps around the lookup.

Owns: ``block_reader`` (the Reader of a block: its key columns, top-k or window calls, the
output columns the host needs to cut ranges or merge IN-list lookups), ``mergeable``
(whether per-value lookups of an IN-list key can be merged exactly) and ``empty_row`` (the
row PostgreSQL returns for an aggregate without GROUP BY over no rows).

Invariant: the Reader's rows for a key, after the host's steps (merge, range cuts, page),
are the statement's rows for that key.
"""

from __future__ import annotations

from typing import Any

from engine.plan import ir
from engine.plan.grouping import Grouping
from engine.plan.planned import Block
from engine.plan.ranges import RangeCut, placed_cuts
from engine.plan.rules.keys import KeySource
from engine.plan.scope import PlanError


def mergeable(block: Block) -> bool:
    """An IN-list key is served by one lookup per value, merged by the host: fine unless the
    page has a constant OFFSET (cut per key by the top-k) or is DISTINCT without the key
    column in the output. (A parameter Page is cut by the host after merging, so it is fine;
    sort columns the client does not see are hidden output columns, see ``block_reader``.)"""
    multi = [pos for pos, src, _ in block.keys if src.multi]
    if not multi:
        return True
    if isinstance(block.rel, ir.Distinct) and any(pos >= block.visible for pos in multi):
        return False  # rows of two lookups could be duplicates of each other
    return block.offset == 0


def empty_row(block: Block, grouping: Grouping) -> tuple[Any, ...]:
    """The row PostgreSQL returns for an aggregate without GROUP BY over no rows: the select
    list over COUNTs of 0 and other aggregates NULL."""
    from engine.dataflow.expr import compile_expr
    project = block.rel
    assert isinstance(project, ir.Project)
    row = (None,) * len(grouping.groups) + tuple(
        0 if a.func in ("count", "count_star", "count_distinct") else None
        for a in grouping.aggs)
    try:
        return tuple(compile_expr(e)(row) for e in project.exprs[: block.visible])
    except Exception as exc:  # PostgreSQL would raise on this row too: not cacheable
        raise PlanError(f"select list raises on an empty aggregate ({exc})") from exc


def block_reader(block: Block) -> tuple[ir.Reader, list[tuple[int, KeySource, int]],
                                        tuple[RangeCut, ...], int]:
    """The block's Reader, its keys, and its range cuts with their columns as reader output
    positions (cut columns not selected are hidden output columns after the visible ones)."""
    rel = block.rel
    group = tuple(pos for pos, _, _ in block.keys)
    if block.limit is not None and not block.windows:  # windows see the rows before LIMIT
        rel = ir.TopK(rel, group, block.order, block.limit, block.offset)
    output = list(range(block.visible))
    merged = any(src.multi for _, src, _ in block.keys)
    for column in [c.column for c in block.cuts] + (
            [k.column for k in block.order] if merged else []):
        if column not in output:  # the host cuts or sorts the lookups' rows on it
            output.append(column)
    cuts = placed_cuts(block.rel, block.cuts, output, block.order)
    reader = ir.Reader(rel, group, tuple(output), block.order, block.limit,
                       block.offset if block.windows else 0, block.windows)
    return reader, block.keys, cuts, len(output) - block.visible
