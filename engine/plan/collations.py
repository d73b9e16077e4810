"""The planner's collation rule for ordering text: byte order, a libc collation weir
reproduces exactly (``engine.values.collation``), or upstream with the precise reason.

Owns: ``order_locale`` (the libc locale a comparison or sort orders text in, carried into
the plan by ``Compare``/``Between``/``SortKey``/``AggSort``/``AggCall``) and
``check_ordering`` (refusing text order under any collation but byte order, for the
constructs that carry no collation into the engine yet).

Invariant: a locale is returned only when ``collation.refusal`` accepts the catalog's
description of the collation (libc, deterministic, the server's glibc release = weir's, the
locale loadable) and the type is text or varchar (bpchar compares without trailing spaces).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.plan import ir, pgtypes
from engine.plan.scope import PlanError
from engine.sql.catalog import BYTE_ORDER_COLLATIONS
from engine.values import collation
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.exprs import ExprBuilder


def check_ordering(builder: ExprBuilder, exprs: tuple[ir.Expr, ...], what: str) -> None:
    """Refuse ``what`` on text under any collation but byte order."""
    for expr in exprs:
        coll = builder.collation(expr)
        if coll is not None and coll not in BYTE_ORDER_COLLATIONS:
            usable = _refusal(builder, expr, coll) is None
            raise PlanError(f"text {what} under collation {coll}" + (
                " (weir reproduces this collation, but not in this construct yet)"
                if usable else ""))


def order_locale(builder: ExprBuilder, exprs: tuple[ir.Expr, ...], what: str) -> str | None:
    """The libc locale ``what`` orders text in (None: byte order), or PlanError with the
    precise reason when weir cannot reproduce the collation's order."""
    locales = set()
    for expr in exprs:
        coll = builder.collation(expr)
        if coll is None or coll in BYTE_ORDER_COLLATIONS:
            continue
        why = _refusal(builder, expr, coll)
        if why is not None:
            raise PlanError(f"text {what} under {why}")
        info = builder.catalog.collation_info(coll)
        assert info is not None and info.locale is not None
        locales.add(info.locale)
    return locales.pop() if locales else None


def _refusal(builder: ExprBuilder, expr: ir.Expr, coll: str) -> str | None:
    if expr.type_oid not in (T.TEXT, T.VARCHAR, T.UNKNOWN):
        return f"collation {coll} on type {pgtypes.type_name(expr.type_oid)}"
    return collation.refusal(builder.catalog.collation_info(coll), coll)
