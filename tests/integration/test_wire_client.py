"""The client-role state machine and weir's own authentication against a real PostgreSQL.

A blocking socket drives ``ClientConnection``; every conversation the unit tests script is
replayed here against the server, so the tables of ``tests.oracle.conversation`` are checked
against what PostgreSQL really sends (pipelining, errors mid-batch, COPY in/out, TLS).
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.auth import ClientAuthenticator
from pgwire.events import CONNECTION_CLOSED, NEED_DATA, Phase, SSLResponse, State
from tests.oracle.client_conn import ClientConnection
from tests.support import unique_name


class Session:
    """One upstream connection driven through ClientConnection."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(20)
        self.sock: socket.socket | ssl.SSLSocket = sock
        self.conn = ClientConnection()

    def send(self, *msgs: fe.FrontendMessage | fe.StartupPhaseMessage) -> None:
        self.sock.sendall(b"".join(self.conn.send(m) for m in msgs))

    def event(self) -> object:
        while (event := self.conn.next_event()) is NEED_DATA:
            self.conn.receive_data(self.sock.recv(65536))
        return event

    def until_ready(self, count: int = 1) -> list[object]:
        """Events up to and including the ``count``-th ReadyForQuery."""
        out: list[object] = []
        while count:
            event = self.event()
            assert event is not CONNECTION_CLOSED, out
            out.append(event)
            count -= isinstance(event, be.ReadyForQuery)
        return out

    def until_ready_or_copy(self) -> list[object]:
        """Events up to a ReadyForQuery or the start of COPY IN."""
        out: list[object] = []
        while not out or not isinstance(out[-1], be.ReadyForQuery | be.CopyInResponse):
            out.append(self.event())
            assert out[-1] is not CONNECTION_CLOSED, out
        return out

    def close(self) -> None:
        if self.conn.phase is not Phase.CLOSED:
            self.send(fe.Terminate())
        self.sock.close()


def connect(pg: Any, user: str, dbname: str, password: str | None = None, tls: bool = False):  # type: ignore[no-untyped-def]
    s = Session(socket.create_connection((pg.host, pg.port)))
    if tls:
        s.send(fe.SSLRequest())
        assert s.event() == SSLResponse(True)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s.sock = ctx.wrap_socket(s.sock)
    s.send(fe.StartupMessage({"user": user, "database": dbname, "application_name": "wire"}))
    auth = ClientAuthenticator(user, password)
    while True:
        event = s.event()
        if isinstance(event, be.ErrorResponse):
            return event
        if isinstance(event, be.ReadyForQuery):
            return s
        if type(event).__name__.startswith("Authentication"):
            reply = auth.respond(event)  # type: ignore[arg-type]
            if reply is not None:
                s.send(reply)


def names(events: list[object]) -> list[str]:
    return [type(e).__name__ for e in events]


@pytest.fixture
def session(pg: Any, dbname: str):  # type: ignore[no-untyped-def]
    s = connect(pg, "postgres", dbname)
    assert isinstance(s, Session)
    yield s
    s.close()


def test_startup_records_parameters_and_key(session: Session) -> None:
    assert session.conn.parameters["client_encoding"] == "UTF8"
    assert session.conn.parameters["application_name"] == "wire"
    assert session.conn.backend_key is not None
    assert session.conn.state is State.IDLE


def test_simple_queries_and_transaction_status(session: Session) -> None:
    session.send(fe.Query("begin; select 1 as a, null::text as b"))
    events = session.until_ready()
    assert names(events) == [
        "CommandComplete",
        "RowDescription",
        "DataRow",
        "CommandComplete",
        "ReadyForQuery",
    ]
    assert events[2] == be.DataRow((b"1", None))
    assert session.conn.transaction_status == "T"
    session.send(fe.Query("select 1/0"))
    events = session.until_ready()
    assert isinstance(events[-2], be.ErrorResponse)
    assert events[-2].sqlstate == "22012"
    assert session.conn.transaction_status == "E"
    session.send(fe.Query("rollback"), fe.Query(""))
    assert names(session.until_ready(2))[-3:] == [
        "ReadyForQuery",
        "EmptyQueryResponse",
        "ReadyForQuery",
    ]
    assert session.conn.transaction_status == "I"


