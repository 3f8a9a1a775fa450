# The user's side of a consumer's delivery: MessageStream (a blocking iterator)
# and ConsumeHandle (a bounded queue feeding worker threads), for any engine that
# keeps the _engine contract (the pull engines today).
#
# Rule 1: the loop thread only ever put_nowait()s into our queues (the engine's
#         sink); credit, returned through engine.taken(), keeps them within
#         max_messages, so a put never fails and a slow handler stops delivery
#         instead of growing memory. Nothing here imports an engine.
# Rule 2: user code (handlers, error_handler) runs on worker threads only.
# Rule 3: shutdown is a flag first, sentinels second, joins with a bound, and a
#         thread never joins itself (a handler may call stop()/drain()).
from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

import attrs

from . import errors
from ._loop import WAKE_INTERVAL
from .message import Msg
from ._engine import Engine, EngineFactory, Terminal, Warning_

if TYPE_CHECKING:
    from .consumer import Consumer
    from .pull import ConsumeOptions

__all__ = ["ConsumeHandle", "ConsumeStats", "MessageStream"]

log = logging.getLogger(__name__)


def _nak_quietly(msg: Msg) -> None:
    try:
        if not msg.acked:
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
    """``consumer.messages()``: a blocking iterator over the ADR-37 continuous pull.

    Iterate with ``for msg in stream`` or call :meth:`next`. Waits wake every
    0.25 s, so Ctrl-C interrupts them (and stops the stream). Terminal errors
    (``ConsumerDeletedError``, ``APIError``, ``ClientClosedError``) are raised
    after every message received before them; warnings (missed heartbeats,
    refused pulls) are logged and kept in ``warnings``. Use from one thread.
    """

    def __init__(self, consumer: "Consumer", opts: "ConsumeOptions", engine: EngineFactory) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._engine = engine(consumer, opts, self._q.put)
        self._conn = consumer._conn
        self._what = f"messages().next() on {consumer._label}"
        self._ended = False
        self._stopping = False
        self._confirmed = False  # the server has read every ack written before the end
        self.error: BaseException | None = None
        self.warnings: list[BaseException] = []
        self._conn.call(self._engine.start(), consumer.js.timeout)

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

    def _repr_html_(self) -> str:
        """HTML for Jupyter: the counters in one row. No I/O."""
        from . import _html

        return _html.consume_stats(self)


