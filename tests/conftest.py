"""Root fixtures: one upstream PostgreSQL cluster per test session.

``WEIR_TEST_DSN`` (a superuser URL) points the suite at an existing cluster; otherwise a
throw-away cluster is started with :mod:`proxy.localpg` and removed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ExternalCluster, create_database


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
