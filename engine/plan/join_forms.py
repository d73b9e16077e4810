"""FULL JOINs and ``JOIN ... USING`` / ``NATURAL JOIN``, built from the equi-joins the
dataflow has.

Owns: ``full_join`` and ``using_join``.

A FULL JOIN on column equalities is a LEFT JOIN plus the right rows that match nothing::

    L FULL JOIN R ON L.a = R.b  =  (L LEFT JOIN R ON L.a = R.b)
                                   UNION ALL (NULLs, R rows with no L partner)

where an R row has no partner when a LEFT JOIN with the DISTINCT ``L.a`` values plus a marker
leaves the marker NULL (a NULL ``R.b`` matches nothing, so it is padded, as in PostgreSQL).

``USING (c, ...)`` (and NATURAL, the columns both sides name alike) joins on ``L.c = R.c``.
The result shows each ``c`` once, first and unqualified, as PostgreSQL does: the left
side's value for an inner or LEFT JOIN, the right side's for a RIGHT JOIN, ``COALESCE(L.c,
R.c)`` for a FULL JOIN. The sides' own ``c`` columns stay reachable qualified (``l.c``,
``l.*``) but not by the bare name or a plain ``*`` (``ScopeCol.qualified_only``).

Invariants: the output columns are the left side's then the right side's (``full_join``), or
the merged columns then both sides' (``using_join``). Both sides of a USING column have the
same type, or two integer types (the merged column is the wider, as PostgreSQL resolves it),
else ``PlanError``; a FULL JOIN
ON holding anything but column equalities between its two sides is a ``PlanError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from engine.plan import ir
from engine.plan.scope import Bound, PlanError, Scope, ScopeCol
from engine.values import oids as T

Keys = tuple[tuple[int, ...], tuple[int, ...]]
Checker = Callable[[list[tuple[int, int]], Bound, Bound], Keys]


def full_join(left: Bound, right: Bound, keys: Keys) -> ir.Rel:
    """``left FULL JOIN right`` on ``left[lk[i]] = right[rk[i]]``: left columns, then right."""
    lk, rk = keys
    if not lk:
        raise PlanError("FULL JOIN without an equality between its two sides")
    lcols, rcols = left.rel.columns, right.rel.columns
    kept = ir.Join(left.rel, right.rel, lk, rk, "left")
    partners = ir.Distinct(ir.Project(
        left.rel, (*(ir.ColumnRef(i, lcols[i].type_oid) for i in lk), ir.Const(1, T.INT4)),
        (*(lcols[i].name for i in lk), "?matched?")))
    marked = ir.Join(right.rel, partners, rk, tuple(range(len(lk))), "left")
    marker = ir.ColumnRef(len(rcols) + len(lk), T.INT4)
    alone = ir.Filter(marked, ir.IsNull(marker, negated=False))
    padded = ir.Project(alone, (*(ir.Const(None, c.type_oid) for c in lcols),
                                *(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(rcols))),
                        tuple(c.name for c in (*lcols, *rcols)))
    return ir.UnionAll((kept, padded))


def using_names(left: Bound, right: Bound, using: list[str] | None) -> list[str]:
    """The USING list, or for NATURAL (``using`` None) the names both sides show."""
    if using is not None:
        if len(set(using)) != len(using):
            raise PlanError("column name listed more than once in USING")
        return using
    shown = {c.name for c in right.scope.cols if _bare(c)}
    return [c.name for c in left.scope.cols if _bare(c) and c.name in shown]


def _bare(col: ScopeCol) -> bool:
    return not col.hidden and not col.qualified_only


def using_join(left: Bound, right: Bound, names: list[str], kind: str,
               check: Checker) -> Bound:
    """``left [kind] JOIN right USING (names)``; ``kind`` is inner, left, right or full and
    ``check`` validates the equi-join pairs (types, collations) into join keys."""
    width = len(left.scope.cols)
    pairs = [(left.scope.lookup((n,)), right.scope.lookup((n,))) for n in names]
    types = [_common(left.scope.cols[a], right.scope.cols[b]) for a, b in pairs]
    keys = check([(a, width + b) for a, b in pairs], left, right)
    joined = _joined(left, right, keys, kind)
    cols = joined.columns
    merged: list[ir.Expr] = []
    for (a, b), oid in zip(pairs, types, strict=True):
        l_ref = _as(ir.ColumnRef(a, cols[a].type_oid), oid)
        r_ref = _as(ir.ColumnRef(width + b, cols[width + b].type_oid), oid)
        merged.append({"inner": l_ref, "left": l_ref, "right": r_ref}.get(
            kind, ir.Coalesce((l_ref, r_ref), oid)))
    rel = ir.Project(joined, (*merged, *(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(cols))),
                     (*names, *(c.name for c in cols)))
    used = {a for a, _ in pairs} | {width + b for _, b in pairs}
    sides = tuple(dataclasses.replace(c, qualified_only=True) if i in used else c
                  for i, c in enumerate(left.scope.cols + right.scope.cols))
    shown = tuple(ScopeCol(None, n, oid, left.scope.cols[a].collation, 0)
                  for n, oid, (a, _) in zip(names, types, pairs, strict=True))
    return Bound(rel, Scope(shown + sides))


_INTEGERS = (T.INT2, T.INT4, T.INT8)


def _common(lc: ScopeCol, rc: ScopeCol) -> int:
    """The merged column's type: the sides' own, or the wider of two integer types (the
    common type PostgreSQL resolves); other pairs of types are a ``PlanError``."""
    if lc.type_oid == rc.type_oid:
        return lc.type_oid
    if lc.type_oid in _INTEGERS and rc.type_oid in _INTEGERS:
        return max(lc.type_oid, rc.type_oid, key=_INTEGERS.index)
    raise PlanError(f"JOIN USING ({lc.name}) between columns of different types")


def _as(ref: ir.ColumnRef, oid: int) -> ir.Expr:
    return ref if ref.type_oid == oid else ir.Cast(ref, oid)


def _joined(left: Bound, right: Bound, keys: Keys, kind: str) -> ir.Rel:
    lk, rk = keys
    if kind == "full":
        return full_join(left, right, keys)
    if kind != "right":
        return ir.Join(left.rel, right.rel, lk, rk, "left" if kind == "left" else "inner")
    return swap_sides(ir.Join(right.rel, left.rel, rk, lk, "left"), len(right.scope.cols))


def swap_sides(join: ir.Rel, first: int) -> ir.Rel:
    """``join``'s columns with its first ``first`` ones moved after the rest (a RIGHT JOIN
    built as a LEFT JOIN, shown left side first)."""
    cols = join.columns
    order = [*range(first, len(cols)), *range(first)]
    return ir.Project(join, tuple(ir.ColumnRef(i, cols[i].type_oid) for i in order),
                      tuple(cols[i].name for i in order))