def test_pipelined_extended_batches_with_an_error(session: Session) -> None:
    session.send(
        fe.Parse("", "select $1::int + 1", (23,)),
        fe.Bind("", "", (), (b"41",)),
        fe.Describe("P", ""),
        fe.Execute(),
        fe.Parse("", "select * from no_such_table"),
        fe.Bind("", ""),
        fe.Execute(),
        fe.Sync(),
        fe.Parse("s", "select generate_series(1, $1)"),
        fe.Describe("S", "s"),
        fe.Bind("p", "s", (), (b"3",)),
        fe.Execute("p", 2),
        fe.Execute("p", 2),
        fe.Sync(),
    )
    events = session.until_ready(2)
    assert names(events) == [
        "ParseComplete",
        "BindComplete",
        "RowDescription",
        "DataRow",
        "CommandComplete",
        "ErrorResponse",
        "ReadyForQuery",
        "ParseComplete",
        "ParameterDescription",
        "RowDescription",
        "BindComplete",
        "DataRow",
        "DataRow",
        "PortalSuspended",
        "DataRow",
        "CommandComplete",
        "ReadyForQuery",
    ]
    assert session.conn.conversation.pending == ()


def test_error_before_sync_skips_until_sync(session: Session) -> None:
    session.send(fe.Parse("", "select nope"), fe.Flush())
    assert isinstance(session.event(), be.ErrorResponse)
    assert session.conn.state is State.SKIP_UNTIL_SYNC
    session.send(fe.Bind("", ""), fe.Execute(), fe.Query("select 1"), fe.Sync())
    assert names(session.until_ready()) == ["ReadyForQuery"]
    assert session.conn.state is State.IDLE


def test_copy_in_and_out_simple_and_extended(session: Session) -> None:
    session.send(fe.Query("create table t (a int, b text); copy t from stdin"))
    assert names(session.until_ready_or_copy()) == ["CommandComplete", "CopyInResponse"]
    assert session.conn.state is State.COPY_IN
    session.send(fe.CopyData(b"1\tone\n2\ttwo\n"), fe.CopyDone())
    assert names(session.until_ready()) == ["CommandComplete", "ReadyForQuery"]
    # libpq's way: Sync right behind the Execute, swallowed by the COPY reader
    session.send(fe.Parse("", "copy t from stdin"), fe.Bind("", ""), fe.Execute(), fe.Sync())
    assert names(session.until_ready_or_copy()) == [
        "ParseComplete",
        "BindComplete",
        "CopyInResponse",
    ]
    session.send(fe.CopyData(b"3\tthree\n"), fe.CopyDone(), fe.Sync())
    assert names(session.until_ready()) == ["CommandComplete", "ReadyForQuery"]
    # bad data: the error ends COPY; the rest of the data is ignored until Sync
    session.send(fe.Parse("", "copy t from stdin"), fe.Bind("", ""), fe.Execute(), fe.Sync())
    session.until_ready_or_copy()
    session.send(fe.CopyData(b"x\ty\n"))
    assert isinstance(session.event(), be.ErrorResponse)
    session.send(fe.CopyData(b"4\tfour\n"), fe.CopyDone(), fe.Sync())
    assert names(session.until_ready()) == ["ReadyForQuery"]
    session.send(fe.Query("copy (select * from t order by a) to stdout"))
    events = session.until_ready()
    assert names(events) == [
        "CopyOutResponse",
        *["CopyData"] * 3,
        "CopyDone",
        "CommandComplete",
        "ReadyForQuery",
    ]
    session.send(fe.Parse("", "copy t to stdout"), fe.Bind("", ""), fe.Execute(), fe.Sync())
    assert names(session.until_ready())[-2:] == ["CommandComplete", "ReadyForQuery"]
    session.send(fe.Query("copy t from stdin"))
    session.until_ready_or_copy()
    session.send(fe.CopyFail("changed my mind"))
    events = session.until_ready()
    assert isinstance(events[0], be.ErrorResponse)
    assert session.conn.state is State.IDLE


def test_function_call_and_notifications(session: Session) -> None:
    session.send(fe.Query("listen ch; notify ch, 'hi'"))
    events = session.until_ready()
    assert be.NotificationResponse(events[-2].process_id, "ch", "hi") in events  # type: ignore[attr-defined]
    session.send(fe.FunctionCall(177, (0, 0), (b"40", b"2"), 0))  # int4pl
    assert session.until_ready()[0] == be.FunctionCallResponse(b"42")


