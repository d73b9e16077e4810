"""Upstream URLs into connection parameters."""

from __future__ import annotations

from cdc.connection import ConnectParams


def test_full_url() -> None:
    params = ConnectParams.from_url(
        "postgresql://us%40er:p%3Ass@db.example:6432/my%20db?sslmode=require&application_name=x")
    assert params == ConnectParams("db.example", 6432, "us@er", "my db", "p:ss", "require", "x")


def test_defaults() -> None:
    params = ConnectParams.from_url("postgres://host")
    assert (params.host, params.port, params.user, params.dbname, params.password,
            params.sslmode) == ("host", 5432, "postgres", "postgres", None, "prefer")
