"""Root fixtures: one upstream PostgreSQL cluster per test session.

``WEIR_TEST_DSN`` (a superuser URL) points the suite at an existing cluster; otherwise a
throw-away cluster is started with :mod:`proxy.localpg` and removed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ExternalCluster, InProcessWeir, WeirProcess, create_database


@pytest.fixture(scope="session")
def pg() -> Iterator[Any]:
    url = os.environ.get("WEIR_TEST_DSN")
    if url:
        yield ExternalCluster(url)
        return
    from proxy import localpg

    cluster = localpg.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def dbname(pg: Any) -> str:
    """A fresh database for one test."""
    return create_database(pg)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate and key for weir's client-facing TLS."""
    import subprocess

    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "weir.crt", d / "weir.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(scope="session")
def weir(pg: Any, tls_files: tuple[str, str]) -> Iterator[WeirProcess]:
    """``weir serve`` as a real subprocess in front of the session cluster (TLS enabled)."""
    proc = WeirProcess.start(pg, ["--tls-cert", tls_files[0], "--tls-key", tls_files[1]])
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def weir_inproc(pg: Any) -> Iterator[InProcessWeir]:
    """A weir Server in this process (own loop in a thread), for tests that inspect it."""
    server = InProcessWeir.start(pg.dsn())
    try:
        yield server
    finally:
        server.stop()
