"""Rule: key choice — which top-level WHERE equalities become the reader's lookup key.

Owns: ``KeySource``, ``Key`` and ``choose_keys``. A conjunct ``column = $n`` always becomes a
key column (v1 supports parameters only there); ``column = literal`` becomes one when the
literal can be lifted: its kind matches the column's type the way PostgreSQL would type it
(an untyped string for any type the planner can parse literals of, an integer literal for
integer columns, a decimal literal for numeric, a boolean for bool), and equality on the
column is plain value equality (deterministic collation, orderable type). Every other
conjunct stays a filter, with its literal pinned into the plan (and into the identity).

Invariant: the decision depends on the statement's shape, the literal kinds and the catalog,
never on literal values, so all texts of one shape share one plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.plan import ir, pgtypes
from engine.plan.exprs import ExprBuilder, deterministic
from engine.plan.literals import can_type
from engine.plan.scope import PlanError, Scope, ScopeCol
from engine.sql.catalog import Catalog
from engine.sql.text import Literal
from engine.values import oids as T

Node = dict[str, Any]

_LIFTABLE: dict[str, tuple[int, ...] | None] = {
    "str": None, "int": pgtypes.INTEGER_TYPES, "numeric": (T.NUMERIC,), "bool": (T.BOOL,)}


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where a reader key value comes from: statement parameter ``$param`` or the literal
    with index ``literal`` in the statement text (``ParsedQuery.literals``)."""

    param: int | None = None
    literal: int | None = None
    #: An IN-list key: one lookup per alternative (each a param or literal source).
    alternatives: tuple[KeySource, ...] = ()
    #: ``column = ANY($param)``: the parameter is an array of the column's type, one lookup
    #: per distinct non-NULL element (nested arrays flattened, as ANY does).
    array: bool = False

    @property
    def multi(self) -> bool:
        """The key may need several lookups (or none), merged by the host."""
        return bool(self.alternatives) or self.array


@dataclass(frozen=True, slots=True)
class Key:
    position: int  # in the FROM+WHERE scope
    source: KeySource
    type_oid: int


def choose_keys(scope: Scope, where: list[Node], literals: tuple[Literal, ...], lift: bool,
                catalog: Catalog, lift_in: bool = False,
                computed: list[ir.Expr] | None = None) -> tuple[list[Key], list[Node]]:
    """Split WHERE conjuncts into reader keys and the conjuncts that remain filters;
    ``lift_in`` also keys ``column IN (values...)`` (one lookup per value). When
    ``computed`` is a list, ``expression = $n`` (or a liftable literal) is keyed too: the
    expression is appended to ``computed`` and its key position is
    ``len(scope.cols) + its index`` (the caller projects those columns)."""
    index = {lit.location: i for i, lit in enumerate(literals)}
    keys: list[Key] = []
    rest: list[Node] = []
    for conj in where:
        key = _key(scope, conj, literals, index, lift, catalog)
        if key is None and lift_in:
            key = _in_key(scope, conj, literals, index, lift, catalog)
        if key is None and lift_in:
            key = _any_key(scope, conj, catalog)
        if key is None and computed is not None:
            key = _expr_key(scope, conj, literals, index, lift, catalog, computed)
        if key is None or any(k.position == key.position for k in keys):
            if key is not None and key.source.param is not None:
                raise PlanError("a column compared with two parameters")
            rest.append(conj)
        else:
            keys.append(key)
    return keys, rest


def _equality_sides(node: Node) -> tuple[Node, Node] | None:
    body = node.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_OP":
        return None
    if [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:] != ["="]:
        return None
    left, right = _uncast(body.get("lexpr") or {}), _uncast(body.get("rexpr") or {})
    if "ColumnRef" not in left and "WeirColumn" not in left:
        left, right = right, left
    if "WeirColumn" in left and "ParamRef" in right:
        return left, right  # a column pulled up from a subquery (``engine.plan.pullup``)
    if "ColumnRef" not in left or not ("ParamRef" in right or "A_Const" in right):
        return None
    if any("String" not in f for f in left["ColumnRef"]["fields"]):
        return None
    return left, right


