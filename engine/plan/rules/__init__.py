"""Plan rewrite rules: small pure passes over a ``Reader`` plan, one per module.

``optimize`` runs them in a fixed order: outer-join reduction, predicate pushdown, eager
aggregation (an aggregate over a join whose groups are left rows folds the right input
first), then column pruning. Key choice (``keys``) runs inside the planner (it decides
what the reader is keyed on) and materialization placement (``materialize``) annotates a
finished plan for the dataflow and for EXPLAIN. Every rule returns a plan with the same
result for every key.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.plan import ir
from engine.plan.rules.eager_aggs import aggregate_before_joins
from engine.plan.rules.outer_joins import reduce_outer_joins
from engine.plan.rules.pruning import prune_columns
from engine.plan.rules.pushdown import push_filters

RULES: tuple[Callable[[ir.Reader], ir.Reader], ...] = (
    reduce_outer_joins, push_filters, aggregate_before_joins, prune_columns)


def optimize(reader: ir.Reader) -> ir.Reader:
    for rule in RULES:
        reader = rule(reader)
    return reader
