"""What the two connection roles share (sans-I/O): the conversation, the framer, end of input,
and the session facts the server announced (ParameterStatus, BackendKeyData).

Owns: ``Endpoint``, the base of ``ClientConnection`` (we face the upstream) and
``ServerConnection`` (we face the app). Each role adds its own sending and event logic.
"""

from __future__ import annotations

from pgwire import backend as be
from pgwire.events import CONNECTION_CLOSED, NEED_DATA, ConnectionClosed, NeedData, Phase, State
from pgwire.framing import Framer
from tests.oracle.conversation import Conversation


class Endpoint:
    __slots__ = ("_eof", "_framer", "backend_key", "conversation", "parameters")

    def __init__(self, framer: Framer) -> None:
        self.conversation = Conversation()
        self._framer = framer
        self._eof = False
        self.parameters: dict[str, str] = {}
        self.backend_key: be.BackendKeyData | None = None

    @property
    def phase(self) -> Phase:
        return self.conversation.phase

    @property
    def state(self) -> State:
        return self.conversation.state

    @property
    def transaction_status(self) -> str:
        """'I' idle, 'T' in a transaction block, 'E' in a failed one (last ReadyForQuery)."""
        return self.conversation.transaction_status

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes from the peer; ``b""`` means it closed its sending side."""
        if not data:
            self._eof = True
        else:
            self._framer.feed(data)

    def _nothing(self) -> NeedData | ConnectionClosed:
        return CONNECTION_CLOSED if self._eof else NEED_DATA
