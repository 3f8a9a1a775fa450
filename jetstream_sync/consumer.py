# The Consumer handle (ADR-37 "Consumers"): info, delete, and the ways to
# read messages (fetch, fetch_no_wait, next, messages, consume), in a priority
# group (ADR-42) where the consumer has them.
#
# Rule 1: argument rules are applied here, before anything is sent; the pull
#         algorithm itself lives in pull.py and runs on the loop thread.
# Rule 2: a handle holds no server resources; ``cached_info`` is what the last
#         round trip said. It does hold the pin id a pinned priority group gave it.
from __future__ import annotations

import threading
from typing import Any, Callable

from . import errors
from ._handle import ConsumerHandle, Context
from ._protocol import DEFAULT, Timeout
from .config import ConsumerInfo
from .message import Msg
from .consume import ConsumeHandle, MessageStream, NakDelay, check_handlers, nak_schedule
from ._engine import Target
from .fetch import MessageBatch, NextCall, request_body
from .pull import ContinuousPull, FetchPull, NextInbox
from .pull_options import FetchOptions, Pin, PriorityOptions, consume_options, fetch_options, priority_options

__all__ = ["Consumer"]


def _start_fetch(target: Target, opts: FetchOptions) -> MessageBatch:
    """Send the pull request now (without waiting for the loop) and return the batch to iterate.

    Nothing here waits on the network; ``opts`` bound how long the batch waits."""
    pull = FetchPull(target, opts)
    target.conn.loop_thread.check_usable()
    # No wait for the loop: the request goes out with the loop's next turn,
    # and anything that stops it arrives through the batch like any ending.
    pull.start_soon()
    return MessageBatch(pull, opts.client_deadline)


