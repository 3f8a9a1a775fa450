# The user's side of a consumer's delivery: MessageStream (a blocking iterator)
# and ConsumeHandle (an engine feeding a _workers.WorkerPool), for any engine that
# keeps the _engine contract (pull, push, both ordered kinds, core subscriptions),
# built from the _engine.Target a handle made.
#
# Rule 1: the loop thread only ever appends to our queues (the engine's sink; a
#         consume hands each run of deliveries to the workers as one batch, one
#         wake-up); credit, returned through engine.taken() as each message is
#         taken (the pool's on_take), keeps them within max_messages, so an
#         append never fails and a slow handler stops delivery instead of
#         growing memory. Nothing here imports an engine.
# Rule 2: user code runs on threads we own, never on the loop: handlers on the workers;
#         error_handler on the worker for a handler's exception and on the handle's one
#         reporter thread for warnings and the terminal error (out of band: a worker stuck in a
#         handler holds no warning back, and warnings keep their order).
# Rule 3: nothing buffered is lost: a message no handler took is NAKed at once, and the
#         handle closes only once the server has read every ack written. A message whose
#         handler raised is NAKed with a delay that grows with its delivery count (nak_delay),
#         so one failing message never becomes a hot loop; without an error_handler its
#         exception is shown as an uncaught thread exception is, once per error and message.
from __future__ import annotations

import logging
import numbers
import queue
import sys
import threading
import time
from typing import Any, Callable, Iterator, Sequence, Union

import attrs

from . import errors
from ._loop import WAKE_INTERVAL
from ._protocol import ACK_DELIVERED, ACK_STREAM_SEQ
from .message import Msg
from ._engine import Engine, EngineFactory, Mark, Target, Terminal, Warning_
from ._workers import WorkerPool

__all__ = ["ConsumeHandle", "ConsumeStats", "DEFAULT_NAK_DELAYS", "MessageStream", "NakDelay", "check_handlers",
           "nak_schedule"]

log = logging.getLogger(__name__)

#: Seconds before a message whose handler raised is redelivered, by its delivery count (1st failure
#: 1 s, 2nd 2 s, then 5, 10 and 30 s for every later one), when its consumer has no ``backoff``.
DEFAULT_NAK_DELAYS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0)

#: What ``nak_delay=`` takes: None (the consumer's ``backoff``, else :data:`DEFAULT_NAK_DELAYS`), seconds
#: (0: at once), a sequence of seconds by delivery count (the last repeats), or ``f(msg) -> seconds``.
NakDelay = Union[float, Sequence[float], Callable[[Msg], float], None]


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0 or value == float("inf"):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def nak_schedule(nak_delay: Any, backoff: Sequence[float] | None = None) -> Callable[[Msg], float]:
    """``nak_delay=`` as a function of the failed message (pure; raises before anything is sent).

    None: the consumer's ``backoff`` when it has one, else :data:`DEFAULT_NAK_DELAYS`; a number:
    that many seconds every time (0: at once); a sequence: its n-th entry for the n-th delivery, the
    last one for every later delivery; a callable: called with the message on the worker thread.
    Raises TypeError/ValueError naming ``nak_delay``.
    """
    if callable(nak_delay):
        return nak_delay
    if nak_delay is None:
        delays: Sequence[float] = tuple(backoff) if backoff else DEFAULT_NAK_DELAYS
    elif isinstance(nak_delay, (str, bytes)) or not isinstance(nak_delay, (numbers.Real, Sequence)):
        raise TypeError(f"nak_delay must be seconds, a sequence of seconds by delivery count, a callable "
                        f"f(msg) -> seconds, or None, got {nak_delay!r}")
    elif isinstance(nak_delay, numbers.Real):
        delays = (_seconds(nak_delay, "nak_delay"),)
    else:
        if not nak_delay:
            raise ValueError("nak_delay must not be an empty sequence (give 0 to redeliver at once)")
        delays = tuple(_seconds(d, f"nak_delay[{i}]") for i, d in enumerate(nak_delay))
    last = len(delays) - 1

    def delay(msg: Msg) -> float:
        try:
            n = msg._ack_fields()[ACK_DELIVERED]
        except ValueError:
            n = 1
        return delays[min(max(n, 1) - 1, last)]

    return delay


def check_handlers(handler: Any, error_handler: Any, workers: Any = 1) -> None:
    """The rules every ``consume()``/``subscribe()`` applies to its callbacks and worker count."""
    if not callable(handler):
        raise TypeError(f"handler must be callable, got {handler!r}")
    if error_handler is not None and not callable(error_handler):
        raise TypeError(f"error_handler must be callable or None, got {error_handler!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")


