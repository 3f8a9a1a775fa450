# The ADR-15 subscribe workflow, blocking (docs/push.md): ``js.subscribe()`` and
# ``js.pull_subscribe()`` as nats-py users know them. Finds the stream by subject, binds to an
# existing consumer after every ADR-15 check or creates one (subscribing first), and hands back a
# Subscription over the same push engine and readers as ``PushConsumer``.
#
# Rule 1: the options alone are checked before anything is sent, the queue + heartbeat/flow-control
#         rule first; checks against an existing consumer name the field and both values.
# Rule 2: an ephemeral consumer this call created is deleted by ``unsubscribe()`` and once a
#         ``drain()`` has closed, by this subscription only; a named durable and a queue group's
#         consumer stay until deleted on purpose (``unsubscribe(delete_consumer=True)``), so a restarted
#         subscriber resumes and a leaving member starves no one. A failed delete goes to
#         ``error_handler`` (or the log).
# Rule 3: auto-ack happens after the handler returned, on its worker, and only for a message it
#         neither acked nor failed on; a message not handled is never acked.
from __future__ import annotations

import enum
import logging
import secrets
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import attrs

from . import errors
from ._loop import WAKE_INTERVAL
from ._protocol import DEFAULT, Timeout, check_subject
from ._engine import Target
from .config import AckPolicy, ConsumerConfig, ConsumerInfo, config_from
from .consume import ConsumeHandle, MessageStream, NakDelay, check_handlers, nak_schedule
from .consumer import Consumer
from .message import Msg
from .push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS, PushEngine, push_options
from .ordered_push import OrderedPush
from .push_consumer import PushConsumer

__all__ = ["Subscription", "pull_subscribe", "subscribe"]

log = logging.getLogger(__name__)


def _shown(value: Any) -> str:
    """A config value as the server's JSON has it (``all``, ``true``, ``5.0``), for error texts."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "unset"
    return repr(value) if isinstance(value, str) else str(value)


def _check_queue_rules(queue: str | None, idle_heartbeat: Any, flow_control: Any) -> None:
    if queue and idle_heartbeat:
        raise errors.SubscriptionConfigError(
            f"queue={queue!r} with idle_heartbeat: heartbeats would go to one random member of the group; "
            f"leave idle_heartbeat out for a queue subscription")
    if queue and flow_control:
        raise errors.SubscriptionConfigError(
            f"queue={queue!r} with flow_control: flow-control requests would go to one random member of the "
            f"group; leave flow_control out for a queue subscription")


def _find_stream(js: Any, subject: str, stream: str | None) -> str:
    if stream is not None:
        return stream
    names = list(js.stream_names(subject))
    if not names:
        raise errors.NoStreamForSubjectError(
            f"cannot subscribe to {subject!r}: no stream captures it; create a stream with that subject "
            f"(js.create_stream(name=..., subjects=[{subject!r}])) or check the subject", subject)
    if len(names) > 1:
        raise errors.NoStreamForSubjectError(
            f"cannot subscribe to {subject!r}: {len(names)} streams capture it ({', '.join(names)}); "
            f"give stream= to choose", subject)
    return names[0]


def _lookup(js: Any, stream: str, name: str | None) -> ConsumerInfo | None:
    if not name:
        return None
    try:
        return js.consumer_info(stream, name)
    except errors.ConsumerNotFoundError:
        return None


def _check_config(info: ConsumerInfo, wanted: ConsumerConfig, label: str) -> None:
    """Every field the caller gave must match the existing consumer's; name the first that does not."""
    have = info.config
    assert have is not None
    for field in attrs.fields(ConsumerConfig):
        if field.name in ("extra", "name", "durable_name", "deliver_subject"):
            continue
        mine = getattr(wanted, field.name)
        if mine is None or mine == {} or mine == []:
            continue
        theirs = getattr(have, field.name)
        if mine != theirs:
            raise errors.SubscriptionConfigError(
                f"{label} exists with {field.name}={_shown(theirs)}, the subscription asked for "
                f"{field.name}={_shown(mine)}; change the option or the consumer")


