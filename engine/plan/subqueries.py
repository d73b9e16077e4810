"""Subqueries in WHERE that become semi-joins: ``x IN (SELECT ...)`` and ``EXISTS (...)``.

Owns: ``semi_joins`` — turns top-level WHERE conjuncts of the forms
- ``col IN (SELECT c FROM ...)`` (uncorrelated), and
- ``EXISTS (SELECT ... FROM ... WHERE inner = outer [AND inner-only conditions])``
  (correlated only through equalities between an inner column and an outer column)
into an inner join of the outer relation with the DISTINCT rows of the subquery's columns.

Invariants: only top-level conjuncts are rewritten (under WHERE, a NULL and a false IN
result both drop the row, so the semi-join is exact there; under OR or NOT it would not be:
those stay unsupported). The subquery's columns are appended as hidden columns: ``*`` and
name lookup never see them, and existing positions do not move. The DISTINCT makes each
outer row match at most once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.exprs import correlated, deterministic, range_names
from engine.plan.from_clause import PlanContext, column_equality, conjuncts
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol

Node = dict[str, Any]
Subquery = Callable[[PlanContext, Node], Bound]


def _in_subquery(node: Node) -> Node | None:
    link = node.get("SubLink")
    if link is None or link.get("subLinkType") != "ANY_SUBLINK":
        return None
    op = [n.get("String", {}).get("sval") for n in link.get("operName", [])]
    if op not in ([], ["="]) or "ColumnRef" not in (link.get("testexpr") or {}):
        return None
    return dict(link)


def _exists(node: Node) -> Node | None:
    link = node.get("SubLink")
    if link is None or link.get("subLinkType") != "EXISTS_SUBLINK":
        return None
    return dict(link)


def _fields(ref: Node) -> tuple[str, ...]:
    return tuple(f["String"]["sval"] for f in ref["ColumnRef"]["fields"] if "String" in f)


def _decorrelate(scope: Scope, link: Node) -> tuple[list[tuple[str, ...]], Node]:
    """EXISTS (... WHERE inner = outer AND rest) -> (outer columns, SELECT inner columns
    ... WHERE rest)."""
    select = copy.deepcopy(link["subselect"]["SelectStmt"])
    for clause in ("groupClause", "havingClause", "limitCount", "limitOffset", "sortClause",
                   "distinctClause", "withClause"):
        if select.get(clause):
            raise PlanError(f"correlated EXISTS subquery with {clause}")
    if select.get("op", "SETOP_NONE") != "SETOP_NONE":
        raise PlanError("correlated EXISTS subquery over a set operation")
    outer_names = {c.qualifier for c in scope.cols}
    outer: list[tuple[str, ...]] = []
    targets: list[Node] = []
    rest: list[Node] = []
    for conj in conjuncts(select.get("whereClause")):
        pair = column_equality(conj)
        if pair is not None:
            sides = [p for p in pair if len(p) == 2 and p[0] in outer_names
                     and not _defines(select, p[0])]
            if len(sides) == 1:
                inner = pair[1] if sides[0] == pair[0] else pair[0]
                outer.append(sides[0])
                targets.append({"ResTarget": {"val": {"ColumnRef": {"fields": [
                    {"String": {"sval": f}} for f in inner]}}}})
                continue
        rest.append(conj)
    if not outer:
        raise PlanError("EXISTS subquery that is not correlated by an equality")
    select["targetList"] = targets
    select["whereClause"] = (None if not rest else rest[0] if len(rest) == 1 else
                             {"BoolExpr": {"boolop": "AND_EXPR", "args": rest}})
    if correlated(scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated EXISTS subquery (correlated beyond equalities)")
    return outer, {"SelectStmt": select}


def _defines(select: Node, name: str) -> bool:
    """Does the subquery's own FROM define range name ``name`` (shadowing the outer one)?"""
    return name in range_names(select.get("fromClause"))


def _join(ctx: PlanContext, subquery: Subquery, bound: Bound, outer: list[int],
          select: Node) -> Bound:
    sub = subquery(ctx, select)
    if len(sub.scope.cols) != len(outer):
        raise PlanError("subquery has too many columns")
    for pos, col in zip(outer, sub.scope.cols, strict=True):
        mine = bound.scope.cols[pos]
        if not pgtypes.comparable(mine.type_oid, col.type_oid):
            raise PlanError(f"IN subquery comparing {pgtypes.type_name(mine.type_oid)} with "
                            f"{pgtypes.type_name(col.type_oid)}")
        if not (deterministic(mine.collation, ctx.catalog)
                and deterministic(col.collation, ctx.catalog)):
            raise PlanError("IN subquery under a nondeterministic collation")
    rel = ir.Join(bound.rel, ir.Distinct(sub.rel), tuple(outer), tuple(range(len(outer))))
    hidden = tuple(ScopeCol(None, c.name, c.type_oid, c.collation, c.rte, hidden=True)
                   for c in sub.scope.cols)
    return Bound(rel, Scope(bound.scope.cols + hidden))


def semi_joins(ctx: PlanContext, subquery: Subquery, bound: Bound,
               where: list[Node]) -> tuple[Bound, list[Node]]:
    """Rewrite the IN/EXISTS conjuncts of ``where`` into semi-joins on ``bound``."""
    rest: list[Node] = []
    for conj in where:
        link = _in_subquery(conj)
        if link is not None:
            if correlated(bound.scope, link):
                raise PlanError("correlated IN/ANY subquery")
            pos = bound.scope.lookup(_fields(link["testexpr"]))
            bound = _join(ctx, subquery, bound, [pos], link["subselect"])
            continue
        link = _exists(conj)
        if link is not None:
            outer, select = _decorrelate(bound.scope, link)
            bound = _join(ctx, subquery, bound, [bound.scope.lookup(f) for f in outer], select)
            continue
        rest.append(conj)
    return bound, rest
