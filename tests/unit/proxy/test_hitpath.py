"""The hit path's pure parts: which Bind messages it recognises, and its memo bounds."""

from __future__ import annotations

from types import SimpleNamespace

from pgwire import frontend as fe
from proxy import hitpath
from proxy.hitpath import Hit, HitMemos, bind_rest
from proxy.session import SessionState


def test_bind_rest_only_for_the_unnamed_portal() -> None:
    raw = fe.Bind("", "s1", (0,), (b"5",), (1,)).encode()
    rest = bind_rest(raw)
    assert rest is not None and raw.endswith(rest) and rest.startswith(b"\x00\x01\x00\x00")
    assert bind_rest(fe.Bind("p", "s1", (), (b"5",), ()).encode()) is None
    # the statement name does not take part: two sessions' names share one memo entry
    assert bind_rest(fe.Bind("", "other", (0,), (b"5",), (1,)).encode()) == rest


def _held(name: str = "c") -> SimpleNamespace:
    return SimpleNamespace(route=SimpleNamespace(cache=SimpleNamespace(name=name)),
                           parse=fe.Parse("s", "SELECT 1", ()))


def test_memo_bounds() -> None:
    memos = HitMemos()
    memos.limit = 1 << 40  # (the bound on answers is tested here; bytes: below)
    sid = memos.settings_id(("some", "settings"))
    assert memos.settings_id(("some", "settings")) == sid
    assert memos.settings_id(("other",)) != sid
    held = _held()  # (one statement: memos are keyed by its cache entry's identity)
    memo = memos.memo(held, sid)  # type: ignore[arg-type]
    assert memos.memo(held, sid) is memo  # type: ignore[arg-type]
    for i in range(hitpath.MEMO_ENTRIES + 10):
        memos.remember(memo, str(i).encode(), Hit((), b"", b"C", ("cache", "x")))
    assert len(memo) == hitpath.MEMO_ENTRIES and b"0" not in memo
    memos.remember(memo, b"big", Hit((), b"", b"x" * (hitpath.MAX_ANSWER_BYTES + 1), ("", "")))
    assert b"big" not in memo
    other = memos.batches("db", ("public",), sid)
    for i in range(hitpath.TOTAL_ENTRIES - hitpath.MEMO_ENTRIES - 10):
        memos.remember(other, str(i % 1000).encode(), Hit((), b"", b"C", ("cache", "x")))
    assert len(memo) == hitpath.MEMO_ENTRIES and other
    for i in range(20):  # past TOTAL_ENTRIES: the oldest answers are forgotten, one by one
        memos.remember(other, f"last{i}".encode(), Hit((), b"", b"C", ("cache", "x")))
    assert len(memos._order) == hitpath.TOTAL_ENTRIES
    assert 0 < hitpath.MEMO_ENTRIES - len(memo) <= 20 and b"10" not in memo
    assert b"last19" in other and hitpath.DEAD not in memo
    assert memos.forgotten == hitpath.MEMO_ENTRIES - len(memo)


def test_memo_byte_bound() -> None:
    memos = HitMemos()
    memo = memos.batches("db", ("public",), 0)
    body = b"x" * (hitpath.MAX_ANSWER_BYTES - 100)
    count = 0
    while not memos.forgotten:
        memos.remember(memo, str(count).encode(), Hit((), b"", body, ("cache", "x")))
        count += 1
    # keys and whole replies are counted (a batch's one reply once): past TOTAL_BYTES, the
    # oldest answer is forgotten
    # (each entry: its key, its body, ReadyForQuery and the entry's own overhead)
    per_entry = len(body) + hitpath.ENTRY_OVERHEAD + hitpath.ORDER_BYTES
    assert (count - 1) * per_entry < hitpath.TOTAL_BYTES <= count * (per_entry + 16)
    assert b"0" not in memo and b"1" in memo and len(memo) == count - 1
    assert memos.bytes <= hitpath.TOTAL_BYTES and count < hitpath.TOTAL_ENTRIES


def test_memo_bound_follows_the_budget_share() -> None:
    """``limit`` (set from the memory budget by ``proxy.misses.budgets``) replaces the
    fixed bound: past it the oldest answers are forgotten, the newest stay (before, every
    memo started over, and each answer had to be encoded and remembered again)."""
    memos = HitMemos()
    memos.limit = 10_000
    memo = memos.batches("db", ("public",), 0)
    for count in range(100):
        memos.remember(memo, str(count).encode(), Hit((), b"", b"x" * 1000, ("cache", "x")))
        assert memos.bytes <= memos.limit
    assert 7 <= len(memo) <= 10 and b"99" in memo and b"0" not in memo
    assert memos.forgotten == 100 - len(memo)
    memos.remember(memo, b"99", Hit((), b"", b"y" * 1000, ("cache", "x")))  # again: still
    assert memos.bytes <= memos.limit and memo[b"99"].body.startswith(b"y")  # bounded
    memos.clear()  # (every memo dropped: a statement holding one fetches a live one)
    assert list(memo) == [hitpath.DEAD] and memos.bytes == 0


def test_other_batches_are_left_to_the_general_path() -> None:
    bind = fe.Bind("", "s1", (), (b"5",), ()).encode()
    # a session busy upstream: a batch of a recognised shape gets as far as the gates
    service = SimpleNamespace(host=object(), settings=None, hits=None,
                              gates=SimpleNamespace(grants={}))
    state = SessionState()
    state.batch_upstream = True
    session = SimpleNamespace(extended=SimpleNamespace(), ctx=SimpleNamespace(tainted=None),
                              state=state,
                              server=SimpleNamespace(service=service),
                              client=SimpleNamespace(write=None))
    parse = fe.Parse("", "SELECT 1").encode()
    for batch in ([bind, fe.Sync().encode()],
                  [parse], [parse, fe.Sync().encode()], [fe.Query("SELECT 1").encode()],
                  [bind, fe.Execute("", 10).encode(), fe.Sync().encode()],
                  [bind, fe.Describe("S", "s1").encode(), fe.Execute().encode(),
                   fe.Sync().encode()],
                  [bind, fe.Execute().encode(), fe.Sync().encode()]):  # not held
        raw, index, pos = b"".join(batch), [], 0
        for msg in batch:
            index.append((msg[0], pos + 5, pos + len(msg)))
            pos += len(msg)
        assert hitpath.try_answer(session, raw, index) is False  # type: ignore[arg-type]