class ConsumeHandle:
    """``consumer.consume(handler, workers=N)``: a running consume with its worker threads.

    The loop thread puts pulled messages into a queue bounded by the pull credit;
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
        # Bounded by the pull credit, not by the queue: the loop never puts more
        # than max_messages/max_bytes of messages in flight (the engine
        # counts them until a worker takes one), and _put re-checks it. A
        # SimpleQueue costs the loop a third of what queue.Queue's lock and
        # notify cost per message, and put() can never block.
        self._cap = opts.max_messages if opts.max_bytes is None else None
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._engine = engine(consumer, opts, self._put)
        self._lock = threading.Lock()
        self._stopping = False     # stop(): NAK instead of handling
        self._draining = False     # drain(): finish the buffer, then close
        self._closed = threading.Event()
        self.error: BaseException | None = None
        self._handled = 0
        self._handler_errors = 0
        self._warnings = 0
        self._in_handler = threading.local()
        self._threads = [threading.Thread(target=self._work, name=f"jetstream-sync-worker-{consumer.name}-{i}",
                                          daemon=True) for i in range(workers)]
        self._alive = workers
        self._conn = consumer._conn
        self._conn.call(self._engine.start(), consumer.js.timeout)
        for t in self._threads:
            t.start()

    # -- loop thread -------------------------------------------------------

    def _put(self, item: Any) -> None:
        if self._stopping and type(item) is Msg:  # stop() was called: hand it back at once
            self._engine.taken(item.size)
            _nak_quietly(item)
            return
        if self._cap is not None and type(item) is Msg and self._engine.buffered() > self._cap:
            # Cannot happen while the credit accounting holds; never grow past the bound.
            self._engine.taken(item.size)
            _nak_quietly(item)
            log.error("jetstream_sync: consume buffer over max_messages; handed %s back", item.subject)
            return
        self._q.put(item)

    # -- worker threads ----------------------------------------------------

    def _work(self) -> None:
        get = self._q.get
        engine = self._engine
        try:
            while True:
                try:
                    item = get(timeout=WAKE_INTERVAL)
                except queue.Empty:
                    if self._stopping or (self._draining and engine.halted.is_set() and self._q.empty()):
                        return
                    continue
                if item is None:  # sentinel from stop()/drain()
                    # Draining ends only once the pull has halted: until then a
                    # message still on the wire may land in the queue.
                    if self._stopping or (engine.halted.is_set() and self._q.empty()):
                        return
                    continue
                if type(item) is Msg:
                    engine.taken(item.size)
                    if self._stopping:
                        _nak_quietly(item)
                        continue
                    self._handle(item)
                elif type(item) is Warning_:
                    self._warnings += 1
                    self._report(item.error)
                else:  # Terminal: nothing more will arrive; finish what is buffered
                    if item.error is not None:
                        self.error = item.error
                        self._report(item.error)
                    self._draining = True
                    self._wake_all()
        finally:
            with self._lock:
                self._alive -= 1
                last = self._alive == 0
            if not last:
                # A worker that took another's sentinel while the pull was still halting
                # exits; wake one that may still wait, so it looks again (a chain: each
                # leaving worker wakes the next) instead of relying on its get() timeout.
                self._q.put(None)
            if last:
                self._engine.stop_soon()
                self._release_leftovers()
                # "closed" means the server has every ack/nak/term the workers wrote.
                self._conn.confirm_writes()
                self._closed.set()

    def _release_leftovers(self) -> None:
        """Last worker out: once the pull has halted nothing more arrives; NAK what nobody took."""
        _wait_halted(self._engine)
        _hand_back(self._q, self._engine)

    def _handle(self, msg: Msg) -> None:
        self._in_handler.active = True
        try:
            self._handler(msg)
            self._handled += 1
        except Exception as exc:
            self._handler_errors += 1
            _nak_quietly(msg)
            self._report(exc)
        finally:
            self._in_handler.active = False

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

    def _wake_all(self) -> None:
        for _ in self._threads:
            self._q.put(None)

    # -- public ------------------------------------------------------------

    def stop(self) -> None:
        """Stop now: no new pulls; buffered messages no worker took are NAKed (redelivered at once).

        Blocks until every worker has finished its current message (at most
        the handler's time), so no handler starts after it returns. Called
        from inside a handler or the error handler it returns at once and the
        handle closes when that handler returns. Idempotent.
        """
        self._stopping = True
        self._engine.stop_soon()
        _hand_back(self._q, self._engine)
        self._wake_all()
        me = threading.current_thread()
        if me in self._threads:
            return
        for t in self._threads:
            while t.is_alive():
                t.join(WAKE_INTERVAL)

    def drain(self) -> None:
        """Stop pulling and let the workers handle everything buffered; then the handle closes.

        Returns without waiting: use :meth:`wait`. Idempotent.
        """
        self._draining = True
        self._engine.stop_soon()
        self._wake_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the handle is fully closed (at most ``timeout`` s); return whether it is.

        Fully closed includes the server having read the workers' acks (see :attr:`closed`);
        its consumer applies them from its own queue, so an info read next shows them at once in practice.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed.is_set():
            wait = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
            if wait <= 0:
                return False
            self._closed.wait(wait)
        return True

    @property
    def closed(self) -> bool:
        """True once every worker has exited, no pull is left and the server has read every
        ack, nak and term the workers wrote (one PING/PONG; skipped while disconnected)."""
        return self._closed.is_set()

    @property
    def stats(self) -> ConsumeStats:
        """A snapshot of the counters (no I/O)."""
        return ConsumeStats(received=self._engine.received, handled=self._handled,
                            handler_errors=self._handler_errors, pulls=self._engine.pulls,
                            buffered=self._engine.buffered(), warnings=self._warnings)

    def _repr_html_(self) -> str:
        """HTML for Jupyter: the state (running/draining/stopped/error) and live counters.

        Reads flags and counters only: no I/O, never blocks; any thread. Pass the
        handle to ``IPython.display.display(handle, display_id=True)`` and call the
        returned display's ``update(handle)`` to refresh it.
        """
        from . import _html

        if self.error is not None:
            state = "error"
        elif self._stopping or self._closed.is_set():
            state = "stopped"
        elif self._draining:
            state = "draining"
        else:
            state = "running"
        return _html.consume_handle(state, self.stats, self.error)

    def __enter__(self) -> "ConsumeHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.drain()
        if threading.current_thread() not in self._threads:
            self.wait()
