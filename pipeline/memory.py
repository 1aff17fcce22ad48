"""What the machine has now: the memory available to new allocations.

Read by the learners' memory budget (``pipeline/learn/crossval.py``) and by the feature-set
build, which refuses a vocabulary that could not fit (``pipeline/compute/feature_sets.py``).
"""
from __future__ import annotations

import os


def available_memory_mb() -> float:
    """Memory available to new allocations now (``MemAvailable`` of /proc/meminfo, else the free
    pages), in MB (10^6 bytes)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (ValueError, OSError, AttributeError):
        return 4096.0


def process_memory_mb() -> float | None:
    """Resident memory of this process now, in MB (10^6 bytes): ``/proc/self/statm``; None where
    it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError, AttributeError):
        return None
