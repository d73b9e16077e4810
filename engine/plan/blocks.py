"""Helpers of the block planner (``planner``) that need no planner state.

Owns: the select list (``select_list``: ``*`` expansion, PostgreSQL's output names), where
keys live in a block's output (``key_columns``), hidden key-expression columns
(``with_computed``), LIMIT/OFFSET values (``limit_param``, ``limit_constant``), UNION
operands and their common column types (``union_operands``, ``unify_branches``), the
location-free text of an expression tree (``canonical``), and the refusal of GROUP BY /
DISTINCT / UNION on types whose equality is not equality of values
(``check_equality_types``).

Invariant: pure functions of their arguments; errors are ``PlanError`` with a reason.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.exprs import ExprBuilder
from engine.plan.from_clause import PlanContext
from engine.plan.names import figure_colname
from engine.plan.rules.keys import Key, KeySource
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.values import oids as T

Node = dict[str, Any]


def canonical(node: Any) -> str:
    """A JSON expression tree as text without source locations (equal expressions, equal
    text), to match select-list expressions with GROUP BY expressions."""
    def strip(n: Any) -> Any:
        if isinstance(n, dict):
            return {k: strip(v) for k, v in n.items() if k != "location"}
        if isinstance(n, list):
            return [strip(v) for v in n]
        return n
    return json.dumps(strip(node), sort_keys=True)


def limit_param(node: Node | None) -> int | None:
    """``$n`` (or ``$n::int4``/``int8``) as a LIMIT/OFFSET value: its number."""
    if node is None:
        return None
    cast = node.get("TypeCast")
    if cast is not None:
        names = [n["String"]["sval"] for n in cast["typeName"].get("names", []) if "String" in n]
        if names[-1:] not in (["int4"], ["int8"], ["integer"], ["bigint"]):
            return None
        node = cast["arg"]
    ref = node.get("ParamRef")
    return None if ref is None else int(ref["number"])


def limit_constant(node: Node | None, clause: str) -> int | None:
    """The value of a LIMIT/OFFSET clause: None when absent or NULL."""
    if node is None:
        return None
    const = node.get("A_Const")
    if const is None:
        raise PlanError(f"{clause} that is not a constant")
    if const.get("isnull"):
        return None
    if "ival" not in const:
        raise PlanError(f"{clause} that is not an integer")
    value = int(const["ival"].get("ival", 0))
    if value < 0:
        raise PlanError(f"negative {clause}")
    return value


def with_computed(bound: Bound, computed: list[ir.Expr], ctx: PlanContext) -> Bound:
    """``bound`` with key expressions appended as hidden columns (keys on expressions)."""
    cols = bound.rel.columns
    builder = ExprBuilder(bound.scope, ctx.catalog)
    refs = [ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols)]
    names = [c.name for c in cols] + [f"?keyexpr{j}?" for j in range(len(computed))]
    rel = ir.Project(bound.rel, (*refs, *computed), tuple(names))
    extra = tuple(ScopeCol(None, names[len(cols) + j], e.type_oid, builder.collation(e),
                           ctx.new_rte(), hidden=True) for j, e in enumerate(computed))
    return Bound(rel, Scope(bound.scope.cols + extra))


def select_list(stmt: Node, builder: ExprBuilder, scope: Scope,
                 grouped: bool) -> tuple[list[ir.Expr], list[str]]:
    """The select list's expressions (``*`` expanded) and PostgreSQL's names for them."""
    exprs: list[ir.Expr] = []
    names: list[str] = []
    if not stmt.get("targetList"):
        raise PlanError("empty select list")
    for target in stmt.get("targetList", []):
        res = target["ResTarget"]
        val = res["val"]
        star = _star(val)
        if star is not None:
            if grouped and star == "*":
                raise PlanError("* in a grouped query")
            for pos in scope.star(None if star == "*" else star):
                names.append(scope.cols[pos].name)
                exprs.append(builder.build({"ColumnRef": {"fields": _fields(scope.cols[pos])}}))
            continue
        expr = builder.build(val)
        if expr.type_oid == T.UNKNOWN:
            expr = builder.coerce(expr, T.TEXT)
        if expr.type_oid not in pgtypes.SUPPORTED_TYPES and T.ARRAY_ELEMENT.get(
                expr.type_oid) not in pgtypes.SUPPORTED_TYPES:  # arrays of them are output
            raise PlanError(f"result of type {pgtypes.type_name(expr.type_oid)}")
        exprs.append(expr)
        names.append(res.get("name") or figure_colname(val))
    return exprs, names


def key_columns(keys: list[Key], key_list: list[ir.Expr], exprs: list[ir.Expr],
                 base: int) -> tuple[list[ir.Expr], list[tuple[int, KeySource, int]]]:
    """Where each key lives in the block's output: a selected column equal to it, or an
    extra hidden column from position ``base`` on."""
    extra: list[ir.Expr] = []
    block_keys = []
    for k, e in zip(keys, key_list, strict=True):
        if e in exprs:  # the key column is selected anyway: key on that column
            block_keys.append((exprs.index(e), k.source, k.type_oid))
            continue
        if e not in extra:
            extra.append(e)
        block_keys.append((base + extra.index(e), k.source, k.type_oid))
    return extra, block_keys


def unify_branches(ctx: PlanContext, branches: list[Bound]) -> list[Bound]:
    """UNION ALL branches with their columns cast to the types PostgreSQL resolves them to
    (select_common_type per column); a column that is a literal in some branch and of
    another type elsewhere is refused (PostgreSQL types such literals from the others)."""
    width = len(branches[0].rel.columns)
    if any(len(b.rel.columns) != width for b in branches):
        raise PlanError("each UNION query must have the same number of columns")
    targets = []
    for i in range(width):
        types = [b.rel.columns[i].type_oid for b in branches]
        target = types[0] if len(set(types)) == 1 else pgtypes.common_type(types)
        if target is None:
            raise PlanError("UNION ALL column of types " + ", ".join(
                pgtypes.type_name(t) for t in types))
        if len({b.scope.cols[i].collation for b in branches}) > 1:
            raise PlanError("UNION ALL column with different collations")
        if target != types[0] or len(set(types)) > 1:
            for b in branches:
                if isinstance(b.rel, ir.Project) and isinstance(b.rel.exprs[i], ir.Const):
                    raise PlanError("UNION ALL column mixing a literal with other types")
        targets.append(target)
    builder = ExprBuilder(branches[0].scope, ctx.catalog)
    out = []
    for b in branches:
        cols = b.rel.columns
        if all(c.type_oid == t for c, t in zip(cols, targets, strict=True)):
            out.append(b)
            continue
        exprs = tuple(builder.coerce(ir.ColumnRef(i, c.type_oid), t)
                      for i, (c, t) in enumerate(zip(cols, targets, strict=True)))
        rel = ir.Project(b.rel, exprs, tuple(c.name for c in cols))
        scope = Scope(tuple(dataclasses.replace(c, type_oid=t)
                            for c, t in zip(b.scope.cols, targets, strict=True)))
        out.append(Bound(rel, scope))
    return out


def union_operands(stmt: Node) -> list[Node]:
    """A UNION ALL operand flattened into its UNION ALL operands (unless it has its own
    ORDER BY / LIMIT); any other operand is one branch, planned on its own."""
    own = any(stmt.get(c) for c in ("sortClause", "limitCount", "limitOffset", "withClause"))
    if stmt.get("op") == "SETOP_UNION" and stmt.get("all") and not own:
        return union_operands(stmt["larg"]) + union_operands(stmt["rarg"])
    return [stmt]


def _star(val: Node) -> str | None:
    fields = val.get("ColumnRef", {}).get("fields")
    if not fields or "A_Star" not in fields[-1]:
        return None
    if len(fields) == 1:
        return "*"
    if len(fields) == 2 and "String" in fields[0]:
        return str(fields[0]["String"]["sval"])
    raise PlanError("schema-qualified *")


def _fields(col: ScopeCol) -> list[Node]:
    parts = [col.name] if col.qualifier is None else [col.qualifier, col.name]
    return [{"String": {"sval": p}} for p in parts]


def check_equality_types(types: Sequence[int], positions: Iterable[int], what: str) -> None:
    """Refuse ``what`` (GROUP BY, DISTINCT, UNION) on a column at ``positions`` whose type's
    equality is not equality of the engine's values."""
    for pos in positions:
        why = pgtypes.NOT_EQUAL_BY_VALUE.get(types[pos])
        if why is not None:
            raise PlanError(f"{what} on a {pgtypes.type_name(types[pos])} value ({why})")