def param_equality(node: Node) -> tuple[Node, Node] | None:
    """``(column reference, $n side as written)`` when ``node`` is ``column = $n`` (either
    way round, ``$n`` possibly cast), else None."""
    sides = _equality_sides(node)
    if sides is None or "ParamRef" not in sides[1] or "ColumnRef" not in sides[0]:
        return None
    body = node["A_Expr"]
    lexpr = body.get("lexpr") or {}
    return sides[0], body["rexpr"] if "ColumnRef" in lexpr else lexpr


def _uncast(node: Node) -> Node:
    """``$n::type`` -> ``$n`` with the cast type remembered (drivers add such casts)."""
    cast = node.get("TypeCast")
    if cast is None or "ParamRef" not in cast.get("arg", {}):
        return node
    names = [n["String"]["sval"] for n in cast["typeName"].get("names", []) if "String" in n]
    if cast["typeName"].get("typmods") or cast["typeName"].get("arrayBounds") or not names:
        return node
    return {"ParamRef": dict(cast["arg"]["ParamRef"], cast=names[-1])}


def _key(scope: Scope, node: Node, literals: tuple[Literal, ...], index: dict[int, int],
         lift: bool, catalog: Catalog) -> Key | None:
    sides = _equality_sides(node)
    if sides is None:
        return None
    left, right = sides
    pos = left["WeirColumn"]["position"] if "WeirColumn" in left else \
        scope.lookup(tuple(f["String"]["sval"] for f in left["ColumnRef"]["fields"]))
    col = scope.cols[pos]
    if "ParamRef" in right:
        cast = right["ParamRef"].get("cast")
        if cast is not None and pgtypes.CAST_TYPES.get(cast) != col.type_oid:
            return None  # a cross-type comparison: left to the expression (unsupported)
        _check_param_column(col, catalog)
        return Key(pos, KeySource(param=int(right["ParamRef"]["number"])), col.type_oid)
    i = index.get(int(right["A_Const"].get("location", -1)))
    if not lift or i is None or not _liftable(literals[i].kind, col, catalog):
        return None
    return Key(pos, KeySource(literal=i), col.type_oid)


def _in_key(scope: Scope, node: Node, literals: tuple[Literal, ...], index: dict[int, int],
            lift: bool, catalog: Catalog) -> Key | None:
    """``column IN (v1, v2, ...)`` with every v a parameter or a liftable literal."""
    body = node.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_IN" or "ColumnRef" not in body["lexpr"]:
        return None
    if [n.get("String", {}).get("sval") for n in body.get("name", [])] != ["="]:
        return None
    items = body["rexpr"].get("List", {}).get("items", [])
    fields = body["lexpr"]["ColumnRef"]["fields"]
    if not items or any("String" not in f for f in fields):
        return None
    pos = scope.lookup(tuple(f["String"]["sval"] for f in fields))
    alternatives = []
    for item in items:
        sides = _equality_sides({"A_Expr": {"kind": "AEXPR_OP", "name": [
            {"String": {"sval": "="}}], "lexpr": body["lexpr"], "rexpr": item}})
        key = None if sides is None else _key(scope, {"A_Expr": {
            "kind": "AEXPR_OP", "name": [{"String": {"sval": "="}}], "lexpr": body["lexpr"],
            "rexpr": item}}, literals, index, lift, catalog)
        if key is None:
            return None
        alternatives.append(key.source)
    return Key(pos, KeySource(alternatives=tuple(alternatives)), scope.cols[pos].type_oid)


