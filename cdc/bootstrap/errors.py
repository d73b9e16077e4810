"""The one error type of the bootstrap, and how upstream failures become clear messages.

Owns: :class:`BootstrapError` (a message a user can act on, printed as is by ``weir
bootstrap``) and :func:`explain` (a psycopg or asyncpg error, by SQLSTATE or class, to such a
message).
"""

from __future__ import annotations

import asyncpg
import psycopg


class BootstrapError(Exception):
    """A bad input or an upstream failure, with what to do about it."""


#: SQLSTATE -> what it means for a bootstrap.
_BY_SQLSTATE = {
    "42501": "permission denied",
    "53400": "replication slot limit reached",
    "42P01": "unknown table",
    "42704": "unknown object",
    "55000": "the upstream is not set up for logical replication",
    "57P01": "the upstream shut down",
    "25006": "read-only transaction",
}


def explain(exc: BaseException, doing: str) -> BootstrapError:
    """A :class:`BootstrapError` for ``exc`` raised while ``doing`` something."""
    if isinstance(exc, BootstrapError):
        return exc
    if (isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) is None) \
            or isinstance(exc, OSError | asyncpg.InterfaceError):
        return BootstrapError(f"the upstream is gone or unreachable while {doing}: "
                              f"{str(exc).strip()}")
    sqlstate = getattr(exc, "sqlstate", None)
    meaning = _BY_SQLSTATE.get(sqlstate or "", "upstream error")
    return BootstrapError(f"{meaning} while {doing}: {str(exc).strip()}"
                          + (f" (SQLSTATE {sqlstate})" if sqlstate else ""))
