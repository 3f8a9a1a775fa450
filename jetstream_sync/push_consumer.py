# The PushConsumer handle (docs/push.md; as nats.go's PushConsumer): a consumer with a deliver
# subject, read with consume() or messages(). It has no fetch/next: the server pushes.
#
# Rule 1: argument rules are applied here, before anything is sent; delivery itself is push.py's
#         engine, read by the same readers (consume.py) as a pull consumer.
# Rule 2: a handle holds no server resources; ``cached_info`` is what the last round trip said.
from __future__ import annotations

from typing import Any, Callable

from ._handle import ConsumerHandle
from .consume import ConsumeHandle, MessageStream, NakDelay, check_handlers, nak_schedule
from .message import Msg
from .push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS, PushEngine, PushOptions, push_options

__all__ = ["PushConsumer"]


class PushConsumer(ConsumerHandle):
    """A handle on one push consumer (it has a ``deliver_subject``). Thread-safe.

    Get one with ``js.create_push_consumer(...)`` or ``js.push_consumer(stream, name)``. Read it with
    :meth:`consume` (worker threads) or :meth:`messages` (a blocking iterator); a ``deliver_group`` in
    its config makes the subscription a queue subscription in that group, so several readers (threads
    or processes) share the messages, each delivered to one of them.
    """

    _kind = "push consumer"

    @property
    def deliver_subject(self) -> str:
        """Where the server delivers this consumer's messages (from the cached info). No I/O."""
        return self._info.config.deliver_subject  # type: ignore[union-attr,return-value]

    def consume(self, handler: Callable[[Msg], Any], *, workers: int = 1,
                error_handler: Callable[[BaseException], Any] | None = None,
                pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
                pending_bytes_limit: int = DEFAULT_PENDING_BYTES, nak_delay: NakDelay = None) -> ConsumeHandle:
        """Subscribe to the deliver subject; ``workers`` threads call ``handler(msg)``. Return the handle.

        Blocks only to subscribe (at most the context's timeout). Messages wait in a buffer of at most
        ``pending_msgs_limit`` messages and ``pending_bytes_limit`` bytes: with flow control on the
        consumer a slow handler pauses the server; without it a full buffer drops messages, counts them
        and reports ``SlowConsumerError`` (explicit-ack messages are redelivered after ``ack_wait``).
        A handler that raises gets its message NAKed (unless acked), redelivered after ``nak_delay``
        (as ``Consumer.consume``); ``error_handler(exc)`` receives its exception on that worker, and
        warnings (missed heartbeats, gaps, slow consumer) and the terminal error in order on the
        handle's reporter thread, promptly even while every worker is busy; without one the handler's
        exception is shown once per error and message on stderr (``threading.excepthook``).
        ``workers=1`` keeps stream order. Raises ValueError/TypeError for bad arguments (nothing sent).
        """
        check_handlers(handler, error_handler, workers)
        nak_schedule(nak_delay)
        opts = self._options(pending_msgs_limit, pending_bytes_limit)
        return ConsumeHandle(self._target(opts.deliver_subject), opts, handler, workers, error_handler,
                             engine=PushEngine, nak_delay=nak_delay)

    def messages(self, *, pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
                 pending_bytes_limit: int = DEFAULT_PENDING_BYTES) -> MessageStream:
        """Subscribe to the deliver subject and return a blocking :class:`MessageStream` over it.

        Blocks only to subscribe. The buffer rules are those of :meth:`consume`; flow control is
        answered as your thread takes the messages before it. Raises ValueError/TypeError (nothing sent).
        """
        opts = self._options(pending_msgs_limit, pending_bytes_limit)
        return MessageStream(self._target(opts.deliver_subject), opts, engine=PushEngine)

    def _options(self, pending_msgs_limit: Any, pending_bytes_limit: Any) -> PushOptions:
        cfg = self._info.config
        assert cfg is not None  # the server always reports a consumer's config
        return push_options(cfg, pending_msgs_limit, pending_bytes_limit)

    def __repr__(self) -> str:
        return f"<PushConsumer {self.stream_name!r}/{self.name!r}>"
