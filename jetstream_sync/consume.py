# The user's side of a consumer's delivery: MessageStream (a blocking iterator)
# and ConsumeHandle (an engine feeding a _workers.WorkerPool), for any engine that
# keeps the _engine contract (the pull engines today).
#
# Rule 1: the loop thread only ever put_nowait()s into our queues (the engine's
#         sink); credit, returned through engine.taken() as each message is
#         taken (the pool's on_take), keeps them within max_messages, so a put
#         never fails and a slow handler stops delivery instead of growing
#         memory. Nothing here imports an engine.
# Rule 2: user code (handlers, error_handler) runs on worker threads only.
# Rule 3: nothing buffered is lost: a message no handler took is NAKed, and the
#         handle closes only once the server has read every ack written.
from __future__ import annotations

import logging
import queue
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

import attrs

from . import errors
from ._loop import WAKE_INTERVAL
from .message import Msg
from ._engine import Engine, EngineFactory, Terminal, Warning_
from ._workers import WorkerPool

if TYPE_CHECKING:
    from .consumer import Consumer
    from .pull import ConsumeOptions

__all__ = ["ConsumeHandle", "ConsumeStats", "MessageStream", "check_handlers"]

log = logging.getLogger(__name__)


def check_handlers(handler: Any, error_handler: Any, workers: Any = 1) -> None:
    """The rules every ``consume()``/``subscribe()`` applies to its callbacks and worker count."""
    if not callable(handler):
        raise TypeError(f"handler must be callable, got {handler!r}")
    if error_handler is not None and not callable(error_handler):
        raise TypeError(f"error_handler must be callable or None, got {error_handler!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")


def _nak_quietly(msg: Msg) -> None:
    try:
        if not msg.acked and msg.reply.startswith("$JS.ACK."):  # a core request's reply is not ours to answer
            msg.nak()
    except errors.JetStreamError:
        pass  # closed client or already acked: the server redelivers after ack_wait


def _hand_back(q: queue.SimpleQueue, engine: Engine) -> bool:
    """Empty ``q`` without blocking, NAKing every message in it; True if the end marker was in it."""
    ended = False
    while True:
        try:
            item = q.get_nowait()
        except queue.Empty:
            return ended
        if type(item) is Msg:
            engine.taken(item.size)
            _nak_quietly(item)
        elif type(item) is Terminal:
            ended = True


def _wait_halted(engine: Engine, limit: float = 2.0) -> None:
    """Wait (at most ``limit`` s, in wakeful slices) until the engine can deliver nothing more."""
    deadline = time.monotonic() + limit
    while not engine.halted.wait(WAKE_INTERVAL):
        if time.monotonic() > deadline:
            return


