# Retry policies for idempotent requests, defined once on top of tenacity.
#
# Rule 1: this module decides *how* to retry (bounded attempts, exponential
#         backoff with jitter, only errors whose ``retriable`` is true); callers
#         decide *whether* a call is idempotent and opt in.
# Rule 2: retries never hide a closed client or a bad argument.
# Rule 3: a retry made on the loop thread (a ``publish_async`` with a msg_id) follows the same
#         schedule, asked for one step at a time (``wait_before_retry``).
from __future__ import annotations

import logging
import random
import time
from typing import Any, Awaitable, Callable, TypeVar

import attrs
import tenacity

__all__ = ["NO_RETRY", "RetryPolicy", "log_retry", "wait_before_retry"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def _is_retriable(exc: BaseException) -> bool:
    return bool(getattr(exc, "retriable", False))


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How idempotent JetStream requests (info, lookups, get_msg, publish and publish_async with msg_id)
    are retried.

    ``attempts`` counts the first try (1 = no retry); between tries the wait
    grows exponentially from ``initial_backoff`` up to ``max_backoff`` seconds,
    with jitter. ``deadline`` (seconds, default None: no limit) ends the retries
    once that long has passed since the first try began, whatever ``attempts``
    says: many quick tries through a leader election, yet a bounded wait when
    every try waits out its timeout. Only errors flagged ``retriable`` are
    retried: timeouts, no responders (a leader election), 503 API errors,
    "duplicate message id is in process" (``MsgIdInProcessError``), a full
    outbound buffer while reconnecting.
    """

    attempts: int = attrs.field(default=3)
    initial_backoff: float = attrs.field(default=0.1)
    max_backoff: float = attrs.field(default=2.0)
    deadline: float | None = attrs.field(default=None)

    @attempts.validator
    def _check_attempts(self, attribute: attrs.Attribute, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"attempts must be an int >= 1, got {value!r}")

    @initial_backoff.validator
    @max_backoff.validator
    def _check_backoff(self, attribute: attrs.Attribute, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{attribute.name} must be a number of seconds >= 0, got {value!r}")

    @deadline.validator
    def _check_deadline(self, attribute: attrs.Attribute, value: float | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise ValueError(f"deadline must be a number of seconds > 0 or None, got {value!r}")

    def _schedule(self, started: float) -> dict[str, Any]:
        stop: Any = tenacity.stop_after_attempt(self.attempts)
        if self.deadline is not None:
            deadline = started + self.deadline
            stop = stop | (lambda _state: time.monotonic() >= deadline)
        return dict(
            stop=stop,
            wait=tenacity.wait_exponential(multiplier=self.initial_backoff, max=self.max_backoff)
            + tenacity.wait_random(0, self.initial_backoff),
            retry=tenacity.retry_if_exception(_is_retriable),
            reraise=True,
            before_sleep=_log_retry,
        )

    def call(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` until it succeeds, raises a non-retriable error, or attempts run out.

        Blocks the calling thread while backing off (interruptible). The last
        error is re-raised as it was.
        """
        if self.attempts == 1:
            return fn()
        started = time.monotonic()
        try:  # the first attempt outside tenacity: most calls succeed at once, and its set-up costs tens of us
            return fn()
        except BaseException as exc:
            if not _is_retriable(exc):
                raise
            first = [exc]

        def again() -> T:  # tenacity sees the first attempt's error as its own first attempt's
            if first:
                raise first.pop()
            return fn()

        return tenacity.Retrying(**self._schedule(started))(again)

    async def call_async(self, fn: Callable[[], Awaitable[T]]) -> T:
        """(loop thread) :meth:`call` for a coroutine function: backs off with ``asyncio.sleep``,
        so the loop keeps serving everything else meanwhile."""
        if self.attempts == 1:
            return await fn()
        return await tenacity.AsyncRetrying(**self._schedule(time.monotonic()))(fn)


def wait_before_retry(policy: RetryPolicy, exc: BaseException, attempt: int,
                      jitter: float | None = None, elapsed: float = 0.0) -> float | None:
    """The seconds to back off before trying again after ``exc`` ended try number ``attempt`` (from 1),
    ``elapsed`` seconds after the first try began, as ``policy.call`` would; None when ``exc`` is not
    retriable, the policy's attempts are spent or its deadline has passed.

    ``jitter`` (0 to 1) picks the point in the jitter range; random when None. Pure otherwise, no I/O.
    """
    if attempt >= policy.attempts or not _is_retriable(exc):
        return None
    if policy.deadline is not None and elapsed >= policy.deadline:
        return None
    # tenacity's wait_exponential(multiplier=initial_backoff, max=max_backoff) + wait_random(0, initial_backoff)
    try:
        grown = min(policy.initial_backoff * 2 ** (attempt - 1), policy.max_backoff)
    except OverflowError:
        grown = policy.max_backoff
    return max(0.0, grown) + policy.initial_backoff * (random.random() if jitter is None else jitter)


def log_retry(exc: BaseException | None, attempt: int) -> None:
    """Log one retry at INFO on the ``jetstream_sync`` logger: what ended try number ``attempt``."""
    log.info("jetstream_sync: retrying after %r (attempt %d)", exc, attempt)


def _log_retry(state: tenacity.RetryCallState) -> None:
    log_retry(state.outcome.exception() if state.outcome else None, state.attempt_number)


#: A policy that never retries.
NO_RETRY = RetryPolicy(attempts=1)
