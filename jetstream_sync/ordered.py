# The ordered consumer (ADR-17 semantics on the ADR-37 API): an ephemeral,
# in-memory, R1, AckNone consumer that is recreated from the last stream
# sequence seen whenever anything goes wrong, so the caller sees every stream
# sequence exactly once, in order.
#
# Rule 1: the cursor (last stream sequence handed over) is the only state
#         that survives a reset; everything else is rebuilt.
# Rule 2: a reset is triggered by a gap in the consumer sequence, a missed
#         heartbeat, the consumer's deletion, or a reconnect; never by the user.
# Rule 3: one read at a time (fetch, next, messages or consume): a second one
#         is a clear error, since two readers would split the ordered stream.
# Rule 4: by composition: messages()/consume() run an OrderedPull that holds a
#         pull.ContinuousPull and an ordered_core.OrderedCore (its ResetHook, shared with
#         the ordered push engine); creates and deletes go through the context's JsApi
#         and its retry policy, like every API request.
from __future__ import annotations

import itertools
import logging
import secrets
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import attrs

from . import errors
from ._connection import Connection
from ._handle import Context, target_of
from .config import AckPolicy, ConsumerConfig, config_from, validate_stream_name
from .consume import ConsumeHandle, MessageStream, check_handlers
from ._protocol import ACK_CONSUMER_SEQ, ACK_STREAM_SEQ
from .message import Msg
from ._engine import Sink, Target, Terminal
from .ordered_core import HEDGE, OrderedCore, start_after
from .fetch import MessageBatch
from .pull import ContinuousPull
from .pull_options import consume_options

__all__ = ["OrderedConsumer", "OrderedPull"]

log = logging.getLogger(__name__)

#: Fields a user may set on an ordered consumer; the rest are fixed by its nature.
_ALLOWED = frozenset({"filter_subject", "filter_subjects", "deliver_policy", "opt_start_seq", "opt_start_time",
                      "replay_policy", "headers_only", "inactive_threshold", "metadata", "description"})
#: An abandoned ordered consumer is removed by the server after this long.
_DEFAULT_INACTIVE = 300.0
#: How long a new read waits for a stopped one to finish halting.
_RELEASE_WAIT = 5.0


def _sequences(msg: Msg) -> tuple[int, int] | None:
    """(stream seq, consumer seq) of a delivered message, or None if it has no ack subject."""
    try:
        fields = msg._ack_fields()  # parsed once per message, kept for metadata and the Spark reader
    except ValueError:
        return None
    return fields[ACK_STREAM_SEQ], fields[ACK_CONSUMER_SEQ]