class MessageStream:
    """``consumer.messages()``: a blocking iterator over a consumer's deliveries (pull or push).

    Iterate with ``for msg in stream`` or call :meth:`next`. Waits wake every
    0.25 s, so Ctrl-C interrupts them (and stops the stream). Terminal errors
    (``ConsumerDeletedError``, ``APIError``, ``ClientClosedError``) are raised
    after every message received before them; warnings (missed heartbeats,
    refused pulls) are logged and kept in ``warnings``. Use from one thread.
    """

    def __init__(self, consumer: "Consumer", opts: "ConsumeOptions", engine: EngineFactory,
                 timeout: float | None = None) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._engine = engine(consumer, opts, self._q.put)
        self._conn = consumer._conn
        self._what = f"messages().next() on {consumer._label}"
        self._ended = False
        self._stopping = False
        self._confirmed = False  # the server has read every ack written before the end
        #: Called once on the reading thread when the stream has ended (the subscribe workflow's clean-up).
        self._on_closed: Callable[[], Any] | None = None
        self.error: BaseException | None = None
        self.warnings: list[BaseException] = []
        self._conn.call(self._engine.start(), consumer.js.timeout if timeout is None else timeout)

    def next(self, timeout: float | None = None) -> Msg:
        """Return the next message, blocking at most ``timeout`` seconds (None: until one comes).

        Raises ``jetstream_sync.TimeoutError`` when none arrives in time,
        ``StopIteration`` once the stream was stopped or drained, and the
        terminal error that ended the pull. Ctrl-C stops the stream.
        """
        if self._ended:
            if self.error is not None:
                raise self.error
            raise StopIteration
        # The handler sits around a call, not around the loop: on CPython 3.11
        # an interrupt delivered at the loop's backward jump (what
        # _thread.interrupt_main() does after a timed-out wait) skips a handler
        # wrapped around the loop itself.
        try:
            return self._next(timeout)
        except (StopIteration, errors.JetStreamError):
            raise
        except BaseException:
            self.stop()
            raise

    def _next(self, timeout: float | None) -> Msg:
        deadline = None if timeout is None else time.monotonic() + timeout
        get = self._q.get
        while True:
            wait = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
            if wait <= 0:
                raise errors.TimeoutError.after(self._what, timeout, "no message")
            try:
                item = get(timeout=wait)
            except queue.Empty:
                if self._ended or (self._stopping and self._engine.halted.is_set()):
                    # stop() from another thread took the end marker, or nothing more will come.
                    self._end()
                    raise StopIteration from None
                continue
            if type(item) is Msg:
                self._engine.taken(item.size)
                if self._stopping:
                    _nak_quietly(item)
                    continue
                return item
            if type(item) is Warning_:
                log.warning("jetstream_sync: %s", item.error)
                self.warnings.append(item.error)
                continue
            # Terminal: everything before it was already returned (FIFO).
            self._end()
            if item.error is not None and not self._stopping:
                self.error = item.error
                raise item.error
            raise StopIteration

    def _end(self) -> None:
        """Iteration is over: it ends once the server has read every ack written before."""
        self._ended = True
        self._confirm()

    def _confirm(self) -> None:
        if not self._confirmed:
            self._confirmed = True
            self._conn.confirm_writes()
            if self._on_closed is not None:
                self._on_closed()

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        return self.next(None)

    def stop(self) -> None:
        """Stop pulling; messages buffered and not yet returned are NAKed for prompt redelivery.

        Iteration then ends. Blocks for one round trip (at most the client's timeout) until the
        server has read every ack, nak and term written so far (the server's consumer applies them
        from its own queue, at once in practice); returns at once when disconnected or closed. Idempotent.
        """
        self._stopping = True
        self._engine.stop_soon()
        # Once halted the engine hands nothing more to the queue (it NAKs late arrivals
        # itself), so one hand-back after that empties it for good.
        _wait_halted(self._engine)
        if _hand_back(self._q, self._engine):
            self._ended = True
        self._confirm()

    def drain(self) -> None:
        """Stop pulling; messages already buffered are still returned, then iteration ends.

        Returns at once. When iteration ends, the server has read every ack written before
        (one round trip, as :meth:`stop`).
        """
        self._engine.stop_soon()

    def __enter__(self) -> "MessageStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@attrs.define
class ConsumeStats:
    """Counters of a ``consume()`` run (a snapshot; no I/O)."""

    received: int = 0
    handled: int = 0
    handler_errors: int = 0
    pulls: int = 0
    buffered: int = 0
    warnings: int = 0
    #: Messages a full push buffer refused (always 0 for pull consumers, which never over-ask).
    dropped: int = 0

    def _repr_html_(self) -> str:
        """HTML for Jupyter: the counters in one row. No I/O."""
        from . import _html

        return _html.consume_stats(self)


