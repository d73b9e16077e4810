"""Name scopes of the planner: which columns a FROM clause makes visible, and under what names.

Owns: ``PlanError`` (the planner's internal signal, always turned into ``Unsupported`` at the
planner's boundary), ``ScopeCol`` and ``Scope`` (column lookup by ``[qualifier.]name`` with
PostgreSQL's ambiguity rules), ``Bound`` (an IR relation with its scope, i.e. what a FROM item
or a subquery plans to), and ``remap`` (rewrite the column references of an expression).

Invariants: ``Bound.scope.cols[i]`` describes output column ``i`` of ``Bound.rel``. A column's
``collation`` is the effective collation name for text columns, None otherwise; ``rte`` names
the range-table entry the column came from (used for functional dependencies in GROUP BY);
``table_pk`` is True for a base table's primary-key columns, ``not_null`` for its NOT NULL
columns (both say nothing of NULLs an outer join adds: see ``rules.materialize.traces``). A
``qualified_only`` column (a side's column of ``JOIN ... USING``) is reached only as
``qualifier.name`` or ``qualifier.*``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.plan import ir


class PlanError(Exception):
    """A reason the statement cannot be planned (internal; becomes Unsupported)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ScopeCol:
    qualifier: str | None
    name: str
    type_oid: int
    collation: str | None
    rte: int
    table_pk: bool = False
    hidden: bool = False
    qualified_only: bool = False  # a side's JOIN USING column: ``q.name`` and ``q.*`` only
    not_null: bool = False  # a base table column declared NOT NULL (a scan's scope only)


@dataclass(frozen=True, slots=True)
class Scope:
    cols: tuple[ScopeCol, ...]

    def lookup(self, fields: tuple[str, ...]) -> int:
        """Position of the column ``fields`` names (``(name,)`` or ``(qualifier, name)``)."""
        if len(fields) == 1:
            hits = [i for i, c in enumerate(self.cols)
                    if c.name == fields[0] and not c.hidden and not c.qualified_only]
        elif len(fields) == 2:
            hits = [i for i, c in enumerate(self.cols)
                    if c.qualifier == fields[0] and c.name == fields[1] and not c.hidden]
        else:
            raise PlanError(f"schema-qualified column reference {'.'.join(fields)}")
        if not hits:
            raise PlanError(f"column {'.'.join(fields)} does not exist")
        if len(hits) > 1:
            raise PlanError(f"column reference {'.'.join(fields)} is ambiguous")
        return hits[0]

    def has_qualifier(self, qualifier: str) -> bool:
        return any(c.qualifier == qualifier for c in self.cols)

    def star(self, qualifier: str | None) -> list[int]:
        """Positions ``*`` (or ``qualifier.*``) expands to."""
        found = [i for i, c in enumerate(self.cols)
                 if not c.hidden and (c.qualifier == qualifier if qualifier is not None
                                      else not c.qualified_only)]
        if qualifier is not None and not found:
            raise PlanError(f"missing FROM-clause entry for table {qualifier}")
        return found


@dataclass(frozen=True, slots=True)
class Bound:
    """A planned FROM item or subquery: the relation and the names of its columns."""

    rel: ir.Rel
    scope: Scope


def remap(expr: Any, fn: Callable[[int], int]) -> Any:
    """``expr`` with every ``ColumnRef(i)`` replaced by ``ColumnRef(fn(i))``."""
    if isinstance(expr, ir.ColumnRef):
        return ir.ColumnRef(fn(expr.index), expr.type_oid)
    if isinstance(expr, tuple):
        return tuple(remap(e, fn) for e in expr)
    if not dataclasses.is_dataclass(expr) or isinstance(expr, type):
        return expr
    changes = {}
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, tuple) or dataclasses.is_dataclass(value):
            new = remap(value, fn)
            if new is not value:
                changes[f.name] = new
    return dataclasses.replace(expr, **changes) if changes else expr


def column_refs(expr: Any) -> set[int]:
    """Input positions an expression reads."""
    found: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.ColumnRef):
            found.add(node.index)
        elif isinstance(node, tuple):
            stack.extend(node)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name) for f in dataclasses.fields(node))
    return found
