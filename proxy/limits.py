"""Limits like PostgreSQL's for what clients may make weir hold (issue 20).

Owns: the message size allowed before authentication ends (:data:`AUTH_MAX_MESSAGE_LENGTH`,
PostgreSQL's ``PG_MAX_AUTH_TOKEN_LENGTH``; the startup packet's own cap is
``pgwire.framing.MAX_STARTUP_LENGTH``), the answers to a login that takes too long and to
one client too many (:func:`login_timeout_error`, :func:`admit`), raising
the process's file descriptor limit at start (:func:`raise_fd_limit`) and making the C
allocator give large freed buffers back to the system (:func:`return_large_buffers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import resource
from collections.abc import Callable
from typing import Any

from pgwire.framing import ProtocolViolation
from proxy.metrics import own_error

log = logging.getLogger("weir.limits")

#: the largest message a client may send before it is authenticated (a password, a SASL
#: response): PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH
AUTH_MAX_MESSAGE_LENGTH = 65535
#: glibc's mallopt parameter numbers
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: allocations from this size on get their own mapping, returned to the system when freed
MMAP_THRESHOLD = 256 * 1024


def before_login(settings: Any) -> int:
    """The largest message a client may send before it is authenticated."""
    return min(int(settings.max_message_bytes), AUTH_MAX_MESSAGE_LENGTH)


def login_timeout_error() -> bytes:
    """What PostgreSQL says when authentication_timeout passes (then it closes)."""
    return own_error("57014", "canceling authentication due to timeout", severity="FATAL")


def admit(sessions: int, maximum: int) -> None:
    """Refuse a session past ``maximum`` (``sessions`` counts it): FATAL 53300."""
    if sessions > maximum:
        raise ProtocolViolation("sorry, too many clients already", "53300")


class LoginClock:
    """The login timeout of one session: ``expired`` runs after ``timeout`` seconds unless
    stopped first (a session built without a running loop, as unit tests drive one by hand,
    has no clock)."""

    __slots__ = ("_timer",)

    def __init__(self, timeout: float, expired: Callable[[], None]) -> None:
        self._timer: asyncio.TimerHandle | None = None
        with contextlib.suppress(RuntimeError):
            self._timer = asyncio.get_running_loop().call_later(timeout, expired)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard limit; (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit from %d to %d: %s",
                        soft, hard, exc)
    return soft, hard


def fd_limit() -> int:
    """The current soft limit of open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def return_large_buffers() -> bool:
    """Fix glibc's mmap threshold (it otherwise grows after each large buffer freed, and
    later large buffers come from the heap, whose memory stays with the process): a large
    message's buffer is unmapped when freed. False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD))
