"""The harness itself: the cluster is real, logical, and its auth rules are as documented."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest


def test_cluster_is_logical(pg: Any) -> None:
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)


def test_scram_role_needs_password(pg: Any, dbname: str) -> None:
    pg.psql("DROP ROLE IF EXISTS harness_scram; "
            "CREATE ROLE harness_scram LOGIN PASSWORD 's3cret' IN ROLE weir_scram")
    with psycopg.connect(pg.dsn("harness_scram", dbname, "s3cret")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("harness_scram",)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg.dsn("harness_scram", dbname, "wrong"))
