"""A client-role and a server-role connection wired back to back (h11's ConnectionPair)."""

from __future__ import annotations

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.events import CONNECTION_CLOSED, NEED_DATA, NegotiationResponse
from tests.oracle.client_conn import ClientConnection
from tests.oracle.server_conn import ServerConnection


class Pair:
    def __init__(self) -> None:
        self.client = ClientConnection()
        self.server = ServerConnection()

    def to_server(self, *msgs: fe.FrontendMessage | fe.StartupPhaseMessage) -> list[object]:
        """The client sends ``msgs``; return what the server's ``next_event`` yields."""
        self.server.receive_data(b"".join(self.client.send(m) for m in msgs))
        return drain(self.server)

    def to_client(self, *msgs: be.BackendMessage | NegotiationResponse) -> list[object]:
        """The server sends ``msgs``; return what the client's ``next_event`` yields."""
        self.client.receive_data(b"".join(self.server.send(m) for m in msgs))
        return drain(self.client)

    def handshake(self, user: str = "alice") -> None:
        """Startup with trust authentication, ending ready and idle."""
        startup = fe.StartupMessage({"user": user, "database": "db"})
        assert self.to_server(startup) == [startup]
        self.to_client(
            be.AuthenticationOk(),
            be.ParameterStatus("server_version", "15.0"),
            be.BackendKeyData(42, 7),
            be.ReadyForQuery("I"),
        )


def drain(conn: ClientConnection | ServerConnection) -> list[object]:
    out: list[object] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return out
        out.append(event)
        if event is CONNECTION_CLOSED:
            return out
