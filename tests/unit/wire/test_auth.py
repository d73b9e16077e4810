"""Client-side authentication for weir's own upstream connections (scramp server as peer)."""

from __future__ import annotations

import hashlib

import pytest
from scramp import ScramMechanism

from pgwire import backend as be
from pgwire import frontend as fe
from pgwire.auth import AuthenticationFailed, ClientAuthenticator, md5_password


def test_md5_password_matches_postgres_formula() -> None:
    # pg_authid stores 'md5' || md5(password || user); the wire adds the salt on top.
    stored = hashlib.md5(b"pu").hexdigest()
    expected = "md5" + hashlib.md5(stored.encode() + b"salt").hexdigest()
    assert md5_password("u", "p", b"salt") == expected
    assert md5_password("u", "p", b"tlas") != expected


def test_cleartext_and_md5_requests() -> None:
    auth = ClientAuthenticator("u", "secret")
    assert auth.respond(be.AuthenticationCleartextPassword()) == fe.PasswordMessage("secret")
    reply = auth.respond(be.AuthenticationMD5Password(b"abcd"))
    assert isinstance(reply, fe.PasswordMessage)
    assert reply.password == md5_password("u", "secret", b"abcd")
    assert auth.respond(be.AuthenticationOk()) is None
    assert auth.done


def _scram_server(password: str) -> object:
    mech = ScramMechanism()
    info = mech.make_auth_info(password, iteration_count=4096)
    return mech.make_server(lambda _user: info)


@pytest.mark.parametrize(("client_pw", "ok"), [("pw", True), ("wrong", False)])
def test_scram_exchange_against_a_scram_server(client_pw: str, ok: bool) -> None:
    server = _scram_server("pw")
    auth = ClientAuthenticator("u", client_pw)
    first = auth.respond(be.AuthenticationSASL(("SCRAM-SHA-256-PLUS", "SCRAM-SHA-256")))
    assert isinstance(first, fe.SASLInitialResponse)
    assert first.mechanism == "SCRAM-SHA-256"
    assert first.data is not None
    server.set_client_first(first.data.decode())  # type: ignore[attr-defined]
    challenge = server.get_server_first().encode()  # type: ignore[attr-defined]
    final = auth.respond(be.AuthenticationSASLContinue(challenge))
    assert isinstance(final, fe.SASLResponse)
    if not ok:
        with pytest.raises(Exception, match=r"(?i)invalid|proof|fail"):
            server.set_client_final(final.data.decode())  # type: ignore[attr-defined]
        return
    server.set_client_final(final.data.decode())  # type: ignore[attr-defined]
    assert auth.respond(be.AuthenticationSASLFinal(server.get_server_final().encode())) is None  # type: ignore[attr-defined]
    assert auth.respond(be.AuthenticationOk()) is None
    assert auth.done


def test_forged_server_final_and_skipped_proof_are_refused() -> None:
    auth = ClientAuthenticator("u", "pw")
    first = auth.respond(be.AuthenticationSASL(("SCRAM-SHA-256",)))
    assert isinstance(first, fe.SASLInitialResponse)
    server = _scram_server("other password")
    assert first.data is not None
    server.set_client_first(first.data.decode())  # type: ignore[attr-defined]
    auth.respond(be.AuthenticationSASLContinue(server.get_server_first().encode()))  # type: ignore[attr-defined]
    with pytest.raises(AuthenticationFailed):
        auth.respond(be.AuthenticationSASLFinal(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="))
    with pytest.raises(AuthenticationFailed, match="skipped"):
        auth.respond(be.AuthenticationOk())


@pytest.mark.parametrize(
    ("auth", "request_"),
    [
        (ClientAuthenticator("u", None), be.AuthenticationMD5Password(b"abcd")),
        (ClientAuthenticator("u", "pw"), be.AuthenticationGSS()),
        (ClientAuthenticator("u", "pw"), be.AuthenticationSASL(("SCRAM-SHA-256-PLUS",))),
        (ClientAuthenticator("u", "pw"), be.AuthenticationSASLContinue(b"r=x")),
    ],
)
def test_requests_weir_cannot_honour(auth: ClientAuthenticator, request_: object) -> None:
    with pytest.raises(AuthenticationFailed):
        auth.respond(request_)  # type: ignore[arg-type]