def _check_filter(info: ConsumerInfo, subject: str, label: str) -> None:
    cfg = info.config
    assert cfg is not None
    filters = [cfg.filter_subject] if cfg.filter_subject else list(cfg.filter_subjects or ())
    if filters and filters != [subject]:
        raise errors.SubscriptionConfigError(
            f"{label} has filter_subject={', '.join(map(repr, filters))}, the subscription is to {subject!r}; "
            f"subscribe to the consumer's filter subject")


def _check_push_binding(info: ConsumerInfo, subject: str, queue: str | None, label: str) -> None:
    """ADR-15 "Binding to an existing consumer", push side, in its order."""
    cfg = info.config
    assert cfg is not None
    if not cfg.deliver_subject:
        raise errors.ConsumerTypeError(f"{label} is a pull consumer (no deliver_subject): use pull_subscribe()")
    group = cfg.deliver_group or None
    if not queue:
        if group:
            raise errors.SubscriptionConfigError(
                f"{label} was made for deliver_group={group!r}; subscribe with queue={group!r}")
        if info.push_bound:
            raise errors.DuplicateSubscriptionError(
                f"{label} already has a subscriber and no deliver_group to share it with")
    elif not group:
        raise errors.SubscriptionConfigError(
            f"{label} was made without a deliver_group; queue={queue!r} cannot join it")
    elif group != queue:
        raise errors.SubscriptionConfigError(
            f"{label} has deliver_group={group!r}, the subscription asked for queue={queue!r}")
    _check_filter(info, subject, label)


