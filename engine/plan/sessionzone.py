"""The session TimeZone a plan is made for, and whether the plan reads it.

Owns: :func:`planning_in` (the zone one planning pass may read, set by ``plan_select``) and
:func:`session_zone` (asked by the date/time planning of ``engine.plan.datetimes`` when a form
depends on the session TimeZone). A form that reads the zone is planned with the zone as a
constant (``date_trunc(unit, v, zone)``, ``v AT TIME ZONE zone`` ...), so its kernels never
read a setting; the plan then records the zone (``PlannedQuery.timezone``), which becomes part
of the cache's identity: a session in another TimeZone has another identity, hence another
cache (or none). Without a zone (``None``), or with a zone weir cannot load as PostgreSQL
does (only ``UTC`` and ``Area/City`` names, as for ``AT TIME ZONE``), such forms are refused
with the reason the caller gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from engine.dataflow import pgzones
from engine.plan.scope import PlanError


@dataclass(slots=True)
class ZoneUse:
    """One planning pass's zone and whether the pass read it (mutable: set when read)."""

    name: str | None
    used: bool = False


_CURRENT: ContextVar[ZoneUse | None] = ContextVar("weir_plan_zone", default=None)


@contextmanager
def planning_in(name: str | None) -> Iterator[ZoneUse]:
    """The zone the planning inside the ``with`` may read (``None``: none)."""
    use = ZoneUse(name)
    token = _CURRENT.set(use)
    try:
        yield use
    finally:
        _CURRENT.reset(token)


def session_zone(refusal: str) -> str:
    """The session's TimeZone, recorded as read; PlanError(``refusal``) when there is none
    weir can compute in."""
    use = _CURRENT.get()
    if use is None or use.name is None:
        raise PlanError(refusal)
    if not pgzones.zone_known(use.name):
        raise PlanError(f"{refusal}; the session TimeZone {use.name!r} is not a full zone "
                        "name weir computes in (such as 'Europe/Paris' or 'UTC')")
    use.used = True
    return use.name