def _nak_quietly(msg: Msg, delay: float = 0.0) -> None:
    try:
        if not msg.acked and msg.reply.startswith("$JS.ACK."):  # a core request's reply is not ours to answer
            msg.nak(delay or None)
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


def _start(engine: Any, conn: Any, timeout: float | None) -> None:
    """Start ``engine`` on the loop, waiting at most ``timeout``. A start that failed, timed out or was
    interrupted may still be running on the loop, or have just finished there (creating a consumer,
    subscribing its inbox) as the wait gave up: nobody will ever read it, so it is stopped."""
    try:
        conn.call(engine.start(), timeout)
    except BaseException:
        try:
            engine.stop_soon()
        except errors.ClientClosedError:
            pass  # the loop is gone, and everything on it
        raise


class MessageStream:
    """``consumer.messages()``: a blocking iterator over a consumer's deliveries (pull or push).

    Iterate with ``for msg in stream`` or call :meth:`next`. Waits wake every
    0.25 s, so Ctrl-C interrupts them (and stops the stream). Terminal errors
    (``ConsumerDeletedError``, ``APIError``, ``ClientClosedError``) are raised
    after every message received before them; warnings (missed heartbeats,
    refused pulls) are logged and kept in ``warnings``. Use from one thread.
    """

    def __init__(self, target: Target, opts: Any, engine: EngineFactory) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._engine = engine(target, opts, self._q.put)
        self._conn = target.conn
        self._what = f"messages().next() on {target.label}"
        self._ended = False
        self._stopping = False
        self._confirmed = False  # the server has read every ack written before the end
        #: Called once on the reading thread when the stream has ended (the subscribe workflow's clean-up).
        self._on_closed: Callable[[], Any] | None = None
        self.error: BaseException | None = None
        self.warnings: list[BaseException] = []
        _start(self._engine, self._conn, target.timeout)

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
            if isinstance(item, Mark):
                return item  # type: ignore[return-value]  # only the engines' owners that mark see one
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


class _Reporter:
    """One thread (``<name>``) that hands warnings and the terminal error to ``report`` in the order
    they arrived, out of band: workers busy in handlers hold nothing back. ``put`` never blocks."""

    _END = object()

    def __init__(self, name: str, report: Callable[[BaseException], None]) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        #: (any thread, the loop's sink included) Queue one error for ``report``. Never blocks.
        self.put: Callable[[BaseException], None] = self._q.put
        self._report = report
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        get = self._q.get
        while True:
            item = get()
            if item is self._END:
                return
            self._report(item)

    def close(self, loop_thread: Any) -> None:
        """End after everything queued so far, the loop's callbacks running now included (the end
        marker is queued through the loop); wait for that unless called on the reporter itself."""
        try:
            loop_thread.call_soon(self._q.put, self._END)
        except errors.ClientClosedError:
            self._q.put(self._END)  # no loop: nothing more can be sunk
        if self.on_thread():
            return
        while self._thread.is_alive():
            self._thread.join(WAKE_INTERVAL)


def _logging_configured(logger: logging.Logger) -> bool:
    """True when a record of ``logger`` reaches a handler the application set up (not our NullHandler)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(type(h) is not logging.NullHandler for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent  # type: ignore[assignment]
    return False


def _where(msg: Msg) -> str:
    """Which message this is, for a note on a handler's exception (no I/O)."""
    try:
        md = msg.metadata
    except ValueError:
        return f"the message on {msg.subject!r}"
    return (f"message {msg.subject!r} (stream {md.stream!r} sequence {md.sequence.stream}, "
            f"delivery {md.num_delivered}) of consumer {md.consumer!r}")


def _identity(msg: Msg, exc: BaseException) -> tuple:
    """A handler failure, the same one on every redelivery: the message and the error's type and text."""
    try:
        fields = msg._ack_fields()
        where: Any = (fields[0], fields[1], fields[ACK_STREAM_SEQ])
    except ValueError:
        where = msg.subject
    return (where, type(exc).__qualname__, str(exc))


#: Distinct handler failures remembered per handle as already shown (then the memory starts again).
_SHOWN_LIMIT = 10_000
#: Messages handed to the workers at once at most (a long run of deliveries is handed over in parts,
#: so workers start on the first ones while the loop still reads).
_BATCH = 256


