"""The relay core (``Relay`` in ``cython_ext/relay_scan.pyx``) handles the quiet cases itself
and hands everything else to the session's Python path, after the hit path, unchanged.

The differential test in ``test_session_relay.py`` holds its observations to the Python path's;
these tests pin down which chunks it handles without the Python path, that ``try_answer`` comes
first with the same arguments, and that what it declines ends exactly as on the Python path.
"""

from __future__ import annotations

from typing import Any

import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import ProtocolViolation
from proxy import hitpath
from proxy.forwarding import plain_query
from proxy.relay import Phase, Session
from proxy.rules import CONTENT_FREE, READ_ONLY_TAGS, WATCHED_WORDS
from proxy.server import Server
from proxy.session import PLAIN_REQUESTS
from proxy.settings import Settings
from tests.unit.test_session_relay import SCAN, _frame, _session, _snapshot

READY_IDLE = be.ReadyForQuery("I").encode()
SELECT_ANSWER = (be.encode_row_description(()) + be.encode_data_row([b"1"])
                 + be.encode_command_complete("SELECT 1"))
PREPARED = (fe.Bind("", "s", (0,), (b"7",), ()).encode() + fe.Describe("P", "").encode()
            + fe.Execute("", 0).encode() + fe.Sync().encode())
PREPARED_ANSWER = be.BindComplete().encode() + SELECT_ANSWER + READY_IDLE


def _extended(value: bytes) -> bytes:
    return (fe.Parse("", "SELECT $1", ()).encode() + fe.Bind("", "", (0,), (value,), ()).encode()
            + fe.Describe("P", "").encode() + fe.Execute("", 0).encode() + fe.Sync().encode())


EXTENDED_ANSWER = be.ParseComplete().encode() + PREPARED_ANSWER
NOTICE = _frame(b"N", b"Mhello\0\0")


def _server(caching: str = "explicit") -> Server:
    return Server(Settings(upstream="postgresql://u@127.0.0.1:1/d", caching=caching))


def _pair(caching: str = "explicit") -> tuple[Session, Session]:
    """A session on the Python path and one on the relay core."""
    server = _server(caching)
    return _session(server, False), _session(server, False, core=True)


def _refuse(*args: Any) -> None:
    raise AssertionError("the Python path was taken")


def _python_path_off(session: Session) -> None:
    for name in ("client_data", "upstream_data", "forward_client"):
        setattr(session, name, _refuse)


def test_the_core_is_built() -> None:
    assert SCAN is not None and hasattr(SCAN, "Relay"), "run `make compile`"


@pytest.mark.parametrize("caching", ["explicit", "off"])
def test_quiet_chunks_never_reach_the_python_path(caching: str) -> None:
    python, core = _pair(caching)
    prepare = fe.Parse("s", "SELECT $1", ()).encode() + fe.Sync().encode()
    prepared = be.ParseComplete().encode() + READY_IDLE
    learn = [(fe.Query("SELECT 1").encode(), SELECT_ANSWER + READY_IDLE), (prepare, prepared),
             (PREPARED, PREPARED_ANSWER), (_extended(b"1"), EXTENDED_ANSWER)]
    quiet = [(fe.Query("select 2;").encode(), SELECT_ANSWER + READY_IDLE),
             (PREPARED.replace(b"7", b"8"), PREPARED_ANSWER),
             (_extended(b"2"), EXTENDED_ANSWER),
             (fe.Flush().encode() + fe.Query("SELECT 3").encode(), NOTICE + SELECT_ANSWER
              + READY_IDLE)]
    for client, answer in learn:
        for session in (python, core):
            session.client_received(client)
            session.upstream_received(answer)
    _python_path_off(core)
    for client, answer in quiet:
        for session in (python, core):
            session.client_received(client)
        assert _snapshot(core) == _snapshot(python)
        for session in (python, core):
            session.upstream_received(answer)
        assert _snapshot(core) == _snapshot(python)
    for attr in ("client", "upstream"):
        assert getattr(core, attr).written == getattr(python, attr).written
    assert core.state.statements.keys() == {"s", ""} and core.state.idle