class OrderedConsumer:
    """An ordered view of a stream: every stream sequence once, in order, no acks needed.

    Get one with ``js.ordered_consumer(stream, **fields)``. Supports
    ``fetch``, ``fetch_no_wait``, ``next``, ``messages`` and ``consume`` like
    :class:`Consumer`, one at a time. Thread-safe; calls block as they do there.
    """

    def __init__(self, js: Context, stream: str, config: ConsumerConfig | Mapping[str, Any] | None,
                 fields: Mapping[str, Any]) -> None:
        validate_stream_name(stream, "stream")
        cfg = config_from(ConsumerConfig, config, fields)
        given = {f.name for f in attrs.fields(ConsumerConfig) if getattr(cfg, f.name) not in (None, {}, [])}
        bad = given - _ALLOWED
        if bad:
            raise ValueError(f"an ordered consumer does not take {', '.join(sorted(bad))}: it is always an "
                             f"ephemeral, in-memory, AckNone consumer (allowed: {', '.join(sorted(_ALLOWED))})")
        self._js = js
        self.stream_name = stream
        #: How errors name it (its server-side consumer changes name with every reset).
        self._label = f"the ordered consumer of stream {stream!r}"
        self._base = cfg
        self.name = f"jss_ordered_{secrets.token_hex(4)}"
        self._serial = itertools.count(1)
        self._lock = threading.Condition()
        self._busy: str | None = None
        self._releasing = False  # the current read was told to stop and will leave shortly
        self.cursor = 0          # last stream sequence handed over
        self._current: Any = None  # the Consumer handle fetch() and next() read (None: none yet)
        self._needs_reset = True
        self._dseq = 0           # last consumer sequence seen on the current incarnation (fetch/next)

    @property
    def js(self) -> Context:
        return self._js

    @property
    def client(self) -> Any:
        return self._js.client

    @property
    def _conn(self) -> Connection:
        return self._js._conn

    # -- configuration of the next incarnation ----------------------------

    def _next_config(self, after: int | None = None) -> ConsumerConfig:
        """The config of the next server-side consumer: starts right after ``after`` (default: the cursor)."""
        after = self.cursor if after is None else after
        cfg = attrs.evolve(
            self._base, name=f"{self.name}_{next(self._serial)}", ack_policy=AckPolicy.NONE, mem_storage=True,
            num_replicas=1, max_deliver=1,
            inactive_threshold=self._base.inactive_threshold or _DEFAULT_INACTIVE)
        return start_after(cfg, after)

    def _target(self) -> Target:
        """What the engine of messages()/consume() starts from (it moves with every reset)."""
        return target_of(self._js, self.stream_name, self.name, self._label)

    def _pull_engine(self, target: Target, opts: Any, sink: Sink) -> "OrderedPull":
        return OrderedPull(self, target, opts, sink)

    # -- one reader at a time ---------------------------------------------

    def _enter(self, what: str) -> None:
        with self._lock:
            if self._busy is not None and self._releasing:
                # stop() was called on the previous read; its pull halts on the loop thread in a moment.
                self._lock.wait_for(lambda: self._busy is None, timeout=_RELEASE_WAIT)
            if self._busy is not None:
                raise RuntimeError(f"this ordered consumer is already being read by {self._busy}(); "
                                   f"an ordered consumer supports one read at a time (stop it first)")
            self._busy = what

    def _leave(self) -> None:
        with self._lock:
            self._busy = None
            self._releasing = False
            self._lock.notify_all()

    def _release_soon(self) -> None:
        """The current read was asked to stop (any thread): a new read may wait for it to leave."""
        with self._lock:
            if self._busy is not None:
                self._releasing = True

    def _handed_over(self, msg: Msg) -> Msg:
        """Advance the cursor past a message given to the user (user thread)."""
        seqs = _sequences(msg)
        if seqs is not None:
            self.cursor = seqs[0]
        return msg

    def _consumer(self) -> Any:
        """The current server-side consumer, recreated after the cursor when needed (blocks)."""
        if self._current is None or self._needs_reset:
            old = self._current
            self._current = self._js.create_consumer(self.stream_name, self._next_config())
            self._needs_reset = False
            self._dseq = 0
            if old is not None:
                self._delete_soon(old.name)
        return self._current

    def _mark_reset(self) -> None:
        self._needs_reset = True

    def _delete_soon(self, name: str) -> None:
        """Ask the server to delete an incarnation without waiting (any thread; never blocks); the
        inactive threshold is the backstop."""
        self._js._jsapi.request_soon(self._js._api.consumer_delete(self.stream_name, name), None,
                                     f"deleting ordered consumer {name!r}")

    # -- fetch / next ------------------------------------------------------

    def fetch(self, max_messages: int | None = None, *, max_bytes: int | None = None, expires: float = 30.0,
              idle_heartbeat: float | None = None, timeout: float | None = None) -> "OrderedBatch":
        """Like ``Consumer.fetch``; a gap or a lost consumer ends the batch early and is healed on the next call."""
        self._enter("fetch")
        try:
            batch = self._consumer().fetch(max_messages, max_bytes=max_bytes, expires=expires,
                                           idle_heartbeat=idle_heartbeat, timeout=timeout)
        except BaseException:
            self._leave()
            raise
        deadline = time.monotonic() + expires

        def retry() -> MessageBatch | None:
            # The consumer was gone before anything came: recreate it and pull for the time left.
            left = deadline - time.monotonic()
            if left < 0.01:
                return None
            hb = idle_heartbeat if idle_heartbeat is not None and idle_heartbeat <= left / 2 else None
            return self._consumer().fetch(max_messages, max_bytes=max_bytes, expires=left, idle_heartbeat=hb,
                                          timeout=timeout)

        return OrderedBatch(self, batch, retry)

    def fetch_no_wait(self, max_messages: int | None = None, *, max_bytes: int | None = None) -> "OrderedBatch":
        """Like ``Consumer.fetch_no_wait``."""
        self._enter("fetch_no_wait")
        try:
            batch = self._consumer().fetch_no_wait(max_messages, max_bytes=max_bytes)
        except BaseException:
            self._leave()
            raise
        return OrderedBatch(self, batch, lambda: self._consumer().fetch_no_wait(max_messages, max_bytes=max_bytes))

    def next(self, timeout: float = 30.0) -> Msg:
        """The next message in stream order, waiting up to ``timeout``. Raises ``jss.TimeoutError``."""
        if timeout is None:
            raise ValueError("timeout must be > 0 seconds for next()")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError.after(f"next() on {self._label}", timeout, "no message")
            with self.fetch(1, expires=max(left, 0.001)) as batch:
                for msg in batch:
                    return msg
            if not self._needs_reset:
                raise errors.TimeoutError.after(f"next() on {self._label}", timeout, "no message")

    # -- messages / consume ----------------------------------------------

    def messages(self, max_messages: int | None = None, max_bytes: int | None = None, expires: float = 30.0,
                 idle_heartbeat: float | None = None, threshold_messages: int | None = None,
                 threshold_bytes: int | None = None) -> MessageStream:
        """Like ``Consumer.messages``, in stream order, healing gaps and lost consumers by itself. The idle
        heartbeat is 2 s by default (at most ``expires / 2``): a consumer lost with its server is
        re-created after 4 s of silence."""
        opts = consume_options(max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes,
                               ordered=True)
        self._enter("messages")
        try:
            return _OrderedMessageStream(self._target(), opts, engine=self._pull_engine)
        except BaseException:
            self._leave()
            raise

    def consume(self, handler: Callable[[Msg], Any], *, error_handler: Callable[[BaseException], Any] | None = None,
                max_messages: int | None = None, max_bytes: int | None = None, expires: float = 30.0,
                idle_heartbeat: float | None = None, threshold_messages: int | None = None,
                threshold_bytes: int | None = None) -> ConsumeHandle:
        """Like ``Consumer.consume`` with one worker (order is the point), healing gaps by itself; the idle
        heartbeat as in :meth:`messages`."""
        check_handlers(handler, error_handler)
        opts = consume_options(max_messages, max_bytes, expires, idle_heartbeat, threshold_messages, threshold_bytes,
                               ordered=True)
        self._enter("consume")

        def handle(msg: Msg) -> Any:
            return handler(self._handed_over(msg))

        try:
            return ConsumeHandle(self._target(), opts, handle, 1, error_handler, engine=self._pull_engine)
        except BaseException:
            self._leave()
            raise

    def close(self, *, wait: bool = False) -> None:
        """Delete the server-side consumer that fetch()/next() use. Idempotent.

        Without ``wait`` the delete is sent and not waited for (never blocks). With ``wait=True``
        it blocks until the server confirms, at most the context's timeout; a consumer already
        gone is fine, and a failure (timeout, closed client) is logged, not raised: the server
        still removes an idle consumer after its inactive threshold. A later read creates a new
        one after the cursor; messages()/consume() delete theirs when they stop.
        """
        cur = self._current
        self._current = None
        self._needs_reset = True
        if cur is None:
            return
        if not wait:
            self._delete_soon(cur.name)
            return
        try:
            self._js.delete_consumer(self.stream_name, cur.name)
        except errors.ConsumerNotFoundError:
            pass
        except errors.JetStreamError as exc:
            log.info("jetstream_sync: could not delete ordered consumer %r on stream %r (the server removes it "
                     "after its inactive threshold): %s", cur.name, self.stream_name, exc)

    def __enter__(self) -> "OrderedConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream_name!r} cursor={self.cursor}>"


