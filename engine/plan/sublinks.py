"""IN / EXISTS subqueries inside WHERE conditions (under OR, AND and NOT), as marked joins.

Owns: ``conditional_subqueries`` — after the top-level semi- and anti-joins, every remaining
WHERE conjunct whose boolean structure (AND / OR / NOT) holds
- ``EXISTS (SELECT ... WHERE inner = outer [AND inner-only conditions])``: anywhere in that
  structure, or
- ``col IN (SELECT x ...)`` (uncorrelated): only where no NOT is above it,
gets a LEFT JOIN with the DISTINCT subquery rows plus a constant marker (as NOT EXISTS does),
and the subquery becomes ``marker IS NOT NULL``.

``select_exists`` does the same for EXISTS in the select list of an ungrouped query.

Invariants: EXISTS is two-valued, so ``marker IS NOT NULL`` (a partner exists) is its exact
value anywhere. IN is NULL where PostgreSQL cannot tell (no match, and a NULL value or a NULL
in the subquery), which the marker turns into false; AND and OR are monotone (false <= NULL <=
true), so without a NOT above it the conjunct is true exactly when it was, and WHERE keeps
exactly the same rows. Under NOT an IN subquery stays unsupported with its reason. The joined
columns are hidden; the DISTINCT makes each outer row match at most once (no duplicates).
"""

from __future__ import annotations

from typing import Any

from engine.plan.antijoins import _marked, _null_test, _weir, exists_marker
from engine.plan.exprs import correlated
from engine.plan.from_clause import PlanContext
from engine.plan.param_antijoins import param_flag
from engine.plan.scope import Bound, PlanError
from engine.plan.subqueries import Subquery, _exists, _fields, _in_subquery, rewrite_targets

Node = dict[str, Any]


def conditional_subqueries(ctx: PlanContext, subquery: Subquery, bound: Bound,
                           where: list[Node]) -> tuple[Bound, list[Node]]:
    """Rewrite the IN/EXISTS subqueries inside the boolean structure of ``where``'s
    conjuncts into marked LEFT JOINs on ``bound``."""
    out: list[Node] = []
    for conj in where:
        conj, bound = _rewrite(ctx, subquery, bound, conj, positive=True)
        out.append(conj)
    return bound, out


def _rewrite(ctx: PlanContext, subquery: Subquery, bound: Bound, node: Node,
             positive: bool) -> tuple[Node, Bound]:
    body = node.get("BoolExpr")
    if body is not None:
        inner = positive if body.get("boolop") != "NOT_EXPR" else False
        args = []
        for arg in body.get("args", []):
            new, bound = _rewrite(ctx, subquery, bound, arg, inner)
            args.append(new)
        return {"BoolExpr": {**body, "args": args}}, bound
    link = _exists(node)
    if link is not None:
        bound, marker = exists_marker(ctx, subquery, bound, link)
        return _null_test(_weir(marker), negated=True), bound
    link = _in_subquery(node)
    if link is not None:
        if not positive:
            raise PlanError("IN subquery under NOT inside a condition (its NULL result "
                            "would count)")
        if correlated(bound.scope, link):
            raise PlanError("correlated IN/ANY subquery")
        pos = bound.scope.lookup(_fields(link["testexpr"]))
        bound, marker = _marked(ctx, bound, [pos], subquery(ctx, link["subselect"]))
        return _null_test(_weir(marker), negated=True), bound
    return node, bound


def select_exists(ctx: PlanContext, subquery: Subquery, bound: Bound,
                  stmt: Node) -> tuple[Bound, Node]:
    """EXISTS subqueries in the select list of an ungrouped query (``EXISTS (...) AS
    voted``): marked LEFT JOINs, the value ``marker IS NOT NULL`` (EXISTS is two-valued).
    Other subqueries there are left to the expression builder (and its reasons)."""
    if not any("EXISTS_SUBLINK" in repr(t) for t in stmt.get("targetList", [])):
        return bound, stmt
    targets = []
    for target in stmt.get("targetList", []):  # a whole value EXISTS (... col = $n ...)
        res = dict(target["ResTarget"])
        link = _exists(res.get("val") or {})
        found = None if link is None else param_flag(ctx, subquery, bound, link)
        if found is not None:
            bound, res["val"] = found[0], found[1]
            res["name"] = res.get("name") or "exists"
        targets.append({"ResTarget": res})
    stmt = {**stmt, "targetList": targets}

    def visit(node: Node, bound: Bound) -> tuple[Any, Bound] | None:
        link = _exists(node)
        if link is None:
            return None
        bound, marker = exists_marker(ctx, subquery, bound, link)
        return _null_test(_weir(marker), negated=True), bound

    return rewrite_targets(stmt, bound, visit)
