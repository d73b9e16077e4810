"""Parse-tree rewrites that turn a form into an equivalent one the screen and planner know.

Owns: ``values_in_lists`` — ``x IN (VALUES (c1), (c2), ...)`` (and ``x = ANY (VALUES ...)``)
whose rows are one constant each becomes ``x IN (c1, c2, ...)``; and a FROM item ``(VALUES
...) alias`` becomes a ``RangeSubselect`` whose subquery is ``{"WeirValues": {"rows": ...}}``
(the same rows, planned by ``engine.plan.values_items``; the screen walks its cells but no
longer sees a VALUES SELECT).

Invariant: a rewrite happens only where PostgreSQL gives both forms the same result. VALUES
types its column first (the common type of its constants) and then compares; an IN list
types the value and the constants together. For constants that are all integers or decimal
numbers, or all strings, both resolve to the same comparison; a NULL row is left alone (a
lone NULL types the VALUES column as text, which an integer value cannot compare with).
The constants keep their source locations, so lifting them into keys works as for a list.
"""

from __future__ import annotations

from typing import Any

Node = dict[str, Any]
_NUMBERS = {"ival", "fval"}


def _pure_values(select: Node) -> bool:
    """A bare ``VALUES (...), ...`` (no ORDER BY, LIMIT or WITH around it)."""
    return bool(select.get("valuesLists")) and not (
        set(select) - {"valuesLists", "limitOption", "op"}) and \
        select.get("op", "SETOP_NONE") == "SETOP_NONE"


def _constants(select: Node) -> list[Node] | None:
    """The constants of a one-column VALUES list of constants of one kind, else None."""
    if not _pure_values(select):
        return None
    items: list[Node] = []
    for row in select.get("valuesLists", []):
        cells = row.get("List", {}).get("items", [])
        if len(cells) != 1 or "A_Const" not in cells[0]:
            return None
        items.append(cells[0])
    kinds = {next((k for k in c["A_Const"] if k != "location"), "isnull") for c in items}
    if not items or not (kinds <= _NUMBERS or kinds == {"sval"}):
        return None
    return items


def _rewrite(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite(n) for n in node]
    if not isinstance(node, dict):
        return node
    item = node.get("RangeSubselect")
    if item is not None and _pure_values(item.get("subquery", {}).get("SelectStmt", {})):
        rows = [row.get("List", {}).get("items", []) for row in
                item["subquery"]["SelectStmt"]["valuesLists"]]
        return {"RangeSubselect": {**item, "subquery": {"WeirValues": {"rows": _rewrite(rows)}}}}
    link = node.get("SubLink")
    if link is not None and link.get("subLinkType") == "ANY_SUBLINK":
        op = [n.get("String", {}).get("sval") for n in link.get("operName", [])]
        items = _constants(link.get("subselect", {}).get("SelectStmt", {}))
        if items is not None and op in ([], ["="]) and link.get("testexpr") is not None:
            return {"A_Expr": {"kind": "AEXPR_IN", "name": [{"String": {"sval": "="}}],
                               "lexpr": _rewrite(link["testexpr"]),
                               "rexpr": {"List": {"items": items}},
                               "location": link.get("location", -1)}}
    return {k: _rewrite(v) for k, v in node.items()}


def values_in_lists(stmt: Node) -> Node:
    """``stmt`` with every ``x IN (VALUES (c), ...)`` of constants as an IN list."""
    out: Node = _rewrite(stmt)
    return out
