"""How often keys were read recently, approximately, in fixed memory (TinyLFU's main stage).

Owns: :class:`Frequency`, a count-min sketch — four rows of 4-bit counters (kept in
bytearrays, saturating at 15) indexed by four slices of a key's 64-bit hash; an estimate is
the smallest of its four counters, so it never undercounts (only collisions overcount).
Every ``period`` additions every counter is halved (aging), so "often" means "often lately":
a key that was hot long ago does not keep out keys hot now.

Used by the engine's admission under a memory budget (``Engine.worth_filling``): a missing
key is filled only when it was read more often than the key the next eviction would take.
Its memory is fixed (4 x ``width`` bytes, 128 kB by default), not per key.
"""

from __future__ import annotations

#: each counter halved (``bytes.translate`` table)
_HALF = bytes(i >> 1 for i in range(256))
#: a counter's largest value (4 bits, as in TinyLFU: enough to tell hot from cold)
TOP = 15
_MASK64 = (1 << 64) - 1


class Frequency:
    """A count-min sketch of recent reads (see the module docstring). ``width``: counters
    per row (a power of two, at most 2**16); ``period``: additions between two halvings
    (default ten per counter of a row)."""

    __slots__ = ("added", "mask", "period", "rows")

    def __init__(self, width: int = 1 << 15, period: int | None = None) -> None:
        if width & (width - 1) or not 0 < width <= 1 << 16:
            raise ValueError(f"width must be a power of two up to 65536, not {width}")
        self.mask = width - 1
        self.rows = [bytearray(width) for _ in range(4)]
        self.period = period if period is not None else 10 * width
        self.added = 0

    def add(self, h: int) -> None:
        """Count one read of the key whose ``hash()`` is ``h``."""
        h &= _MASK64
        m = self.mask
        for row in self.rows:
            i = h & m
            if row[i] < TOP:
                row[i] += 1
            h >>= 16
        self.added += 1
        if self.added >= self.period:
            self.age()

    def estimate(self, h: int) -> int:
        """Reads of the key whose ``hash()`` is ``h`` lately (never fewer than counted since
        the last halving; more when other keys share all four counters)."""
        h &= _MASK64
        m = self.mask
        least = TOP
        for row in self.rows:
            v = row[h & m]
            if v < least:
                least = v
            h >>= 16
        return least

    def age(self) -> None:
        """Halve every counter (what was read long ago counts less)."""
        self.rows = [row.translate(_HALF) for row in self.rows]
        self.added = 0
