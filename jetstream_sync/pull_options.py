# The options of the pull engines, pure rules with no I/O (ADR-37 "Fetch" and "Consume Configuration
# Options"): what ``fetch()``/``next()`` and ``messages()``/``consume()`` accept, their defaults, and
# the pull request they become. Unit tested without a server (tests/test_pull.py).
#
# Rule: a bad option raises ValueError/TypeError naming it, before anything is sent.
from __future__ import annotations

from typing import Any

import attrs

from ._protocol import check_count, check_seconds, pull_request

__all__ = ["BYTES_BATCH", "ConsumeOptions", "FetchOptions", "consume_options", "fetch_options"]

#: With max_bytes the request's batch is set this high, so bytes are the limit (ADR-37).
BYTES_BATCH = 1_000_000
#: Extra time the client waits beyond the server-side ``expires``.
CLIENT_MARGIN = 1.0
#: A fetch with ``timeout=`` asks the server to end its pull this much earlier, so the end arrives in time.
TIMEOUT_MARGIN = 0.1


@attrs.frozen(kw_only=True)
class FetchOptions:
    """A validated one-shot pull: what goes into the ``CONSUMER.MSG.NEXT`` request."""

    batch: int
    max_bytes: int | None
    expires: float
    idle_heartbeat: float | None
    no_wait: bool = False
    #: The caller's bound on the whole fetch (seconds), None for none.
    timeout: float | None = None

    def request(self) -> dict[str, Any]:
        return pull_request(self.batch, max_bytes=self.max_bytes, expires=self.expires,
                            idle_heartbeat=self.idle_heartbeat, no_wait=self.no_wait)

    @property
    def client_deadline(self) -> float:
        """Seconds the client waits: longer than the server-side ``expires``, and never past ``timeout``."""
        wait = self.expires + max(CLIENT_MARGIN, self.expires * 0.1)
        return wait if self.timeout is None else min(wait, self.timeout)


def fetch_options(max_messages: Any = None, max_bytes: Any = None, expires: Any = 30.0,
                  idle_heartbeat: Any = None, no_wait: bool = False, timeout: float | None = None) -> FetchOptions:
    """Apply ADR-37's rules for fetch/next: exactly one of max_messages/max_bytes, positive expiry,
    heartbeat at most half the expiry, on by default from 10 s expiries (5 s, as nats.go).

    A ``timeout`` (seconds, checked by the caller) bounds the fetch: the server-side expiry is cut to
    end :data:`TIMEOUT_MARGIN` before it, and a heartbeat that no longer fits half of it is dropped."""
    max_messages = check_count(max_messages, "max_messages")
    max_bytes = check_count(max_bytes, "max_bytes")
    if max_messages is not None and max_bytes is not None:
        raise ValueError("max_messages and max_bytes are exclusive: give exactly one")
    if max_messages is None and max_bytes is None:
        raise ValueError("give exactly one of max_messages or max_bytes")
    exp = check_seconds(expires, "expires")
    if exp is None:
        raise ValueError("expires must be > 0 seconds, got None")
    hb = check_seconds(idle_heartbeat, "idle_heartbeat")
    if hb is not None and hb > exp / 2:
        raise ValueError(f"idle_heartbeat must be at most half of expires ({exp / 2:.3g}s), got {hb:.3g}s")
    if timeout is not None and not no_wait:
        exp = min(exp, max(timeout - TIMEOUT_MARGIN, timeout / 2))
        if hb is not None and hb > exp / 2:
            hb = None
    if hb is None and exp >= 10 and not no_wait:
        hb = 5.0
    return FetchOptions(batch=max_messages if max_messages is not None else BYTES_BATCH, max_bytes=max_bytes,
                        expires=exp, idle_heartbeat=None if no_wait else hb, no_wait=no_wait,
                        timeout=None if no_wait else timeout)


@attrs.frozen(kw_only=True)
class ConsumeOptions:
    """Validated options of a continuous pull (ADR-37 "Consume Configuration Options")."""

    max_messages: int
    max_bytes: int | None
    expires: float
    idle_heartbeat: float
    threshold_messages: int
    threshold_bytes: int | None


def consume_options(max_messages: Any = None, max_bytes: Any = None, expires: Any = 30.0,
                    idle_heartbeat: Any = None, threshold_messages: Any = None,
                    threshold_bytes: Any = None) -> ConsumeOptions:
    """Apply ADR-37's defaults and rules for messages()/consume().

    ``max_messages`` 500 when neither limit is given; ``max_messages`` and
    ``max_bytes`` exclusive; ``expires`` at least 1 s; ``idle_heartbeat``
    expires/2 capped at 30 s (at least 0.5 s, at most expires/2); thresholds
    50% and never above their limit.
    """
    mm = check_count(max_messages, "max_messages")
    mb = check_count(max_bytes, "max_bytes")
    if mm is not None and mb is not None:
        raise ValueError("max_messages and max_bytes are exclusive: give at most one")
    exp = check_seconds(expires, "expires")
    if exp is None or exp < 1.0:
        raise ValueError(f"expires must be at least 1 second for messages()/consume(), got {expires!r}")
    hb = check_seconds(idle_heartbeat, "idle_heartbeat")
    if hb is None:
        hb = max(0.5, min(exp / 2, 30.0))
    elif hb > exp / 2:
        raise ValueError(f"idle_heartbeat must be at most half of expires ({exp / 2:.3g}s), got {hb:.3g}s")
    elif hb < 0.5 or hb > 30.0:
        raise ValueError(f"idle_heartbeat must be between 0.5 and 30 seconds, got {hb:.3g}s")
    tm = check_count(threshold_messages, "threshold_messages") if threshold_messages != 0 else 0
    tb = check_count(threshold_bytes, "threshold_bytes") if threshold_bytes != 0 else 0
    if mb is not None:
        if threshold_messages is not None:
            raise ValueError("threshold_messages goes with max_messages; with max_bytes use threshold_bytes")
        tb = mb // 2 if tb is None else tb
        if tb > mb:
            raise ValueError(f"threshold_bytes ({tb}) must not exceed max_bytes ({mb})")
        return ConsumeOptions(max_messages=BYTES_BATCH, max_bytes=mb, expires=exp, idle_heartbeat=hb,
                              threshold_messages=0, threshold_bytes=tb)
    if threshold_bytes is not None:
        raise ValueError("threshold_bytes goes with max_bytes; with max_messages use threshold_messages")
    mm = 500 if mm is None else mm
    tm = mm // 2 if tm is None else tm
    if tm > mm:
        raise ValueError(f"threshold_messages ({tm}) must not exceed max_messages ({mm})")
    return ConsumeOptions(max_messages=mm, max_bytes=None, expires=exp, idle_heartbeat=hb,
                          threshold_messages=tm, threshold_bytes=None)
