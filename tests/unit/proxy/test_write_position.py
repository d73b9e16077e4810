"""Which client chunks get the write's position read after them (``proxy.write_position``):
one run of a statement learnt as writing, ending with its Sync, after a cached read; and how
a statement is learnt (``proxy.aftermiss.learn``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pgwire import frontend as fe
from pgwire.framing import scan_messages
from proxy import aftermiss, write_position


def _chunk(*msgs: Any) -> tuple[bytes, list[tuple[int, int, int]]]:
    raw = b"".join(m.encode() for m in msgs)
    found, _ = scan_messages(raw, 0, len(raw))
    return raw, list(found)


def _session(*writers: str) -> Any:
    prepared = {name: object() for name in (*writers, "read", "other")}
    return SimpleNamespace(writers={name: prepared[name] for name in writers},
                           ctx=SimpleNamespace(hiding=set()),
                           state=SimpleNamespace(portal_statements={}, statements=prepared,
                                                  held={}))


def test_one_run_of_a_learnt_statement_ending_with_sync_is_a_write() -> None:
    s = _session("vote")
    assert write_position.writes(s, *_chunk(fe.Bind("", "vote"), fe.Execute("", 0), fe.Sync()))
    assert write_position.writes(s, *_chunk(fe.Bind("", "vote"), fe.Describe("P", ""),
                                            fe.Execute("", 0), fe.Sync()))


def test_anything_else_is_not() -> None:
    s = _session("vote")
    for msgs in (
        (fe.Bind("", "read"), fe.Execute("", 0), fe.Sync()),  # not learnt
        (fe.Bind("", "vote"), fe.Execute("", 0)),  # no Sync: the transaction may go on
        (fe.Bind("", "vote"), fe.Execute("", 0), fe.Flush()),
        (fe.Bind("", "vote"), fe.Execute("", 0), fe.Sync(), fe.Sync()),
        # a second statement in the implicit transaction (it might open a block)
        (fe.Bind("", "vote"), fe.Execute("", 0), fe.Bind("", "other"), fe.Execute("", 0),
         fe.Sync()),
        (fe.Parse("", "BEGIN"), fe.Bind("", "vote"), fe.Execute("", 0), fe.Sync()),
        (fe.Bind("", ""), fe.Execute("", 0), fe.Sync()),  # the unnamed statement
        (fe.Query("UPDATE t SET v = 1"),),
    ):
        assert not write_position.writes(s, *_chunk(*msgs)), msgs
    assert not write_position.writes(_session(), *_chunk(fe.Bind("", "vote"),
                                                         fe.Execute("", 0), fe.Sync()))
    s.state.statements["vote"] = object()  # (prepared again under its name: another one)
    assert not write_position.writes(s, *_chunk(fe.Bind("", "vote"), fe.Execute("", 0),
                                                fe.Sync()))


def test_the_statement_last_bound_to_the_unnamed_portal_is_learnt_up_to_a_bound() -> None:
    s = _session()
    aftermiss.learn(s)  # (nothing bound: nothing learnt)
    assert s.writers == {}
    for i in range(aftermiss.MAX_WRITERS + 5):
        s.state.statements[f"w{i}"] = object()
        s.state.portal_statements[""] = f"w{i}"
        aftermiss.learn(s)
    assert len(s.writers) == aftermiss.MAX_WRITERS
    assert s.writers["w0"] is s.state.statements["w0"]
    s.state.statements["w0"] = again = object()  # prepared again, wrote again: relearnt
    s.state.portal_statements[""] = "w0"
    aftermiss.learn(s)
    assert s.writers["w0"] is again
    s.state.portal_statements[""] = ""
    aftermiss.learn(s)
    assert "" not in s.writers
    s.writers.clear()
    s.state.held["w1"] = object()  # (a cached read bound after the write: not learnt)
    s.state.portal_statements[""] = "w1"
    aftermiss.learn(s)
    assert s.writers == {}
    s.ctx.hiding.add("w2")  # (a write behind a read-only tag: not learnt)
    s.state.portal_statements[""] = "w2"
    aftermiss.learn(s)
    assert s.writers == {}


def test_only_a_write_after_a_cached_read_reads_its_position() -> None:
    assert write_position.after_cached_read(("cache", "served by cache kv1"))
    for last in (None, ("upstream", "not a cached query"), ("admin", "weir command")):
        assert not write_position.after_cached_read(last)
