"""Framer and scan_messages: limits, early refusal, startup packets, the SSL answer byte."""

from __future__ import annotations

import pytest

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.framing import MAX_STARTUP_LENGTH, Framer, ProtocolViolation, scan_messages


def test_scan_returns_complete_messages_and_the_resume_offset() -> None:
    a, b = be.ReadyForQuery("I").encode(), be.CommandComplete("SELECT 1").encode()
    buf = b"xx" + a + b + b[:3]
    found, end = scan_messages(buf, 2, 1000)
    assert found == [(ord("Z"), 7, 8), (ord("C"), 13, 2 + len(a) + len(b))]
    assert end == 2 + len(a) + len(b)
    assert scan_messages(buf, end, 1000) == ([], end)


def test_oversized_message_is_refused_before_its_body_arrives() -> None:
    framer = Framer(max_length=100)
    framer.feed(b"Q\x00\x00\x10\x00")  # 4096 bytes announced, none sent
    with pytest.raises(ProtocolViolation, match="exceeds the limit"):
        framer.next()
    with pytest.raises(ProtocolViolation, match="invalid message length 3"):
        scan_messages(b"Q\x00\x00\x00\x03", 0, 100)


def test_startup_packet_limits_and_then_typed_messages() -> None:
    framer = Framer(startup=True)
    startup = fe.StartupMessage({"user": "u"}).encode()
    framer.feed(startup[:6])
    assert framer.next() is None
    framer.feed(startup[6:] + fe.Sync().encode())
    assert framer.next() == (0, startup[4:])
    assert framer.next() == (ord("S"), b"")
    big = Framer(startup=True)
    big.feed((MAX_STARTUP_LENGTH + 1).to_bytes(4, "big"))
    with pytest.raises(ProtocolViolation, match="startup packet length"):
        big.next()


def test_ssl_answer_byte_then_messages() -> None:
    framer = Framer()
    assert framer.next_byte() is None
    framer.feed(b"N" + be.AuthenticationOk().encode())
    assert framer.next_byte() == ord("N")
    assert framer.buffered == 9
    raw, index = framer.drain()
    assert raw == be.AuthenticationOk().encode()
    assert index == [(ord("R"), 5, 9)]
    assert framer.buffered == 0


def test_buffer_is_compacted_as_messages_are_taken() -> None:
    framer = Framer()
    row = be.DataRow((b"x" * 100,)).encode()
    for _ in range(1000):
        framer.feed(row)
        assert framer.next() == (ord("D"), row[5:])
    assert framer.buffered == 0
    assert len(framer.buf) <= 2 * len(row)
