"""The engine's input types: upstream transactions, row changes, snapshots, xid arithmetic.

Owns: ``Transaction``, ``RowChange``, ``ChangeKind``, the ``UNCHANGED_TOAST`` sentinel,
``Snapshot`` with PostgreSQL's visibility rule, and ``extend_xid`` (32 -> 64-bit epochs).

Contract with the CDC applier (it produces exactly these):
- One ``Transaction`` per upstream commit, delivered in commit order; ``xid`` is the 64-bit
  (epoch-extended) transaction id, ``commit_lsn`` the commit record's LSN.
- Rows are tuples in the table's column order holding canonical Python values (None = NULL).
- ``insert``: ``old`` None, ``new`` the row.
- ``update``: ``new`` the new row, in which a column the upstream did not send (an unchanged
  TOASTed value) is ``UNCHANGED_TOAST``. ``old`` is None when the replica identity columns did
  not change and the upstream sent no old tuple; otherwise a row whose replica-identity columns
  (REPLICA IDENTITY DEFAULT: the primary key) are set and whose other columns are
  ``UNCHANGED_TOAST`` unless ``old_full`` (REPLICA IDENTITY FULL: every column is known).
- ``delete``: ``old`` as for update, ``new`` None.
- ``truncate``: ``old`` and ``new`` None; every row of the table is gone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class _UnchangedToast:
    """The single marker for a column value the upstream did not send."""

    __slots__ = ()
    _instance: _UnchangedToast | None = None

    def __new__(cls) -> _UnchangedToast:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = _UnchangedToast()


class ChangeKind(enum.Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    TRUNCATE = "truncate"


Row = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class RowChange:
    """One change of one row of table ``table_oid`` (see the module docstring)."""

    table_oid: int
    kind: ChangeKind
    old: Row | None
    new: Row | None
    old_full: bool = False


@dataclass(frozen=True, slots=True)
class Transaction:
    """One upstream transaction, applied by the engine as one atomic batch."""

    xid: int
    commit_lsn: int
    changes: tuple[RowChange, ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """``pg_current_snapshot()``: 64-bit xmin, xmax and the in-progress xids."""

    xmin: int
    xmax: int
    xip: frozenset[int] = frozenset()

    @classmethod
    def from_text(cls, text: str) -> Snapshot:
        """Parse ``pg_current_snapshot()::text`` (``xmin:xmax:xip,xip,...``)."""
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def visible(self, xid: int) -> bool:
        """Whether a committed transaction ``xid`` is visible in this snapshot."""
        return xid < self.xmin or (xid < self.xmax and xid not in self.xip)


def extend_xid(xid32: int, reference: int) -> int:
    """The 64-bit xid nearest ``reference`` (a recent 64-bit xid) whose low 32 bits are
    ``xid32``: epoch-safe across the 2**32 wrap-around as long as the two are within 2**31."""
    if not 0 <= xid32 < 2**32:
        raise ValueError(f"not a 32-bit xid: {xid32}")
    candidate = (reference & ~0xFFFFFFFF) | xid32
    if candidate - reference > 2**31:
        candidate -= 2**32
    elif reference - candidate > 2**31:
        candidate += 2**32
    return xid32 if candidate < 0 else candidate