class Consumer(ConsumerHandle):
    """A handle on one pull consumer. Thread-safe; calls block as each one documents."""

    def __init__(self, js: Context, info: ConsumerInfo) -> None:
        super().__init__(js, info)
        self._next_inbox: NextInbox | None = None
        self._next_lock = threading.Lock()
        self._next_opts: dict[float, tuple[Any, bytes]] = {}  # timeout -> (options, request body)
        #: The pin id each pinned priority group gave this handle (ADR-42), by group.
        self._pins: dict[str, Pin] = {}

    def _priority(self, group: str | None, min_pending: int | None, min_ack_pending: int | None,
                  priority: int | None) -> PriorityOptions | None:
        """The priority-group part of a pull, checked against the cached info (ADR-42), and the server's
        support for it; None for a consumer without priority groups. Raises ValueError/TypeError naming
        the argument, ``FeatureNotSupportedError``; nothing is sent."""
        cfg = self._info.config
        if group is None and min_pending is None and min_ack_pending is None and priority is None and (
                cfg is None or not cfg.priority_groups):
            return None
        opts = priority_options(group, min_pending, min_ack_pending, priority, cfg, self._label, self._pins)
        if opts is not None:
            jsapi = self._js._jsapi
            jsapi.require("priority groups", 1, "2.11")
            if priority is not None:
                jsapi.require("the prioritized priority policy", 2, "2.12")
        return opts

    def fetch(self, max_messages: int | None = None, *, max_bytes: int | None = None, expires: float = 30.0,
              idle_heartbeat: float | None = None, timeout: float | None = None, group: str | None = None,
              min_pending: int | None = None, min_ack_pending: int | None = None,
              priority: int | None = None) -> MessageBatch:
        """Send one pull request now and return a :class:`MessageBatch` to iterate.

        Exactly one of ``max_messages``/``max_bytes``. Iterating blocks until
        each message arrives and ends when the pull ends (count or bytes
        reached, ``expires`` passed, no messages). An empty batch is not an
        error. Messages arrive on the loop thread and are handed over through a
        queue; iteration runs on the caller's thread.

        ``timeout`` (seconds) bounds the whole batch: the pull's server-side
        expiry is cut to end just before it, so iteration ends within about
        ``timeout`` with what arrived. Without it the batch waits ``expires``.

        A consumer with priority groups is pulled in one of them: ``group``
        (required there), ``min_pending``/``min_ack_pending`` (``overflow``:
        deliver only while the consumer has that many pending / unacked),
        ``priority`` (``prioritized``: 0, served first, to 9). A pinned group's
        pin id is kept by this handle and sent back; a pull refused because the
        pin moved (423) is sent again without it for the time left.

        Never blocks: the pull request goes out with the loop's next turn.
        Raises ValueError/TypeError for bad options, ``FeatureNotSupportedError``
        for priority groups on a server before 2.11 (nothing sent); terminal
        errors (``ConsumerDeletedError`` naming the consumer and stream when
        either is gone, ``APIError``, ``ClientClosedError``) are raised by
        iteration after the messages before them.
        """
        t = None if timeout is None else self._conn.timeout_or_default(timeout)
        opts = fetch_options(max_messages, max_bytes, expires, idle_heartbeat, timeout=t,
                             priority=self._priority(group, min_pending, min_ack_pending, priority))
        return _start_fetch(self._target(), opts)

    def fetch_no_wait(self, max_messages: int | None = None, *, max_bytes: int | None = None,
                      group: str | None = None, min_pending: int | None = None, min_ack_pending: int | None = None,
                      priority: int | None = None) -> MessageBatch:
        """Like :meth:`fetch`, but only what is available right now; ends at once when nothing is."""
        opts = fetch_options(max_messages, max_bytes, expires=5.0, no_wait=True,
                             priority=self._priority(group, min_pending, min_ack_pending, priority))
        return _start_fetch(self._target(), opts)

    def next(self, timeout: float = 30.0, *, group: str | None = None, min_pending: int | None = None,
             min_ack_pending: int | None = None, priority: int | None = None) -> Msg:
        """Pull one message, blocking up to ``timeout`` seconds for it.

        The pull request is sent at once (no wait for the loop thread) on a
        long-lived inbox of this handle; the message is built on the calling
        thread. ``group``, ``min_pending``, ``min_ack_pending``, ``priority``:
        the priority group of the pull, as :meth:`fetch` has them. Raises
        ``jetstream_sync.TimeoutError`` when none arrives,
        ``ConsumerDeletedError`` (naming the consumer and stream) when the
        consumer or its stream is gone or goes away while waiting,
        ``ClientClosedError``; ValueError/TypeError for bad arguments and
        ``FeatureNotSupportedError`` before anything is sent; Ctrl-C withdraws the pull.
        """
        if timeout is None:
            raise ValueError("timeout must be > 0 seconds for next(); use messages() to wait without a bound")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        if prio is not None:  # the body carries the pin id as it is now: built for each call
            opts: Any = fetch_options(1, None, timeout, None, priority=prio)
            body = None
        else:
            cached = self._next_opts.get(timeout)
            if cached is None:
                opts = fetch_options(1, None, timeout, None)
                cached = (opts, request_body(opts))
                if len(self._next_opts) < 16:
                    self._next_opts[timeout] = cached
            opts, body = cached
        with self._next_lock:
            inbox = self._next_inbox
            if inbox is None or inbox.retired:
                inbox = NextInbox(self._target())
                self._conn.call(inbox.start(), self._js.timeout)
                self._next_inbox = inbox
            mine = inbox.try_acquire()
        if not mine:  # another thread is in next() on this handle: a one-off pull of its own
            batch = _start_fetch(self._target(), opts)
            try:
                for msg in batch:
                    return msg
            finally:
                batch.stop()
            raise errors.TimeoutError.after(f"next() on {self._label}", timeout, "no message")
        return NextCall(inbox, inbox.target).run(opts, f"next() on {self._label}", body)

    def messages(self, max_messages: int | None = None, max_bytes: int | None = None, expires: float = 30.0,
                 idle_heartbeat: float | None = None, threshold_messages: int | None = None,
                 threshold_bytes: int | None = None, *, group: str | None = None, min_pending: int | None = None,
                 min_ack_pending: int | None = None, priority: int | None = None) -> MessageStream:
        """Start the ADR-37 continuous pull and return a blocking :class:`MessageStream`.

        At most ``max_messages`` (default 500) or ``max_bytes`` are buffered
        locally; a new pull tops the buffer up when it falls to the threshold
        (default half). Heartbeats are always on. A replicated consumer's new
        leader (its 409 Leadership Change or leader-elected advisory) is pulled
        from at once. Blocks only to subscribe and send the first pull. ``group``, ``min_pending``,
        ``min_ack_pending``, ``priority``: the priority group of the pulls, as
        :meth:`fetch` has them; in a pinned group ``expires`` is at most half
        the consumer's ``priority_timeout`` (the pin lasts while new pulls
        come), and a 423 (the pin moved) is a warning: the pulling goes on
        without the pin id. Raises ValueError/TypeError for bad options,
        ``FeatureNotSupportedError`` (nothing sent). A consumer (or stream)
        deleted under it ends it with ``ConsumerDeletedError`` naming both,
        after the buffered messages.
        """
        opts = consume_options(max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes,
                               priority=self._priority(group, min_pending, min_ack_pending, priority))
        return MessageStream(self._target(), opts, engine=ContinuousPull)

    def consume(self, handler: Callable[[Msg], Any], *, workers: int = 1,
                error_handler: Callable[[BaseException], Any] | None = None, max_messages: int | None = None,
                max_bytes: int | None = None, expires: float = 30.0, idle_heartbeat: float | None = None,
                threshold_messages: int | None = None, threshold_bytes: int | None = None,
                nak_delay: NakDelay = None, group: str | None = None, min_pending: int | None = None,
                min_ack_pending: int | None = None, priority: int | None = None) -> ConsumeHandle:
        """Consume continuously: ``workers`` threads call ``handler(msg)``; return a :class:`ConsumeHandle`.

        Messages wait in a bounded queue (never more than ``max_messages``
        or ``max_bytes``); a slow handler slows the pulling. ``workers=1``
        keeps stream order.

        A handler that raises gets its message NAKed (unless it acked it),
        redelivered after ``nak_delay``: by default the consumer's ``backoff``
        by delivery count, else 1, 2, 5, 10, then 30 s; a number of seconds
        (0: at once), a sequence by delivery count, or ``f(msg) -> seconds``.
        ``error_handler(exc)`` receives handler exceptions on that worker, and
        warnings and the terminal error (``ConsumerDeletedError`` naming the
        consumer and stream when either is deleted), in order, on the handle's
        reporter thread (even while every worker is busy). Without an ``error_handler``
        a handler's exception is shown as an uncaught thread exception is
        (``threading.excepthook``), once per error and message. ``group``,
        ``min_pending``, ``min_ack_pending``, ``priority``: the priority group
        of the pulls, as :meth:`messages` has them (a 423 reaches
        ``error_handler`` as a ``PinIdMismatchError`` warning). Blocks only to
        start. Raises ValueError/TypeError for bad arguments,
        ``FeatureNotSupportedError`` (nothing sent).
        """
        check_handlers(handler, error_handler, workers)
        nak_schedule(nak_delay)
        opts = consume_options(max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes,
                               priority=self._priority(group, min_pending, min_ack_pending, priority))
        return ConsumeHandle(self._target(), opts, handler, workers, error_handler, engine=ContinuousPull,
                             nak_delay=nak_delay)

    def unpin(self, group: str, *, timeout: Timeout = DEFAULT) -> None:
        """Unpin the client ``group`` (a ``pinned_client`` priority group of this consumer) is pinned to:
        the server pins the next client that pulls. See ``JetStream.unpin_consumer``. Raises ValueError
        for a group the cached info does not list (nothing sent)."""
        cfg = self._info.config
        groups = (cfg.priority_groups if cfg is not None else None) or []
        if isinstance(group, str) and group not in groups:
            raise ValueError(f"group={group!r} is not a priority group of {self._label}: it has {groups or 'none'}")
        self._js.unpin_consumer(self.stream_name, self.name, group, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"
