"""Which hit-lane hand-backs are counted as a write's (``proxy.lane_writes``): exactly one run
of a learnt write, whole; a partial message, a run with more after it, or anything else is
not counted."""

from __future__ import annotations

from pgwire import frontend as fe
from proxy import lane_writes
from tests.unit.proxy.test_write_position import _session


def _raw(*msgs: fe.Bind | fe.Execute | fe.Sync | fe.Query) -> bytes:
    return b"".join(m.encode() for m in msgs)


def test_one_whole_run_of_a_learnt_write_is_counted() -> None:
    s = _session("vote")
    run = _raw(fe.Bind("", "vote"), fe.Execute("", 0), fe.Sync())
    counted = lane_writes.WriteHandbacks()
    counted.note(s, run)
    assert counted.count == 1
    for raw in (run[:-1],  # (the Sync not whole yet)
                run + _raw(fe.Bind("", "read"), fe.Execute("", 0), fe.Sync()),
                _raw(fe.Bind("", "read"), fe.Execute("", 0), fe.Sync()),
                _raw(fe.Query("UPDATE t SET v = 1")), b"", b"B\x00\x00\x00\x02"):
        counted.note(s, raw)
        assert counted.count == 1, raw
    counted.note(_session(), run)  # (nothing learnt)
    assert counted.count == 1