def _any_key(scope: Scope, node: Node, catalog: Catalog) -> Key | None:
    """``column = ANY($n)`` (or ``$n::type[]`` with the column's type): how drivers pass a
    list. PostgreSQL types an untyped ``$n`` as an array of the column's type."""
    body = node.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_OP_ANY" or "ColumnRef" not in body["lexpr"]:
        return None
    if [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:] != ["="]:
        return None
    fields = body["lexpr"]["ColumnRef"]["fields"]
    right = body.get("rexpr") or {}
    cast = right.get("TypeCast")
    if cast is not None:
        type_name = cast["typeName"]
        names = [n["String"]["sval"] for n in type_name.get("names", []) if "String" in n]
        if "ParamRef" not in cast.get("arg", {}) or type_name.get("typmods") or len(
                type_name.get("arrayBounds") or []) != 1 or not names:
            return None
        right = {"ParamRef": dict(cast["arg"]["ParamRef"], cast=names[-1])}
    if "ParamRef" not in right or any("String" not in f for f in fields):
        return None
    pos = scope.lookup(tuple(f["String"]["sval"] for f in fields))
    col = scope.cols[pos]
    cast_name = right["ParamRef"].get("cast")
    if cast_name is not None and pgtypes.CAST_TYPES.get(cast_name) != col.type_oid:
        return None  # a cross-type comparison: left to the expression (unsupported)
    if col.type_oid not in T.ARRAY_OF:
        return None
    _check_param_column(col, catalog)
    return Key(pos, KeySource(param=int(right["ParamRef"]["number"]), array=True), col.type_oid)


def _expr_key(scope: Scope, node: Node, literals: tuple[Literal, ...], index: dict[int, int],
              lift: bool, catalog: Catalog, computed: list[ir.Expr]) -> Key | None:
    """``expression = $n`` / ``= literal`` with a column-free right side and an expression
    over the FROM columns (no parameters, aggregates or subqueries) on the left."""
    body = node.get("A_Expr")
    if body is None or body.get("kind") != "AEXPR_OP":
        return None
    if [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:] != ["="]:
        return None
    left, right = body.get("lexpr") or {}, _uncast(body.get("rexpr") or {})
    if not ("ParamRef" in right or "A_Const" in right) or "ColumnRef" in left:
        left, right = right, _uncast(body.get("lexpr") or {})
    if not ("ParamRef" in right or "A_Const" in right) or not left:
        return None
    if _mentions(left, ("ParamRef", "SubLink")) or "ColumnRef" in left:
        return None
    try:
        builder = ExprBuilder(scope, catalog, clause="WHERE")
        expr = builder.build(left)
        builder.check_equality((expr,))
    except PlanError:
        return None  # not keyable: it stays a filter (which reports any real problem)
    probe = ScopeCol(None, "?expr?", expr.type_oid, builder.collation(expr), 0)
    if "ParamRef" in right:
        cast = right["ParamRef"].get("cast")
        if cast is not None and pgtypes.CAST_TYPES.get(cast) != expr.type_oid:
            return None
        _check_param_column(probe, catalog)
        source = KeySource(param=int(right["ParamRef"]["number"]))
    else:
        i = index.get(int(right["A_Const"].get("location", -1)))
        if not lift or i is None or not _liftable(literals[i].kind, probe, catalog):
            return None
        source = KeySource(literal=i)
    if expr in computed:
        return Key(len(scope.cols) + computed.index(expr), source, expr.type_oid)
    computed.append(expr)
    return Key(len(scope.cols) + len(computed) - 1, source, expr.type_oid)


def _mentions(tree: Any, kinds: tuple[str, ...]) -> bool:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(k in node for k in kinds):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _liftable(kind: str, col: ScopeCol, catalog: Catalog) -> bool:
    if kind not in _LIFTABLE or col.type_oid not in pgtypes.ORDERABLE_TYPES:
        return False
    allowed = _LIFTABLE[kind]
    if allowed is not None and col.type_oid not in allowed:
        return False
    return can_type(col.type_oid) and deterministic(col.collation, catalog)


def _check_param_column(col: ScopeCol, catalog: Catalog) -> None:
    if col.type_oid not in pgtypes.ORDERABLE_TYPES:
        raise PlanError(f"parameter compared with column {col.name} of type "
                        f"{pgtypes.type_name(col.type_oid)}")
    if not deterministic(col.collation, catalog):
        raise PlanError(f"parameter compared under nondeterministic collation {col.collation}")
