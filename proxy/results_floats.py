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
it); float4 shortest digits come from :func:`engine.values.scalars.format_float4`.
"""

from __future__ import annotations

import math

from engine.values.scalars import format_float4

_TWO_53 = float(2**53)


def _layout(negative: bool, digits: str, exponent: int, limit: int) -> str:
    """Digits d1d2... with decimal exponent of d1, laid out as PostgreSQL's d2s/f2s do."""
    digits = digits.rstrip("0") or "0"
    sign = "-" if negative else ""
    if exponent < -4 or exponent >= limit:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    if len(digits) <= exponent + 1:
        return sign + digits + "0" * (exponent + 1 - len(digits))
    return f"{sign}{digits[: exponent + 1]}.{digits[exponent + 1 :]}"


def _repr_digits(value: float) -> tuple[str, int]:
    """Python's shortest round-trip digits of abs(value) and the decimal exponent of the first."""
    text = repr(abs(value))
    whole, _, rest = text.partition("e")
    exponent = int(rest or "0")
    intpart, _, frac = whole.partition(".")
    digits = (intpart + frac).lstrip("0")
    exponent += len(intpart) - 1 - (len(intpart + frac) - len(digits))
    return digits.rstrip("0") or "0", exponent


def _inside_digits(value: float) -> tuple[str, int]:
    """Shortest digits strictly inside the rounding interval of an integral double >= 2**53."""
    v = int(value)
    below = int(math.nextafter(value, 0.0))
    above = math.nextafter(value, math.inf)
    low2 = v + below  # twice the lower bound
    high2 = v + (int(above) if above != math.inf else 2 * v - below)  # twice the upper bound
    exponent = len(str(v)) - 1
    for length in range(1, 18):
        scale = 10 ** (exponent + 1 - length)
        down = v // scale * scale
        best: int | None = None
        for cand in (down, down + scale):
            if low2 < 2 * cand < high2 and (best is None or abs(cand - v) <= abs(best - v)):
                best = cand
        if best is not None:
            text = str(best)
            return text.rstrip("0") or "0", len(text) - 1
    return str(v), exponent


def shortest_float8(value: float) -> str:
    """float8out with extra_float_digits > 0."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if abs(value) >= _TWO_53:
        digits, exponent = _inside_digits(abs(value))
    else:
        digits, exponent = _repr_digits(value)
    return _layout(value < 0, digits, exponent, 15)


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
