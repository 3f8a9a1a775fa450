# The bridge between user threads and the one asyncio loop.
#
# Rule 1: one daemon thread per Client runs one private event loop; every
#         coroutine of the package runs there and nowhere else.
# Rule 2: this module knows nothing of NATS or JetStream. It runs coroutines,
#         schedules callbacks and batches fire-and-forget work; that is all.
# Rule 3: a waiting user thread wakes at least every 0.25 s (so Ctrl-C and
#         _thread.interrupt_main() land promptly) and never waits unbounded
#         when a timeout was given: op timeout + grace, then TimeoutError.
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import threading
import time
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from .errors import ClientClosedError, TimeoutError

__all__ = ["EventLoopThread", "Outbox", "WAKE_INTERVAL", "Waiter", "wait_future"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest a blocked user thread sleeps before it looks around again.
WAKE_INTERVAL = 0.25
#: Added to an operation's own timeout: the coroutine's timeout should win on a
#: healthy loop; this backstop only trips when the loop has stalled.
BRIDGE_GRACE = 1.0
#: Most bytes one read of a socket takes. asyncio's default (256 KiB) is above malloc's mmap
#: threshold (128 KiB), and off the main thread nothing keeps such a buffer around: every read
#: would map and unmap one (three system calls and a TLB shootdown, tens of microseconds on
#: each round trip to the server). 64 KiB is served from the loop thread's heap.
READ_SIZE = 64 * 1024


def wait_future(fut: concurrent.futures.Future, deadline: float | None, on_timeout: Callable[[], BaseException],
                check: Callable[[], None] | None = None) -> Any:
    """Wait for ``fut`` in short slices until ``deadline`` (monotonic) and return its result.

    Blocks the calling thread; interruptible (KeyboardInterrupt propagates and
    the future is left to the caller to cancel). ``check()`` runs after every
    slice that ended without a result and may raise to abandon the wait (a
    future whose loop died will never resolve).
    """
    while True:
        if deadline is None:
            slice_ = WAKE_INTERVAL
        else:
            slice_ = min(WAKE_INTERVAL, deadline - time.monotonic())
            if slice_ <= 0:
                if fut.done():
                    return fut.result()
                raise on_timeout()
        try:
            return fut.result(slice_)
        except builtins_timeout:
            # In 3.11 concurrent.futures.TimeoutError *is* builtins.TimeoutError,
            # so a coroutine that raised one looks like a wait that timed out.
            if fut.done():
                return fut.result()
        if check is not None:
            check()


builtins_timeout = concurrent.futures.TimeoutError


class Waiter:
    """A reusable wake-up for one blocked user thread, fired by the loop thread with one value.

    Cheaper than a Future on both sides: one lock, held while the waiter is idle. ``fire(value)``
    stores the value and releases the lock (once per use, any thread); :meth:`wait` acquires it
    again, so a wait that returned leaves the waiter ready for its next use. After a wait that
    raised (timeout, interrupt) a ``fire`` may still be on its way: drop that waiter.
    """

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.value: Any = None

    def fire(self, value: Any) -> None:
        """Hand ``value`` to the waiting thread and wake it. Call once per use."""
        self.value = value
        self._lock.release()

    def wait(self, deadline: float | None, on_timeout: Callable[[], BaseException],
             check: Callable[[], None] | None = None) -> Any:
        """Block until fired and return the value, at most until ``deadline`` (monotonic; None: no bound).

        Wakes every :data:`WAKE_INTERVAL` (Ctrl-C lands); ``check()`` runs after every slice that
        ended unfired and may raise to abandon the wait. Raises ``on_timeout()`` at the deadline.
        """
        acquire = self._lock.acquire
        while True:
            if deadline is None:
                fired = acquire(True, WAKE_INTERVAL)
            else:
                left = deadline - time.monotonic()
                fired = acquire(True, min(WAKE_INTERVAL, left)) if left > 0 else acquire(False)
                if not fired and left <= WAKE_INTERVAL:
                    raise on_timeout()
            if fired:
                value = self.value
                self.value = None
                return value
            if check is not None:
                check()


# Bumped in every forked child, so "was this made in another process?" is an
# int comparison instead of a getpid() system call on every publish and ack.
_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _SelectorLoop(asyncio.SelectorEventLoop):
    """asyncio's default loop, reading sockets :data:`READ_SIZE` bytes at most."""

    def _make_socket_transport(self, *args: Any, **kwargs: Any) -> Any:
        transport = super()._make_socket_transport(*args, **kwargs)  # type: ignore[misc]
        transport.max_size = READ_SIZE
        return transport


def _new_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    if type(loop) is not asyncio.SelectorEventLoop:
        return loop  # another policy's loop (uvloop, a proactor, ...) is used as it comes
    loop.close()
    return _SelectorLoop()


class EventLoopThread:
    """A private asyncio loop on a daemon thread, with a blocking ``run()`` bridge.

    Thread-safe. ``run()`` and ``call_soon()`` may be called from any thread
    except the loop thread itself.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._run_forever, name=name, daemon=True)
        self._ident: int | None = None  # the thread's ident once started (read on every call)
        self._pid = os.getpid()
        self._generation = _fork_generation
        self._closed = False
        self._close_reason = "the client is closed"
        self._lock = threading.Lock()
        # asyncio keeps only weak references to tasks; these keep ours alive.
        self._tasks: set[asyncio.Task] = set()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread and return once the loop runs."""
        started = threading.Event()
        self._loop.call_soon(started.set)
        self._thread.start()
        self._ident = self._thread.ident
        if not started.wait(10):
            raise RuntimeError("the event loop thread did not start")

    def _run_forever(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            asyncio.set_event_loop(None)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    @property
    def closed(self) -> bool:
        return self._closed

    def on_loop_thread(self) -> bool:
        """True when called from this loop's own thread."""
        return threading.get_ident() == self._ident

    def check_usable(self) -> None:
        """Raise unless a blocking call may be made from the current thread.

        Raises:
            ClientClosedError: closed, or this object was inherited through fork().
            RuntimeError: called on the loop thread, where waiting would deadlock.
        """
        if _fork_generation != self._generation:
            raise ClientClosedError(
                f"this client was created in process {self._pid} and cannot be used in process "
                f"{os.getpid()} after fork(); call jetstream_sync.connect() in this process"
            )
        if self._closed:
            raise ClientClosedError(self._close_reason)
        if self.on_loop_thread():
            raise RuntimeError(
                "a blocking jetstream_sync call was made on the client's own event loop thread, where "
                "it would deadlock; call it from another thread (publish_async future callbacks run on "
                "this thread: hand the work to a thread of your own)"
            )

    def stop(self, timeout: float = 5.0, reason: str = "the client is closed") -> None:
        """Cancel every task, stop the loop and join its thread (bounded by ``timeout``).

        Idempotent. Waiters blocked in ``run()`` get ``ClientClosedError``.
        Never joins its own thread: called on the loop thread it only schedules the stop.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_reason = reason
        if os.getpid() != self._pid:
            return  # the thread does not exist in a forked child
        if not self._thread.is_alive():
            self._loop.close()
            return

        async def shutdown() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=max(0.1, timeout / 2))
            await self._loop.shutdown_asyncgens()
            self._loop.stop()

        if self.on_loop_thread():
            self._loop.create_task(shutdown())
            return
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(shutdown()))
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("jetstream_sync: event loop thread %s did not stop within %.1fs", self.name, timeout)
            return
        self._loop.close()

    # -- crossing into the loop ----------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and block until it finishes; return its result.

        Blocks the calling thread for at most ``timeout`` + a grace period
        (``None`` waits for as long as the coroutine takes), waking every
        0.25 s. KeyboardInterrupt cancels the coroutine and propagates; the
        loop stays usable.

        Raises:
            RuntimeError: called on the loop thread.
            ClientClosedError: the loop is closed or closes while waiting.
            TimeoutError: the loop did not finish the coroutine in time.
            Whatever the coroutine raises.
        """
        try:
            self.check_usable()
            # Submitted under the lock stop() takes to set ``_closed``: a
            # coroutine is either on the loop before shutdown() collects the
            # tasks to cancel, or refused here; it never lands on a dead loop.
            with self._lock:
                if self._closed:
                    raise ClientClosedError(self._close_reason)
                fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except BaseException:
            coro.close()
            raise
        deadline = None if timeout is None else time.monotonic() + timeout + BRIDGE_GRACE
        try:
            return wait_future(fut, deadline, lambda: TimeoutError(
                f"the operation did not finish within {timeout:.3g}s (+{BRIDGE_GRACE}s grace); "
                "the event loop may be stalled"), self._check_loop_alive)
        except concurrent.futures.CancelledError:
            if self._closed:
                raise ClientClosedError(self._close_reason) from None
            raise
        except ClientClosedError:
            raise  # the loop is gone: cancelling would only schedule onto a closed loop
        except BaseException:
            fut.cancel()
            raise

    def _check_loop_alive(self) -> None:
        # A coroutine that survives stop()'s cancellation (it swallows
        # CancelledError) never resolves its future once the loop has stopped:
        # its waiter must not wait forever for it.
        if self._closed and not self._thread.is_alive():
            raise ClientClosedError(self._close_reason)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the loop without waiting. Never blocks.

        Raises ClientClosedError when the loop is closed or this is a forked child.
        """
        if self._closed or _fork_generation != self._generation:
            self.check_usable()
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError as exc:  # loop closed between the check and the call
            raise ClientClosedError(self._close_reason) from exc

    def spawn(self, coro: Awaitable[Any], name: str | None = None) -> asyncio.Task:
        """Start a task on the loop (must be called on the loop thread); keep a strong reference."""
        task = self._loop.create_task(coro, name=name)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("jetstream_sync: background task %s failed", task.get_name(), exc_info=task.exception())


class Outbox:
    """A thread-safe buffer of fire-and-forget work, flushed on the loop one batch per crossing.

    ``put()`` never blocks and costs one deque append plus, at most once per
    batch, a ``call_soon_threadsafe``. ``flush(items)`` is a plain function run
    on the loop thread; it must not raise (it owns per-item error handling).
    """

    def __init__(self, loop_thread: EventLoopThread, flush: Callable[[list], None]) -> None:
        self._lt = loop_thread
        self._flush = flush
        self._items: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, item: Any) -> None:
        """Queue ``item``; schedule a flush if none is pending. Thread-safe, never blocks.

        Raises ClientClosedError when the loop is closed.
        """
        self._items.append(item)
        # Read without the lock first: a flush clears the flag before it takes the items, so an
        # item appended before this read is either taken by that flush or sees the flag cleared.
        if self._scheduled:
            return
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._lt.call_soon(self._flush_now)
        except BaseException:
            with self._lock:
                self._scheduled = False
            raise

    def _flush_now(self) -> None:
        with self._lock:
            # Cleared before popping: a put() that lands after the pop schedules anew.
            self._scheduled = False
        items = []
        pop = self._items.popleft
        try:
            while True:
                items.append(pop())
        except IndexError:
            pass
        if items:
            try:
                self._flush(items)
            except Exception:  # pragma: no cover - flush functions handle their own errors
                log.exception("jetstream_sync: outbox flush failed")

    def pending(self) -> int:
        """Items queued and not yet flushed (approximate; for stats and tests)."""
        return len(self._items)
