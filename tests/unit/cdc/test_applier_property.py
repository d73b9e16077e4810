"""Exactly-once under arbitrary disconnects and replays (the upstream's at-least-once delivery).

A stream of transactions is delivered with cuts at random points (the connection drops, maybe
mid-transaction) and each reconnect resumes from any position the upstream may choose: at or
before what the applier reported applied (the slot's confirmed position lags behind). Whatever
the schedule, the sink must see every transaction exactly once, in commit order, whole.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.applier import Applier
from cdc.pgoutput import Begin, Column, Commit, Insert, PgoutputMessage, Relation
from tests.unit.cdc.recording import RecordingSink

REL = Relation(42, "public", "t", "d", (Column(1, "id", 23, -1),))


def _stream(sizes: list[int]) -> list[tuple[int, list[PgoutputMessage]]]:
    """Per transaction: (end LSN, its messages). LSNs grow like WAL positions."""
    out = []
    lsn = 1000
    row = 0
    for xid, size in enumerate(sizes, start=500):
        commit_lsn = lsn + 100 * (size + 1)
        msgs: list[PgoutputMessage] = [Begin(commit_lsn, 0, xid), REL]
        for _ in range(size):
            row += 1
            msgs.append(Insert(42, (str(row),)))
        msgs.append(Commit(0, commit_lsn, commit_lsn + 48, 0))
        out.append((commit_lsn + 48, msgs))
        lsn = commit_lsn + 48
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.data())
def test_every_transaction_applied_exactly_once_in_order(sizes: list[int],
                                                         data: st.DataObject) -> None:
    txns = _stream(sizes)
    sink = RecordingSink()
    applier = Applier(sink)
    start = 0  # index of the first transaction the upstream sends on this connection
    for _ in range(6):
        flat = [m for _, msgs in txns[start:] for m in msgs]
        cut = data.draw(st.integers(0, len(flat)), label="messages before the drop")
        for msg in flat[:cut]:
            applier.feed(msg)
        applier.connection_lost()
        applied = [i for i, (end, _) in enumerate(txns) if end <= applier.applied_end_lsn]
        confirmed = data.draw(st.integers(0, len(applied)), label="transactions confirmed")
        start = confirmed  # the upstream resends everything after its confirmed position
    for msg in [m for _, msgs in txns[start:] for m in msgs]:
        applier.feed(msg)
    assert [t.xid for t in sink.transactions] == [500 + i for i in range(len(sizes))]
    assert [len(t.changes) for t in sink.transactions] == sizes
    rows = [c.new for t in sink.transactions for c in t.changes]
    assert rows == [(i,) for i in range(1, sum(sizes) + 1)]
