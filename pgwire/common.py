"""Messages that both sides of a v3 connection send: CopyData and CopyDone.

Owns: their dataclasses, encoders and decoders. ``pgwire.frontend`` and
``pgwire.backend`` re-export them, so each family module lists every message its side
may send. Decoders raise only ``ProtocolViolation``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pgwire.codec import frame, no_payload

COPY_DONE_BYTES = b"c\x00\x00\x00\x04"


@dataclass(frozen=True, slots=True)
class CopyData:
    """'d': a chunk of a COPY data stream (either direction), or replication traffic."""

    TYPE: ClassVar[bytes] = b"d"
    data: bytes

    def encode(self) -> bytes:
        return frame(b"d", self.data)

    @classmethod
    def decode(cls, payload: bytes) -> CopyData:
        return cls(bytes(payload))


@dataclass(frozen=True, slots=True)
class CopyDone:
    """'c': the end of a COPY data stream."""

    TYPE: ClassVar[bytes] = b"c"

    def encode(self) -> bytes:
        return COPY_DONE_BYTES

    @classmethod
    def decode(cls, payload: bytes) -> CopyDone:
        no_payload(payload, "CopyDone")
        return COPY_DONE


COPY_DONE = CopyDone()
