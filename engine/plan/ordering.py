"""ORDER BY, LIMIT and OFFSET of a SELECT block or a UNION.

Owns: ``order_by`` (sort items -> ``SortKey``s over the select list, with expressions the
list lacks as hidden columns), ``sort_target`` (an item by output position, output name or
expression) and ``page_bounds`` (LIMIT / OFFSET as constants, or a ``Page`` when a
parameter sets either).

Invariants: a sort key is on a type whose order the engine reproduces exactly
(``pgtypes.ORDERABLE_TYPES``) under a collation it can compare in (byte order, or a libc
collation ``engine.values.collation`` reproduces, carried in the ``SortKey``); LIMIT /
OFFSET need ORDER BY (otherwise PostgreSQL's page is not determined), a constant OFFSET
needs a LIMIT.
"""

from __future__ import annotations

from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.blocks import limit_constant, limit_param
from engine.plan.exprs import ExprBuilder
from engine.plan.planned import Page
from engine.plan.scope import PlanError

Node = dict[str, Any]


def order_by(stmt: Node, builder: ExprBuilder, exprs: list[ir.Expr],
             names: list[str]) -> tuple[tuple[ir.SortKey, ...], list[ir.Expr]]:
    """The statement's sort keys over ``exprs`` (then the hidden expressions returned)."""
    keys: list[ir.SortKey] = []
    hidden: list[ir.Expr] = []
    for item in stmt.get("sortClause", []):
        sort = item["SortBy"]
        if sort.get("useOp"):
            raise PlanError("ORDER BY ... USING")
        pos = sort_target(sort["node"], builder, exprs, names, hidden)
        expr = exprs[pos] if pos < len(exprs) else hidden[pos - len(exprs)]
        if expr.type_oid not in pgtypes.ORDERABLE_TYPES:
            raise PlanError(f"ORDER BY a value of type {pgtypes.type_name(expr.type_oid)}")
        locale = builder.order_locale((expr,), "ORDER BY")
        nulls = sort.get("sortby_nulls", "SORTBY_NULLS_DEFAULT")
        keys.append(ir.SortKey(pos, sort.get("sortby_dir") == "SORTBY_DESC",
                               None if nulls == "SORTBY_NULLS_DEFAULT"
                               else nulls == "SORTBY_NULLS_FIRST", locale))
    return tuple(keys), hidden


def sort_target(node: Node, builder: ExprBuilder, exprs: list[ir.Expr], names: list[str],
                hidden: list[ir.Expr]) -> int:
    """The position an ORDER BY item sorts on: an output position (``ORDER BY 2``), an
    output name, a selected expression, or a new hidden expression appended to ``hidden``."""
    if "A_Const" in node and "ival" in node["A_Const"]:
        n = int(node["A_Const"]["ival"].get("ival", 0))
        if not 1 <= n <= len(exprs):
            raise PlanError(f"ORDER BY position {n} is not in select list")
        return n - 1
    fields = node.get("ColumnRef", {}).get("fields", [])
    if len(fields) == 1 and "String" in fields[0]:
        hits = [i for i, n in enumerate(names) if n == fields[0]["String"]["sval"]]
        if len(hits) > 1:
            raise PlanError(f"ORDER BY {names[hits[0]]} is ambiguous")
        if hits:
            return hits[0]
    expr = builder.build(node)
    if expr in exprs:
        return exprs.index(expr)
    hidden.append(expr)
    return len(exprs) + len(hidden) - 1


def page_bounds(stmt: Node, order: tuple[ir.SortKey, ...]) -> tuple[
        int | None, int, Page | None]:
    """(LIMIT, OFFSET) as constants, or a Page when a parameter sets either; both need
    ORDER BY, a constant OFFSET needs a LIMIT."""
    lparam = limit_param(stmt.get("limitCount"))
    oparam = limit_param(stmt.get("limitOffset"))
    limit = None if lparam else limit_constant(stmt.get("limitCount"), "LIMIT")
    offset = 0 if oparam else limit_constant(stmt.get("limitOffset"), "OFFSET") or 0
    if (lparam or oparam) and not order:
        raise PlanError("LIMIT/OFFSET parameter without ORDER BY")
    if lparam or oparam:
        return None, 0, Page(limit, lparam, offset, oparam)
    if limit is None and offset:
        raise PlanError("OFFSET without LIMIT")
    if limit is not None and not order:
        raise PlanError(f"{'OFFSET' if offset else 'LIMIT'} without ORDER BY")
    return limit, offset, None
