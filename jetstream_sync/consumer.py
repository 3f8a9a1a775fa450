# The Consumer handle (ADR-37 "Consumers"): info, delete, and the ways to
# read messages (fetch, fetch_no_wait, next).
#
# Rule 1: argument rules are applied here, before anything is sent; the pull
#         algorithm itself lives in pull.py and runs on the loop thread.
# Rule 2: a handle holds no server resources; ``cached_info`` is what the last
#         round trip said.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from .config import ConsumerInfo
from .message import Msg
from .pull import MessageBatch, fetch_options, start_fetch

if TYPE_CHECKING:
    from .client import Client
    from .jetstream import JetStream

__all__ = ["Consumer"]


class Consumer:
    """A handle on one consumer. Thread-safe; calls block as each one documents."""

    def __init__(self, js: "JetStream", info: ConsumerInfo) -> None:
        self._js = js
        self._info = info
        self.name: str = info.name
        self.stream_name: str = info.stream_name

    @property
    def js(self) -> "JetStream":
        return self._js

    @property
    def client(self) -> "Client":
        return self._js.client

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from the last server round trip. No I/O."""
        return self._info

    def info(self, *, timeout: float | None = ...) -> ConsumerInfo:  # type: ignore[assignment]
        """Fetch fresh info from the server (retried) and cache it. Raises ``ConsumerNotFoundError``."""
        info = self._js.consumer_info(self.stream_name, self.name, timeout=timeout)
        self._info = info
        return info

    def delete(self, *, timeout: float | None = ...) -> None:  # type: ignore[assignment]
        """Delete this consumer on the server. Raises ``ConsumerNotFoundError``."""
        self._js.delete_consumer(self.stream_name, self.name, timeout=timeout)

    def fetch(self, max_messages: int | None = None, *, max_bytes: int | None = None, expires: float = 30.0,
              idle_heartbeat: float | None = None, timeout: float | None = None) -> MessageBatch:
        """Send one pull request now and return a :class:`MessageBatch` to iterate.

        Exactly one of ``max_messages``/``max_bytes``. Iterating blocks until
        each message arrives and ends when the pull ends (count or bytes
        reached, ``expires`` passed, no messages). An empty batch is not an
        error. Messages arrive on the loop thread and are handed over through a
        queue; iteration runs on the caller's thread.

        Blocks only to send the request (at most ``timeout``, default the
        context's timeout).
        Raises ValueError/TypeError for bad options (nothing sent); terminal
        errors (``ConsumerDeletedError``, ``APIError``, ``ClientClosedError``)
        are raised by iteration after the messages before them.
        """
        opts = fetch_options(max_messages, max_bytes, expires, idle_heartbeat)
        t = None if timeout is None else self.client.timeout_or_default(timeout)
        return start_fetch(self, opts, t)

    def fetch_no_wait(self, max_messages: int | None = None, *, max_bytes: int | None = None) -> MessageBatch:
        """Like :meth:`fetch`, but only what is available right now; ends at once when nothing is."""
        opts = fetch_options(max_messages, max_bytes, expires=5.0, no_wait=True)
        return start_fetch(self, opts)

    def next(self, timeout: float = 30.0) -> Msg:
        """Pull one message, blocking up to ``timeout`` seconds for it.

        Raises ``jetstream_sync.TimeoutError`` when none arrives,
        ``ConsumerDeletedError`` when the consumer goes away while waiting.
        """
        if timeout is None:
            raise ValueError("timeout must be > 0 seconds for next(); use messages() to wait without a bound")
        opts = fetch_options(1, None, timeout, None)
        batch = start_fetch(self, opts)
        try:
            for msg in batch:
                return msg
        finally:
            batch.stop()
        raise errors.TimeoutError(f"no message from consumer {self.name!r} within {timeout:.3g}s")

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"