def test_tls_and_the_three_authentication_methods(pg: Any, dbname: str) -> None:
    scram, md5 = unique_name("scram"), unique_name("md5")
    pg.psql(f"CREATE ROLE {scram} LOGIN PASSWORD 'pw1' IN ROLE weir_scram")
    pg.psql(
        f"SET password_encryption = 'md5'; CREATE ROLE {md5} LOGIN PASSWORD 'pw2' IN ROLE weir_md5"
    )
    for user, password, tls in [
        (scram, "pw1", False),
        (md5, "pw2", True),
        ("postgres", None, True),
    ]:
        s = connect(pg, user, dbname, password, tls)
        assert isinstance(s, Session), s
        s.send(fe.Query("select current_user"))
        assert s.until_ready()[1] == be.DataRow((user.encode(),))
        s.close()
    for user in (scram, md5):
        err = connect(pg, user, dbname, "wrong")
        assert isinstance(err, be.ErrorResponse)
        assert err.sqlstate == "28P01"


def test_replication_copy_both(pg: Any, dbname: str) -> None:
    s = Session(socket.create_connection((pg.host, pg.port)))
    s.send(fe.StartupMessage({"user": "postgres", "database": dbname, "replication": "database"}))
    while not isinstance(s.event(), be.ReadyForQuery):
        pass
    slot = unique_name("slot")
    s.send(fe.Query("IDENTIFY_SYSTEM"))
    assert names(s.until_ready())[:2] == ["RowDescription", "DataRow"]
    s.send(fe.Query(f"CREATE_REPLICATION_SLOT {slot} TEMPORARY LOGICAL pgoutput"))
    s.until_ready()
    pg.psql(f"CREATE PUBLICATION {slot} FOR ALL TABLES", dbname)
    s.send(
        fe.Query(
            f"START_REPLICATION SLOT {slot} LOGICAL 0/0 (proto_version '1', "
            f"publication_names '{slot}')"
        )
    )
    assert isinstance(s.event(), be.CopyBothResponse)
    assert s.conn.state is State.COPY_BOTH
    s.send(fe.CopyDone())
    events = s.until_ready()
    # PG 15's walsender may still send a keepalive after its CopyDone, then ends both the
    # COPY and the START_REPLICATION command with a CommandComplete each.
    assert "CopyDone" in names(events)
    assert names(events)[-3:] == ["CommandComplete", "CommandComplete", "ReadyForQuery"]
    assert s.conn.state is State.IDLE
    s.close()


_STEPS = [
    fe.Parse("", "select 1"),
    fe.Parse("", "select 1/0"),
    fe.Parse("", "selec nothing"),
    fe.Parse("s1", "select $1::int"),
    fe.Parse("", "select generate_series(1, 3)"),
    fe.Bind("", ""),
    fe.Bind("", "s1", (), (b"5",)),
    fe.Bind("", "s1", (), (b"x",)),
    fe.Describe("P", ""),
    fe.Describe("S", ""),
    fe.Describe("S", "s1"),
    fe.Execute("", 0),
    fe.Execute("", 1),
    fe.Close("S", "s1"),
    fe.Close("P", ""),
    fe.Flush(),
    fe.Sync(),
    fe.Query("select 1"),
    fe.Query("select 1/0; select 2"),
    fe.Query(""),
    fe.Query("begin"),
    fe.Query("rollback"),
    fe.Query("copy c from stdin"),
    fe.Parse("", "copy c from stdin"),
    fe.Query("copy c to stdout"),
    fe.CopyData(b"1\n"),
    fe.CopyData(b"oops\n"),
    fe.CopyDone(),
    fe.CopyFail("no"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(st.sampled_from(_STEPS), max_size=12))
def test_random_pipelines_match_the_real_server(pg: Any, steps: list[fe.FrontendMessage]) -> None:
    """Whatever a pipeline does, the conversation follows the server and ends in step."""
    s = connect(pg, "postgres", "postgres")
    assert isinstance(s, Session)
    try:
        s.send(fe.Query("create temp table c (a int)"))
        s.until_ready()
        s.send(*steps, fe.CopyDone(), fe.Sync())
        while s.conn.conversation.pending:
            if s.event() is CONNECTION_CLOSED:
                # e.g. a non-COPY message during COPY IN: ERROR, then FATAL "protocol
                # synchronization was lost"; the conversation saw the FATAL too.
                assert s.conn.phase is Phase.CLOSED
                return
        assert s.conn.state is State.IDLE
        s.send(fe.Query("rollback; select 42"))
        events = s.until_ready()
        assert be.DataRow((b"42",)) in events
        assert events[-2:] == [be.CommandComplete("SELECT 1"), be.ReadyForQuery("I")]
    finally:
        s.close()