class ConsumeHandle:
    """``consumer.consume(handler, workers=N)``: a running consume with its worker threads.

    The loop thread puts delivered messages into a queue bounded by the engine's credit;
    ``workers`` threads named ``jetstream-sync-worker-*`` call ``handler(msg)``.
    A handler that raises gets its message NAKed (unless it acked it) and
    the exception goes to ``error_handler``, which also receives warnings and
    the terminal error, on a worker thread. Thread-safe; handlers and the
    error handler may call ``stop()``/``drain()``.
    """

    def __init__(self, consumer: "Consumer", opts: "ConsumeOptions", handler: Callable[[Msg], Any], workers: int,
                 error_handler: Callable[[BaseException], Any] | None, engine: EngineFactory) -> None:
        self._handler = handler
        self._error_handler = error_handler
        # Bounded by the engine, not by the queue: the loop never puts more than the
        # engine's limit (messages or bytes) in flight (the engine counts them until a
        # worker takes one: on_take), and _put re-checks it. A SimpleQueue costs the
        # loop a third of what queue.Queue's lock and notify cost per message, and
        # put() can never block.
        self._engine = engine(consumer, opts, self._put)
        self._cap = self._engine.limit
        self._pool = WorkerPool(f"jetstream-sync-worker-{consumer.name}", workers, work=self._work,
                                on_take=self._on_take, discard=self._discard, source_done=self._engine.halted,
                                on_exit=self._on_exit)
        self._submit = self._pool.submit
        self.error: BaseException | None = None
        self._handled = 0
        self._handler_errors = 0
        self._warnings = 0
        self._conn = consumer._conn
        #: Called once by the last worker out, before ``closed`` (the subscribe workflow's clean-up).
        self._on_closed: Callable[[], Any] | None = None
        self._conn.call(self._engine.start(), consumer.js.timeout)
        self._pool.start()

    # -- loop thread -------------------------------------------------------

    def _put(self, item: Any) -> None:
        if self._pool.stopping and type(item) is Msg:  # stop() was called: hand it back at once
            self._engine.taken(item.size)
            _nak_quietly(item)
            return
        if self._cap is not None and type(item) is Msg and self._engine.buffered() > self._cap:
            # Cannot happen while the credit accounting holds; never grow past the bound.
            self._engine.taken(item.size)
            _nak_quietly(item)
            log.error("jetstream_sync: consume buffer over its limit; handed %s back", item.subject)
            return
        self._submit(item)

    # -- worker threads (the pool's hooks) ---------------------------------

    def _on_take(self, item: Any) -> None:
        if type(item) is Msg:
            self._engine.taken(item.size)  # the one crossing back down: credit spent

    def _work(self, item: Any) -> None:
        if type(item) is Msg:
            self._handle(item)
        elif type(item) is Warning_:
            self._warnings += 1
            self._report(item.error)
        else:  # Terminal: nothing more will arrive; finish what is buffered
            if item.error is not None:
                self.error = item.error
                self._report(item.error)
            self._pool.drain()

    def _discard(self, item: Any) -> None:
        """After stop(): a message goes back to the server; warnings and the end are still reported."""
        if type(item) is Msg:
            _nak_quietly(item)
        else:
            self._work(item)

    def _on_exit(self) -> None:
        """Last worker out: once the engine has halted nothing more arrives; NAK what nobody took."""
        self._engine.stop_soon()
        _wait_halted(self._engine)
        self._pool.discard_queued()
        # "closed" means the server has every ack/nak/term the workers wrote.
        self._conn.confirm_writes()
        if self._on_closed is not None:
            try:
                self._on_closed()
            except Exception:
                log.exception("jetstream_sync: clean-up after consume raised")

    def _handle(self, msg: Msg) -> None:
        try:
            self._handler(msg)
            self._handled += 1
        except Exception as exc:
            self._handler_errors += 1
            _nak_quietly(msg)
            self._report(exc)

    def _report(self, exc: BaseException) -> None:
        if self._error_handler is None:
            if isinstance(exc, (errors.NoHeartbeatError, errors.APIError)) and self.error is not exc:
                log.warning("jetstream_sync: consume warning: %s", exc)
            else:
                log.error("jetstream_sync: consume error: %r", exc, exc_info=exc)
            return
        try:
            self._error_handler(exc)
        except Exception:
            log.exception("jetstream_sync: error_handler raised")

    # -- public ------------------------------------------------------------

    def stop(self) -> None:
        """Stop now: no new pulls; buffered messages no worker took are NAKed (redelivered at once).

        Blocks until every worker has finished its current message (at most
        the handler's time), so no handler starts after it returns. Called
        from inside a handler or the error handler it returns at once and the
        handle closes when that handler returns. Idempotent.
        """
        self._pool.stopping = True  # first: the loop hands back what still arrives
        self._engine.stop_soon()
        self._pool.stop()

    def drain(self) -> None:
        """Stop pulling and let the workers handle everything buffered; then the handle closes.

        Returns without waiting: use :meth:`wait`. Idempotent.
        """
        self._engine.stop_soon()
        self._pool.drain()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the handle is fully closed (at most ``timeout`` s); return whether it is.

        Fully closed includes the server having read the workers' acks (see :attr:`closed`);
        its consumer applies them from its own queue, so an info read next shows them at once in practice.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        closed = self._pool.closed
        while not closed.is_set():
            wait = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
            if wait <= 0:
                return False
            closed.wait(wait)
        return True

    @property
    def closed(self) -> bool:
        """True once every worker has exited, no pull is left and the server has read every
        ack, nak and term the workers wrote (one PING/PONG; skipped while disconnected)."""
        return self._pool.closed.is_set()

    @property
    def stats(self) -> ConsumeStats:
        """A snapshot of the counters (no I/O)."""
        return ConsumeStats(received=self._engine.received, handled=self._handled,
                            handler_errors=self._handler_errors, pulls=self._engine.pulls,
                            buffered=self._engine.buffered(), warnings=self._warnings,
                            dropped=self._engine.dropped)

    def _repr_html_(self) -> str:
        """HTML for Jupyter: the state (running/draining/stopped/error) and live counters.

        Reads flags and counters only: no I/O, never blocks; any thread. Pass the
        handle to ``IPython.display.display(handle, display_id=True)`` and call the
        returned display's ``update(handle)`` to refresh it.
        """
        from . import _html

        if self.error is not None:
            state = "error"
        elif self._pool.stopping or self._pool.closed.is_set():
            state = "stopped"
        elif self._pool.draining:
            state = "draining"
        else:
            state = "running"
        return _html.consume_handle(state, self.stats, self.error)

    def __enter__(self) -> "ConsumeHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.drain()
        if not self._pool.on_worker():
            self.wait()
