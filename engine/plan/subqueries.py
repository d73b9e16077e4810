"""Subqueries in WHERE that become semi-joins: ``x IN (SELECT ...)`` and ``EXISTS (...)``.

Owns: ``semi_joins`` — turns top-level WHERE conjuncts of the forms
- ``col IN (SELECT c FROM ...)`` (uncorrelated), and
- ``EXISTS (SELECT ... FROM ... WHERE inner = outer [AND inner-only conditions])``
  (correlated only through equalities between an inner column and an outer column)
into an inner join of the outer relation with the DISTINCT rows of the subquery's columns.
A plain subquery's top-level ``column = $n`` conjuncts are pulled out of it (``pullup``): the
column joins the DISTINCT rows as one more hidden column and ``hidden column = $n`` becomes
a conjunct of the enclosing WHERE, which the top block keys on (``v.user_id = $2`` in an
EXISTS, ``tag = $2`` in an IN subquery). For each key value the DISTINCT rows with that
value are the subquery's rows under ``$n``, so each outer row still matches at most once;
a NULL ``$n`` matches no key, as ``column = NULL`` matches no row.

Invariants: only top-level conjuncts are rewritten (under WHERE, a NULL and a false IN
result both drop the row, so the semi-join is exact there; under OR or NOT it would not be:
those become marked LEFT JOINs in ``engine.plan.sublinks``). The subquery's columns are
appended as hidden columns: ``*`` and name lookup never see them, and existing positions do
not move. The DISTINCT makes each outer row match at most once. A pulled conjunct that
is not a key (not the top block, a cast to another type, two parameters on one column) stays
a filter holding ``$n``, which the expression builder refuses with its reason.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.exprs import correlated, deterministic, range_names
from engine.plan.from_clause import PlanContext, column_equality, conjuncts
from engine.plan.names import figure_colname
from engine.plan.pullup import key_conjunct, pull_params
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.values import oids as T

Node = dict[str, Any]
Subquery = Callable[[PlanContext, Node], Bound]
Visit = Callable[[Node, Bound], "tuple[Any, Bound] | None"]  # see thread_rewrite


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


def _plain_select(link: Node, what: str, top_n: bool = False) -> Node:
    """A copy of the subquery's SELECT, which must have no GROUP BY, HAVING or WITH, nor
    (unless ``top_n``) ORDER BY, LIMIT, OFFSET or DISTINCT."""
    select: Node = copy.deepcopy(link["subselect"]["SelectStmt"])
    cut = ("limitCount", "limitOffset", "sortClause", "distinctClause")
    for clause in ("groupClause", "havingClause", "withClause", *(() if top_n else cut)):
        if select.get(clause):
            raise PlanError(f"correlated {what} with {clause}")
    if select.get("op", "SETOP_NONE") != "SETOP_NONE":
        raise PlanError(f"correlated {what} over a set operation")
    return select


def _correlation(scope: Scope, select: Node, what: str) -> tuple[
        list[tuple[str, ...]], list[Node]]:
    """Split the subquery's WHERE into ``inner = outer`` equalities and the rest; set the
    rest as its WHERE. Returns (outer columns, inner column references)."""
    outer_names = {c.qualifier for c in scope.cols}
    outer: list[tuple[str, ...]] = []
    inner_refs: list[Node] = []
    rest: list[Node] = []
    for conj in conjuncts(select.get("whereClause")):
        pair = column_equality(conj)
        if pair is not None:
            sides = [p for p in pair if len(p) == 2 and p[0] in outer_names
                     and not _defines(select, p[0])]
            if len(sides) == 1:
                inner = pair[1] if sides[0] == pair[0] else pair[0]
                outer.append(sides[0])
                inner_refs.append({"ColumnRef": {"fields": [
                    {"String": {"sval": f}} for f in inner]}})
                continue
        rest.append(conj)
    if not outer:
        raise PlanError(f"{what} that is not correlated by an equality")
    select["whereClause"] = (None if not rest else rest[0] if len(rest) == 1 else
                             {"BoolExpr": {"boolop": "AND_EXPR", "args": rest}})
    return outer, inner_refs


def _decorrelate(scope: Scope, link: Node) -> tuple[list[tuple[str, ...]], Node]:
    """EXISTS (... WHERE inner = outer AND rest) -> (outer columns, SELECT inner columns
    ... WHERE rest)."""
    select = _plain_select(link, "EXISTS subquery")
    outer, inner = _correlation(scope, select, "EXISTS subquery")
    select["targetList"] = [{"ResTarget": {"val": ref}} for ref in inner]
    if correlated(scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated EXISTS subquery (correlated beyond equalities)")
    return outer, {"SelectStmt": select}


def _defines(select: Node, name: str) -> bool:
    """Does the subquery's own FROM define range name ``name`` (shadowing the outer one)?"""
    return name in range_names(select.get("fromClause"))


