"""Output column names as PostgreSQL derives them for unnamed select-list items.

Owns: ``figure_colname`` — PostgreSQL's FigureColname rules over libpg_query JSON nodes: a
column reference gives its column name, a function call its function name, a cast the name of
its argument (else the type's name), CASE its ELSE branch's name (else "case"), COALESCE
"coalesce", NULLIF "nullif", EXISTS "exists", a scalar subquery its first column's name,
a subscript ``a[i]`` its array's name, everything else "?column?".
"""

from __future__ import annotations

from typing import Any

Node = dict[str, Any]
_UNKNOWN = "?column?"

#: SQL-syntax type names as PostgreSQL prints them in a column name.
_TYPE_NAMES = {"int4": "int4", "int": "int4", "integer": "int4", "int8": "int8",
               "bigint": "int8", "int2": "int2", "smallint": "int2", "float8": "float8",
               "float4": "float4", "bool": "bool", "boolean": "bool", "numeric": "numeric",
               "text": "text", "varchar": "varchar", "bpchar": "bpchar", "date": "date",
               "timestamp": "timestamp", "timestamptz": "timestamptz", "uuid": "uuid"}


def _strength(node: Node | None) -> tuple[str | None, int]:
    """(name, strength): 2 = a real name, 1 = a fallback keyword name, 0 = none."""
    if not node:
        return None, 0
    kind, body = next(iter(node.items()))
    if kind == "ColumnRef":
        last = body["fields"][-1]
        return (last["String"]["sval"], 2) if "String" in last else (None, 0)
    if kind == "FuncCall":
        return str(body["funcname"][-1]["String"]["sval"]), 2
    if kind == "TypeCast":
        name, strength = _strength(body["arg"])
        if strength <= 1:
            names = [n["String"]["sval"] for n in body["typeName"].get("names", [])
                     if "String" in n]
            return _TYPE_NAMES.get(names[-1], names[-1]), 1
        return name, strength
    if kind == "CaseExpr":
        name, strength = _strength(body.get("defresult"))
        return (name, strength) if strength > 1 else ("case", 1)
    figure = _KEYWORD_NAMES.get(kind)
    if figure is None:
        return None, 0
    result: tuple[str | None, int] = figure(body)
    return result


def _sublink(body: Node) -> tuple[str | None, int]:
    kind = body.get("subLinkType")
    if kind == "EXISTS_SUBLINK":
        return "exists", 2
    if kind == "ARRAY_SUBLINK":
        return "array", 2
    if kind == "EXPR_SUBLINK":
        targets = body["subselect"].get("SelectStmt", {}).get("targetList", [])
        if targets:
            res = targets[0]["ResTarget"]
            if res.get("name"):
                return res["name"], 2
            return _strength(res["val"])
    return None, 0


def _a_expr(body: Node) -> tuple[str | None, int]:
    return ("nullif", 2) if body.get("kind") == "AEXPR_NULLIF" else (None, 0)


_KEYWORD_NAMES: dict[str, Any] = {
    "CoalesceExpr": lambda b: ("coalesce", 2),
    "MinMaxExpr": lambda b: ("greatest" if b.get("op") == "IS_GREATEST" else "least", 2),
    "A_Expr": _a_expr,
    "SubLink": _sublink,
    "A_ArrayExpr": lambda b: ("array", 2),
    "RowExpr": lambda b: ("row", 2),
    "A_Indirection": lambda b: _strength(b.get("arg")),  # subscripts keep the array's name
}


def figure_colname(node: Node) -> str:
    name, strength = _strength(node)
    return name if strength > 0 and name is not None else _UNKNOWN
