"""Range parameters: ``column < $n`` (``<=``, ``>``, ``>=``, ``BETWEEN $a AND $b``) cut by the host.

Owns: ``RangeCut`` (one bound: a reader output column, an operator, the parameter giving the
bound), ``choose_ranges`` (which top-level WHERE conjuncts become cuts) and ``cut_rows`` /
``range_value_ok`` (applying them to a lookup's rows with PostgreSQL's comparison semantics).

How a range query is served: the reader is keyed on the statement's equality keys only (or on
nothing), so its state holds every row of the key, sorted by the ORDER BY; the host keeps the
rows whose column satisfies every cut, then applies LIMIT/OFFSET (a ``Page``: a constant
LIMIT is never pushed into a top-k under a range, since the cut comes after it). The cut
column is in the reader's output (as a hidden column after the visible ones, when not
selected); the host drops hidden columns after cutting.

Exactness: a cut is only made on a column whose type's order Python reproduces on the
canonical values (integers, numeric with NaN above every number, floats with NaN above every
float, text and varchar under a byte-order collation, or under a libc collation weir
reproduces (``engine.values.collation``: such a cut compares sort keys, is never bisected
and gets no range-partial state), bytea, uuid, bool, date, timestamp,
timestamptz with ``infinity``/``-infinity``, BC years and years after 9999 kept as text by
the codecs). A NULL bound or column value satisfies no cut, as in SQL. A bound that is
text the codecs could not read (``TextValue`` other than ``infinity``) sends the statement
upstream (``range_value_ok``).
"""

from __future__ import annotations

import dataclasses
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.dataflow.ordering import Desc
from engine.dataflow.state.intervals import value_order
from engine.plan import pgtypes
from engine.plan.exprs import ExprBuilder
from engine.plan.ir import SortKey
from engine.plan.scope import PlanError, Scope
from engine.sql.catalog import Catalog
from engine.values import TextValue
from engine.values import oids as T
from engine.values.collation import key_function

Node = dict[str, Any]

#: Types a cut may compare (see the module docstring).
RANGE_TYPES = frozenset({T.INT2, T.INT4, T.INT8, T.NUMERIC, T.FLOAT4, T.FLOAT8, T.TEXT,
                         T.VARCHAR, T.NAME, T.BYTEA, T.UUID, T.BOOL, T.DATE, T.TIMESTAMP,
                         T.TIMESTAMPTZ})
#: a WHERE conjunct ``engine.plan.param_antijoins`` leaves for a ``not_any`` cut:
#: ``{NOT_ANY_NODE: {"position": array column, "param": n, "type": element type}}``
NOT_ANY_NODE = "WeirNotAnyParam"
#: a select-list value ``param_antijoins`` leaves for a ``flag`` step (same fields)
FLAG_NODE = "WeirParamFlag"


def host_cuts(scope: Scope, where: list[Node], catalog: Catalog, top: bool,
              stmt: Node) -> tuple[list[RangeCut], list[Node]]:
    """:func:`choose_ranges` in the top block, plus the ``flag`` steps of its select list;
    elsewhere none (a parameter step below the top block raises)."""
    flags = [t["ResTarget"]["val"][FLAG_NODE] for t in stmt.get("targetList", [])
             if FLAG_NODE in (t.get("ResTarget", {}).get("val") or {})]
    if not top:
        if flags or any(NOT_ANY_NODE in c for c in where):
            raise PlanError("a $n inside an EXISTS or NOT EXISTS in a subquery (only in "
                            "the top block)")
        return [], where
    cuts, where = choose_ranges(scope, where, catalog)
    return cuts + [RangeCut(f["position"], "flag", f["param"], f["type"]) for f in flags], where


def placed_cuts(rel: Any, cuts: Sequence[RangeCut], output: list[int],
                order: Sequence[SortKey]) -> tuple[RangeCut, ...]:
    """The cuts with their columns as reader output positions, and each ``flag`` step's
    target: the visible column of the top Project computing its placeholder."""
    placed = []
    for cut in cuts:
        target = -1
        if cut.op == "flag":
            exprs = rel.exprs if type(rel).__name__ == "Project" else ()
            source = getattr(exprs[cut.column], "index", None) if cut.column < len(exprs) \
                else None  # the array column the Project passes through
            found = [i for i, e in enumerate(exprs) if getattr(e, "name", None) == "param_flag"
                     and e.args[0].index == source]
            if len(found) != 1 or found[0] >= len(output) or output[found[0]] != found[0] \
                    or any(k.column == found[0] for k in order):
                raise PlanError("EXISTS with a parameter other than as a select-list value "
                                "(ordered on, or in an expression)")
            target = found[0]
        placed.append(dataclasses.replace(cut, column=output.index(cut.column), target=target))
    return tuple(placed)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True, slots=True)