def _check_pairs(ctx: PlanContext, bound: Bound, outer: list[int], sub: Bound) -> None:
    for pos, col in zip(outer, sub.scope.cols, strict=False):
        mine = bound.scope.cols[pos]
        if not pgtypes.comparable(mine.type_oid, col.type_oid):
            raise PlanError(f"IN subquery comparing {pgtypes.type_name(mine.type_oid)} with "
                            f"{pgtypes.type_name(col.type_oid)}")
        if not (deterministic(mine.collation, ctx.catalog)
                and deterministic(col.collation, ctx.catalog)):
            raise PlanError("IN subquery under a nondeterministic collation")


def _join(ctx: PlanContext, subquery: Subquery, bound: Bound, outer: list[int],
          select: Node) -> tuple[Bound, list[Node]]:
    """The semi-join of ``bound`` with the DISTINCT rows of ``select``, its top-level
    ``column = $n`` conjuncts pulled out (``pullup``) as hidden columns after the matched ones;
    returns the new bound and those conjuncts over the hidden columns (for key choice)."""
    select, params = pull_params(select)
    sub = subquery(ctx, select)
    if len(sub.scope.cols) != len(outer) + len(params):
        raise PlanError("subquery has too many columns")
    _check_pairs(ctx, bound, outer, sub)
    rel = ir.Join(bound.rel, ir.Distinct(sub.rel), tuple(outer), tuple(range(len(outer))))
    hidden = tuple(ScopeCol(None, c.name, c.type_oid, c.collation, c.rte, hidden=True)
                   for c in sub.scope.cols)
    first = len(bound.scope.cols) + len(outer)
    keyed = [key_conjunct(first + i, param) for i, param in enumerate(params)]
    return Bound(rel, Scope(bound.scope.cols + hidden)), keyed


def semi_joins(ctx: PlanContext, subquery: Subquery, bound: Bound,
               where: list[Node]) -> tuple[Bound, list[Node]]:
    """Rewrite the IN/EXISTS conjuncts of ``where`` into semi-joins on ``bound``; a
    subquery's ``column = $n`` conjuncts come back as ``hidden column = $n`` conjuncts, which
    the top block keys on (elsewhere they stay filters holding a ``$n``: unsupported)."""
    rest: list[Node] = []
    keyed: list[Node] = []
    for conj in where:
        link = _in_subquery(conj)
        if link is not None:
            if correlated(bound.scope, link):
                raise PlanError("correlated IN/ANY subquery")
            pos = bound.scope.lookup(_fields(link["testexpr"]))
            bound, more = _join(ctx, subquery, bound, [pos], link["subselect"])
            keyed.extend(more)
            continue
        link = _exists(conj)
        if link is not None:
            outer, select = _decorrelate(bound.scope, link)
            bound, more = _join(ctx, subquery, bound, [bound.scope.lookup(f) for f in outer],
                                select)
            keyed.extend(more)
            continue
        rest.append(conj)
    return bound, rest + keyed


_ZERO_ON_EMPTY = ("count",)


def _scalar_aggregate(select: Node) -> Node | None:
    """The single bare aggregate call a scalar subquery selects, if that is what it is."""
    targets = select.get("targetList", [])
    if len(targets) != 1:
        return None
    val = targets[0]["ResTarget"]["val"]
    call = val.get("FuncCall")
    if call is None or call.get("over") is not None:
        return None
    name = [p["String"]["sval"] for p in call.get("funcname", []) if "String" in p][-1:]
    return val if name and name[0].lower() in ("count", "sum", "avg", "min", "max") else None


def _scalar_join(ctx: PlanContext, subquery: Subquery, bound: Bound,
                 link: Node) -> tuple[Bound, Node] | None:
    """LEFT JOIN the grouped form of a correlated aggregate subquery; the node to use in
    its place (None when the subquery is not of that form)."""
    if not correlated(bound.scope, link):
        return _constant_join(ctx, subquery, bound, link)
    select = _plain_select(link, "scalar subquery")
    agg = _scalar_aggregate(select)
    if agg is None:
        raise PlanError("correlated scalar subquery other than one aggregate")
    outer, inner = _correlation(bound.scope, select, "correlated scalar subquery")
    select["targetList"] = [{"ResTarget": {"val": ref}} for ref in inner] + [
        {"ResTarget": {"val": agg}}]
    select["groupClause"] = inner
    if correlated(bound.scope, {"subselect": {"SelectStmt": select}}):
        raise PlanError("correlated scalar subquery (correlated beyond equalities)")
    sub = subquery(ctx, {"SelectStmt": select})
    positions = [bound.scope.lookup(f) for f in outer]
    _check_pairs(ctx, bound, positions, sub)
    rel = ir.Join(bound.rel, sub.rel, tuple(positions), tuple(range(len(positions))), "left")
    hidden = tuple(ScopeCol(None, c.name, c.type_oid, c.collation, c.rte, hidden=True)
                   for c in sub.scope.cols)
    name = agg["FuncCall"]["funcname"][-1]["String"]["sval"].lower()
    node = {"WeirColumn": {"position": len(bound.scope.cols) + len(inner),
                           "zero": name in _ZERO_ON_EMPTY}}
    return Bound(rel, Scope(bound.scope.cols + hidden)), node