def test_the_hit_path_comes_first_with_the_same_arguments() -> None:
    assert SCAN is not None
    calls: list[tuple[Any, ...]] = []

    def try_answer(session: Session, raw: bytes, index: list[tuple[int, int, int]]) -> bool:
        calls.append((session, raw, list(index)))
        return raw.startswith(b"Q")  # "answers" every simple Query

    core = _pair()[1]
    SCAN.configure(try_answer, Phase.READY, ProtocolViolation, PLAIN_REQUESTS, READ_ONLY_TAGS,
                   WATCHED_WORDS, plain_query, CONTENT_FREE)
    try:
        query = fe.Query("SELECT 1").encode()
        core.client_received(query)
        core.client_received(PREPARED)  # declined: goes upstream (the Python path: unknown)
    finally:
        SCAN.configure(hitpath.try_answer, Phase.READY, ProtocolViolation, PLAIN_REQUESTS,
                       READ_ONLY_TAGS, WATCHED_WORDS, plain_query, CONTENT_FREE)
    assert calls == [(core, query, [(ord("Q"), 5, len(query))]),
                     (core, PREPARED, [(t, s, e) for t, s, e in _index(PREPARED)])]
    assert core.upstream.written == [PREPARED]  # type: ignore[union-attr]


def _index(raw: bytes) -> list[tuple[int, int, int]]:
    out, pos = [], 0
    while pos < len(raw):
        end = pos + 1 + int.from_bytes(raw[pos + 1 : pos + 5], "big")
        out.append((raw[pos], pos + 5, end))
        pos = end
    return out


@pytest.mark.parametrize("chunks", [
    [b"B\0\0\0\x04"],  # a Bind without its names: declined, decoding it is a violation
    [b"Q\0\0\0\x02"],  # a length below 4
    [fe.Query("SELECT 1").encode()[:7], fe.Query("SELECT 1").encode()[7:]],  # in pieces
    [fe.Close("S", "s").encode() + fe.Sync().encode()],  # not quiet
    [fe.Terminate().encode()],
])
def test_what_the_core_declines_ends_as_on_the_python_path(chunks: list[bytes]) -> None:
    python, core = _pair()
    for chunk in chunks:
        for session in (python, core):
            session.client_received(chunk)
    assert _snapshot(core) == _snapshot(python)
    for attr in ("client", "upstream"):
        assert getattr(core, attr).written == getattr(python, attr).written


def test_a_long_pipeline_is_observed_alike() -> None:
    python, core = _pair()
    learn = fe.Parse("s", "SELECT $1", ()).encode() + PREPARED
    run = fe.Bind("", "s", (0,), (b"1",), ()).encode() + fe.Execute("", 0).encode()
    for session in (python, core):
        session.client_received(learn)
        session.upstream_received(be.ParseComplete().encode() + PREPARED_ANSWER)
        session.client_received(run * 100 + fe.Sync().encode())  # more than the core keeps
    assert _snapshot(core) == _snapshot(python)
    answer = (be.BindComplete().encode() + SELECT_ANSWER) * 100 + READY_IDLE
    for session in (python, core):
        session.upstream_received(answer)
    assert _snapshot(core) == _snapshot(python) and core.state.idle
    for attr in ("client", "upstream"):
        assert getattr(core, attr).written == getattr(python, attr).written


def test_the_core_passes_data_on_outside_ready() -> None:
    python, core = _pair()
    for session in (python, core):
        session.state.phase = Phase.CLOSED
        session.client_received(fe.Query("SELECT 1").encode())
        session.upstream_received(READY_IDLE)
    assert core.upstream.written == python.upstream.written == []  # type: ignore[union-attr]
    assert core.client.written == python.client.written == []  # type: ignore[attr-defined]