class RangeCut:
    """Rows pass when ``row[column] <op> $param`` (column: a position in the reader's output,
    or during planning in the FROM+WHERE scope). Two host steps on array columns of
    ``engine.plan.param_antijoins`` share it: ``not_any`` (rows pass when no element equals
    ``$param``) and ``flag`` (no row is cut: the visible column ``target`` becomes whether
    an element equals ``$param``)."""

    column: int
    op: str
    param: int
    type_oid: int
    target: int = -1
    #: the libc locale a text cut compares in (``engine.values.collation``; None: bytes)
    collation: str | None = None


def choose_ranges(scope: Scope, where: list[Node], catalog: Catalog) -> tuple[
        list[RangeCut], list[Node]]:
    """Split top-level WHERE conjuncts into range cuts on parameters and the rest."""
    cuts: list[RangeCut] = []
    rest: list[Node] = []
    for conj in where:
        marked = conj.get(NOT_ANY_NODE)
        if marked is not None:
            cuts.append(RangeCut(marked["position"], marked.get("op", "not_any"),
                                 marked["param"], marked["type"]))
            continue
        found = _cuts(scope, conj, catalog)
        if found is None:
            rest.append(conj)
        else:
            cuts.extend(found)
    return cuts, rest


def _param(node: Node, type_oid: int) -> int | None:
    cast = node.get("TypeCast")
    if cast is not None:
        names = [n["String"]["sval"] for n in cast["typeName"].get("names", []) if "String" in n]
        if cast["typeName"].get("typmods") or cast["typeName"].get("arrayBounds") or not names \
                or pgtypes.CAST_TYPES.get(names[-1]) != type_oid:
            return None
        node = cast.get("arg", {})
    ref = node.get("ParamRef")
    return None if ref is None else int(ref["number"])


def _column(scope: Scope, node: Node, catalog: Catalog) -> tuple[int, int] | None:
    fields = node.get("ColumnRef", {}).get("fields")
    if not fields or any("String" not in f for f in fields):
        return None
    pos = scope.lookup(tuple(f["String"]["sval"] for f in fields))
    col = scope.cols[pos]
    if col.type_oid not in RANGE_TYPES:
        return None
    return pos, col.type_oid


def _check_order(scope: Scope, node: Node, catalog: Catalog) -> str | None:
    """The libc locale a text cut compares in (None: byte order), or PlanError."""
    builder = ExprBuilder(scope, catalog)
    return builder.order_locale((builder.build(node),), "range parameter")


def _cuts(scope: Scope, node: Node, catalog: Catalog) -> list[RangeCut] | None:
    body = node.get("A_Expr")
    if body is None:
        return None
    kind = body.get("kind")
    name = [n.get("String", {}).get("sval") for n in body.get("name", [])][-1:]
    if kind == "AEXPR_BETWEEN" and "ColumnRef" in (body.get("lexpr") or {}):
        items = (body.get("rexpr") or {}).get("List", {}).get("items", [])
        column = _column(scope, body["lexpr"], catalog)
        if column is None or len(items) != 2:
            return None
        lo, hi = (_param(i, column[1]) for i in items)
        if lo is None or hi is None:
            return None
        locale = _check_order(scope, body["lexpr"], catalog)
        return [RangeCut(column[0], ">=", lo, column[1], collation=locale),
                RangeCut(column[0], "<=", hi, column[1], collation=locale)]
    if kind != "AEXPR_OP" or not name or name[0] not in _FLIP:
        return None
    op = name[0]
    left, right = body.get("lexpr") or {}, body.get("rexpr") or {}
    if "ColumnRef" not in left:
        left, right, op = right, left, _FLIP[op]
    if "ColumnRef" not in left:
        return None
    column = _column(scope, left, catalog)
    if column is None:
        return None
    param = _param(right, column[1])
    if param is None:
        return None
    locale = _check_order(scope, left, catalog)
    return [RangeCut(column[0], op, param, column[1], collation=locale)]