def _with_constant(bound: Bound) -> Bound:
    """``bound`` plus a hidden constant column (a join key that matches every row)."""
    cols = bound.rel.columns
    refs = [ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols)]
    rel = ir.Project(bound.rel, (*refs, ir.Const(1, T.INT4)), (*(c.name for c in cols), "?one?"))
    one = ScopeCol(None, "?one?", T.INT4, None, 0, hidden=True)
    return Bound(rel, Scope((*bound.scope.cols, one)))


def _constant_join(ctx: PlanContext, subquery: Subquery, bound: Bound,
                   link: Node) -> tuple[Bound, Node] | None:
    """An uncorrelated subquery that is one aggregate without GROUP BY has exactly one row:
    join it to every row (on a constant) and use its value."""
    select = link["subselect"].get("SelectStmt", {})
    if any(select.get(c) for c in ("groupClause", "havingClause", "limitCount", "limitOffset",
                                    "distinctClause")) or select.get("op", "SETOP_NONE") != \
            "SETOP_NONE" or _scalar_aggregate(select) is None:
        return None
    sub = _with_constant(subquery(ctx, {"SelectStmt": select}))
    left = _with_constant(bound)
    width = len(left.scope.cols)
    rel = ir.Join(left.rel, sub.rel, (width - 1,), (len(sub.scope.cols) - 1,))
    hidden = tuple(dataclasses.replace(c, hidden=True) for c in sub.scope.cols)
    node = {"WeirColumn": {"position": width, "zero": False}}
    return Bound(rel, Scope(left.scope.cols + hidden)), node


def scalar_subqueries(ctx: PlanContext, subquery: Subquery, bound: Bound,
                      stmt: Node) -> tuple[Bound, Node]:
    """Correlated aggregate subqueries in the select list -> LEFT JOINs with the aggregate
    grouped by the correlation columns (COUNT of no rows is 0, other aggregates NULL)."""
    if not any("SubLink" in json_keys(t) for t in stmt.get("targetList", [])):
        return bound, stmt
    return rewrite_targets(stmt, bound, _scalar_visit(ctx, subquery))


def where_scalar_subqueries(ctx: PlanContext, subquery: Subquery, bound: Bound,
                            where: list[Node]) -> tuple[Bound, list[Node]]:
    """Correlated aggregate subqueries inside WHERE conjuncts -> LEFT JOINs, as in the
    select list (the WHERE then compares with the joined, hidden aggregate column)."""
    out: list[Node] = []
    visit = _scalar_visit(ctx, subquery)
    for conj in where:
        if "SubLink" in json_keys(conj):
            conj, bound = thread_rewrite(conj, bound, visit)
        out.append(conj)
    return bound, out


def _scalar_visit(ctx: PlanContext, subquery: Subquery) -> Visit:
    def visit(node: Node, bound: Bound) -> tuple[Any, Bound] | None:
        link = node.get("SubLink")
        if link is None or link.get("subLinkType") != "EXPR_SUBLINK":
            return None
        done = _scalar_join(ctx, subquery, bound, link)
        if done is None:
            return node, bound
        return done[1], done[0]
    return visit


def thread_rewrite(node: Any, bound: Bound, visit: Visit) -> tuple[Any, Bound]:
    """``node`` (a parse tree) with each dict ``visit`` answers replaced by its answer,
    top down, threading the ``Bound`` each answer extends through them in tree order."""
    if isinstance(node, list):
        items = []
        for item in node:
            new, bound = thread_rewrite(item, bound, visit)
            items.append(new)
        return items, bound
    if not isinstance(node, dict):
        return node, bound
    done = visit(node, bound)
    if done is not None:
        return done
    out: Node = {}
    for key, value in node.items():
        out[key], bound = thread_rewrite(value, bound, visit)
    return out, bound


def rewrite_targets(stmt: Node, bound: Bound, visit: Visit) -> tuple[Bound, Node]:
    """``thread_rewrite`` over each select-list value; a target without an alias keeps the
    column name PostgreSQL gives its original expression."""
    targets = []
    for target in stmt.get("targetList", []):
        res = dict(target["ResTarget"])
        if res.get("name") is None and "val" in res:
            res["name"] = figure_colname(res["val"])
        res["val"], bound = thread_rewrite(res.get("val"), bound, visit)
        targets.append({"ResTarget": res})
    return bound, {**stmt, "targetList": targets}


def json_keys(tree: Any) -> set[str]:
    """Every dict key occurring in a JSON tree."""
    keys: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys.update(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys
