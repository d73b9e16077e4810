"""Cached reads that do not wait: a miss is answered upstream at once (DESIGN §12).

Owns: :func:`read_now` (the rows of a routed cached read from the current state of the cache,
every key of an IN list read in one synchronous step, or the reason it goes upstream — a miss
queues the key's fill in the background, ``EngineHost.read_or_fill``), the reasons shown by
EXPLAIN LAST STATEMENT, and what ``weir serve``'s settings make of the fill policy and the
memory budget (:func:`fill_policy`, :func:`budgets`, :func:`default_budget`).

Why forwarding a miss keeps every guarantee: the client gets PostgreSQL's own answer, and
that answer moves the session's ``seen(s)`` (``proxy.seen``), so the session's later cached
reads wait for a barrier sent after it; the background fill installs the key with its own
snapshot and marker (DESIGN §6), as a waited-for fill did.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine import merge_lookups
from proxy.caching import DROPPED, FAILED, EngineHost, ReadOutcome
from proxy.fillqueue import FillPolicy
from proxy.router import Route
from proxy.settings import Settings

MISS = "a miss: answered upstream while the key's fill runs in the background"
BEHIND = ("no barrier sent after the session's last upstream answer passed within "
          "--read-timeout (monotonic reads)")

Reads = list[tuple[str, tuple[Any, ...], object]]


def read_now(host: EngineHost, route: Route, reads: Reads | None, count: bool = True
             ) -> tuple[tuple[Any, ...] | None, str]:
    """The rows of a cached read, or None and why it goes upstream (``reads`` receives
    (cache, key, engine answer) per key when it is answered). Every missing key of an IN
    list gets its fill queued, so the next read of the list finds them together."""
    assert route.keys is not None and route.classified is not None
    name = route.cache.name
    results: list[Any] = []
    missed = False
    for key in route.keys:
        rows = host.read_or_fill(name, key, count)
        if rows is FAILED:
            return None, ReadOutcome.FAILED
        if rows is DROPPED:
            return None, ReadOutcome.DROPPED
        if rows is None:
            missed = True
        results.append(rows)
    if missed:
        return None, MISS
    if reads is not None:
        reads.extend((name, tuple(key), rows)
                     for key, rows in zip(route.keys, results, strict=True))
    plan = route.classified.query.plan  # type: ignore[union-attr]
    return tuple(merge_lookups(plan, results, route.params)), route.reason


def fill_policy(settings: Settings) -> FillPolicy:
    # (a miss that waits for its fill, --misses wait, should not wait for others to join it)
    return FillPolicy(admission=settings.admission, max_queued=settings.fill_queue,
                      linger=0.002 if settings.misses == "upstream" else 0.0)


#: share of the memory weir may use that the default budget gives to cached state
DEFAULT_SHARE = 0.25
#: share of a budget the hit path's answer memos may take (the engine gets the rest)
MEMO_SHARE = 0.25


def default_budget(meminfo: str = "/proc/meminfo",
                   cgroup: str = "/sys/fs/cgroup/memory.max") -> int | None:
    """A quarter of the memory weir may use: the cgroup's limit (v2 ``memory.max``, or v1
    ``memory.limit_in_bytes``) when it has one, else the machine's; None when neither is
    readable."""
    limits: list[int] = []
    for path in (cgroup, "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" or v1's huge number: no limit
            limits.append(int(text))
        break
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError):
            return None
    return int(min(limits) * DEFAULT_SHARE)


def budgets(settings: Settings, memos: Any) -> int | None:
    """The engine's budget in bytes (None: unlimited) from ``--memory-budget`` (unset: the
    default; 0: none), after giving the hit path's memos (``memos.limit``) their share:
    everything weir keeps per key is inside the one budget."""
    total = settings.memory_budget
    if total == 0:
        return None
    if total is None:
        total = default_budget()
        if total is None:
            return None
    limit: int = min(memos.limit, int(total * MEMO_SHARE))
    memos.limit = limit
    return total - limit
