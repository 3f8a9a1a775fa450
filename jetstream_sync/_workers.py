# A bounded pool of worker threads fed by the loop thread (pika's work pool is the model): the
# loop submits items, one or a whole batch at a time, without ever blocking; N named threads take
# them one at a time from one shared FIFO, and every item taken is announced through ``on_take``,
# in groups (see Rule 2). It knows nothing of NATS, messages or engines: ``consume.ConsumeHandle``
# says what taking, working and discarding mean.
#
# Rule 1: ``submit``/``submit_many`` (the loop thread's entries) append to a deque and wake a
#         sleeping worker at most once per call, and only when no worker is awake or work is slow:
#         a batch costs one wake, not one per item, and a busy worker is never woken at all. What keeps the deque bounded is the caller's credit,
#         returned through ``on_take``.
# Rule 2: while its work is slow (its last item took more than _QUICK_WORK), a worker announces each
#         item before working it; while it is quick, in groups: at once when the queue is empty after
#         its take (a lone message's credit returns before its work starts), else after at most
#         _ANNOUNCE_EVERY items, and always before it discards anything, sleeps or exits. Credit so
#         comes back late by at most a group of quick items, never early: one call (one lock) per
#         group, not per item.
# Rule 3: while work is slow, a worker that takes an item
#         while more wait and a peer sleeps wakes that peer first, so a batch spreads over the pool
#         at once and slow handlers never hold back what a sleeping worker could take. While work
#         is quick, a batch is worked by the worker that was woken (and any a later batch woke):
#         waking peers to share a quick batch only makes them queue for the interpreter lock.
#         A sleeping worker also looks at the queue every WAKE_INTERVAL whatever woke it.
# Rule 4: ``work``, ``discard`` and ``on_exit`` run on worker threads only, never on the loop.
# Rule 5: shutdown is a flag first, wake-ups second, joins with a bound, and a thread never
#         joins itself (``work`` may call ``stop()``/``drain()``).
from __future__ import annotations

import collections
import queue
import threading
from time import perf_counter
from typing import Any, Callable, Iterable

from ._loop import WAKE_INTERVAL

__all__ = ["WorkerPool"]

#: What wakes a sleeping worker to look at the items and the flags again; never given to ``work``.
_WAKE = None
#: Work that took less than this (seconds) is quick: no peer is woken to share the queue.
_QUICK_WORK = 100e-6
#: A worker announces what it took at least every this many items.
_ANNOUNCE_EVERY = 16


