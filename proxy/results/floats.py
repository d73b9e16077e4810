"""float4/float8 text output exactly as PostgreSQL 12+ prints it, under any extra_float_digits.

Owns: :func:`float_text`. For ``extra_float_digits > 0`` PostgreSQL prints the shortest
digits that read back as the same value (Ryu), laid out in plain notation for decimal
exponents in [-4, 15) (float4: [-4, 6)) and as ``d.ddde+XX`` otherwise. Ryu only accepts
digit strings strictly inside the value's rounding interval, whereas Python's ``repr`` also
accepts one lying exactly on the interval's bound (round-half-even). That can happen only for
doubles of magnitude >= 2**53, whose interval bounds are integers; there we search the
shortest digit string strictly inside the interval (the nearest one, ties upward, as Ryu).
For ``extra_float_digits <= 0`` it is C's ``%.{15+n}g`` (float4: ``%.{6+n}g``).

Invariant: the float4 value is the double nearest the float4 (as ``engine.values`` decodes
it); the shortest digits come from :mod:`engine.values.scalars` (``format_float4``,
``format_float8``), shared with the text codecs so the two can never disagree.
"""

from __future__ import annotations

import math

from engine import format_float4
from engine import format_float8 as shortest_float8

__all__ = ["float_text", "shortest_float8"]

def float_text(value: float, extra_digits: int, float4: bool) -> str:
    """float4out/float8out with ``extra_float_digits = extra_digits``."""
    if extra_digits > 0:
        return format_float4(value) if float4 else shortest_float8(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    precision = max(1, (6 if float4 else 15) + extra_digits)
    return f"{value:.{precision}g}"
