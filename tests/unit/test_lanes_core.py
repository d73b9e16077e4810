"""The compiled hit lanes (``cython_ext.lanes``) on socket pairs: what a lane answers, and
that it hands everything else back untouched (the bytes it did not answer, the reply bytes
it could not send).

These drive the lane threads directly; ``tests/integration/test_hit_lanes.py`` runs them
inside weir against the real upstream, byte for byte against the event loop's hit path.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import cython_ext
from proxy.rules import WRITE_WORDS, hides_write_python, hiding_words

_core = cython_ext.load_pair("lanes")
if _core is None:  # the build is part of `make test`; a missing one is an error, not a skip
    raise RuntimeError("cython_ext.lanes is not built; run `make compile`")
core: Any = _core

REST = b"\x00\x00\x00\x01\x00\x00\x00\x013\x00\x00"  # no formats, one parameter "3", none
LATER = 1e12  # a deadline that does not pass


def msg(t: bytes, payload: bytes) -> bytes:
    return t + struct.pack("!I", len(payload) + 4) + payload


def unit(name: bytes = b"s1", rest: bytes = REST, describe: bool = False) -> bytes:
    out = msg(b"B", b"\x00" + name + b"\x00" + rest)
    if describe:
        out += msg(b"D", b"P\x00")
    return out + msg(b"E", b"\x00\x00\x00\x00\x00") + msg(b"S", b"")


@pytest.fixture
def lanes() -> Iterator[Any]:
    lanes = core.Lanes(2)
    threads = [threading.Thread(target=lanes.run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    lanes.set_fresh_until(LATER)
    try:
        yield lanes
    finally:
        lanes.stop()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(10)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def handed(lanes: Any) -> list[int]:
    """Wait for the lanes' notice (the descriptor becoming readable) and drain it."""
    ready, _, _ = select.select([lanes.notify_fd], [], [], 10)
    assert ready, "no session was handed back"
    return list(lanes.handed())


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk
        out += chunk
    return out