class WorkerPool:
    """``workers`` threads named ``<name>-<i>`` calling ``work(item)`` for each submitted item.

    - ``on_take(items)``: a worker took ``items`` (a list, in order) out of the queue; called on that
      worker before it works the last of them while work is slow or the queue ran empty, else within
      _ANNOUNCE_EVERY items, and always before it discards an item, sleeps or exits.
    - ``work(item)``: the job; exceptions are the caller's to catch (one escaping ends that worker).
    - ``discard(item)``: what ``stop()`` does instead of working an item still queued or taken after it.
    - ``source_done``: set once nothing more will be submitted; draining ends when it is set and the
      queue is empty.
    - ``on_exit()``: run by the last worker out, before :attr:`closed` is set.
    """

    def __init__(self, name: str, workers: int, *, work: Callable[[Any], None], on_take: Callable[[Any], None],
                 discard: Callable[[Any], None], source_done: threading.Event,
                 on_exit: Callable[[], None]) -> None:
        self._items: collections.deque = collections.deque()
        self._wake: queue.SimpleQueue = queue.SimpleQueue()
        self._work = work
        self._on_take = on_take
        self._discard = discard
        self._source_done = source_done
        self._on_exit = on_exit
        self._lock = threading.Lock()
        #: Workers about to wait, or waiting, for a wake-up (changed under ``_lock``, read without it).
        self._sleeping = 0
        #: The last item worked took longer than _QUICK_WORK (assumed at first).
        self._slow = True
        self.stopping = False   # stop(): discard instead of working
        self.draining = False   # drain(): work off the queue, then exit
        self.closed = threading.Event()  # every worker has exited and on_exit has run
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        self._alive = workers

    def start(self) -> None:
        """Start the threads. Call once."""
        for t in self._threads:
            t.start()

    def submit(self, item: Any) -> None:
        """(loop thread, or any) Queue ``item`` for a worker. Never blocks."""
        self._items.append(item)
        self._wake_one()

    def submit_many(self, items: Iterable[Any]) -> None:
        """(loop thread, or any) Queue ``items`` in order, waking at most one worker. Never blocks."""
        self._items.extend(items)
        self._wake_one()

    def _wake_one(self) -> None:
        """After a submit: wake a sleeping worker when every worker sleeps, or when work is slow (a
        worker that is awake and quick gets to the new items soon; waking another to share them only
        makes both queue for the interpreter lock). No wake-up is missed: a worker counts itself as
        sleeping before its last look at the queue."""
        sleeping = self._sleeping
        if sleeping and (sleeping >= self._alive or self._slow):
            self._wake.put(_WAKE)

    def queued(self) -> int:
        """Items waiting in the queue right now (no I/O; approximate)."""
        return len(self._items)

    def on_worker(self) -> bool:
        """True when called from one of this pool's threads."""
        return threading.current_thread() in self._threads

    # -- worker threads ----------------------------------------------------

    def _done(self) -> bool:
        """Whether a worker that found the queue empty leaves: stopping, or draining with nothing more
        to come (draining ends only once the source is done: until then an item may still land)."""
        return self.stopping or (self.draining and self._source_done.is_set() and not self._items)

    def _sleep(self) -> None:
        """Wait for a wake-up (at most WAKE_INTERVAL). Counted as sleeping *before* the last look at
        the queue, so a submit either is seen here or sees the sleeper and wakes it: none is missed."""
        lock = self._lock
        with lock:
            self._sleeping += 1
        try:
            if not self._items:
                try:
                    self._wake.get(timeout=WAKE_INTERVAL)
                except queue.Empty:
                    pass
        finally:
            with lock:
                self._sleeping -= 1

    def _run(self) -> None:
        items = self._items
        popleft = items.popleft
        on_take = self._on_take
        work = self._work
        alone = len(self._threads) == 1
        took: list = []  # taken, not yet announced
        slow = True  # this worker's last item took more than _QUICK_WORK (assumed at first)
        try:
            while True:
                try:
                    item = popleft()
                except IndexError:
                    if took:
                        on_take(took)
                        took = []
                    if self._done():
                        return
                    self._sleep()
                    continue
                took.append(item)
                if slow or not items or len(took) >= _ANNOUNCE_EVERY:
                    on_take(took)
                    took = []
                if self.stopping:
                    if took:
                        on_take(took)
                        took = []
                    self._discard(item)
                    continue
                if not alone and items and self._slow and self._sleeping:
                    self._wake.put(_WAKE)  # more is waiting, work is slow and a peer sleeps: let it help
                started = perf_counter()
                work(item)
                slow = perf_counter() - started > _QUICK_WORK
                if not alone:
                    self._slow = slow
        finally:
            if took:
                on_take(took)
            with self._lock:
                self._alive -= 1
                last = self._alive == 0
            if last:
                self._on_exit()
                self.closed.set()
            else:
                # Wake one that may still wait, so it looks at the flags now (a chain: each leaving
                # worker wakes the next) instead of at its next WAKE_INTERVAL.
                self._wake.put(_WAKE)

    def discard_queued(self) -> None:
        """Take every queued item without blocking: ``on_take`` then ``discard`` each (any thread)."""
        popleft = self._items.popleft
        while True:
            try:
                item = popleft()
            except IndexError:
                return
            self._on_take([item])
            self._discard(item)

    # -- any thread --------------------------------------------------------

    def wake_all(self) -> None:
        """Wake every worker, so each looks at the flags now."""
        for _ in self._threads:
            self._wake.put(_WAKE)

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
