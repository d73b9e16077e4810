"""``$n`` equalities inside a FROM, IN or EXISTS subquery, pulled up to the enclosing keys.

Owns: ``pull_params`` (a plain subquery's top-level ``column = $n`` conjuncts -> the subquery
without them, each column added to its select list), ``pulled_conjuncts`` (those
conjuncts rebuilt over the enclosing FROM clause's hidden columns, for key choice) and
``key_conjunct`` (one such ``hidden column = $n``; the semi-joins of
``engine.plan.subqueries`` use it for the columns they pull out of IN / EXISTS subqueries).

``(SELECT ... FROM t WHERE t.a = $1 AND rest) x`` returns the rows of ``(SELECT ..., t.a
FROM t WHERE rest) x`` whose ``a`` equals ``$1``, less the column: a filter on a plain
subquery (no GROUP BY, aggregate, DISTINCT ON, LIMIT / OFFSET, window or set operation)
commutes with it. Under a plain DISTINCT too: the rows with ``a`` equal to ``$1`` of
``SELECT DISTINCT ..., t.a`` are the distinct rows under ``$1`` (``a`` is the same in all
of them); DISTINCT ON would pick each group's first row before the filter. Above an
inner join or a comma join the filter stays exact, so the enclosing block keys on the
hidden column as on any ``column = $n`` (``rules.keys``; its conjunct names the column
as ``WeirColumn``). The planner pulls only from FROM items that
are not on the NULL-padded side of an outer join (``PlanContext.pulled`` is None there).

Invariant: a pulled conjunct the enclosing block does not key (it is not the top block, or
the column is compared with two parameters) stays a filter holding a ``$n``, which the
expression builder refuses ("parameter outside an equality"), so nothing is served inexactly.
"""

from __future__ import annotations

import copy
from typing import Any

from engine.plan.grouping import has_aggregates
from engine.plan.rules.keys import param_equality
from engine.plan.scope import Scope

Node = dict[str, Any]
_BLOCKING = ("groupClause", "havingClause", "limitCount", "limitOffset", "windowClause",
             "withClause", "valuesLists")
_PLAIN_DISTINCT: list[Node] = [{}]  # DISTINCT without ON, as the parser gives it


def pull_params(sub: Node) -> tuple[Node, list[Node]]:
    """``sub`` (a subquery's ``{"SelectStmt": ...}``) without its top-level ``column = $n``
    conjuncts, each column appended to its select list; and those conjuncts' ``$n`` sides."""
    select = sub.get("SelectStmt", {})
    if any(select.get(c) for c in _BLOCKING) or select.get("op", "SETOP_NONE") != "SETOP_NONE" \
            or select.get("distinctClause") not in (None, [], _PLAIN_DISTINCT) \
            or has_aggregates([select.get("targetList"), select.get("sortClause")]) \
            or "'over'" in repr(select.get("targetList")):
        return sub, []
    where = select.get("whereClause")
    body = (where or {}).get("BoolExpr")
    conj = body["args"] if body is not None and body.get("boolop") == "AND_EXPR" else \
        [where] if where is not None else []
    pulled: list[Node] = []
    kept: list[Node] = []
    targets: list[Node] = []
    for node in conj:
        sides = param_equality(node)
        if sides is None:
            kept.append(node)
            continue
        column, param = sides
        targets.append({"ResTarget": {"name": f"?pulled{len(targets)}?", "val": column}})
        pulled.append(param)
    if not pulled:
        return sub, []
    select = copy.copy(select)
    select["whereClause"] = (None if not kept else kept[0] if len(kept) == 1 else
                             {"BoolExpr": {"boolop": "AND_EXPR", "args": kept}})
    select["targetList"] = [*select.get("targetList", []), *targets]
    return {"SelectStmt": select}, pulled


def pulled_conjuncts(scope: Scope, entries: list[tuple[int, int, Node]]) -> list[Node]:
    """``(rte, index, $n side)`` of each pulled conjunct -> ``hidden column = $n`` over
    ``scope`` (the enclosing FROM clause), the column found by its range entry and name."""
    out: list[Node] = []
    for rte, i, param in entries:
        name = f"?pulled{i}?"
        pos = next(p for p, c in enumerate(scope.cols) if c.rte == rte and c.name == name)
        out.append(key_conjunct(pos, param))
    return out


def key_conjunct(position: int, param: Node) -> Node:
    """``column at position = $n`` (``param`` as written, possibly cast) as a WHERE
    conjunct the key choice reads like ``column = $n``."""
    return {"A_Expr": {"kind": "AEXPR_OP", "name": [{"String": {"sval": "="}}],
                       "lexpr": {"WeirColumn": {"position": position}}, "rexpr": param}}
