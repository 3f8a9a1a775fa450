# Small helpers every benchmark script here shares: CPU time, load average,
# failing loudly, rotating the case order between rounds, the bare loop crossing, the library's revision.
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import jetstream_sync as jss


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


def crossing_us(client: Any, n: int = 2000) -> tuple[float, float]:
    """p50 of a bare thread -> loop -> thread round trip of ``client``'s loop thread, us, two ways.

    First: a no-op coroutine run through the loop (``run()``, what any blocking call that runs a
    coroutine pays). Second, the cheapest form: this thread waits on a ``threading.Lock`` that a
    ``call_soon_threadsafe`` callback releases (one wake of the loop, one wake of the caller).
    """
    lt = client._conn.loop_thread

    async def noop() -> None:
        return None

    run_times = []
    for _ in range(n):
        t0 = time.perf_counter()
        lt.run(noop(), 5.0)
        run_times.append(time.perf_counter() - t0)
    lock = threading.Lock()
    lock_times = []
    for _ in range(n):
        lock.acquire()
        t0 = time.perf_counter()
        lt.loop.call_soon_threadsafe(lock.release)
        if not lock.acquire(timeout=5.0):
            fail("the loop thread did not release the lock within 5 s")
        lock_times.append(time.perf_counter() - t0)
        lock.release()
    return statistics.median(run_times) * 1e6, statistics.median(lock_times) * 1e6


def overhead_line(label: str, jss_us: float, base_us: float, crossing: tuple[float, float], target: float) -> str:
    """``label: N crossings (target <= T)  PASS|BELOW`` with the figures it comes from; the overhead is
    (jss p50 - nats-py p50) / bare crossing p50 (the run() form), the lock form in parentheses."""
    run_us, lock_us = crossing
    over = (jss_us - base_us) / run_us
    verdict = "PASS" if over <= target else "BELOW"
    return (f"{label}: {over:5.2f} crossings  (target <= {target})  {verdict:<5}  "
            f"p50 {jss_us:.0f} - {base_us:.0f} us over a crossing of {run_us:.0f} us "
            f"(= {(jss_us - base_us) / lock_us:.2f} lock hand-offs of {lock_us:.0f} us)")


def library_revision() -> str:
    """`` (git <commit>[, modified])`` for a jetstream_sync imported from a git checkout, else empty:
    the library changes quickly, and figures are only comparable for the same code."""
    package = os.path.dirname(os.path.abspath(jss.__file__))
    try:
        def git(*cmd: str) -> str:
            return subprocess.run(["git", "-C", package, *cmd], capture_output=True, text=True, timeout=5,
                                  check=True).stdout.strip()
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", package)
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" (git {commit}{', modified' if dirty else ''})"
