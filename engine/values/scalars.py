"""Text codecs of the non-temporal scalar types: bool, integers, floats, numeric, bytea, uuid.

Owns: PostgreSQL text output -> canonical value and back, byte-exact with PostgreSQL's own
output functions under the default settings (``extra_float_digits`` >= 1, ``bytea_output=hex``).

Canonical values: ``bool``; ``int`` (int2/4/8, oid); ``float`` (float4 is the double nearest
the float4, as PostgreSQL would widen it); ``Decimal`` for numeric (with scale kept:
``1.50`` stays ``Decimal('1.50')``); ``bytes``; ``uuid.UUID``. NaN decodes to the singletons
of :mod:`engine.values.types`.
"""

from __future__ import annotations

import math
import struct
import uuid
from decimal import Decimal, InvalidOperation, localcontext

from engine.values.types import FLOAT_NAN, NUMERIC_NAN


def parse_bool(text: str) -> bool:
    if text == "t":
        return True
    if text == "f":
        return False
    raise ValueError(f"invalid boolean text {text!r}")


def format_bool(value: bool) -> str:
    return "t" if value else "f"


def parse_float(text: str) -> float:
    if text == "NaN":
        return FLOAT_NAN
    return float(text)


def parse_float4(text: str) -> float:
    """The float4 PostgreSQL stores for ``text``, widened to a double (as float4 -> float8 does)."""
    if text == "NaN":
        return FLOAT_NAN
    value: float = struct.unpack("f", struct.pack("f", float(text)))[0]
    return value


def _float4_neighbours(value: float) -> tuple[Decimal, Decimal]:
    """The exact midpoints between ``value`` (a float4) and its float4 neighbours."""
    bits = struct.unpack("<I", struct.pack("<f", abs(value)))[0]
    below = struct.unpack("<f", struct.pack("<I", bits - 1))[0] if bits else 0.0
    above = struct.unpack("<f", struct.pack("<I", bits + 1))[0]
    with localcontext(prec=400):  # exact: a float4's decimal expansion has < 160 digits
        exact = Decimal(abs(value))
        return (exact + Decimal(below)) / 2, (exact + Decimal(above)) / 2


def _shortest_float4_digits(value: float) -> str:
    """Fewest digits that read back as this float4, strictly inside its rounding interval
    (PostgreSQL's Ryu does not accept the interval's bounds)."""
    low, high = _float4_neighbours(value)
    for precision in range(0, 9):
        candidate = f"{value:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(candidate)))[0] != value:
            continue
        if low < abs(Decimal(candidate)) < high:
            return candidate
    return f"{value:.8e}"


def _layout(negative: bool, digits: str, exponent: int, limit: int) -> str:
    """Digits d1d2... with decimal exponent of d1, laid out as PostgreSQL's d2s/f2s do:
    plain notation for exponents in [-4, limit), ``d.ddde+XX`` otherwise."""
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


def _pg_float_text(value: float, sci: str, digits_limit: int) -> str:
    """Lay out shortest digits (given in Python's ``d.ddde±XX`` form) the way PostgreSQL does."""
    mantissa, exp_text = sci.split("e")
    negative = mantissa.startswith("-")
    return _layout(negative, mantissa.lstrip("-").replace(".", ""), int(exp_text), digits_limit)


def _special_float(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    return None


def format_float8(value: float) -> str:
    """PostgreSQL's float8out (extra_float_digits > 0): the shortest digits that read back as
    the value (Ryu), plain notation for decimal exponents in [-4, 15).

    Ryu accepts only digit strings strictly inside the value's rounding interval, whereas
    Python's ``repr`` also accepts one lying exactly on a bound (round-half-even); that can
    happen only for doubles of magnitude >= 2**53, whose bounds are integers, so there the
    shortest string strictly inside is searched (the nearest, ties upward, as Ryu)."""
    special = _special_float(value)
    if special is not None:
        return special
    if abs(value) >= _TWO_53:
        digits, exponent = _inside_digits(abs(value))
    else:
        digits, exponent = _repr_digits(value)
    return _layout(value < 0, digits, exponent, 15)


_TWO_53 = float(2**53)


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


def format_float4(value: float) -> str:
    """PostgreSQL's float4out (shortest digits that round-trip through float4)."""
    special = _special_float(value)
    if special is not None:
        return special
    return _pg_float_text(value, _shortest_float4_digits(value), 6)


def parse_numeric(text: str) -> Decimal:
    if text == "NaN":
        return NUMERIC_NAN
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"invalid numeric text {text!r}") from exc


def format_numeric(value: Decimal) -> str:
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:f}"


def parse_bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    return _parse_bytea_escape(text)


def _parse_bytea_escape(text: str) -> bytes:
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
        elif text.startswith("\\\\", i):
            out.append(0x5C)
            i += 2
        else:
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
    return bytes(out)


def format_bytea(value: bytes) -> str:
    return "\\x" + value.hex()


def parse_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(text)


def format_uuid(value: uuid.UUID) -> str:
    return str(value)
