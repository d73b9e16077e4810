"""The backend 'R' (Authentication*) messages of protocol 3.0 (sans-I/O).

Owns: one frozen slotted dataclass per authentication request, named as in the PostgreSQL
docs, and ``decode_authentication`` which picks the class by the Int32 code that starts
every 'R' payload. Re-exported by ``pgwire.backend``.

Invariant: decoders raise only ``ProtocolViolation``; an unknown code is a violation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from pgwire.codec import Reader, cstr, frame, i32
from pgwire.framing import ProtocolViolation


def _code_only(code: int) -> bytes:
    return frame(b"R", i32(code))


@dataclass(frozen=True, slots=True)
class AuthenticationOk:
    """'R' code 0: authentication succeeded."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 0

    def encode(self) -> bytes:
        return _code_only(0)


@dataclass(frozen=True, slots=True)
class AuthenticationKerberosV5:
    """'R' code 2: Kerberos V5 requested (unsupported by modern servers)."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 2

    def encode(self) -> bytes:
        return _code_only(2)


@dataclass(frozen=True, slots=True)
class AuthenticationCleartextPassword:
    """'R' code 3: send the password in clear text."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 3

    def encode(self) -> bytes:
        return _code_only(3)


@dataclass(frozen=True, slots=True)
class AuthenticationMD5Password:
    """'R' code 5: send md5(md5(password + user) + salt)."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 5
    salt: bytes

    def encode(self) -> bytes:
        if len(self.salt) != 4:
            raise ValueError("the MD5 salt is 4 bytes")
        return frame(b"R", i32(5) + self.salt)


@dataclass(frozen=True, slots=True)
class AuthenticationGSS:
    """'R' code 7: GSSAPI authentication requested."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 7

    def encode(self) -> bytes:
        return _code_only(7)


@dataclass(frozen=True, slots=True)
class AuthenticationGSSContinue:
    """'R' code 8: GSSAPI or SSPI continuation data."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 8
    data: bytes

    def encode(self) -> bytes:
        return frame(b"R", i32(8) + self.data)


@dataclass(frozen=True, slots=True)
class AuthenticationSSPI:
    """'R' code 9: SSPI authentication requested."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 9

    def encode(self) -> bytes:
        return _code_only(9)


@dataclass(frozen=True, slots=True)
class AuthenticationSASL:
    """'R' code 10: SASL authentication; the mechanisms the server offers, preferred first."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 10
    mechanisms: tuple[str, ...]

    def encode(self) -> bytes:
        return frame(b"R", i32(10) + b"".join(cstr(m) for m in self.mechanisms) + b"\x00")


@dataclass(frozen=True, slots=True)
class AuthenticationSASLContinue:
    """'R' code 11: a SASL challenge (server-first-message for SCRAM)."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 11
    data: bytes

    def encode(self) -> bytes:
        return frame(b"R", i32(11) + self.data)


@dataclass(frozen=True, slots=True)
class AuthenticationSASLFinal:
    """'R' code 12: SASL outcome data (server-final-message for SCRAM)."""

    TYPE: ClassVar[bytes] = b"R"
    CODE: ClassVar[int] = 12
    data: bytes

    def encode(self) -> bytes:
        return frame(b"R", i32(12) + self.data)


AuthenticationMessage = (
    AuthenticationOk
    | AuthenticationKerberosV5
    | AuthenticationCleartextPassword
    | AuthenticationMD5Password
    | AuthenticationGSS
    | AuthenticationGSSContinue
    | AuthenticationSSPI
    | AuthenticationSASL
    | AuthenticationSASLContinue
    | AuthenticationSASLFinal
)

AUTHENTICATION_OK = AuthenticationOk()
_NO_DATA: dict[int, AuthenticationMessage] = {
    0: AUTHENTICATION_OK,
    2: AuthenticationKerberosV5(),
    3: AuthenticationCleartextPassword(),
    7: AuthenticationGSS(),
    9: AuthenticationSSPI(),
}


def _md5(r: Reader) -> AuthenticationMessage:
    return AuthenticationMD5Password(r.raw(4))


def _sasl(r: Reader) -> AuthenticationMessage:
    mechanisms = []
    while True:
        name = r.cstring()
        if not name:
            break
        mechanisms.append(name)
    return AuthenticationSASL(tuple(mechanisms))


_WITH_DATA: dict[int, Callable[[Reader], AuthenticationMessage]] = {
    5: _md5,
    8: lambda r: AuthenticationGSSContinue(r.rest()),
    10: _sasl,
    11: lambda r: AuthenticationSASLContinue(r.rest()),
    12: lambda r: AuthenticationSASLFinal(r.rest()),
}


def decode_authentication(payload: bytes) -> AuthenticationMessage:
    """Decode an 'R' payload into the Authentication* message its code names."""
    r = Reader(payload, "Authentication")
    code = r.int32()
    msg = _NO_DATA.get(code)
    if msg is None:
        parse = _WITH_DATA.get(code)
        if parse is None:
            raise ProtocolViolation(f"unknown authentication request code {code}")
        msg = parse(r)
    r.finish()
    return msg
