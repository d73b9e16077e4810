"""Client side of PostgreSQL authentication for weir's own upstream connections (sans-I/O).

Owns: answering Authentication* requests with the right frontend message: trust (nothing to
send), cleartext, md5, and SCRAM-SHA-256 through the maintained ``scramp`` library. The
channel-binding variant (-PLUS) is not used.

Invariant: ``respond`` returns the bytes to send (possibly empty) or raises :class:`AuthError`
with a message saying what to configure.
"""

from __future__ import annotations

import hashlib

from scramp import ScramClient

from proxy.wire.backend import (
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationMessage,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
)
from proxy.wire.frontend import PasswordMessage, SASLInitialResponse, SASLResponse

SCRAM = "SCRAM-SHA-256"


class AuthError(Exception):
    """Authentication could not proceed (unsupported method, missing password, bad server)."""


def md5_password(user: str, password: str, salt: bytes) -> str:
    inner = hashlib.md5((password + user).encode()).hexdigest()
    return "md5" + hashlib.md5(inner.encode() + salt).hexdigest()


class Authenticator:
    """One authentication exchange; feed each Authentication* message to :meth:`respond`."""

    def __init__(self, user: str, password: str | None) -> None:
        self.user = user
        self.password = password
        self._scram: ScramClient | None = None
        self.done = False

    def _need_password(self, method: str) -> str:
        if self.password is None:
            raise AuthError(f"the upstream asks {self.user!r} for {method} authentication "
                            "but no password was configured (set it in the upstream URL)")
        return self.password

    def respond(self, msg: AuthenticationMessage) -> bytes:
        if isinstance(msg, AuthenticationOk):
            self.done = True
            return b""
        if isinstance(msg, AuthenticationCleartextPassword):
            return PasswordMessage(self._need_password("password")).encode()
        if isinstance(msg, AuthenticationMD5Password):
            password = self._need_password("md5")
            return PasswordMessage(md5_password(self.user, password, msg.salt)).encode()
        if isinstance(msg, AuthenticationSASL):
            if SCRAM not in msg.mechanisms:
                raise AuthError(f"no supported SASL mechanism in {msg.mechanisms}")
            self._scram = ScramClient([SCRAM], self.user, self._need_password("SCRAM"))
            first = self._scram.get_client_first().encode()
            return SASLInitialResponse(SCRAM, first).encode()
        if isinstance(msg, AuthenticationSASLContinue) and self._scram is not None:
            self._scram.set_server_first(msg.data.decode())
            return SASLResponse(self._scram.get_client_final().encode()).encode()
        if isinstance(msg, AuthenticationSASLFinal) and self._scram is not None:
            try:
                self._scram.set_server_final(msg.data.decode())
            except Exception as exc:
                raise AuthError(f"SCRAM server signature rejected: {exc}") from exc
            return b""
        raise AuthError(f"unsupported authentication request {type(msg).__name__}")
