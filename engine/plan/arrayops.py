"""Array columns, operators and functions for the planner.

Owns: which array types pass as column values (``ARRAY_TYPES``: arrays of element types whose
PostgreSQL equality is Python's equality of the canonical values - integers, text and
varchar under a deterministic collation, bool, uuid, date), and the planned forms with their
result types: ``x = ANY(array)`` (not a parameter array: that is a lookup key, see
``rules.keys``), ``@>``, ``<@``, ``&&``, ``cardinality(a)``, ``array_length(a, n)`` with a
literal ``n``, subscripts ``a[i]`` / ``a[i][j]`` (integer indexes), one slice ``a[lo:hi]``
(either bound may be omitted) and ``ARRAY[x, ...]`` of scalars of one of those element
types (resolved to their common type as PostgreSQL does). Array literals are ``'{...}'``
strings typed by the other side. Kernels: ``engine.dataflow.pgarrays``.

Invariant: anything else on arrays (comparisons, ordering, GROUP BY / DISTINCT, several
slices, nested ``ARRAY[ARRAY[...]]``, ``ARRAY[]``,
other functions, arrays of other element types) raises ``PlanError`` with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.plan import ir, pgtypes
from engine.plan.scope import PlanError, column_refs
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.exprs import ExprBuilder

Node = dict[str, Any]

#: Element types whose equality in PostgreSQL is equality of the canonical values.
EXACT_ELEMENTS = frozenset({T.INT2, T.INT4, T.INT8, T.TEXT, T.VARCHAR, T.BOOL, T.UUID, T.DATE})
ARRAY_TYPES = frozenset(T.ARRAY_OF[e] for e in EXACT_ELEMENTS)
ARRAY_OPERATORS = frozenset({"@>", "<@", "&&"})
ARRAY_FUNCTIONS = frozenset({"cardinality", "array_length"})
_KERNELS = {"@>": "array_contains", "<@": "array_contained", "&&": "array_overlap"}


def applies(name: str, left: ir.Expr, right: ir.Expr) -> bool:
    """Is ``left name right`` an array operator (``@>`` and ``<@`` are jsonb's too)?"""
    return name == "&&" or (name in ARRAY_OPERATORS and (
        left.type_oid in T.ARRAY_ELEMENT or right.type_oid in T.ARRAY_ELEMENT))


def _deterministic(b: ExprBuilder, expr: ir.Expr, what: str) -> None:
    """Text elements compare under the array's collation: a nondeterministic one (equal
    texts that differ in bytes) is refused."""
    found = {b.colls.get(i) for i in column_refs(expr)} - {None}
    for coll in found or {b.catalog.default_collation}:
        if coll is not None and coll in b.catalog.nondeterministic:
            raise PlanError(f"{what} on text under nondeterministic collation {coll}")


def _array(b: ExprBuilder, expr: ir.Expr, what: str) -> ir.Expr:
    if expr.type_oid not in ARRAY_TYPES:
        raise PlanError(f"{what} on {pgtypes.type_name(expr.type_oid)} (arrays of integers, "
                        "text, varchar, bool, uuid and date only)")
    if T.ARRAY_ELEMENT[expr.type_oid] in (T.TEXT, T.VARCHAR):
        _deterministic(b, expr, what)
    return expr


def array_operator(b: ExprBuilder, name: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    if left.type_oid == T.UNKNOWN and right.type_oid in ARRAY_TYPES:
        left = b.coerce(left, right.type_oid)
    elif right.type_oid == T.UNKNOWN and left.type_oid in ARRAY_TYPES:
        right = b.coerce(right, left.type_oid)
    left, right = _array(b, left, f"operator {name}"), _array(b, right, f"operator {name}")
    if left.type_oid != right.type_oid:
        raise PlanError(f"operator {pgtypes.type_name(left.type_oid)} {name} "
                        f"{pgtypes.type_name(right.type_oid)}")
    return ir.Func(_KERNELS[name], (left, right), T.BOOL)


def any_op(b: ExprBuilder, body: Node) -> ir.Expr:
    """``x = ANY(array expression)``; a parameter array that is no lookup key keeps the
    reason the key rule gives."""
    op = [n.get("String", {}).get("sval") for n in body.get("name", [])]
    if "ParamRef" in repr(body.get("rexpr")) or op != ["="]:
        raise PlanError("op ANY (array) other than a lookup key column = ANY($n) of the "
                        "column's type (grouped on, if aggregated)")
    value, array = b.build(body["lexpr"]), b.build(body["rexpr"])
    if array.type_oid == T.UNKNOWN and value.type_oid in T.ARRAY_OF:
        array = b.coerce(array, T.ARRAY_OF[value.type_oid])  # '{1,2}' typed by the value
    array = _array(b, array, "= ANY")
    element = T.ARRAY_ELEMENT[array.type_oid]
    value = b.coerce(value, element)
    if not pgtypes.comparable(value.type_oid, element):
        raise PlanError(f"{pgtypes.type_name(value.type_oid)} = ANY "
                        f"({pgtypes.type_name(array.type_oid)})")
    if element in (T.TEXT, T.VARCHAR):
        b.check_equality((value,))
    return ir.Func("array_any_eq", (value, array), T.BOOL)


def array_func(b: ExprBuilder, name: str, body: Node) -> ir.Expr:
    args = [b.build(a) for a in body.get("args", [])]
    if name == "cardinality" and len(args) == 1:
        return ir.Func("cardinality", (_array(b, args[0], "cardinality()"),), T.INT4)
    if name == "array_length" and len(args) == 2 and isinstance(args[1], ir.Const) \
            and args[1].type_oid == T.INT4:
        return ir.Func("array_length", (_array(b, args[0], "array_length()"), args[1]),
                       T.INT4)
    raise PlanError(f"{name}() with these arguments (array_length's dimension must be an "
                    "integer literal)")


def subscript(b: ExprBuilder, body: Node) -> ir.Expr:
    """``a[i]`` (``a[i][j]`` ...): the element, of the array's element type; NULL for a NULL
    array or index, an index out of bounds or a count of subscripts other than the array's
    dimensions (as PostgreSQL)."""
    array = _array(b, b.build(body["arg"]), "array subscript")
    items = body.get("indirection", [])
    if any("A_Indices" not in item for item in items):
        raise PlanError("field selection")
    if any(item["A_Indices"].get("is_slice") for item in items):
        return _slice(b, array, items)
    indexes: list[ir.Expr] = []
    for item in items:
        bounds = item["A_Indices"]
        if bounds.get("lidx") is not None or bounds.get("uidx") is None:
            raise PlanError("array slice or field selection")
        indexes.append(_index(b, bounds["uidx"]))
    return ir.Func("array_subscript", (array, *indexes), T.ARRAY_ELEMENT[array.type_oid])


def _index(b: ExprBuilder, node: Node) -> ir.Expr:
    index = b.coerce(b.build(node), T.INT4)
    if index.type_oid not in (T.INT2, T.INT4):
        raise PlanError(f"array subscript of type {pgtypes.type_name(index.type_oid)}")
    return index


_SLICES = {(True, True): "array_slice", (True, False): "array_slice_from",
           (False, True): "array_slice_to", (False, False): "array_slice_all"}


def _slice(b: ExprBuilder, array: ir.Expr, items: list[Node]) -> ir.Expr:
    """``a[lo:hi]`` (bounds may be omitted) of a one-dimensional array (a slice of a
    multidimensional one is computed upstream: the kernel raises)."""
    if len(items) != 1:
        raise PlanError("array slice with several subscripts")
    bounds = items[0]["A_Indices"]
    lo, hi = bounds.get("lidx"), bounds.get("uidx")
    args = tuple(_index(b, n) for n in (lo, hi) if n is not None)
    return ir.Func(_SLICES[(lo is not None, hi is not None)], (array, *args), array.type_oid)


def param_flag(b: ExprBuilder, body: Node) -> ir.Expr:
    """The placeholder of an EXISTS with a parameter (``engine.plan.param_antijoins``): NULL
    from the dataflow, replaced by the host (``ranges.iter_cut``)."""
    position = body["position"]
    return ir.Func("param_flag", (ir.ColumnRef(position, b.scope.cols[position].type_oid),),
                   T.BOOL)


def array_constructor(b: ExprBuilder, body: Node) -> ir.Expr:
    """``ARRAY[x, y, ...]`` of scalars: their common type (unknown literals as text), which
    must be an element type of ``ARRAY_TYPES``; NULL elements kept."""
    nodes = body.get("elements", [])
    if not nodes:
        raise PlanError("ARRAY[] without elements")
    if any("A_ArrayExpr" in n for n in nodes):
        raise PlanError("ARRAY constructor of arrays")
    elements = [b.build(n) for n in nodes]
    element = pgtypes.common_type([e.type_oid for e in elements])
    if element not in EXACT_ELEMENTS:
        raise PlanError("ARRAY constructor of "
                        + (pgtypes.type_name(element) if element is not None else
                           "different types"))
    elements = [b.coerce(e, element) for e in elements]
    if any(e.type_oid != element for e in elements):
        raise PlanError("ARRAY constructor of different types")
    if element in (T.TEXT, T.VARCHAR):
        for e in elements:
            _deterministic(b, e, "ARRAY constructor")
    return ir.Func("array_construct", tuple(elements), T.ARRAY_OF[element])
