"""The streaming replication sub-protocol inside CopyBoth (sans-I/O).

Owns: decoding the server's CopyData payloads (XLogData 'w', Primary keepalive 'k') and
encoding the client's Standby status update 'r', per the "Streaming Replication Protocol"
chapter. Times are µs since 2000-01-01 UTC, passed in by the caller (no clock here).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cdc.pgoutput.decoder import PgoutputError

_XLOG_HEADER = struct.Struct("!QQq")
_KEEPALIVE = struct.Struct("!QqB")
_STATUS = struct.Struct("!cQQQqB")


@dataclass(frozen=True, slots=True)
class XLogData:
    wal_start: int
    wal_end: int
    send_time: int
    data: bytes


@dataclass(frozen=True, slots=True)
class PrimaryKeepalive:
    wal_end: int
    send_time: int
    reply_requested: bool


def decode_copy_data(payload: bytes) -> XLogData | PrimaryKeepalive:
    """Decode one CopyData payload the server sends during START_REPLICATION."""
    kind = payload[:1]
    if kind == b"w":
        if len(payload) < 1 + _XLOG_HEADER.size:
            raise PgoutputError(f"truncated XLogData header ({len(payload)} bytes)")
        start, end, sent = _XLOG_HEADER.unpack_from(payload, 1)
        return XLogData(start, end, sent, bytes(payload[1 + _XLOG_HEADER.size :]))
    if kind == b"k":
        if len(payload) != 1 + _KEEPALIVE.size:
            raise PgoutputError(f"bad primary keepalive length {len(payload)}")
        end, sent, reply = _KEEPALIVE.unpack_from(payload, 1)
        return PrimaryKeepalive(end, sent, bool(reply))
    raise PgoutputError(f"unknown replication CopyData message {kind!r}")


def standby_status_update(
    written: int, flushed: int, applied: int, now: int, reply_requested: bool = False
) -> bytes:
    """The CopyData payload of a Standby status update ('r')."""
    return _STATUS.pack(b"r", written, flushed, applied, now, 1 if reply_requested else 0)
