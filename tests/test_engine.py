# _engine: the contract between readers and engines, and the one idle-heartbeat alarm every engine
# keeps (ADR-37: silence for twice the idle heartbeat is a missed heartbeat, reported once).
# Pure: the clock is read, never waited on. The engines' use of it runs against a real server in
# the heartbeat tests of test_consume.py, test_ordered.py and test_faults.py.
from __future__ import annotations

import math
import time

from jetstream_sync._engine import HeartbeatWatch, Terminal, Warning_


def test_silence_for_twice_the_interval_is_one_missed_heartbeat():
    watch = HeartbeatWatch(5.0)
    start = watch.last_seen
    assert watch.limit == 10.0
    assert not watch.missed(start + 9.99)
    assert watch.missed(start + 10.0)
    # Reported once: the count restarts at the moment it was missed.
    assert not watch.missed(start + 10.5)
    assert watch.missed(start + 20.0)


def test_anything_seen_restarts_the_count():
    watch = HeartbeatWatch(1.0)
    watch.last_seen -= 1.5
    watch.seen()
    now = time.monotonic()
    assert not watch.missed(now)
    assert 1.9 <= watch.due_in(now) <= 2.0


def test_without_heartbeats_nothing_is_ever_missed():
    watch = HeartbeatWatch(None)
    assert watch.limit == math.inf and watch.due_in(time.monotonic()) == math.inf
    assert not watch.missed(time.monotonic() + 1e9)


def test_sunk_items_carry_their_error():
    err = RuntimeError("x")
    assert Warning_(err).error is err
    assert Terminal(None).error is None
