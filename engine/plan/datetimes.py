"""Date/time expressions for the planner: which forms are planned and their result types.

Owns: ``temporal_arith`` (date/timestamp/interval operators) and ``datetime_func``
(``date_trunc``, also with a named zone, ``extract``) and ``zoned_cast`` (casts between
timestamptz and date/timestamp), called by ``ExprBuilder``. Forms whose result does not
depend on the session TimeZone are planned as they are (their kernels:
``engine.dataflow.pgtime``), so one cache serves sessions of every TimeZone. Forms that read
it (``date_trunc``/``extract`` of a timestamptz, timestamptz +/- months or days, those casts)
are planned only when the planner is given the session's zone (``engine.plan.sessionzone``),
rewritten with the zone as a constant; otherwise refused with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.dataflow import pgtime, pgzones
from engine.plan import ir, pgtypes
from engine.plan.literals import LiteralError, literal_value_in_zone
from engine.plan.scope import PlanError
from engine.plan.sessionzone import session_zone
from engine.values import Interval
from engine.values import oids as T

if TYPE_CHECKING:
    from engine.plan.exprs import ExprBuilder

Node = dict[str, Any]


def temporal_arith(b: ExprBuilder, op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    """date/timestamp arithmetic whose result does not depend on the session TimeZone:
    on timestamptz, only the difference of two instants and adding a constant interval
    without months or days (those are added in local time)."""
    if T.UNKNOWN in (left.type_oid, right.type_oid):
        raise PlanError("untyped literal in date/time arithmetic (write interval '...' or "
                        "date '...')")
    if left.type_oid in (T.INT2, T.INT4) and right.type_oid == T.DATE:
        left = b.coerce(left, T.INT4)
    if right.type_oid in (T.INT2, T.INT4) and left.type_oid == T.DATE:
        right = b.coerce(right, T.INT4)
    key = (op, left.type_oid, right.type_oid)
    result = pgtime.ARITH_TYPES.get(key)
    if result is None:
        raise PlanError(f"operator {pgtypes.type_name(left.type_oid)} {op} "
                        f"{pgtypes.type_name(right.type_oid)}")
    if T.TIMESTAMPTZ in key and T.INTERVAL in key:
        iv = left if left.type_oid == T.INTERVAL else right
        if not (isinstance(iv, ir.Const) and isinstance(iv.value, Interval)):
            raise PlanError("timestamptz +/- an interval that is not a constant")
        if iv.value.months or iv.value.days:
            zone = session_zone("timestamptz +/- an interval with months or days (added in "
                                "the session TimeZone)")
            value = right if iv is left else left
            return _shift_in_zone(value, iv.value, -1 if op == "-" else 1, zone)
    return ir.Arith(op, left, right, result)  # type: ignore[arg-type]


def _in_zone(zone: str, value: ir.Expr) -> ir.Expr:
    """``value AT TIME ZONE zone``: timestamptz -> wall-clock timestamp, and back."""
    result = T.TIMESTAMP if value.type_oid == T.TIMESTAMPTZ else T.TIMESTAMPTZ
    return ir.Func("timezone", (ir.Const(zone, T.TEXT), value), result)


def _shift_in_zone(value: ir.Expr, iv: Interval, sign: int, zone: str) -> ir.Expr:
    """timestamptz + ``sign`` * ``iv`` as PostgreSQL adds it in the session TimeZone: the
    months to the wall-clock time, which becomes an instant again, then the days the same way
    (two steps: a wall-clock time in a DST gap moves), then the microseconds to the instant."""
    out = value
    for step in (Interval(months=sign * iv.months), Interval(days=sign * iv.days)):
        if step.months or step.days:
            moved = ir.Arith("+", _in_zone(zone, out), ir.Const(step, T.INTERVAL), T.TIMESTAMP)
            out = _in_zone(zone, moved)
    if iv.microseconds:
        out = ir.Arith("+", out, ir.Const(Interval(microseconds=sign * iv.microseconds),
                                         T.INTERVAL), T.TIMESTAMPTZ)
    return out


#: casts that read the session TimeZone: (from, to) -> the reason without a zone
_ZONED_CASTS = {
    (T.TIMESTAMPTZ, T.TIMESTAMP): "cast from timestamptz to timestamp",
    (T.TIMESTAMPTZ, T.DATE): "cast from timestamptz to date",
    (T.TIMESTAMP, T.TIMESTAMPTZ): "cast from timestamp to timestamptz",
    (T.DATE, T.TIMESTAMPTZ): "cast from date to timestamptz",
}


def zoned_literal(text: str, refusal: str) -> ir.Const:
    """A timestamptz literal without an offset (an ISO date or timestamp): the wall-clock
    time in the session TimeZone, made an instant at plan time as PostgreSQL reads it (a time
    in a DST gap or overlap resolved as for ``AT TIME ZONE``). Pinned in the plan, so the
    zone joins the cache's identity (a literal lifted as a lookup key is read by
    ``Classified.keys`` in the identity's zone)."""
    zone = session_zone(refusal)
    try:
        return ir.Const(literal_value_in_zone(T.TIMESTAMPTZ, text, zone), T.TIMESTAMPTZ)
    except LiteralError as exc:
        raise PlanError(refusal) from exc


def zoned_cast(value: ir.Expr, target: int) -> ir.Expr | None:
    """A cast between timestamptz and timestamp or date, in the session TimeZone (None: not
    such a cast)."""
    what = _ZONED_CASTS.get((value.type_oid, target))
    if what is None:
        return None
    zone = session_zone(f"{what} (in the session TimeZone)")
    if value.type_oid == T.DATE:
        value = ir.Cast(value, T.TIMESTAMP)
    local = _in_zone(zone, value)
    return ir.Cast(local, T.DATE) if target == T.DATE else local