class Subscription:
    """A push subscription made by ``js.subscribe()``. Thread-safe.

    With a handler, ``workers`` threads run it and :meth:`next_msg` is not available; without one,
    :meth:`next_msg` and iteration give the messages on the calling thread. ``pending`` (buffered now),
    ``delivered`` (JetStream messages received) and ``dropped`` (refused by a full buffer) are counters
    read without I/O. Leaving a ``with`` block normally drains it (with a handler: everything the server
    sent before is handled first) or, without a handler, unsubscribes it (what was not read is NAKed);
    leaving it by an exception (Ctrl-C included) unsubscribes it: handlers in flight finish, what is
    buffered is NAKed, control returns at once.
    """

    def __init__(self, js: Any, subject: str, queue: str | None, consumer: PushConsumer, created: bool,
                 reader: ConsumeHandle | MessageStream, error_handler: Callable[[BaseException], Any] | None) -> None:
        self._js = js
        self.subject = subject
        self.queue = queue
        self._consumer = consumer
        self._created = created
        # Only an ephemeral this subscription created goes with it: a named durable or a queue group's stays.
        cfg = consumer.cached_info.config
        self._owned = created and cfg is not None and not cfg.durable_name
        self._delete = False  # unsubscribe(delete_consumer=True) asked for the consumer to go
        self._reader = reader
        self._engine: PushEngine = reader._engine  # type: ignore[assignment]
        self._error_handler = error_handler
        self._cleanup_lock = threading.Lock()
        self._cleaned = False

    # -- facts -------------------------------------------------------------

    @property
    def stream_name(self) -> str:
        return self._consumer.stream_name

    @property
    def consumer_name(self) -> str:
        """The name of the consumer behind this subscription."""
        return self._consumer.name

    @property
    def pending(self) -> int:
        """Messages received and not yet handed to a worker or returned by :meth:`next_msg`. No I/O."""
        return self._engine.buffered()

    @property
    def delivered(self) -> int:
        """JetStream messages received (statuses never count). No I/O."""
        return self._engine.received

    @property
    def dropped(self) -> int:
        """Messages a full buffer refused, one by one. No I/O."""
        return self._engine.dropped

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended delivery, if any."""
        return self._reader.error

    @property
    def closed(self) -> bool:
        """True once delivery has ended and, with a handler, every worker has exited."""
        if isinstance(self._reader, ConsumeHandle):
            return self._reader.closed
        return self._engine.halted.is_set()

    def consumer_info(self, *, timeout: Timeout = DEFAULT) -> ConsumerInfo:
        """The consumer's info from the server (one request, retried). Raises ``ConsumerNotFoundError``."""
        return self._consumer.info(timeout=timeout)

    # -- reading without a handler -------------------------------------------

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message, waiting at most ``timeout`` seconds (None: until one comes).

        Raises ``jetstream_sync.TimeoutError`` when none comes in time, ``StopIteration`` once
        unsubscribed or drained, ``TypeError`` on a subscription with a handler. Ctrl-C unsubscribes.
        """
        if not isinstance(self._reader, MessageStream):
            raise TypeError("next_msg() is for subscriptions without a handler: the handler gets the messages")
        return self._reader.next(timeout)

    def __iter__(self) -> Iterator[Msg]:
        if not isinstance(self._reader, MessageStream):
            raise TypeError("iteration is for subscriptions without a handler: the handler gets the messages")
        return iter(self._reader)

    # -- ending ------------------------------------------------------------

    def unsubscribe(self, delete_consumer: bool = False) -> None:
        """Stop now: no more deliveries; messages buffered and not handled are NAKed. Then delete the
        consumer if it is an ephemeral this subscription created, or if ``delete_consumer`` is True (a
        named durable or a queue group's consumer otherwise stays, so a later subscriber resumes where
        it stood). One request; a failure goes to ``error_handler`` (or the log).

        Blocks until the workers finished their current message and the delete is answered.
        Idempotent; from inside a handler it returns at once and the rest follows when it returns.
        Raises TypeError for a ``delete_consumer`` that is not a bool.
        """
        if not isinstance(delete_consumer, bool):
            raise TypeError(f"delete_consumer must be True or False, got {delete_consumer!r}")
        if delete_consumer:
            self._delete = True
        self._reader.stop()
        if isinstance(self._reader, ConsumeHandle) and not self._reader.closed:
            return  # called from a handler: the close callback deletes
        self._clean_up()

    def drain(self) -> None:
        """Stop interest, let everything the server sent before reach the handler (or iteration), then
        close and delete an ephemeral consumer this subscription created (a named durable and a queue
        group's consumer stay). Returns at once: use :meth:`wait`."""
        self._reader.drain()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the subscription is closed (at most ``timeout`` s); True when it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            left = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
            if left <= 0:
                return False
            if isinstance(self._reader, ConsumeHandle):
                self._reader.wait(left)
            else:
                self._engine.halted.wait(left)
        if isinstance(self._reader, ConsumeHandle):
            self._clean_up()  # without a handler, iteration ending (or unsubscribe) cleans up
        return True

    def _on_closed(self) -> None:
        """(worker or reading thread) The reader closed: delete a consumer this subscription created."""
        self._clean_up()

    def _clean_up(self) -> None:
        with self._cleanup_lock:
            if self._cleaned or not (self._owned or self._delete):
                self._cleaned = True
                return
            self._cleaned = True
        try:
            self._js.delete_consumer(self.stream_name, self.consumer_name)
        except errors.ConsumerNotFoundError:
            pass
        except errors.JetStreamError as exc:
            if self._error_handler is not None:
                try:
                    self._error_handler(exc)
                except Exception:
                    log.exception("jetstream_sync: error_handler raised")
            else:
                log.warning("jetstream_sync: could not delete consumer %r of stream %r: %s",
                            self.consumer_name, self.stream_name, exc)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None or isinstance(self._reader, MessageStream):
            # Nobody iterates after the block: hand back what is buffered instead of leaving it to ack_wait.
            self.unsubscribe()
            return
        self.drain()
        if self._reader._pool.on_worker() or self._reader._reporter.on_thread():
            return
        self.wait()

    def __repr__(self) -> str:
        return f"<Subscription {self.subject!r} consumer={self.consumer_name!r} queue={self.queue!r}>"


def _delete_quietly(js: Any, stream: str, name: str) -> None:
    try:
        js.delete_consumer(stream, name)
    except errors.JetStreamError as exc:
        log.info("jetstream_sync: could not delete consumer %r of stream %r: %s", name, stream, exc)


def _auto_ack(handler: Callable[[Msg], Any], manual_ack: bool, ack_none: bool) -> Callable[[Msg], Any]:
    if manual_ack or ack_none:
        return handler

    def handle(msg: Msg) -> None:
        handler(msg)  # raising: the reader NAKs it (unless acked) and reports the error
        if not msg.acked:
            msg.ack()

    return handle


def subscribe(js: Any, subject: str, queue: str | None = None,
              handler: Callable[[Msg], Any] | None = None, *, durable: str | None = None, stream: str | None = None,
              config: ConsumerConfig | Mapping[str, Any] | None = None, manual_ack: bool = False,
              ordered_consumer: bool = False, idle_heartbeat: float | None = None, flow_control: bool = False,
              pending_msgs_limit: int = DEFAULT_PENDING_MSGS, pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
              deliver_policy: Any = None, headers_only: bool | None = None, inactive_threshold: float | None = None,
              workers: int = 1, error_handler: Callable[[BaseException], Any] | None = None,
              nak_delay: NakDelay = None) -> Subscription:
    """See ``JetStream.subscribe``."""
    _check_queue_rules(queue, idle_heartbeat, flow_control)
    cfg = config_from(ConsumerConfig, config, {})
    _check_arguments(subject, queue, handler, error_handler, workers, nak_delay, cfg)
    if ordered_consumer:
        given = [n for n, v in (("queue", queue), ("durable", durable), ("manual_ack", manual_ack)) if v]
        if given:
            raise ValueError(f"ordered_consumer=True takes no {', '.join(given)}: an ordered consumer is one "
                             f"reader's ephemeral, AckNone view of the stream")
    wanted = _wanted(cfg, idle_heartbeat=idle_heartbeat, flow_control=True if flow_control else None,
                     deliver_policy=deliver_policy, headers_only=headers_only, inactive_threshold=inactive_threshold)
    push_options(attrs.evolve(wanted, deliver_subject="_"), pending_msgs_limit, pending_bytes_limit)

    stream_name = _find_stream(js, subject, stream)
    if ordered_consumer:
        return _ordered(js, subject, stream_name, wanted, handler, workers, error_handler, pending_msgs_limit,
                        pending_bytes_limit, nak_delay)

    def reader(consumer: PushConsumer, cfg: ConsumerConfig) -> ConsumeHandle | MessageStream:
        return _reader(consumer, cfg, handler, manual_ack, workers, error_handler, pending_msgs_limit,
                       pending_bytes_limit, nak_delay)

    name = durable or wanted.durable_name or wanted.name or queue
    info = _lookup(js, stream_name, name)
    made = None
    if info is None:
        durable_name = name if (durable or wanted.durable_name or queue) else None
        made, info = _create(js, subject, queue, stream_name, wanted, name, durable_name, reader)
    consumer, delivery = made if made is not None else _bind(js, subject, queue, stream_name, info, wanted, reader)
    sub = Subscription(js, subject, queue, consumer, made is not None, delivery, error_handler)
    delivery._on_closed = sub._on_closed
    return sub


def _check_arguments(subject: str, queue: str | None, handler: Any, error_handler: Any, workers: int,
                     nak_delay: NakDelay, cfg: ConsumerConfig) -> None:
    """subscribe()'s arguments alone, before anything is sent (after the queue rules of its options)."""
    _check_queue_rules(queue, cfg.idle_heartbeat, cfg.flow_control)
    check_subject(subject)
    if queue is not None and (not isinstance(queue, str) or not queue or " " in queue):
        raise ValueError(f"queue must be a non-empty name without spaces, got {queue!r}")
    if handler is not None:
        check_handlers(handler, error_handler, workers)
    elif error_handler is not None and not callable(error_handler):
        raise TypeError(f"error_handler must be callable or None, got {error_handler!r}")
    nak_schedule(nak_delay)


def _wanted(cfg: ConsumerConfig, **options: Any) -> ConsumerConfig:
    """``cfg`` with the options subscribe() was given (None: not given); validated."""
    fields = {k: v for k, v in options.items() if v is not None}
    return attrs.evolve(cfg, **fields) if fields else cfg  # validated: bad values raise here


Reader = Callable[[PushConsumer, ConsumerConfig], "ConsumeHandle | MessageStream"]


def _create(js: Any, subject: str, queue: str | None, stream_name: str, wanted: ConsumerConfig, name: str | None,
            durable_name: str | None, reader: Reader,
            ) -> tuple[tuple[PushConsumer, ConsumeHandle | MessageStream] | None, ConsumerInfo | None]:
    """Subscribe, then create the consumer (the server sees interest at once): ((handle, reader), None);
    or (None, info) when another subscriber created it first, to bind to."""
    new = attrs.evolve(
        wanted, durable_name=durable_name, name=name or f"jss_sub_{secrets.token_hex(6)}",
        deliver_subject=wanted.deliver_subject or js._conn.new_inbox(), deliver_group=queue,
        filter_subject=None if wanted.filter_subjects else subject, ack_policy=wanted.ack_policy or AckPolicy.EXPLICIT)
    assert new.name is not None
    handle = PushConsumer(js, ConsumerInfo(stream_name=stream_name, name=new.name, config=new))
    delivery = reader(handle, new)
    try:
        consumer = js.create_push_consumer(stream_name, new)
        if delivery._engine.halted.is_set():  # delivery ended meanwhile (a refused subscribe, a close)
            delivery.stop()
            _delete_quietly(js, stream_name, consumer.name)
            raise delivery.error or errors.JetStreamError(
                f"the subscription to {new.deliver_subject!r} ended before consumer {consumer.name!r} was made")
    except errors.ConsumerExistsError:
        delivery.stop()  # another member won the race: bind to what it made
        return None, js.consumer_info(stream_name, new.name)
    except BaseException:
        delivery.stop()
        raise
    handle._info = consumer.cached_info
    return (handle, delivery), None


def _bind(js: Any, subject: str, queue: str | None, stream_name: str, info: ConsumerInfo | None,
          wanted: ConsumerConfig, reader: Reader) -> tuple[PushConsumer, ConsumeHandle | MessageStream]:
    """ADR-15 "Binding to an existing consumer": every check, then a reader on it."""
    assert info is not None and info.config is not None
    label = f"consumer {info.name!r} of stream {stream_name!r}"
    _check_push_binding(info, subject, queue, label)
    _check_config(info, wanted, label)
    consumer = PushConsumer(js, info)
    return consumer, reader(consumer, info.config)


def _reader(consumer: PushConsumer, cfg: ConsumerConfig, handler: Callable[[Msg], Any] | None, manual_ack: bool,
            workers: int, error_handler: Any, msgs_limit: Any, bytes_limit: Any,
            nak_delay: NakDelay) -> ConsumeHandle | MessageStream:
    opts = push_options(cfg, msgs_limit, bytes_limit)
    target = consumer._target(opts.deliver_subject)
    if handler is None:
        return MessageStream(target, opts, engine=PushEngine)
    work = _auto_ack(handler, manual_ack, cfg.ack_policy is AckPolicy.NONE)
    return ConsumeHandle(target, opts, work, workers, error_handler, engine=PushEngine, nak_delay=nak_delay)


#: The idle heartbeat of an ordered push consumer when none is given (as nats.go).
_ORDERED_HEARTBEAT = 5.0
#: An abandoned ordered push consumer is removed by the server after this long.
_ORDERED_INACTIVE = 300.0


def _ordered(js: Any, subject: str, stream_name: str, wanted: ConsumerConfig,
             handler: Callable[[Msg], Any] | None, workers: int, error_handler: Any, msgs_limit: Any,
             bytes_limit: Any, nak_delay: NakDelay) -> Subscription:
    base = attrs.evolve(wanted, name=None, durable_name=None, ack_policy=AckPolicy.NONE, flow_control=True,
                        idle_heartbeat=wanted.idle_heartbeat or _ORDERED_HEARTBEAT, mem_storage=True,
                        num_replicas=1, max_deliver=1, deliver_group=None,
                        filter_subject=None if wanted.filter_subjects else subject,
                        inactive_threshold=wanted.inactive_threshold or _ORDERED_INACTIVE)
    first = attrs.evolve(base, name="jss_ordered", deliver_subject="_")
    handle = PushConsumer(js, ConsumerInfo(stream_name=stream_name, name=first.name, config=first))
    handle._label = f"the ordered push consumer of stream {stream_name!r}"
    opts = attrs.evolve(push_options(first, msgs_limit, bytes_limit), gap_check=False)  # it resets instead

    def named(name: str) -> None:
        handle.name = name  # the subscription names the consumer of the moment

    def engine(target: Target, opts: Any, sink: Any) -> OrderedPush:
        return OrderedPush(base, target, opts, sink, named)

    target = handle._target(opts.deliver_subject)
    reader: ConsumeHandle | MessageStream
    if handler is None:
        reader = MessageStream(target, opts, engine=engine)
    else:
        reader = ConsumeHandle(target, opts, handler, workers, error_handler, engine=engine, nak_delay=nak_delay)
    return Subscription(js, subject, None, handle, False, reader, error_handler)


def pull_subscribe(js: Any, subject: str, durable: str | None = None, stream: str | None = None,
                   config: ConsumerConfig | Mapping[str, Any] | None = None) -> Consumer:
    """See ``JetStream.pull_subscribe``."""
    check_subject(subject)
    cfg = config_from(ConsumerConfig, config, {})
    if cfg.ack_policy is AckPolicy.NONE:
        raise errors.SubscriptionConfigError("ack_policy=none cannot back a pull subscription: pulled messages "
                                             "must be acked (use an ordered consumer to read without acks)")
    if cfg.deliver_subject:
        raise errors.ConsumerTypeError(f"deliver_subject={cfg.deliver_subject!r} makes a push consumer: "
                                       f"use subscribe()")
    name = durable or cfg.durable_name or cfg.name
    stream_name = _find_stream(js, subject, stream)
    info = _lookup(js, stream_name, name)
    if info is None:
        new = attrs.evolve(cfg, durable_name=name or None, name=name or None,
                           filter_subject=None if cfg.filter_subjects else subject)
        try:
            return js.create_consumer(stream_name, new)
        except errors.ConsumerExistsError:
            info = js.consumer_info(stream_name, name)  # type: ignore[arg-type]
    label = f"consumer {info.name!r} of stream {stream_name!r}"
    assert info.config is not None
    if info.config.deliver_subject:
        raise errors.ConsumerTypeError(f"{label} is a push consumer (deliver_subject "
                                       f"{info.config.deliver_subject!r}): use subscribe()")
    if info.config.ack_policy is AckPolicy.NONE:
        raise errors.SubscriptionConfigError(f"{label} has ack_policy=none, which cannot back a pull subscription")
    _check_filter(info, subject, label)
    _check_config(info, cfg, label)
    return js.consumer(stream_name, info.name)  # type: ignore[arg-type]
