# Small helpers every benchmark script here shares: CPU time, load average,
# failing loudly, rotating the case order between rounds.
from __future__ import annotations

import os
import resource
import sys


def cpu_seconds() -> float:
    """CPU time of this process, all threads (the server is another process, not counted)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fail(message: str) -> None:
    """Print ``FAILED: message`` to stderr and exit 1."""
    print(f"\nFAILED: {message}", file=sys.stderr)
    sys.exit(1)


def rotated(items: list, k: int) -> list:
    """``items`` rotated by ``k``: each round starts with another case, so noise hits all alike."""
    k %= len(items)
    return items[k:] + items[:k]


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