class ConsumeHandle:
    """``consumer.consume(handler, workers=N)``: a running consume with its worker threads.

    The loop thread puts delivered messages into a queue bounded by the engine's credit;
    ``workers`` threads named ``jetstream-sync-worker-*`` call ``handler(msg)``.
    A handler that raises gets its message NAKed (unless it acked it) with a delay that grows with
    the message's delivery count (``nak_delay``), and the exception goes to ``error_handler`` on
    that worker; without an ``error_handler`` it is shown as an uncaught thread exception is
    (``threading.excepthook``: its traceback on stderr), once per error and message. Warnings and
    the terminal error reach ``error_handler`` (or the log) in order, on the handle's reporter
    thread ``jetstream-sync-reporter-*``, even while every worker is busy. Thread-safe; handlers and
    the error handler may call ``stop()``/``drain()``.
    """

    def __init__(self, target: Target, opts: Any, handler: Callable[[Msg], Any], workers: int,
                 error_handler: Callable[[BaseException], Any] | None, engine: EngineFactory,
                 nak_delay: NakDelay = None) -> None:
        self._nak_delay = nak_schedule(nak_delay, target.backoff)
        self._handler = handler
        self._error_handler = error_handler
        self._shown: set[tuple] = set()
        # Messages handed back while the engine still delivers wait here for their NAK: NAKed while the
        # server can still deliver to us, a message would come straight back to a reader that is stopping.
        self._parked: list[Msg] = []
        self._parked_lock = threading.Lock()
        # Bounded by the engine, not by the queue: the loop never puts more than the
        # engine's limit (messages or bytes) in flight (the engine counts them until a
        # worker takes one: on_take), and _put re-checks it. A SimpleQueue costs the
        # loop a third of what queue.Queue's lock and notify cost per message, and
        # put() can never block.
        self._engine = engine(target, opts, self._put)
        self._cap = self._engine.limit
        self._pool = WorkerPool(f"jetstream-sync-worker-{target.name}", workers, work=self._work,
                                on_take=self._on_take, discard=self._discard, source_done=self._engine.halted,
                                on_exit=self._on_exit)
        self._reporter = _Reporter(f"jetstream-sync-reporter-{target.name}", self._report)
        self._batch: list[Msg] = []  # delivered since the last hand-over (loop thread)
        self._end_queued = False  # the Terminal waits in the workers' queue
        self._call_soon = target.conn.loop_thread.loop.call_soon
        self.error: BaseException | None = None
        self._handled = 0
        self._handler_errors = 0
        self._warnings = 0
        self._conn = target.conn
        #: Called once by the last worker out, before ``closed`` (the subscribe workflow's clean-up).
        self._on_closed: Callable[[], Any] | None = None
        _start(self._engine, self._conn, target.timeout)
        self._reporter.start()
        self._pool.start()

    # -- loop thread -------------------------------------------------------

    def _put(self, item: Any) -> None:
        if type(item) is Msg and not self._pool.stopping:
            batch = self._batch
            batch.append(item)
            if len(batch) == 1:
                # One hand-over per run of deliveries (everything the loop delivers before it looks at
                # its queue again, a whole socket read in practice): one wake for the batch, not one
                # a message.
                self._call_soon(self._hand_over)
            elif len(batch) >= _BATCH:
                self._hand_over()
            return
        kind = type(item)
        if kind is Msg:  # stop() was called: hand it back
            self._engine.taken(item.size)
            self._give_back(item)
        elif kind is Warning_:
            self._warnings += 1
            self._reporter.put(item.error)
        elif isinstance(item, Mark):
            return  # a point the handlers need not see
        else:
            if item.error is not None:  # Terminal: said now; the workers finish what is buffered first
                self.error = item.error
                self._reporter.put(item.error)
            self._hand_over()  # the messages before it first
            self._end_queued = True
            self._pool.submit(item)

    def _hand_over(self) -> None:
        """Give the workers what was delivered since the last hand-over (loop thread)."""
        batch = self._batch
        if not batch:
            return
        self._batch = []
        if self._pool.stopping:  # stop() came first: none of it reaches a handler
            self._hand_back_now(batch)
            return
        if self._cap is not None:
            excess = self._engine.buffered() - self._cap
            if excess > 0:
                # Cannot happen while the credit accounting holds; never grow past the bound.
                batch, over = batch[:-excess], batch[-excess:]
                self._hand_back_now(over)
                log.error("jetstream_sync: consume buffer over its limit; handed %d messages back", len(over))
        self._pool.submit_many(batch)

    def _hand_back_now(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            self._engine.taken(msg.size)
            self._give_back(msg)

    # -- worker threads (the pool's hooks) ---------------------------------

    def _on_take(self, items: list) -> None:
        count = size = 0
        for item in items:
            if type(item) is Msg:
                count += 1
                size += item.size
        if count:
            self._engine.taken(size, count)  # the one crossing back down: credit spent

    def _work(self, item: Any) -> None:
        if type(item) is Msg:
            self._handle(item)
        else:  # Terminal (already reported): nothing more will arrive; finish what is buffered
            self._end_queued = False
            self._pool.drain()

    def _discard(self, item: Any) -> None:
        """After stop(): a message goes back to the server; the end still ends the pool."""
        if type(item) is Msg:
            self._give_back(item)
        else:
            self._work(item)

    def _give_back(self, msg: Msg) -> None:
        """NAK ``msg`` (redelivered at once) once the engine can deliver nothing more (any thread)."""
        if self._engine.halted.is_set():
            _nak_quietly(msg)
            return
        with self._parked_lock:
            self._parked.append(msg)
        if self._engine.halted.is_set():  # halted meanwhile: whoever flushed may have missed it
            self._flush_parked()

    def _flush_parked(self) -> None:
        with self._parked_lock:
            parked, self._parked = self._parked, []
        for msg in parked:
            _nak_quietly(msg)

    def _on_exit(self) -> None:
        """Last worker out: once the engine has halted nothing more arrives; NAK what nobody took."""
        self._engine.stop_soon()
        _wait_halted(self._engine)
        self._pool.discard_queued()
        self._flush_parked()
        # "closed" means the server has every ack/nak/term the workers wrote, and every warning was said.
        self._conn.confirm_writes()
        self._reporter.close(self._conn.loop_thread)
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
            try:
                delay = self._nak_delay(msg)
            except Exception:
                log.exception("jetstream_sync: nak_delay raised; redelivering after %ss", DEFAULT_NAK_DELAYS[-1])
                delay = DEFAULT_NAK_DELAYS[-1]
            _nak_quietly(msg, delay)
            if self._error_handler is not None:
                self._report(exc)
            else:
                self._show(msg, exc, delay)

    def _show(self, msg: Msg, exc: BaseException, delay: float) -> None:
        """No error_handler: show a handler's exception once per error and message (a redelivery failing
        the same way is counted, not shown again): as an ERROR record with its traceback when the
        application configured logging, else as an uncaught thread exception (``threading.excepthook``)."""
        key = _identity(msg, exc)
        log.debug("jetstream_sync: handler raised on %s: %r", msg.subject, exc)
        if key in self._shown:
            return
        if len(self._shown) >= _SHOWN_LIMIT:
            self._shown.clear()
        self._shown.add(key)
        again = f"redelivered in {delay:g}s" if delay else "redelivered at once"
        note = (f"jetstream_sync: raised by the consume handler on {_where(msg)}; the message was NAKed and is "
                f"{again}. Shown once per error and message; pass error_handler= to handle errors yourself.")
        if _logging_configured(log):  # the application reads its log: the traceback goes there
            log.error("%s", note, exc_info=exc)
            return
        add_note = getattr(exc, "add_note", None)
        if add_note is not None:
            add_note(note)
        else:  # Python 3.10: no notes; say it first
            print(note, file=sys.stderr)
        try:
            threading.excepthook(threading.ExceptHookArgs(  # type: ignore[call-arg]
                (type(exc), exc, exc.__traceback__, threading.current_thread())))
        except Exception:
            log.exception("jetstream_sync: threading.excepthook raised")

    def _report(self, exc: BaseException) -> None:
        if self._error_handler is None:
            if isinstance(exc, (errors.NoHeartbeatError, errors.APIError, errors.SlowConsumerError,
                                errors.MessageGapError)) and self.error is not exc:
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
        handle closes when that handler returns. Idempotent. Leaving a ``with``
        block by an exception (Ctrl-C included) calls it.
        """
        self._pool.stopping = True  # first: the loop hands back what still arrives
        self._engine.stop_soon()
        if self._pool.on_worker() or self._reporter.on_thread():
            self._pool.stop(wait=False)  # the last worker out hands back the rest
            return
        try:
            # Interest first (one round trip): a NAK the server can deliver straight back to us would
            # only bounce, and be lost with the connection if the process is leaving.
            _wait_halted(self._engine)
        finally:  # a second Ctrl-C while waiting still hands the buffer back
            self._pool.discard_queued()
            self._flush_parked()
        self._pool.stop()
        self._flush_parked()

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
                            buffered=self._buffered(), warnings=self._warnings,
                            dropped=self._engine.dropped)

    def _buffered(self) -> int:
        """Messages received and not yet taken by a worker (no I/O; any thread)."""
        return max(0, self._pool.queued() - self._end_queued) + len(self._batch)

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

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Leaving normally drains (everything buffered is handled, then the handle closes); leaving by
        an exception, Ctrl-C included, stops: handlers in flight finish, what is buffered is NAKed."""
        if exc_type is not None:
            self.stop()
            return
        self.drain()
        if not self._pool.on_worker() and not self._reporter.on_thread():
            self.wait()
