"""Parity: ``cython_ext.hitpath.try_answer`` does exactly what ``proxy.hitpath``'s pure
version does — same answer, same writes, same changes to the session and the memos — for
random batches, memo contents and session gates."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cython_ext
from pgwire import frontend as fe
from pgwire.framing import scan_messages
from proxy import hitpath
from proxy.extended import HeldStatement
from proxy.seen import Seen
from proxy.session_core import SessionCore_python
from tests.unit.proxy.test_session_core_parity import ledger_on

fast = cython_ext.load_pair("hitpath")
_core = cython_ext.load_pair("session_core")
FAST_CORE: type = SessionCore_python if _core is None else _core.SessionCore
QUERY = "SELECT v FROM t WHERE k = $1"


def test_twin_is_built() -> None:
    assert fast is not None, "cython_ext.hitpath is not built: run `make compile`"


class _Engine:
    def __init__(self, answers: dict[tuple[str, tuple[Any, ...]], object], fail: bool) -> None:
        self.answers, self.fail = answers, fail

    def lookup(self, cache: str, key: tuple[Any, ...]) -> object:
        if self.fail:
            raise KeyError(cache)
        return self.answers.get((cache, key))

    def current(self, cache: str, key: tuple[Any, ...], answer: object) -> bool:
        return self.lookup(cache, key) is answer


def _batch(kind: str, describe: bool, param: bytes, shape_ok: bool) -> bytes:
    tail: list[Any] = [fe.Describe("P", "")] if describe else []
    tail += [fe.Execute("", 0 if shape_ok else 5), fe.Sync()]
    if kind == "prepared":
        msgs: list[Any] = [fe.Bind("", "s1", (), (param,), ()), *tail]
    elif kind == "unnamed":
        msgs = [fe.Parse("", QUERY), fe.Bind("", "", (), (param,), ()), *tail]
    elif kind == "query":
        msgs = [fe.Query(f"SELECT v FROM t WHERE k = {param.decode()}")]
    else:
        msgs = [fe.Bind("p", "s1", (), (param,), ()), *tail]
    return b"".join(m.encode() for m in msgs)


def _world(c: dict[str, Any], core: type = SessionCore_python
           ) -> tuple[Any, bytes, list[tuple[int, int, int]]]:
    """A session as the hit path sees it, built afresh from the drawn configuration (its
    core of the class ``core``: each twin reads its own)."""
    raw = _batch(c["kind"], c["describe"], c["param"], c["shape_ok"])
    index, _ = scan_messages(raw, 0, 1 << 20)
    route = SimpleNamespace(cache=SimpleNamespace(name="c") if c["cached"] else None)
    held = HeldStatement(fe.Parse("s1", QUERY), route)  # type: ignore[arg-type]
    answer = ("row",)
    engine = _Engine({("c", (1,)): answer if c["current"] else ("other",)}, c["fail"])
    hits = hitpath.HitMemos()
    now = time.monotonic()
    grants = {} if c["granted"] is None else {
        ("u", "c"): (c["granted"] != "no", now + (-1.0 if c["granted"] == "expired" else 60.0))}
    service = SimpleNamespace(
        settings=SimpleNamespace(read_your_writes="on", staleness_bound=5.0),
        host=SimpleNamespace(stream=SimpleNamespace(up=c["connected"]),
                             fresh_as_of=now - c["lag"], engine=engine,
                             coverage=SimpleNamespace(covered=now - c["behind"])),
        hits=hits, gates=SimpleNamespace(grants=grants),
        reads=SimpleNamespace(output_settings_id=lambda state, ctx: (None, 0)))
    description = b"T-desc" if c["kind"] == "prepared" else b""  # as the memos are filled
    hit = hitpath.Hit(((("c", (1,), answer)),), description, b"D-rows C-tag", ("cache", "c"),
                      statement=held if c["kind"] == "unnamed" else None)
    if c["memo"]:
        if c["kind"] == "prepared" and c["cached"]:
            rest = hitpath.bind_rest(raw[: index[0][2]])
            assert rest is not None
            hits.remember(hits.memo(held, 0), rest, hit)
        elif c["kind"] != "prepared":
            hits.remember(hits.batches("db", ("public",), 0), raw, hit)
    if c["dead"] and c["cached"]:  # the statement holds a dropped memo: both fetch anew
        held.memo, held.memo_sid = hits.memo(held, 0), 0
        hits.clear()
    writes: list[bytes] = []
    state = ledger_on(core)  # the session core: the gates the hit path reads
    state.held["s1"] = held
    state.held_portals.update({"": object(), "q": object()})
    state.batch_upstream = c["busy"]
    state.transaction_status = c["tx"]
    state.parameters_version = 3
    if c["idle"] != "yes":  # a request outstanding: the client's, or one weir discards
        state.pending.append(object())
        state.discarded = int(c["idle"] == "discarded")
    extended = SimpleNamespace(recording=None)

    def simple_query(answered: bool = False) -> None:  # Extended.simple_query's effect here
        state.held.pop("", None)
        state.held_portals.pop("", None)

    extended.simple_query = simple_query
    session = SimpleNamespace(
        extended=extended,
        state=state,
        ctx=SimpleNamespace(defaults_applied=True, tainted=c["tainted"],
                            seen=Seen(now - 1.0, c["wrote"]),
                            user="u", last=("upstream", "before"), database="db",
                            search_path=("public",), settings_version=1,
                            # the session's memo of its output settings id: current or not
                            output=(3 if c["output_memo"] else 2, 1, (None, 0))),
        server=SimpleNamespace(service=service), client=SimpleNamespace(write=writes.append),
        lane_recent=0b101, lane_miss_run=7)  # (a hit shifts a 0 in and ends the run)
    return session, raw, index


def _outcome(session: Any, result: bool) -> tuple[Any, ...]:
    ext, state, hits = session.extended, session.state, session.server.service.hits
    recording = ext.recording
    # (a prepared statement's memo key holds id(cache entry): differs between the worlds)
    memos = sorted((repr(k[:1] + k[2:] if len(k) == 5 else k), sorted(m))
                   for k, m in hits._memos.items())
    held = {name: (type(h).__name__, h.parse, h.memo_sid) for name, h in state.held.items()}
    return (result, session.client.write.__self__, session.ctx.last, hits.served, memos,
            sorted(state.held_portals), held, recording, session.lane_recent,
            session.lane_miss_run)


def _mostly(good: Any, bad: Any) -> st.SearchStrategy[Any]:
    """``good`` six times in seven: most examples pass every gate and reach the answer."""
    return st.sampled_from((good,) * 6 + (bad,))


CONFIG = st.fixed_dictionaries({
    "kind": st.sampled_from(("prepared", "prepared", "unnamed", "query", "named-portal")),
    "describe": st.booleans(), "param": st.sampled_from((b"1", b"2")),
    "shape_ok": _mostly(True, False), "cached": _mostly(True, False),
    "memo": _mostly(True, False), "current": _mostly(True, False),
    "fail": _mostly(False, True),
    "granted": st.sampled_from(("yes",) * 6 + ("no", "expired", None)),
    "connected": _mostly(True, False), "lag": _mostly(0.1, 9.0), "busy": _mostly(False, True),
    "idle": st.sampled_from(("yes",) * 5 + ("discarded", "no")), "tx": _mostly("I", "T"),
    "wrote": _mostly(False, True), "behind": _mostly(0.5, 2.0),
    "tainted": _mostly(None, "SET search_path"), "output_memo": _mostly(True, False),
    "dead": _mostly(False, True),
})


@settings(max_examples=300, deadline=None)
@given(CONFIG)
def test_twin_matches_pure(config: dict[str, Any]) -> None:
    assert fast is not None
    pure_session, raw, index = _world(config)
    fast_session, raw2, index2 = _world(config, FAST_CORE)
    expected = _outcome(pure_session, hitpath.try_answer_python(pure_session, raw, index))
    got = _outcome(fast_session, fast.try_answer(fast_session, raw2, index2))
    assert got == expected


def test_twin_matches_pure_when_the_statement_holds_a_dropped_memo() -> None:
    """Every gate passes and the statement still holds a memo the memos dropped (marked
    dead): both fetch a live memo, the same way (rare in the random configurations)."""
    assert fast is not None
    good = {"kind": "prepared", "param": b"1", "shape_ok": True, "cached": True, "memo": True,
            "current": True, "fail": False, "granted": "yes", "connected": True, "lag": 0.1,
            "busy": False, "idle": "yes", "tx": "I", "wrote": False, "behind": 0.5,
            "tainted": None,
            "dead": True}
    for describe in (False, True):
        for output_memo in (False, True):
            config = {**good, "describe": describe, "output_memo": output_memo}
            pure_session, raw, index = _world(config)
            fast_session, raw2, index2 = _world(config, FAST_CORE)
            expected = _outcome(pure_session, hitpath.try_answer_python(pure_session, raw, index))
            assert expected[4], "a live memo was fetched"
            assert _outcome(fast_session, fast.try_answer(fast_session, raw2, index2)) == expected