def test_answers_stamped_runs_with_and_without_describe(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.put(7, REST, b"<plain>", b"<described>")
    lanes.enter(1, b.fileno(), [(b"s1", 7, LATER)])
    a.sendall(unit() + unit(describe=True) + unit())  # pipelined in one write
    assert recv_exactly(a, 25) == b"<plain><described><plain>"
    assert lanes.stats()[0] == 3
    served, table, unanswered, unsent = lanes.leave(1)
    assert (served, table, unanswered, unsent) == (3, 7, b"", b"")
    assert lanes.leave(1) is None
    assert lanes.stats()[3] == 0


#: the reason ``Lanes.leaves`` counts for each case below
WHY = {"bump": "epoch", "dropped": "unstamped", "other statement": "statement", "gate": "gate",
       "fresh": "fresh", "unknown key": "unstamped", "named portal": "message",
       "row limit": "message", "query": "message"}


@pytest.mark.parametrize("case", list(WHY))
def test_hands_back_what_it_may_not_answer(lanes: Any, pair: Any, case: str) -> None:
    a, b = pair
    lanes.put(7, REST, b"<plain>", b"<described>")
    gate = time.monotonic() - 1 if case == "gate" else LATER
    lanes.enter(3, b.fileno(), [(b"s1", 7, gate)])
    chunk = {
        "other statement": unit(name=b"s2"),
        "unknown key": unit(rest=REST[:-2] + b"\x00\x01"),
        "named portal": msg(b"B", b"p\x00s1\x00" + REST) + msg(b"E", b"p\x00\x00\x00\x00\x00")
        + msg(b"S", b""),
        "row limit": msg(b"B", b"\x00s1\x00" + REST) + msg(b"E", b"\x00\x00\x00\x00\x01")
        + msg(b"S", b""),
        "query": msg(b"Q", b"SELECT 1\x00"),
    }.get(case, unit())
    if case == "bump":
        lanes.bump()
    if case == "dropped":
        lanes.drop([(7, REST)])
    if case == "fresh":
        lanes.set_fresh_until(time.monotonic() - 1)
    a.sendall(chunk)
    assert handed(lanes) == [3]
    assert lanes.leave(3) == (0, -1, chunk, b"")
    assert lanes.stats()[0] == 0
    leaves, dropped = lanes.leaves()
    assert leaves == {why: int(why == WHY[case]) for why in core.LEAVE_NAMES}
    assert dropped == (case == "dropped")


def test_a_dropped_entry_leaves_the_others_answered(lanes: Any, pair: Any) -> None:
    """``drop`` forgets the entries named (an engine answer replaced or dropped), and no
    other; ``touched`` names each answered entry once."""
    a, b = pair
    other = REST[:-3] + b"4\x00\x00"
    lanes.put(7, REST, b"<a>", b"<a>")
    lanes.put(7, other, b"<b>", b"<b>")
    lanes.enter(5, b.fileno(), [(b"s1", 7, LATER)])
    a.sendall(unit() + unit(rest=other) + unit())
    assert recv_exactly(a, 9) == b"<a><b><a>"
    assert sorted(lanes.touched()) == sorted([(7, REST), (7, other)])
    assert lanes.touched() == []
    size = lanes.stats()[2]
    lanes.drop([(7, REST), (8, REST)])  # (an unknown entry is no error)
    assert lanes.stats()[1:3] == (1, size - 8 - len(REST) - 6)
    a.sendall(unit(rest=other))
    assert recv_exactly(a, 3) == b"<b>"
    assert lanes.touched() == [(7, other)]
    a.sendall(unit(rest=other) + unit())
    assert recv_exactly(a, 3) == b"<b>"
    assert handed(lanes) == [5]
    assert lanes.leave(5) == (5, 7, unit(), b"")
    assert lanes.leaves() == ({why: int(why == "unstamped") for why in core.LEAVE_NAMES}, 1)


def test_answers_the_leading_runs_and_hands_back_the_rest(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.put(7, REST, b"<plain>", b"<described>")
    lanes.enter(4, b.fileno(), [(b"s1", 7, LATER)])
    rest = msg(b"Q", b"SELECT 1\x00") + unit()
    a.sendall(unit() + unit(describe=True) + rest)
    assert handed(lanes) == [4]
    assert recv_exactly(a, 18) == b"<plain><described>"
    assert lanes.leave(4) == (2, 7, rest, b"")


def test_sessions_ready_together_each_get_their_own_answers(lanes: Any) -> None:
    """A lane sends the answers of one wake-up after reading every ready session: each
    session still gets exactly its own answers, and one handed back with the rest of its
    bytes leaves the others answered."""
    pairs = [socket.socketpair() for _ in range(6)]
    try:
        lanes.put(7, REST, b"<plain>", b"<described>")
        for i, (_, b) in enumerate(pairs):
            lanes.enter(20 + i, b.fileno(), [(b"s1", 7, LATER)])
        rest = msg(b"Q", b"SELECT 1\x00")
        for rnd in range(3):
            for i, (a, _) in enumerate(pairs):
                a.settimeout(10)
                a.sendall(unit(describe=i % 2 == 1) * (i + 1)
                          + (rest if (i, rnd) == (5, 2) else b""))
            for i, (a, _) in enumerate(pairs):
                one = b"<described>" if i % 2 else b"<plain>"
                assert recv_exactly(a, len(one) * (i + 1)) == one * (i + 1)
        assert handed(lanes) == [25]
        assert lanes.leave(25) == (18, 7, rest, b"")
        for i in range(5):
            assert lanes.leave(20 + i) == (3 * (i + 1), 7, b"", b"")
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_an_incomplete_run_is_handed_back_whole(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.put(7, REST, b"<plain>", b"<described>")
    lanes.enter(5, b.fileno(), [(b"s1", 7, LATER)])
    whole = unit()
    a.sendall(whole[:-3])  # the Sync is cut
    assert handed(lanes) == [5]
    assert lanes.leave(5) == (0, -1, whole[:-3], b"")


def test_end_of_stream_is_handed_back(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.enter(6, b.fileno(), [(b"s1", 7, LATER)])
    a.shutdown(socket.SHUT_WR)
    assert handed(lanes) == [6]
    assert lanes.leave(6) == (0, -1, b"", b"")


def test_reply_bytes_the_socket_does_not_take_are_handed_back(lanes: Any, pair: Any) -> None:
    a, b = pair
    big = bytes(range(256)) * 64  # 16 KiB a reply; the peer reads nothing
    b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    lanes.put(7, REST, big, big)
    lanes.enter(8, b.fileno(), [(b"s1", 7, LATER)])
    sent_units = 0
    tokens: list[int] = []
    while not tokens:
        a.sendall(unit() * 16)
        sent_units += 16
        ready, _, _ = select.select([lanes.notify_fd], [], [], 0.5)
        if ready:
            tokens = list(lanes.handed())
    assert tokens == [8]
    served, _, unanswered, unsent = lanes.leave(8)
    assert unsent  # what the socket would not take
    received = b""
    a.setblocking(False)
    while True:
        try:
            chunk = a.recv(1 << 20)
        except BlockingIOError:
            break
        if not chunk:
            break
        received += chunk
    # every answered run's reply is either received or handed back, in order
    assert received + unsent == big * served
    assert len(unanswered) % len(unit()) == 0
    assert served + len(unanswered) // len(unit()) <= sent_units


def test_leave_waits_for_no_one_and_forgets_the_session(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.enter(9, b.fileno(), [])
    with pytest.raises(ValueError):
        lanes.enter(9, b.fileno(), [])
    with pytest.raises(ValueError):
        lanes.enter(0, b.fileno(), [])
    assert lanes.stats()[3] == 1
    assert lanes.leave(9) == (0, -1, b"", b"")
    assert lanes.stats()[3] == 0
    # the lane's duplicate descriptor is closed: the socket is still open for its owner
    a.sendall(b"x")
    assert b.recv(1) == b"x"


def test_entries_are_stamped_with_the_epoch_of_put(lanes: Any, pair: Any) -> None:
    a, b = pair
    lanes.put(7, REST, b"<old>", b"<old>")
    lanes.bump()
    lanes.put(7, REST, b"<new>", b"<new>")  # stamped again: answered
    lanes.enter(10, b.fileno(), [(b"s1", 7, LATER)])
    a.sendall(unit())
    assert recv_exactly(a, 5) == b"<new>"
    lanes.clear()
    a.sendall(unit())
    assert handed(lanes) == [10]
    assert lanes.leave(10)[:3] == (1, 7, unit())
    assert lanes.stats()[1:3] == (0, 0)


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of loopback TCP sockets (a socketpair has no arrival CPU)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        a = socket.create_connection(server.getsockname())
        b, _ = server.accept()
    a.settimeout(10)
    return a, b


def on_cpu(cpu: int, work: Any) -> Any:
    """``work()`` run by a thread that runs on ``cpu`` only (its bytes arrive there)."""
    result: list[Any] = []

    def run() -> None:
        os.sched_setaffinity(0, {cpu})
        result.append(work())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(20)
    assert result, "the pinned client thread failed"
    return result[0]


def test_pinned_lanes_serve_sessions_on_the_cpu_their_bytes_arrive_on() -> None:
    """With one lane pinned to each CPU, a session goes to the lane of the CPU its client
    sends from, and moves with it; answers are unchanged and nothing is lost on a move."""
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    assert len(cpus) == 2, "the lanes' CPU routing needs two CPUs to move between"
    lanes = core.Lanes(2, 0.0, cpus)
    assert lanes.cpus == cpus
    threads = [threading.Thread(target=lanes.run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    lanes.set_fresh_until(LATER)
    lanes.put(7, REST, b"<plain>", b"<described>")
    a, b = tcp_pair()
    try:
        lanes.enter(30, b.fileno(), [(b"s1", 7, LATER)])

        def round_trips(n: int) -> bytes:
            out = b""
            for i in range(n):
                a.sendall(unit(describe=i % 2 == 1))
                out += recv_exactly(a, 11 if i % 2 else 7)
            return out
        for cpu, lane in ((cpus[1], 1), (cpus[0], 0), (cpus[1], 1)):
            # the first answer may come from the lane the session was on; by the second
            # the move the first one decided is done
            assert on_cpu(cpu, lambda: round_trips(2)) == b"<plain><described>"
            assert lanes.lane_of(30) == lane
        assert lanes.lane_of(31) == -1
        assert 2 <= lanes.stats()[5] <= 3  # 1 -> 0 -> 1, and perhaps to 1 at first
        assert lanes.leave(30) == (6, 7, b"", b"")
    finally:
        lanes.stop()
        for t in threads:
            t.join(10)
        a.close()
        b.close()
    with pytest.raises(ValueError, match="one distinct CPU"):
        core.Lanes(2, 0.0, (cpus[0], cpus[0]))
    with pytest.raises(ValueError, match="one distinct CPU"):
        core.Lanes(2, 0.0, (cpus[0],))


# -- pass sessions ------------------------------------------------------------------------------

WATCHED = (b"CREATE", b"SET")
READ_ONLY = (b"SELECT", b"BEGIN")
BIND_NAMES = b"\x00s1\x00"
PARSE_PAYLOAD = b"\x00SELECT 1\x00\x00\x00"
ROW = msg(b"2", b"") + msg(b"D", b"\x00\x01\x00\x00\x00\x011") + msg(b"C", b"SELECT 1\x00")
IDLE = msg(b"Z", b"I")


def cycle(names: bytes = BIND_NAMES) -> bytes:
    return msg(b"B", names + REST) + msg(b"E", b"\x00\x00\x00\x00\x00") + msg(b"S", b"")


upstream_pair = pair  # a second pair of sockets: the upstream's end and the lane's


def enter_pass(lanes: Any, token: int, pair: Any, upstream_pair: Any, queries: str = "ascii",
               names: tuple[bytes, ...] = (), hiding: tuple[str, ...] = (),
               held: list[tuple[bytes, int]] | None = None) -> None:
    lanes.set_words(WATCHED, READ_ONLY)
    lanes.routing(names, tuple(w.encode() for w in hiding),
                  tuple(w.encode() for w in WRITE_WORDS))
    lanes.enter_pass(token, pair[1].fileno(), upstream_pair[1].fileno(), [BIND_NAMES],
                     [] if held else [PARSE_PAYLOAD], core.QUERIES[queries], held)


def test_a_pass_session_relays_quiet_cycles_and_sums_them_up(lanes: Any, pair: Any,
                                                              upstream_pair: Any) -> None:
    client, server = pair[0], upstream_pair[0]
    assert client is not server
    enter_pass(lanes, 11, pair, upstream_pair)
    sent = cycle() + msg(b"P", PARSE_PAYLOAD) + cycle() + msg(b"Q", b"SELECT 2\x00")
    client.sendall(sent[:7])  # a partial message waits for the rest
    client.sendall(sent[7:])
    assert recv_exactly(server, len(sent)) == sent
    answer = ROW + IDLE + msg(b"1", b"") + ROW + IDLE + ROW + IDLE
    server.sendall(answer[:20])  # an answer goes to the client once its cycle is whole
    server.sendall(answer[20:])
    assert recv_exactly(client, len(answer)) == answer
    client.sendall(cycle())  # in flight when the session is taken back
    assert recv_exactly(server, len(cycle())) == cycle()
    result = lanes.leave(11)
    (cycles, binds, parses, queried, batch, unread, unsent, up_unread, up_unsent, inflight,
     missed, first, *_) = result
    assert cycles == 3 and queried and not batch
    assert [(key, runs) for _, key, runs in binds] == [(BIND_NAMES, 2)]
    assert [key for _, key in parses] == [PARSE_PAYLOAD]
    assert binds[0][0] > parses[0][0]  # the last Bind came after the Parse
    assert (unread, unsent, up_unread, up_unsent) == (b"", b"", b"", b"")
    assert inflight == cycle() and missed == b"" and first == 0
    assert lanes.stats()[4] == 3


@pytest.mark.parametrize("case", ["unknown bind", "unknown parse", "watched query",
                                  "non-ascii query", "cached relation", "close", "routing",
                                  "flush"])
def test_a_pass_session_hands_back_what_it_may_not_forward(
        lanes: Any, pair: Any, upstream_pair: Any, case: str) -> None:
    client = pair[0]
    enter_pass(lanes, 12, pair, upstream_pair, queries="unnamed", names=(b"things",))
    chunk = {
        "unknown bind": cycle(b"\x00s2\x00"),
        "unknown parse": msg(b"P", b"\x00SELECT 3\x00\x00\x00") + msg(b"S", b""),
        "watched query": msg(b"Q", b" set x = 1\x00"),
        "non-ascii query": msg(b"Q", "SELECT 'é'\0".encode()),
        "cached relation": msg(b"Q", b"SELECT * FROM Things\x00"),
        "close": msg(b"C", b"Ss1\x00") + msg(b"S", b""),
        "flush": msg(b"B", BIND_NAMES + REST) + msg(b"E", b"\x00\x00\x00\x00\x00")
        + msg(b"H", b""),
    }.get(case, cycle())
    if case == "routing":
        lanes.routing(())
    client.sendall(chunk)
    assert handed(lanes) == [12]
    result = lanes.leave(12)
    assert result[0] == 0 and result[5] == chunk and result[9] == b""
    upstream_pair[0].setblocking(False)
    with pytest.raises(BlockingIOError):
        upstream_pair[0].recv(100)  # nothing was forwarded


@pytest.mark.parametrize("case", ["error", "write", "transaction", "notification"])
def test_a_pass_session_hands_back_answers_it_may_not_relay(
        lanes: Any, pair: Any, upstream_pair: Any, case: str) -> None:
    client, server = pair[0], upstream_pair[0]
    enter_pass(lanes, 13, pair, upstream_pair)
    if case != "notification":
        client.sendall(cycle())
        assert recv_exactly(server, len(cycle())) == cycle()
    answer = {
        "error": msg(b"E", b"SERROR\x00\x00") + IDLE,
        "write": msg(b"C", b"INSERT 0 1\x00") + IDLE,
        "transaction": msg(b"C", b"BEGIN\x00") + msg(b"Z", b"T"),
        "notification": msg(b"A", b"\x00\x00\x00\x01ch\x00hi\x00"),
    }[case]
    server.sendall(ROW + IDLE + answer if case == "error" else answer)
    assert handed(lanes) == [13]
    result = lanes.leave(13)
    if case == "error":  # the whole cycle before it went by
        assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert result[7] == answer
    assert result[9] == (b"" if case == "notification" or case == "error" else cycle())


HIDING_TEXTS = [
    "SELECT bump(1)", "select Bump (1)", "SELECT updated_at FROM t", "SELECT bumpy(1)",
    "WITH u AS (UPDATE t SET a = 1 RETURNING 1) SELECT * FROM u", "UPDATE t SET a = bump(1)",
    "  delete FROM t WHERE a = 1", "EXPLAIN ANALYZE DELETE FROM t", "EXECUTE p(1)",
    "SELECT * FROM t FOR UPDATE", "MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE",
    "SELECT $bump(1)", "SELECT a_bump(1)", "SELECT 1 AS insert_", "SELECT x.bump FROM x",
    "SELECT bump", "bump(1)",
]


@pytest.mark.parametrize("text", HIDING_TEXTS)
def test_a_pass_session_hands_back_queries_that_may_hide_a_write(
        lanes: Any, pair: Any, upstream_pair: Any, text: str) -> None:
    """The lane's check is ``proxy.rules.hides_write``: a Query that may write behind
    a read-only tag goes to the event loop (read-your-writes counts it); others pass."""
    client, server = pair[0], upstream_pair[0]
    hiding = hiding_words(("bump",))
    enter_pass(lanes, 14, pair, upstream_pair, queries="unnamed", hiding=hiding)
    query = msg(b"Q", text.encode() + b"\x00")
    client.sendall(query)
    if hides_write_python(text.lower(), hiding):
        assert handed(lanes) == [14]
        assert lanes.leave(14)[5] == query
    else:
        assert recv_exactly(server, len(query)) == query
        assert lanes.leave(14)[9] == query  # in flight


# -- pass sessions that forward held statements' misses ---------------------------------------

HELD = [(b"\x00h1\x00", 7)]  # the held statement h1, its answers in lane table 7


def test_a_pass_session_forwards_held_reads_it_has_no_stamp_for(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """A held statement's run with no stamped answer goes upstream byte for byte, its Bind
    kept for the proxy (admission: ``Lanes.take_missed``); PostgreSQL's answer is relayed."""
    client, server = pair[0], upstream_pair[0]
    other = REST.replace(b"3", b"4")
    lanes.put(7, other, b"<b>", b"<b>")  # (another key's answer: not this read's)
    enter_pass(lanes, 31, pair, upstream_pair, held=HELD)
    sent = unit(b"h1") + unit(b"h1", describe=True) + cycle()
    client.sendall(sent)
    assert recv_exactly(server, len(sent)) == sent
    server.sendall((ROW + IDLE) * 3)
    assert recv_exactly(client, len(ROW + IDLE) * 3) == (ROW + IDLE) * 3
    bind = msg(b"B", b"\x00h1\x00" + REST)
    assert lanes.misses() == (2, 0)
    assert lanes.take_missed() == [(31, bind + bind, 0)]  # (no doorkeeper: every read)
    assert lanes.take_missed() == []  # (taken)
    client.sendall(unit(b"h1"))  # forwarded, not taken before the session leaves
    assert recv_exactly(server, len(unit(b"h1"))) == unit(b"h1")
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    result = lanes.leave(31)
    assert result[0] == 4 and result[10] == bind and result[11] == 0
    assert sorted((key, runs) for _, key, runs in result[1]) == [(b"\x00h1\x00", 3),
                                                                  (BIND_NAMES, 1)]


@pytest.mark.parametrize("case", ["stamped", "row limit", "named portal", "parse", "flush"])
def test_a_pass_session_hands_back_held_reads_it_may_not_forward(
        lanes: Any, pair: Any, upstream_pair: Any, case: str) -> None:
    """A stamped answer is the hit path's (the event loop checks the session's gates first);
    a held statement's Bind outside the drivers' run, and any Parse, are the loop's."""
    client = pair[0]
    if case == "stamped":
        lanes.put(7, REST, b"<plain>", b"<described>")
    enter_pass(lanes, 32, pair, upstream_pair, held=HELD)
    chunk = {
        "row limit": msg(b"B", b"\x00h1\x00" + REST) + msg(b"E", b"\x00\x00\x00\x00\x01")
        + msg(b"S", b""),
        "named portal": msg(b"B", b"p\x00h1\x00" + REST) + msg(b"E", b"p\x00\x00\x00\x00\x00")
        + msg(b"S", b""),
        "parse": msg(b"P", PARSE_PAYLOAD) + msg(b"S", b""),
        "flush": msg(b"B", b"\x00h1\x00" + REST) + msg(b"E", b"\x00\x00\x00\x00\x00")
        + msg(b"H", b""),
    }.get(case, unit(b"h1"))
    client.sendall(chunk)
    assert handed(lanes) == [32]
    result = lanes.leave(32)
    assert result[0] == 0 and result[5] == chunk and result[9] == b"" and result[10] == b""
    assert lanes.misses() == (0, 0) and lanes.take_missed() == []
    upstream_pair[0].setblocking(False)
    with pytest.raises(BlockingIOError):
        upstream_pair[0].recv(100)  # nothing was forwarded


def test_amid_misses_a_pass_session_forwards_stamped_reads_too(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """After 6 of its last 8 held statements' runs had no stamped answer, a run with one goes
    upstream too (the client would wait for a seen(s) barrier on the event loop); with fewer
    misses among them it is handed back."""
    client, server = pair[0], upstream_pair[0]
    lanes.put(7, REST, b"<plain>", b"<described>")
    enter_pass(lanes, 33, pair, upstream_pair, held=HELD)
    for i in range(6):  # misses: other keys, not stamped
        miss = unit(b"h1", REST.replace(b"3", str(i + 4).encode()))
        client.sendall(miss)
        assert recv_exactly(server, len(miss)) == miss
        server.sendall(ROW + IDLE)
        assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert lanes.misses() == (6, 0)
    for _ in range(3):  # stamped, amid misses: forwarded (6 of the last 8 were misses)
        client.sendall(unit(b"h1"))
        assert recv_exactly(server, len(unit(b"h1"))) == unit(b"h1")
        server.sendall(ROW + IDLE)
        assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert lanes.misses() == (6, 3)
    client.sendall(unit(b"h1"))  # now 5 of the last 8: handed back
    assert handed(lanes) == [33]
    result = lanes.leave(33)
    assert result[0] == 9 and result[5] == unit(b"h1")
    assert result[10] == b"".join(  # every forwarded miss's Bind, for the proxy to read (not
        # the stamped ones': hits, nothing to count)
        msg(b"B", b"\x00h1\x00" + REST.replace(b"3", str(i + 4).encode())) for i in range(6))


def test_the_lanes_doorkeeper_counts_first_reads_and_passes_later_ones(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """``screen_misses(n)``: a key's first forwarded read is only counted (admission refuses
    it anyway), its later reads' Binds are taken by the proxy; keys per lane table."""
    client, server = pair[0], upstream_pair[0]
    lanes.screen_misses(16)
    enter_pass(lanes, 34, pair, upstream_pair, held=[*HELD, (b"\x00h2\x00", 8)])
    reads = [(b"h1", b"4"), (b"h1", b"5"), (b"h1", b"4"), (b"h2", b"4"), (b"h1", b"4")]
    for name, value in reads:
        one = unit(name, REST.replace(b"3", value))
        client.sendall(one)
        assert recv_exactly(server, len(one)) == one
        server.sendall(ROW + IDLE)
        assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    again = msg(b"B", b"\x00h1\x00" + REST.replace(b"3", b"4"))
    assert lanes.take_missed() == [(34, again + again, 3)]
    assert lanes.take_missed() == []
    assert lanes.misses() == (5, 0)
    first = unit(b"h2", REST.replace(b"3", b"5"))  # a first read: counted at leave
    client.sendall(first)
    assert recv_exactly(server, len(first)) == first  # (forwarded before it is answered)
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    result = lanes.leave(34)
    assert result[10] == b"" and result[11] == 1


def test_a_pass_session_forwards_no_misses_while_the_event_loop_is_behind(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """``open_misses(False)`` (the event loop falls behind: ``lane_misses.keeping_up``): a
    held statement's read with no stamped answer hands the session back, forwarded by no
    lane; reopened, the next one is forwarded again."""
    client, server = pair[0], upstream_pair[0]
    enter_pass(lanes, 34, pair, upstream_pair, held=HELD)
    lanes.open_misses(False)
    client.sendall(unit(b"h1"))
    assert handed(lanes) == [34]
    result = lanes.leave(34)
    assert result[0] == 0 and result[5] == unit(b"h1") and result[10] == b""
    assert lanes.misses() == (0, 0)
    lanes.open_misses(True)
    enter_pass(lanes, 35, pair, upstream_pair, held=HELD)
    client.sendall(unit(b"h1"))
    assert recv_exactly(server, len(unit(b"h1"))) == unit(b"h1")
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert lanes.misses() == (1, 0)


def test_while_the_event_loop_is_behind_a_pass_session_forwards_first_reads_only(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """With the lanes' doorkeeper on, a read it would keep (a key's first: only counted, no
    work for the event loop) is still forwarded while misses are closed; a key's next read
    (its Bind the event loop would read: admission, a fill) hands the session back."""
    client, server = pair[0], upstream_pair[0]
    lanes.screen_misses(16)
    lanes.open_misses(False)
    enter_pass(lanes, 37, pair, upstream_pair, held=HELD)
    client.sendall(unit(b"h1"))
    assert recv_exactly(server, len(unit(b"h1"))) == unit(b"h1")  # a first read
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    client.sendall(unit(b"h1"))  # its second: the loop's
    assert handed(lanes) == [37]
    result = lanes.leave(37)
    assert result[0] == 1 and result[5] == unit(b"h1") and result[10] == b"" \
        and result[11] == 1
    assert lanes.misses() == (1, 0)


def rest(value: bytes) -> bytes:
    """A Bind's tail after the names (as ``REST``) with the one parameter ``value``."""
    return b"\x00\x00\x00\x01" + struct.pack("!I", len(value)) + value + b"\x00\x00"


#: misses a pass session forwards in one stay (``MISS_STINT`` in ``cython_ext.lanes``)
STINT = 1024


def test_a_pass_session_hands_back_after_forwarding_a_stint_of_misses(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """A stay in a lane forwards at most MISS_STINT misses: the next one hands the session
    back, so the event loop answers the keys filled but not stamped meanwhile."""
    client, server = pair[0], upstream_pair[0]
    enter_pass(lanes, 36, pair, upstream_pair, held=HELD)
    for i in range(STINT):
        miss = unit(b"h1", rest(b"k%d" % i))  # (other keys)
        client.sendall(miss)
        assert recv_exactly(server, len(miss)) == miss
        server.sendall(ROW + IDLE)
        assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert lanes.misses() == (STINT, 0)
    last = unit(b"h1", rest(b"last"))
    client.sendall(last)
    assert handed(lanes) == [36]
    result = lanes.leave(36)
    assert result[0] == STINT and result[5] == last


# -- hit sessions that may switch to a pass session at a miss ----------------------------------

def enter_switching(lanes: Any, token: int, pair: Any, upstream_pair: Any, recent: int,
                    held: list[tuple[bytes, int]] = HELD) -> None:
    """A hit session holding ``h1`` (lane table 7) that may switch (``Lanes.enter``'s
    ``switch``), its last 8 held runs ``recent``."""
    lanes.set_words(WATCHED, READ_ONLY)
    lanes.routing((), (), tuple(w.encode() for w in WRITE_WORDS))
    lanes.enter(token, pair[1].fileno(), [(b"h1", 7, LATER)],
                (upstream_pair[1].fileno(), [BIND_NAMES], [], core.QUERIES["ascii"], held,
                 recent))


def test_a_hit_session_amid_misses_forwards_a_miss_itself(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """A hit session that may switch answers stamped runs as any hit session; at a run with
    no stamped answer, its reads being mostly misses lately, it becomes a pass session that
    forwards misses and sends the run upstream itself (no hand-back to the event loop): the
    client gets PostgreSQL's answer; ``leave`` returns a pass session's result with the
    answers given before the switch."""
    client, server = pair[0], upstream_pair[0]
    lanes.put(7, REST, b"<plain>", b"<described>")
    enter_switching(lanes, 41, pair, upstream_pair, recent=0xFF)
    client.sendall(unit(b"h1"))
    assert recv_exactly(client, 7) == b"<plain>"  # (a hit: 7 of the last 8 were misses)
    miss = unit(b"h1", rest(b"4"))
    client.sendall(miss)
    assert recv_exactly(server, len(miss)) == miss  # forwarded byte for byte
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    assert lanes.switched() == 1 and lanes.misses() == (1, 0)
    client.sendall(unit(b"h1"))  # stamped, amid misses: forwarded too (no stamp answers now)
    assert recv_exactly(server, len(unit(b"h1"))) == unit(b"h1")
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    result = lanes.leave(41)
    assert result[0] == 2 and result[12] == 1 and result[13] == 7  # 2 relayed, 1 answered
    assert result[14] & 0xFF == 0b11111010  # (hit, miss, forwarded hit)
    assert sum(leaves for leaves in lanes.leaves()[0].values()) == 0
    assert lanes.take_missed() == [] and result[10] == msg(b"B", b"\x00h1\x00" + rest(b"4"))


def test_while_the_event_loop_is_behind_a_hit_session_switches_for_a_first_read_only(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """Misses closed (``open_misses(False)``): a hit session switches at a read the lanes'
    doorkeeper would keep (a key's first), not at one it would pass on."""
    client, server = pair[0], upstream_pair[0]
    lanes.screen_misses(16)
    lanes.open_misses(False)
    enter_switching(lanes, 44, pair, upstream_pair, recent=0xFF)
    first = unit(b"h1", rest(b"4"))
    client.sendall(first)
    assert recv_exactly(server, len(first)) == first
    server.sendall(ROW + IDLE)
    assert recv_exactly(client, len(ROW + IDLE)) == ROW + IDLE
    result = lanes.leave(44)
    assert lanes.switched() == 1 and result[0] == 1 and result[11] == 1
    enter_switching(lanes, 45, pair, upstream_pair, recent=0xFF)
    client.sendall(first)  # its second read: handed back, as from any hit session
    assert handed(lanes) == [45]
    assert lanes.leave(45) == (0, -1, first, b"") and lanes.switched() == 1


@pytest.mark.parametrize("case", ["hits lately", "misses closed", "not forwarded", "no switch"])
def test_a_hit_session_hands_back_a_miss_it_may_not_forward(
        lanes: Any, pair: Any, upstream_pair: Any, case: str) -> None:
    """The miss is handed back as from any hit session (the event loop forwards it, with the
    position read) when the session's reads were mostly hits lately (fewer than 6 of its
    last 8 runs missed), while lanes forward no misses, for a statement whose misses the
    lane may not forward, or without ``switch``; nothing goes upstream."""
    client = pair[0]
    if case == "no switch":
        lanes.enter(42, pair[1].fileno(), [(b"h1", 7, LATER)])
    else:
        enter_switching(lanes, 42, pair, upstream_pair,
                        recent=0b00011111 if case == "hits lately" else 0xFF,
                        held=[] if case == "not forwarded" else HELD)
    if case == "misses closed":  # (no doorkeeper: every read would cost the event loop)
        lanes.open_misses(False)
    miss = unit(b"h1", rest(b"4"))
    client.sendall(miss)
    assert handed(lanes) == [42]
    assert lanes.leave(42) == (0, -1, miss, b"")
    assert lanes.switched() == 0 and lanes.leaves()[0]["unstamped"] == 1
    upstream_pair[0].setblocking(False)
    with pytest.raises(BlockingIOError):
        upstream_pair[0].recv(100)  # nothing was forwarded


def test_a_hit_session_that_may_switch_hands_back_when_its_upstream_speaks(
        lanes: Any, pair: Any, upstream_pair: Any) -> None:
    """Its upstream socket is watched only to hand the session back when anything arrives
    there (a notification, the server going away): those bytes are the event loop's, left
    unread in the socket."""
    enter_switching(lanes, 43, pair, upstream_pair, recent=0xFF)
    notice = msg(b"A", b"\x00\x00\x00\x01chan\x00\x00")
    upstream_pair[0].sendall(notice)
    assert handed(lanes) == [43]
    assert lanes.leave(43) == (0, -1, b"", b"")
    assert lanes.leaves()[0]["upstream"] == 1
    assert recv_exactly(upstream_pair[1], len(notice)) == notice
