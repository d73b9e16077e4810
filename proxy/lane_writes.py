"""Writes at which a hit lane hands its session back (issue 24): counted, so that what a lane
forwarding such a write itself would save is measured (``lane_left_write`` in SHOW WEIR STATUS).

Owns: :func:`handed_write` (whether what a hit lane did not answer is one run of a learnt
write, the chunk ``proxy.write_position`` sends with its position read) and
:class:`WriteHandbacks` (the count).

Why: a hit session's lane hands it back at any statement it does not hold
(``lane_left_statement``); for a vote or a comment of the demo's news site (a learnt write
right after cached reads) that hand-back and the event loop's two turns (the chunk, then its
answer with the position read) are most of what the write costs through weir over its cost
direct. Counting them separately tells how many writes a lane forwarding them itself (not
done yet: see docs/architecture.md, *The position read with a write*) would take off the
event loop. Only counting: nothing here changes what happens to the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgwire.framing import ProtocolViolation, scan_messages
from proxy import write_position

#: the longest message framed here (a write's run is small; anything longer is not one)
_MAX_LENGTH = 1 << 20


def handed_write(session: Any, unanswered: bytes) -> bool:
    """Whether ``unanswered`` (the bytes a hit lane handed ``session`` back with) is exactly
    one run of a statement the session learnt writes (``write_position.writes``) — the
    chunk the event loop then sends with its position read, after a cached read."""
    if not unanswered or not session.writers or unanswered[0] != ord("B"):
        return False
    try:
        index, end = scan_messages(unanswered, 0, _MAX_LENGTH)
    except ProtocolViolation:
        return False
    return end == len(unanswered) and write_position.writes(session, unanswered, index)


@dataclass(slots=True)
class WriteHandbacks:
    """How many hit sessions a lane handed back at a learnt write's run."""

    count: int = 0

    def note(self, session: Any, unanswered: bytes) -> None:
        """A hit session came back with ``unanswered``: counted if it is a write's run."""
        if handed_write(session, unanswered):
            self.count += 1
