"""Standby status updates report only applied (and durable) positions."""

from __future__ import annotations

import struct
from typing import Any

from cdc.connection import ConnectParams
from cdc.pgoutput import Begin, Commit, PrimaryKeepalive
from cdc.stream import ReplicationStream, StreamConfig
from tests.unit.cdc.recording import RecordingSink


class _Wire:
    """Collects the CopyData payloads the stream sends (the upstream side of the socket)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_copy_data(self, payload: bytes) -> None:
        self.sent.append(payload)


def _status(payload: bytes) -> tuple[int, int, int, int]:
    kind, written, flushed, applied, _now, reply = struct.unpack("!cQQQqB", payload)
    assert kind == b"r"
    return written, flushed, applied, reply


def _stream(durable: int | None = None) -> ReplicationStream:
    config = StreamConfig(ConnectParams("127.0.0.1", 1, "u", "d"))
    return ReplicationStream(config, RecordingSink(),
                             durable_lsn=None if durable is None else (lambda: durable))


def test_keepalive_reply_reports_applied_not_received() -> None:
    stream, wire = _stream(), _Wire()
    conn: Any = wire
    stream.applier.feed(Begin(1000, 0, 5))
    stream._keepalive(conn, PrimaryKeepalive(5000, 0, True))
    written, flushed, applied, _ = _status(wire.sent[-1])
    assert (written, flushed, applied) == (5000, 0, 0)  # a transaction is open: nothing more
    stream.applier.feed(Commit(0, 1000, 1048, 0))
    stream._keepalive(conn, PrimaryKeepalive(6000, 0, True))
    assert _status(wire.sent[-1])[:3] == (6000, 6000, 6000)  # idle: all before 6000 applied


def test_no_reply_unless_requested_and_durable_position_caps_flush() -> None:
    stream, wire = _stream(durable=500), _Wire()
    conn: Any = wire
    stream._keepalive(conn, PrimaryKeepalive(7000, 0, False))
    assert wire.sent == []
    stream._send_status(conn)
    assert _status(wire.sent[-1])[:3] == (7000, 500, 500)
