# A bounded pool of worker threads fed by the loop thread (pika's work pool is the model): the
# loop submits items without ever blocking, N named threads take them one at a time, and every
# item taken is announced through ``on_take`` before it is worked on. It knows nothing of NATS,
# messages or engines: ``consume.ConsumeHandle`` says what taking, working and discarding mean.
#
# Rule 1: ``submit`` (the loop thread's only entry) is a put into a SimpleQueue: it never blocks.
#         What keeps the queue bounded is the caller's credit, returned through ``on_take``.
# Rule 2: ``work``, ``discard`` and ``on_exit`` run on worker threads only, never on the loop.
# Rule 3: shutdown is a flag first, sentinels second, joins with a bound, and a thread never
#         joins itself (``work`` may call ``stop()``/``drain()``).
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from ._loop import WAKE_INTERVAL

__all__ = ["WorkerPool"]

#: Wakes a worker to look at the flags again; never given to ``work``.
_SENTINEL = None


class WorkerPool:
    """``workers`` threads named ``<name>-<i>`` calling ``work(item)`` for each submitted item.

    - ``on_take(item)``: a worker took ``item`` out of the queue (called first, on that worker).
    - ``work(item)``: the job; exceptions are the caller's to catch (one escaping ends that worker).
    - ``discard(item)``: what ``stop()`` does instead of working an item still queued or taken after it.
    - ``source_done``: set once nothing more will be submitted; draining ends when it is set and the
      queue is empty.
    - ``on_exit()``: run by the last worker out, before :attr:`closed` is set.
    """

    def __init__(self, name: str, workers: int, *, work: Callable[[Any], None], on_take: Callable[[Any], None],
                 discard: Callable[[Any], None], source_done: threading.Event,
                 on_exit: Callable[[], None]) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        #: (loop thread, or any) Queue ``item`` for a worker. Never blocks.
        self.submit: Callable[[Any], None] = self._q.put
        self._work = work
        self._on_take = on_take
        self._discard = discard
        self._source_done = source_done
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self.stopping = False   # stop(): discard instead of working
        self.draining = False   # drain(): work off the queue, then exit
        self.closed = threading.Event()  # every worker has exited and on_exit has run
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        self._alive = workers

    def start(self) -> None:
        """Start the threads. Call once."""
        for t in self._threads:
            t.start()

    def queued(self) -> int:
        """Items (and wake-up sentinels) waiting in the queue right now (no I/O; approximate)."""
        return self._q.qsize()

    def on_worker(self) -> bool:
        """True when called from one of this pool's threads."""
        return threading.current_thread() in self._threads

    # -- worker threads ----------------------------------------------------

    def _run(self) -> None:
        get = self._q.get
        on_take = self._on_take
        work = self._work
        try:
            while True:
                try:
                    item = get(timeout=WAKE_INTERVAL)
                except queue.Empty:
                    if self.stopping or (self.draining and self._source_done.is_set() and self._q.empty()):
                        return
                    continue
                if item is _SENTINEL:
                    # Draining ends only once the source is done: until then an item
                    # still on its way may land in the queue.
                    if self.stopping or (self._source_done.is_set() and self._q.empty()):
                        return
                    continue
                on_take(item)
                if self.stopping:
                    self._discard(item)
                    continue
                work(item)
        finally:
            with self._lock:
                self._alive -= 1
                last = self._alive == 0
            if last:
                self._on_exit()
                self.closed.set()
            else:
                # A worker that took another's sentinel while the source was still finishing
                # exits; wake one that may still wait, so it looks again (a chain: each
                # leaving worker wakes the next) instead of relying on its get() timeout.
                self._q.put(_SENTINEL)

    def discard_queued(self) -> None:
        """Take every queued item without blocking: ``on_take`` then ``discard`` each (any thread)."""
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if item is not _SENTINEL:
                self._on_take(item)
                self._discard(item)

    # -- any thread --------------------------------------------------------

    def wake_all(self) -> None:
        """Put one sentinel per worker, so each looks at the flags now."""
        for _ in self._threads:
            self._q.put(_SENTINEL)

    def stop(self, wait: bool = True) -> None:
        """Discard what is queued, let each worker finish its current item, then join them.

        Called from a worker, or with ``wait=False``, it returns at once (each worker exits when its
        item is done). Joins wake every 0.25 s, so Ctrl-C interrupts them. Idempotent.
        """
        self.stopping = True
        self.discard_queued()
        self.wake_all()
        if not wait or self.on_worker():
            return
        for t in self._threads:
            while t.is_alive():
                t.join(WAKE_INTERVAL)

    def drain(self) -> None:
        """Work off what is queued and what the source still submits, then exit. Never blocks. Idempotent."""
        self.draining = True
        self.wake_all()
