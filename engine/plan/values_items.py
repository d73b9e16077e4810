"""``(VALUES ...) alias(columns)`` as a FROM item joined with the rest of the FROM clause.

Owns: ``values_item`` (the parse-time ``WeirValues`` item -> its typed constant rows and the
columns it shows, ``ValuesItem``) and ``times_values`` (a relation CROSS JOIN a VALUES list).

The dataflow has no constant relation, so a VALUES list is never a relation alone: joined
with another FROM item (comma, CROSS JOIN or an inner JOIN, whose conditions filter above),
the product ``other CROSS JOIN VALUES`` is the UNION ALL, over the VALUES rows, of ``other``
with the row's constants appended (or prepended, by FROM order). Each row's columns are typed as
PostgreSQL types a VALUES column: the one type of its non-NULL cells, the widest of integer
and numeric cells, text when all are untyped strings (or NULL); an untyped string among
typed cells is read as that type. Text columns compare under the database's default
collation. The constants are pinned into the cache's identity like any literal kept in a
plan.

Invariants: cells are expressions of constants (a ``$n``, a column or a subquery there is a
``PlanError``); a VALUES list alone, on the NULL-padded side of an outer join, or two of them
in one FROM list are ``PlanError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.exprs import ExprBuilder
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.sql.catalog import Catalog
from engine.values import oids as T

Node = dict[str, Any]
_NUMBERS = (T.INT2, T.INT4, T.INT8, T.NUMERIC)


@dataclass(frozen=True, slots=True)
class ValuesItem:
    rows: tuple[tuple[ir.Expr, ...], ...]
    cols: tuple[ScopeCol, ...]


def is_values(item: Node) -> bool:
    return "WeirValues" in item.get("RangeSubselect", {}).get("subquery", {})


def values_item(catalog: Catalog, item: Node, rte: int) -> ValuesItem:
    """The ``RangeSubselect`` ``item`` (a parse-time ``WeirValues``) typed and named."""
    body = item["RangeSubselect"]
    if body.get("lateral"):
        raise PlanError("LATERAL VALUES")
    cells: list[list[Node]] = body["subquery"]["WeirValues"]["rows"]
    width = len(cells[0])
    if any(len(row) != width for row in cells):
        raise PlanError("VALUES lists must all be the same length")
    if "ParamRef" in repr(cells):
        raise PlanError("parameter in a VALUES list")
    builder = ExprBuilder(Scope(()), catalog, clause="VALUES")
    built = [[builder.build(cell) for cell in row] for row in cells]
    types = [_column_type([row[i] for row in built]) for i in range(width)]
    rows = tuple(tuple(_typed(builder, e, t) for e, t in zip(row, types, strict=True))
                 for row in built)
    alias = body.get("alias") or {}
    qualifier = alias.get("aliasname", "*VALUES*")
    names = [c["String"]["sval"] for c in alias.get("colnames", [])]
    if len(names) > width:
        raise PlanError(f"VALUES list {qualifier} has {width} columns available but "
                        f"{len(names)} columns specified")
    names += [f"column{i + 1}" for i in range(len(names), width)]
    cols = tuple(ScopeCol(qualifier, n, t, catalog.default_collation
                          if t in (T.TEXT, T.VARCHAR) else None, rte)
                 for n, t in zip(names, types, strict=True))
    return ValuesItem(rows, cols)


def _column_type(cells: list[ir.Expr]) -> int:
    typed = {e.type_oid for e in cells if e.type_oid != T.UNKNOWN}
    if not typed:
        return T.TEXT
    if len(typed) == 1:
        return typed.pop()
    if typed <= set(_NUMBERS):
        return max(typed, key=_NUMBERS.index)
    raise PlanError("VALUES column of types " + ", ".join(
        sorted(pgtypes.type_name(t) for t in typed)))


def _typed(builder: ExprBuilder, expr: ir.Expr, type_oid: int) -> ir.Expr:
    if expr.type_oid == type_oid:
        return expr
    out = builder.coerce(expr, type_oid)
    if out.type_oid != type_oid:
        raise PlanError(f"VALUES cell of type {pgtypes.type_name(expr.type_oid)} in a "
                        f"column of type {pgtypes.type_name(type_oid)}")
    return out


def times_values(other: Bound, values: ValuesItem, values_first: bool) -> Bound:
    """``other CROSS JOIN VALUES``: every row of ``other`` once per VALUES row, the VALUES columns
    before ``other``'s when ``values_first`` (FROM order), else after."""
    cols = other.rel.columns
    refs = tuple(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols))
    names = tuple(c.name for c in cols)
    own = tuple(c.name for c in values.cols)
    branches = tuple(ir.Project(other.rel, (*row, *refs) if values_first else (*refs, *row),
                                (*own, *names) if values_first else (*names, *own))
                     for row in values.rows)
    rel: ir.Rel = branches[0] if len(branches) == 1 else ir.UnionAll(branches)
    scope = values.cols + other.scope.cols if values_first else other.scope.cols + values.cols
    return Bound(rel, Scope(scope))
