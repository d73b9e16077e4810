"""A minimal asyncio PostgreSQL client on weir's wire core, for replication and barriers.

Owns: connecting (TCP, optional TLS per ``sslmode``), the startup packet (with
``replication=database`` for the stream, and the session settings weir's codecs assume),
authentication via :mod:`pgwire.auth`, simple-protocol queries returning text rows, and the
CopyBoth sub-protocol (read CopyData payloads, send CopyData). Statements may be pipelined
(:meth:`PgConnection.send_query`, then :meth:`PgConnection.result` per statement, in order).

psycopg 3 and asyncpg cannot stream logical replication, hence this client. Errors from the
server raise :class:`UpstreamError` (with SQLSTATE); a closed socket raises ``ConnectionError``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from pgwire.auth import AuthenticationFailed, ClientAuthenticator
from pgwire.authmsg import decode_authentication
from pgwire.backend import (
    BackendKeyData,
    CommandComplete,
    CopyBothResponse,
    DataRow,
    ErrorResponse,
    ParameterStatus,
    RowDescription,
    decode_backend,
)
from pgwire.common import CopyData
from pgwire.framing import UPSTREAM_MAX_MESSAGE_LENGTH, Framer
from pgwire.frontend import Query, SSLRequest, StartupMessage, Terminate

#: Session settings that make the server's text output match engine.values' codecs.
SESSION_SETTINGS = {
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "extra_float_digits": "1",
    "bytea_output": "hex",
}


class UpstreamError(Exception):
    """An ErrorResponse from the server."""

    def __init__(self, sqlstate: str, message: str, detail: str | None = None) -> None:
        super().__init__(f"{message} (SQLSTATE {sqlstate})" + (f": {detail}" if detail else ""))
        self.sqlstate = sqlstate
        self.message = message

    @classmethod
    def from_response(cls, err: ErrorResponse) -> UpstreamError:
        return cls(err.sqlstate, err.message, err.get("D"))


@dataclass(frozen=True, slots=True)
class ConnectParams:
    host: str
    port: int
    user: str
    dbname: str
    password: str | None = None
    sslmode: str = "prefer"
    application_name: str = "weir"
    connect_timeout: float = 10.0

    @classmethod
    def from_url(cls, url: str) -> ConnectParams:
        """``postgresql://user:password@host:port/dbname?sslmode=...&application_name=...``."""
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        return cls(
            host=parts.hostname or "localhost", port=parts.port or 5432,
            user=unquote(parts.username or "postgres"),
            dbname=unquote(parts.path[1:] or "postgres"),
            password=unquote(parts.password) if parts.password is not None else None,
            sslmode=query.get("sslmode", "prefer"),
            application_name=query.get("application_name", "weir"),
        )


@dataclass(slots=True)
class QueryResult:
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    tag: str = ""


