"""Authentication is relayed (the upstream decides) and TLS works in both directions."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support import InProcessWeir, WeirProcess, unique_name


def _error(dsn: str) -> str:
    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(dsn).close()
    text = str(info.value)
    return text[text.index("FATAL"):] if "FATAL" in text else text


@pytest.mark.parametrize("method", ["scram", "md5"])
def test_password_auth_relayed(pg: Any, weir: WeirProcess, dbname: str, method: str) -> None:
    role = unique_name(f"auth_{method}")
    encryption = "scram-sha-256" if method == "scram" else "md5"
    pg.psql(f"SET password_encryption = '{encryption}'; "
            f"CREATE ROLE {role} LOGIN PASSWORD 'right-horse' IN ROLE weir_{method}")
    with psycopg.connect(weir.dsn(role, dbname, "right-horse")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)
    direct = _error(pg.dsn(role, dbname, "battery-staple"))
    through = _error(weir.dsn(role, dbname, "battery-staple"))
    assert "password authentication failed" in direct
    assert through == direct


def test_scram_with_client_tls(pg: Any, weir: WeirProcess, dbname: str) -> None:
    """Client TLS to weir, clear text upstream: SCRAM works with libpq's defaults."""
    role = unique_name("auth_tls")
    pg.psql(f"CREATE ROLE {role} LOGIN PASSWORD 'pw' IN ROLE weir_scram")
    for mode in ("require", "prefer"):
        with psycopg.connect(weir.dsn(role, dbname, "pw", sslmode=mode)) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT current_user").fetchone() == (role,)
    with psycopg.connect(weir.dsn(role, dbname, "pw", sslmode="disable")) as conn:
        assert not conn.info.pgconn.ssl_in_use


def test_tls_both_legs(pg: Any, tls_files: tuple[str, str], dbname: str) -> None:
    """TLS to weir and from weir upstream. Channel binding cannot cross a proxy, so weir
    withholds SCRAM-SHA-256-PLUS; a client that then says "I could bind" (libpq's default
    channel_binding=prefer) is refused by a TLS upstream as a downgrade, and a client with
    channel_binding=disable authenticates. Trust and md5 are unaffected."""
    role = unique_name("auth_tls2")
    pg.psql(f"CREATE ROLE {role} LOGIN PASSWORD 'pw' IN ROLE weir_scram")
    upstream = pg.dsn().replace("sslmode=disable", "sslmode=require")
    proc = WeirProcess.start(pg, ["--tls-cert", tls_files[0], "--tls-key", tls_files[1]],
                             upstream=upstream)
    try:
        with psycopg.connect(proc.dsn(dbname=dbname, sslmode="require")) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
                                ).fetchone() == (True,)
        with psycopg.connect(proc.dsn(role, dbname, "pw", sslmode="require"),
                             channel_binding="disable") as conn:
            assert conn.execute("SELECT current_user").fetchone() == (role,)
        with pytest.raises(psycopg.OperationalError, match="channel binding negotiation"):
            psycopg.connect(proc.dsn(role, dbname, "pw", sslmode="require")).close()
    finally:
        proc.stop()


def test_ssl_request_declined_without_certificate(weir_inproc: InProcessWeir) -> None:
    with pytest.raises(psycopg.OperationalError, match="server does not support SSL"):
        psycopg.connect(weir_inproc.dsn(sslmode="require")).close()
    with psycopg.connect(weir_inproc.dsn(sslmode="prefer")) as conn:
        assert not conn.info.pgconn.ssl_in_use


def test_upstream_tls_verify_full_rejects_wrong_ca(pg: Any, tls_files: tuple[str, str]) -> None:
    """sslmode=verify-full with a root that did not sign the server's certificate fails."""
    upstream = pg.dsn().replace("sslmode=disable",
                                f"sslmode=verify-full&sslrootcert={tls_files[0]}")
    server = InProcessWeir.start(upstream)
    try:
        with pytest.raises(psycopg.OperationalError, match="TLS negotiation with the upstream"):
            psycopg.connect(server.dsn()).close()
    finally:
        server.stop()