class _OrderedMessageStream(MessageStream):
    """``OrderedConsumer.messages()``: a MessageStream whose cursor follows what it hands over."""

    def next(self, timeout: float | None = None) -> Msg:
        return self._engine._oc._handed_over(super().next(timeout))


class OrderedBatch:
    """A fetch from an ordered consumer: yields messages while the sequence is unbroken."""

    def __init__(self, oc: OrderedConsumer, batch: MessageBatch,
                 retry: Callable[[], MessageBatch | None] | None = None) -> None:
        self._oc = oc
        self._batch = batch
        self._retry = retry
        self._yielded = 0
        self._done = False
        self.error: BaseException | None = None

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        oc = self._oc
        while True:
            try:
                msg = next(self._batch)
                break
            except StopIteration:
                self._finish()
                raise
            except (errors.ConsumerDeletedError, errors.NoRespondersError):
                # The consumer is gone (503: nobody serves its pulls; or deleted while we waited).
                oc._mark_reset()
                retry, self._retry = self._retry, None
                if retry is None or self._yielded:
                    self._finish()  # the next call recreates it
                    raise StopIteration from None
                try:  # nothing came yet: recreate it and pull again within this call
                    batch = retry()
                except BaseException as exc:
                    self.error = exc
                    self._finish()
                    raise
                if batch is None:
                    self._finish()
                    raise StopIteration from None
                self._batch = batch
            except errors.NoHeartbeatError:
                oc._mark_reset()
                self._finish()
                raise StopIteration from None
            except BaseException as exc:
                self.error = exc
                self._finish()
                raise
        seqs = _sequences(msg)
        if seqs is None or seqs[1] != oc._dseq + 1:
            oc._mark_reset()
            self._batch.stop()
            self._finish()
            raise StopIteration
        oc.cursor, oc._dseq = seqs[0], seqs[1]
        self._yielded += 1
        return msg

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._oc._leave()

    def stop(self) -> None:
        """Abandon the batch. Messages the server sent and we did not yield are gone from this
        incarnation (AckNone), so the next read recreates the consumer after the cursor."""
        if not self._done and self._batch.unread:
            self._oc._mark_reset()
        self._batch.stop()
        self._finish()

    def __enter__(self) -> "OrderedBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class OrderedPull:
    """The engine of an ordered ``messages()``/``consume()`` (loop thread): a ``ContinuousPull`` and an
    :class:`~jetstream_sync.ordered_core.OrderedCore` it holds, the core moving the pull to a new
    server-side consumer after the cursor whenever the old one is out of step or lost. The credit
    counts live in the pull and survive every reset, so what readers take is counted whichever
    consumer delivered it."""

    def __init__(self, oc: OrderedConsumer, target: Target, opts: Any, sink: Sink) -> None:
        self._oc = oc
        self._sink = sink
        # Hedged creates: only the consumer pulled from delivers, so a create answered late costs nothing.
        self._core = OrderedCore(target, sink, cursor=oc.cursor, hedge=HEDGE)
        self._pull = ContinuousPull(target, opts, self._deliver, hook=self._core)
        self._core.bind(self._pull, self._move)
        self.halted = self._pull.halted
        self.taken = self._pull.taken
        self.buffered = self._pull.buffered
        self.limit = self._pull.limit
        self.dropped = 0

    @property
    def pulls(self) -> int:
        return self._pull.pulls

    @property
    def received(self) -> int:
        return self._pull.received

    async def start(self) -> None:
        oc = self._oc
        if oc._current is not None:  # a fetch left its incarnation behind: this pull makes its own
            oc._delete_soon(oc._current.name)
            oc._current = None
        oc._mark_reset()
        self._pull.attach()
        try:
            await self._core.reset()
        except BaseException:  # cancelled by the caller's timeout, or worse: leave nothing running
            self._pull.halt(None)  # no reader will come: nothing may pull or recreate on a reconnect
            raise

    def stop_soon(self) -> None:
        self._oc._release_soon()
        self._pull.stop_soon()

    def _deliver(self, item: Any) -> None:
        """The pull's sink: the end of the pull is the end of this ordered read."""
        if type(item) is Terminal:
            self._core.ended()
            self._oc._leave()
        self._sink(item)

    async def _move(self) -> None:
        """A reset's own step: create the next consumer, then pull from it."""
        name = await self._core.create(self._oc._next_config)
        if name is not None:
            await self._pull.retarget(name)
