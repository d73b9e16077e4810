"""Client-side authentication for weir's OWN upstream connections (sans-I/O).

Owns: answering the upstream's Authentication* requests with weir's configured credentials
(the CDC replication client and admin/fill connections; application sessions never come
here, their authentication is relayed): clear-text password, md5, and SCRAM-SHA-256 through
the ``scramp`` library (no channel binding: weir offers no -PLUS mechanism).

Usage: feed every Authentication* message the ``ClientConnection`` yields to
``ClientAuthenticator.respond``; send the frontend message it returns, if any.
``done`` becomes True at AuthenticationOk.

Invariants: a server that ends a SCRAM exchange without a valid server signature is refused
(``AuthenticationFailed``), so a man in the middle cannot skip the proof; a request the
client cannot honour (GSSAPI, SSPI, Kerberos, no password configured) is refused the same
way, never answered with something empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from scramp import ScramClient, ScramException

from pgwire import backend as be
from pgwire import frontend as fe

SCRAM_SHA_256 = "SCRAM-SHA-256"


class AuthenticationFailed(Exception):
    """weir cannot (or must not) complete the upstream's authentication request."""

    def __init__(self, message: str, sqlstate: str = "28000") -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate


def md5_password(user: str, password: str, salt: bytes) -> str:
    """The md5 PasswordMessage text: 'md5' + md5(md5(password + user) + salt)."""
    inner = hashlib.md5((password + user).encode("utf-8")).hexdigest()
    return "md5" + hashlib.md5(inner.encode("ascii") + salt).hexdigest()


Reply = fe.PasswordMessage | fe.SASLInitialResponse | fe.SASLResponse | None


class ClientAuthenticator:
    """One authentication exchange as the client, with fixed credentials."""

    __slots__ = ("_handlers", "_password", "_scram", "_scram_verified", "done", "user")

    def __init__(self, user: str, password: str | None) -> None:
        self.user = user
        self._password = password
        self._scram: ScramClient | None = None
        self._scram_verified = False
        self.done = False
        self._handlers: dict[type, Callable[[be.AuthenticationMessage], Reply]] = {
            be.AuthenticationOk: self._ok,
            be.AuthenticationCleartextPassword: self._cleartext,
            be.AuthenticationMD5Password: self._md5,
            be.AuthenticationSASL: self._sasl,
            be.AuthenticationSASLContinue: self._sasl_continue,
            be.AuthenticationSASLFinal: self._sasl_final,
        }

    def respond(self, msg: be.AuthenticationMessage) -> Reply:
        """The frontend message answering ``msg`` (None: nothing to send)."""
        handler = self._handlers.get(type(msg))
        if handler is None:
            raise AuthenticationFailed(
                f"authentication method {type(msg).__name__} is not supported by weir", "28000"
            )
        return handler(msg)

    def _need_password(self) -> str:
        if self._password is None:
            raise AuthenticationFailed("the upstream requires a password and none is configured")
        return self._password

    def _ok(self, msg: be.AuthenticationMessage) -> Reply:
        if self._scram is not None and not self._scram_verified:
            raise AuthenticationFailed("the upstream skipped the SCRAM server proof")
        self.done = True
        return None

    def _cleartext(self, msg: be.AuthenticationMessage) -> Reply:
        return fe.PasswordMessage(self._need_password())

    def _md5(self, msg: be.AuthenticationMessage) -> Reply:
        assert isinstance(msg, be.AuthenticationMD5Password)
        return fe.PasswordMessage(md5_password(self.user, self._need_password(), msg.salt))

    def _sasl(self, msg: be.AuthenticationMessage) -> Reply:
        assert isinstance(msg, be.AuthenticationSASL)
        if SCRAM_SHA_256 not in msg.mechanisms:
            offered = ", ".join(msg.mechanisms) or "none"
            raise AuthenticationFailed(f"no supported SASL mechanism offered ({offered})")
        password = self._need_password()
        try:
            self._scram = ScramClient([SCRAM_SHA_256], self.user, password)
            first = self._scram.get_client_first()
        except ScramException as exc:
            raise AuthenticationFailed(f"SCRAM: {exc}") from None
        return fe.SASLInitialResponse(SCRAM_SHA_256, first.encode("utf-8"))

    def _sasl_continue(self, msg: be.AuthenticationMessage) -> Reply:
        assert isinstance(msg, be.AuthenticationSASLContinue)
        scram = self._require_scram()
        try:
            scram.set_server_first(msg.data.decode("utf-8"))
            final = scram.get_client_final()
        except (ScramException, UnicodeDecodeError, ValueError) as exc:
            raise AuthenticationFailed(f"SCRAM: {exc}") from None
        return fe.SASLResponse(final.encode("utf-8"))

    def _sasl_final(self, msg: be.AuthenticationMessage) -> Reply:
        assert isinstance(msg, be.AuthenticationSASLFinal)
        scram = self._require_scram()
        try:
            scram.set_server_final(msg.data.decode("utf-8"))
        except (ScramException, UnicodeDecodeError, ValueError) as exc:
            raise AuthenticationFailed(f"SCRAM server proof rejected: {exc}") from None
        self._scram_verified = True
        return None

    def _require_scram(self) -> ScramClient:
        if self._scram is None:
            raise AuthenticationFailed("SASL continuation without a SASL exchange")
        return self._scram