def datetime_func(b: ExprBuilder, name: str, body: Node) -> ir.Expr:
    """date_trunc('field', timestamp) and extract(field FROM date|timestamp), and
    extract(epoch FROM timestamptz): the forms that do not read the session TimeZone."""
    args = body.get("args", [])
    if name == "date_trunc" and len(args) == 3:
        return _date_trunc_zone(b, args)
    if len(args) != 2:
        raise PlanError(f"{name}() with {len(args)} arguments")
    field = b.build(args[0])
    if not isinstance(field, ir.Const) or not isinstance(field.value, str):
        raise PlanError(f"{name}() with a field that is not a string constant")
    unit = field.value.lower()
    value = b.build(args[1])
    if value.type_oid == T.UNKNOWN:
        raise PlanError(f"{name}() of an untyped literal")
    if name == "date_trunc":
        if value.type_oid not in (T.TIMESTAMP, T.TIMESTAMPTZ, T.DATE):
            raise PlanError(f"date_trunc() of {pgtypes.type_name(value.type_oid)}")
        if unit not in pgtime.TRUNC_FIELDS:
            raise PlanError(f"date_trunc() unit {unit!r}")
        if value.type_oid == T.TIMESTAMP:
            return ir.Func("date_trunc", (ir.Const(unit, T.TEXT), value), T.TIMESTAMP)
        # a date is cast to timestamptz (the preferred type): both in the session TimeZone
        zone = session_zone(f"date_trunc() of {pgtypes.type_name(value.type_oid)} (computed "
                            "as timestamptz in the session TimeZone)")
        if value.type_oid == T.DATE:
            value = _in_zone(zone, ir.Cast(value, T.TIMESTAMP))
        return ir.Func("date_trunc_zone", (ir.Const(unit, T.TEXT), ir.Const(zone, T.TEXT),
                                           value), T.TIMESTAMPTZ)
    fields = pgtime.EXTRACT_FIELDS.get(value.type_oid)
    if value.type_oid == T.TIMESTAMPTZ and unit != "epoch" \
            and unit in pgtime.EXTRACT_FIELDS[T.TIMESTAMP]:
        # the fields of the wall-clock time in the session TimeZone
        zone = session_zone(f"extract({unit} FROM timestamptz) (depends on the session "
                            "TimeZone)")
        return ir.Func("extract", (ir.Const(unit, T.TEXT), _in_zone(zone, value)), T.NUMERIC)
    if fields is None or unit not in fields:
        raise PlanError(f"extract({unit} FROM {pgtypes.type_name(value.type_oid)})"
                        + (" (depends on the session TimeZone)"
                           if value.type_oid == T.TIMESTAMPTZ else ""))
    return ir.Func("extract", (ir.Const(unit, T.TEXT), value), T.NUMERIC)


def _date_trunc_zone(b: ExprBuilder, args: list[Node]) -> ir.Expr:
    """``date_trunc('unit', timestamptz, 'Area/City')``: in the named zone, not the session's."""
    unit, value, zone = (b.build(a) for a in args)
    if not isinstance(unit, ir.Const) or not isinstance(unit.value, str) \
            or unit.value.lower() not in pgtime.TRUNC_FIELDS:
        raise PlanError("date_trunc() with a unit that is not a known string constant")
    name = _zone_name(zone, "date_trunc() in the zone")
    if value.type_oid != T.TIMESTAMPTZ:
        raise PlanError(f"date_trunc(unit, {pgtypes.type_name(value.type_oid)}, zone)")
    return ir.Func("date_trunc_zone", (ir.Const(unit.value.lower(), T.TEXT),
                                       ir.Const(name, T.TEXT), value), T.TIMESTAMPTZ)


def _zone_name(zone: ir.Expr, what: str = "AT TIME ZONE") -> str:
    if not (isinstance(zone, ir.Const) and isinstance(zone.value, str)
            and zone.type_oid in (T.UNKNOWN, T.TEXT)):
        raise PlanError(f"{what} with a zone that is not a string constant")
    if not pgzones.zone_known(zone.value):
        raise PlanError(f"{what} {zone.value!r} (only full zone names such as "
                        "'Europe/Paris' and 'UTC': other names may be abbreviations, "
                        "which depend on the session's timezone_abbreviations)")
    return zone.value


def at_time_zone(b: ExprBuilder, body: Node) -> ir.Expr:
    """``value AT TIME ZONE 'Area/City'`` (``timezone(zone, value)``) on a timestamp or a
    timestamptz: the zone is a constant full zone name, so the session TimeZone is not read."""
    args = body.get("args", [])
    if len(args) != 2:
        raise PlanError(f"timezone() with {len(args)} arguments")
    zone, value = b.build(args[0]), b.build(args[1])
    name = _zone_name(zone)
    if value.type_oid not in (T.TIMESTAMP, T.TIMESTAMPTZ):
        raise PlanError(f"AT TIME ZONE on {pgtypes.type_name(value.type_oid)}"
                        + (" (untyped literal)" if value.type_oid == T.UNKNOWN else ""))
    result = T.TIMESTAMP if value.type_oid == T.TIMESTAMPTZ else T.TIMESTAMPTZ
    return ir.Func("timezone", (ir.Const(name, T.TEXT), value), result)
