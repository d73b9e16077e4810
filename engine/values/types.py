"""Value types weir uses where Python has no exact built-in equivalent.

Owns: ``Interval`` (PostgreSQL's own months/days/microseconds triple, so that '1 mon' and
'30 days' stay distinct, as they are in PostgreSQL), ``TextValue`` (a value kept as the text
PostgreSQL sent, tagged with its type oid: unknown types, and values a Python type cannot hold
such as ``infinity`` dates, BC or year > 9999 timestamps, or ``24:00:00``), and the NaN
singletons.

Invariant: every canonical value is hashable and equal values (as PostgreSQL's equality
operator sees them for the types decoded) compare equal in Python. NaN is the exception
Python forces on us: ``float('nan') != float('nan')``; the codecs therefore always return the
same NaN *object* (``FLOAT_NAN`` / ``NUMERIC_NAN``) so that dictionaries and tuples, which
test identity before equality, treat NaN as equal to itself like PostgreSQL does.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

FLOAT_NAN: float = float("nan")
NUMERIC_NAN: Decimal = Decimal("NaN")


@dataclass(frozen=True, slots=True)
class Interval:
    """A PostgreSQL interval: months, days and microseconds, each signed, never normalised."""

    months: int = 0
    days: int = 0
    microseconds: int = 0


@dataclass(frozen=True, slots=True)
class TextValue:
    """A value kept as PostgreSQL's text output, with the oid of its type."""

    oid: int
    text: str
