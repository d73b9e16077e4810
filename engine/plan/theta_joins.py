"""LEFT JOINs whose ON compares the two sides other than by equality (``ON s.author_id =
u.id AND s.score > u.karma``), built from inner joins, a marked anti-join and a union.

Owns: ``theta_left_join``. With ``theta`` the ON conditions that are not column equalities
(and those reading only the left side)::

    M = Filter(theta, L JOIN R ON the equalities)          the matched pairs
    L LEFT JOIN R = M UNION ALL (unmatched L rows, padded with NULLs)

where a left row is unmatched when its primary key is not among M's: a LEFT JOIN with the
distinct matched keys plus a marker, keeping rows whose marker is NULL.

Invariant: exact when every left row is identified by its primary key columns and rows with
equal keys are equal (a base table, possibly filtered or projected): a row is padded exactly
when no right row makes both the equalities and θ true, as in PostgreSQL. Other left sides
(joins, subqueries, tables without a primary key) raise ``PlanError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.plan import ir
from engine.plan.exprs import ExprBuilder
from engine.plan.scope import Bound, PlanError, Scope
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.from_clause import PlanContext

Node = dict[str, Any]


def _table(rel: ir.Rel) -> ir.TableRef | None:
    while isinstance(rel, ir.Filter | ir.Project):
        rel = rel.input
    return rel.table if isinstance(rel, ir.Scan) else None


def _identity(left: Bound) -> list[int]:
    """Positions of the left side's primary key columns (PlanError if it has none)."""
    table = _table(left.rel)
    rtes = {c.rte for c in left.scope.cols}
    pk = [i for i, c in enumerate(left.scope.cols) if c.table_pk]
    if table is None or not table.primary_key or len(rtes) != 1 \
            or len(pk) != len(table.primary_key):
        raise PlanError("LEFT JOIN ON comparing both sides other than by equality, whose "
                        "preserved side is not one table with its primary key")
    return pk


def theta_left_join(ctx: PlanContext, left: Bound, right: Bound,
                    keys: tuple[tuple[int, ...], tuple[int, ...]], conds: list[Node]) -> ir.Rel:
    """``left LEFT JOIN right ON keys AND conds`` (``keys``: the equi-join columns of each
    side, checked; ``right`` already filtered by its own conditions): left then right."""
    ident = _identity(left)
    width = len(left.scope.cols)
    lk, rk = keys
    scope = Scope(left.scope.cols + right.scope.cols)
    builder = ExprBuilder(scope, ctx.catalog, clause="JOIN/ON")
    preds = tuple(builder.boolean(c) for c in conds)
    theta = preds[0] if len(preds) == 1 else ir.BoolOp("and", preds)
    matched = ir.Filter(ir.Join(left.rel, right.rel, lk, rk), theta)
    cols = matched.columns
    ids = ir.Distinct(ir.Project(matched, (*(ir.ColumnRef(i, cols[i].type_oid) for i in ident),
                                           ir.Const(1, T.INT4)),
                                 (*(cols[i].name for i in ident), "?matched?")))
    marked = ir.Join(left.rel, ids, tuple(ident), tuple(range(len(ident))), "left")
    marker = ir.ColumnRef(width + len(ident), T.INT4)
    unmatched = ir.Filter(marked, ir.IsNull(marker, negated=False))
    lcols, rcols = left.rel.columns, right.rel.columns
    padded = ir.Project(unmatched, (*(ir.ColumnRef(i, c.type_oid) for i, c in enumerate(lcols)),
                                    *(ir.Const(None, c.type_oid) for c in rcols)),
                        tuple(c.name for c in (*lcols, *rcols)))
    return ir.UnionAll((matched, padded))