def _keepalive(writer: asyncio.StreamWriter) -> None:
    """TCP keepalives, so a vanished peer is noticed even while nothing is sent."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _tls_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class PgConnection:
    """One upstream connection. Create with :meth:`connect`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._framer = Framer(UPSTREAM_MAX_MESSAGE_LENGTH)
        self._pending: deque[tuple[int, bytes]] = deque()
        self.parameters: dict[str, str] = {}
        self.backend_key: BackendKeyData | None = None
        self.notices: list[str] = []
        #: time.monotonic() of the last bytes received (liveness of a quiet stream).
        self.last_receive = time.monotonic()

    @classmethod
    async def connect(cls, params: ConnectParams, replication: bool = False) -> PgConnection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(params.host, params.port), params.connect_timeout
        )
        try:
            if params.sslmode != "disable":
                writer.write(SSLRequest().encode())
                await writer.drain()
                answer = await reader.readexactly(1)
                if answer == b"S":
                    await writer.start_tls(_tls_context())
                elif params.sslmode in ("require", "verify-ca", "verify-full"):
                    raise ConnectionError("the upstream refused TLS but sslmode=require")
            _keepalive(writer)
            conn = cls(reader, writer)
            await asyncio.wait_for(conn._startup(params, replication), params.connect_timeout)
        except BaseException:
            writer.close()
            raise
        return conn

    async def _startup(self, params: ConnectParams, replication: bool) -> None:
        startup = {"user": params.user, "database": params.dbname,
                   "application_name": params.application_name, **SESSION_SETTINGS}
        if replication:
            startup["replication"] = "database"
        self._writer.write(StartupMessage(startup).encode())
        auth = ClientAuthenticator(params.user, params.password)
        while True:
            mtype, payload = await self._next()
            if mtype == ord("R"):
                try:
                    reply = auth.respond(decode_authentication(payload))
                except AuthenticationFailed as exc:
                    raise UpstreamError(exc.sqlstate, exc.message) from exc
                if reply is not None:
                    self._writer.write(reply.encode())
            elif mtype == ord("Z"):
                return
            else:
                self._other(mtype, payload)

    def _other(self, mtype: int, payload: bytes) -> None:
        msg = decode_backend(mtype, payload)
        if isinstance(msg, ErrorResponse):
            raise UpstreamError.from_response(msg)
        if isinstance(msg, ParameterStatus):
            self.parameters[msg.name] = msg.value
        elif isinstance(msg, BackendKeyData):
            self.backend_key = msg
        elif mtype == ord("N"):
            self.notices.append(getattr(msg, "message", ""))

    async def _next(self) -> tuple[int, bytes]:
        while not self._pending:
            await self._writer.drain()
            data = await self._reader.read(262144)
            if not data:
                raise ConnectionError("the upstream closed the connection")
            self.last_receive = time.monotonic()
            self._framer.feed(data)
            await asyncio.sleep(0)  # read() does not yield while data is buffered: be fair
            raw, index = self._framer.drain()
            self._pending.extend((mtype, raw[start:end]) for mtype, start, end in index)
        return self._pending.popleft()

    async def query(self, sql: str) -> QueryResult:
        """Run one simple-protocol statement; rows as text. Raises UpstreamError."""
        self.send_query(sql)
        return await self.result()

    def send_query(self, sql: str) -> None:
        """Send one simple-protocol statement without waiting for its answer (statements sent
        so are pipelined: read their answers in order with :meth:`result`)."""
        self._writer.write(Query(sql).encode())

    async def result(self) -> QueryResult:
        """The answer of the oldest statement sent whose answer was not read yet."""
        result = QueryResult()
        error: UpstreamError | None = None
        while True:
            mtype, payload = await self._next()
            if mtype == ord("D"):
                row = DataRow.decode(payload)
                result.rows.append(tuple(None if v is None else v.decode() for v in row.values))
            elif mtype == ord("T"):
                result.columns = [f.name for f in RowDescription.decode(payload).fields]
            elif mtype == ord("C"):
                result.tag = CommandComplete.decode(payload).tag
            elif mtype == ord("Z"):
                if error is not None:
                    raise error
                return result
            elif mtype == ord("E"):
                error = UpstreamError.from_response(ErrorResponse.decode(payload))
            elif mtype not in (ord("I"), ord("n")):
                self._other(mtype, payload)

    async def start_copy_both(self, sql: str) -> None:
        """Send a command that answers CopyBothResponse (START_REPLICATION)."""
        self._writer.write(Query(sql).encode())
        while True:
            mtype, payload = await self._next()
            if mtype == ord("W"):
                CopyBothResponse.decode(payload)
                return
            if mtype == ord("E"):
                err = UpstreamError.from_response(ErrorResponse.decode(payload))
                await self._until_ready()
                raise err
            self._other(mtype, payload)

    async def _until_ready(self) -> None:
        while (await self._next())[0] != ord("Z"):
            pass

    async def read_copy_data(self) -> bytes | None:
        """The next CopyData payload of the CopyBoth stream, or None when the server ends it."""
        while True:
            mtype, payload = await self._next()
            if mtype == 0x64:  # 'd'
                return payload
            if mtype == ord("c"):
                return None
            self._other(mtype, payload)

    def abort(self) -> None:
        """Drop the connection at once (no Terminate): the peer is presumed dead."""
        self._writer.transport.abort()

    def send_copy_data(self, payload: bytes) -> None:
        self._writer.write(CopyData(payload).encode())

    async def close(self) -> None:
        try:
            if not self._writer.is_closing():
                self._writer.write(Terminate().encode())
            self._writer.close()
            await self._writer.wait_closed()
        except (OSError, ConnectionError, ssl.SSLError):
            pass