# ---------------------------------------------------------------------------- at read time


_order = value_order  # (shared with range-partial state)


def range_value_ok(value: Any) -> bool:
    """A decoded bound weir can compare: not text it could not read (except infinity)."""
    return not isinstance(value, TextValue) or value.text in ("infinity", "-infinity")


_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _key(cut: RangeCut) -> Callable[[Any, int], Any]:
    """How a cut orders values: ``value_order``, or the sort key of its collation."""
    if cut.collation is None:
        return _order
    coll = key_function(cut.collation)
    return lambda value, oid: coll(value)


def cut_rows(rows: Iterable[tuple[Any, ...]], cuts: Sequence[RangeCut],
             params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows that satisfy every cut for these parameter values."""
    return list(iter_cut(rows, cuts, params))


def iter_cut(rows: Iterable[tuple[Any, ...]], cuts: Sequence[RangeCut],
             params: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """:func:`cut_rows`, lazily (a page can stop early)."""
    tests = []
    absent = []  # (array column, value): no element may equal the value
    flags = []  # (target, array column, value): whether an element equals the value
    outside = []  # (array column, value): NOT IN the elements is true (none when NULL)
    for cut in cuts:
        bound = params[cut.param - 1]
        if cut.op == "flag":
            flags.append((cut.target, cut.column, bound))
            continue
        if cut.op == "not_any":
            if bound is not None:  # ``= NULL`` matches no element: the row stays
                absent.append((cut.column, bound))
            continue
        if cut.op == "not_in":  # ``$n NOT IN (elements)`` (``engine.plan.param_in``)
            outside.append((cut.column, bound))
            continue
        if bound is None:
            return  # a comparison with NULL is never true
        key = _key(cut)
        tests.append((cut.column, _TESTS[cut.op], key(bound, cut.type_oid), cut.type_oid, key))
    for row in rows:
        for column, test, bound, type_oid, key in tests:
            value = row[column]
            if value is None or not test(key(value, type_oid), bound):
                break
        else:
            if not any(row[column] is not None and value in row[column]
                       for column, value in absent) and not any(
                    row[column] and (value is None or None in row[column]
                                     or value in row[column]) for column, value in outside):
                for target, column, value in flags:  # EXISTS is never NULL
                    found = value is not None and row[column] is not None and value in row[column]
                    row = (*row[:target], found, *row[target + 1:])
                yield row


def narrow(rows: Sequence[tuple[Any, ...]], cuts: Sequence[RangeCut], params: Sequence[Any],
           lead: SortKey | None) -> tuple[Iterable[tuple[Any, ...]], list[RangeCut]]:
    """For rows sorted first by ``lead`` (a reader output position): the slice where every
    cut on that column holds, found by bisection, and the cuts left to test. A keyset page
    (``id > $1 ORDER BY id LIMIT 20``) then costs a bisection and the page, not a scan (the
    slice is lazy: no copy of the rows)."""
    if lead is None or any(params[c.param - 1] is None for c in cuts):
        return rows, list(cuts)
    on = [c for c in cuts if c.column == lead.column and c.op in _TESTS
          and c.collation is None and lead.collation is None]  # (collated: scanned)
    if not on:
        return rows, list(cuts)
    col, nulls_first = lead.column, lead.effective_nulls_first

    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        value = row[col]
        if value is None:
            return (-1,) if nulls_first else (1,)
        order = _order(value, on[0].type_oid)
        return (0, Desc(order) if lead.descending else order)

    lo = bisect_right(rows, (0,), key=key) if nulls_first else 0  # after the NULLs
    hi = len(rows) if nulls_first else bisect_left(rows, (1,), key=key)  # before them
    for cut in on:
        bound = _order(params[cut.param - 1], cut.type_oid)
        at = (0, Desc(bound) if lead.descending else bound)
        # ascending: > and >= keep a suffix, < and <= a prefix; descending the reverse
        upper = (cut.op in ("<", "<=")) != lead.descending
        strict = cut.op in ("<", ">")
        if upper:
            hi = min(hi, (bisect_left if strict else bisect_right)(rows, at, lo, hi, key=key))
        else:
            lo = max(lo, (bisect_right if strict else bisect_left)(rows, at, lo, hi, key=key))
        hi = max(hi, lo)
    return (rows[i] for i in range(lo, hi)), [c for c in cuts if c not in on]
