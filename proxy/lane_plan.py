"""How many lanes weir runs and on which CPUs (``proxy.lanes``): from the settings, whether
the lanes are built, and the CPU quota of weir's cgroup.

Owns: :func:`lane_plan` and :func:`cpu_quota` (pure but for reading the process's CPU
affinity and the cgroup file).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from proxy.settings import Settings


def lane_plan(settings: Settings, built: bool, quota: float | None = None
              ) -> tuple[int, tuple[int, ...]]:
    """How many lanes to run and the CPU each is pinned to (empty: not pinned), from
    ``--hit-lanes`` and ``--lane-cpus``, whether the lanes are built, and the CPUs' worth of
    time weir's cgroup may use (``quota``, None: no limit). By default there is one lane per
    CPU weir may run on, each pinned to its CPU: a session is served on the CPU its client's
    packets arrive on, so a lane wakes the client thread on its own CPU, not across
    (``docs/benchmarks/hit.md``). Under a quota smaller than that, the default is one
    unpinned lane per CPU of quota (lanes poll after answering, which would spend it)."""
    count, pinned = settings.hit_lanes, settings.pinned_cpus
    if pinned:
        return len(pinned), pinned
    allowed = tuple(sorted(os.sched_getaffinity(0)))[:64]
    if count is None:
        count = len(allowed) if built else 0
        if quota is not None and count:
            count = max(1, min(count, math.ceil(quota)))
    if settings.lane_cpus.strip().lower() == "auto" and count == len(allowed) and count > 0:
        return count, allowed
    return count, ()


def cpu_quota(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """The CPUs' worth of time this process's cgroup (v2) may use, or None: no limit, or
    no cgroup v2 file to say (``quota period`` or ``max period``, in microseconds)."""
    try:
        quota, period = path.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None
