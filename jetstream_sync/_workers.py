# A bounded pool of worker threads fed by the loop thread (pika's work pool is the model): the
# loop submits items, one or a whole batch at a time, without ever blocking; N named threads take
# them one at a time from one shared FIFO, and every item taken is announced through ``on_take``,
# in groups (see Rule 2). It knows nothing of NATS, messages or engines: ``consume.ConsumeHandle``
# says what taking, working and discarding mean.
#
# Rule 1: ``submit``/``submit_many`` (the loop thread's entries) append to a deque and wake a
#         sleeping worker at most once per call, and only when no worker is awake or work is slow:
#         a batch costs one wake, not one per item, and a busy worker is never woken at all. What
#         keeps the deque bounded is the caller's credit, returned through ``on_take``.
# Rule 2: work is slow once two items in a row each took more than _QUICK_WORK (one alone is most
#         often a quick item that waited for the interpreter lock). While its work is slow a worker
#         announces each item before working it; while it is quick, in groups: at once when the
#         queue is empty after its take (a lone message's credit returns before its work starts),
#         else after at most _ANNOUNCE_EVERY items, and always before it discards anything, sleeps
#         or exits. Credit so comes back late by at most a group of quick items, never early: one
#         call (one lock) per group, not per item.
# Rule 3: while work is slow, a worker that takes an item while more wait and a peer sleeps wakes
#         that peer first, so a batch spreads over the pool at once and slow handlers never hold
#         back what a sleeping worker could take. While work is quick, a batch is worked by the
#         worker that is awake: waking peers to share quick work only makes them queue for the
#         interpreter lock. A sleeping worker also looks at the queue and the flags every
#         WAKE_INTERVAL whatever woke it, and takes what waits unless work is quick and the worker
#         on it is not stuck (its item started less than _STUCK_AFTER ago).
# Rule 4: ``work``, ``discard`` and ``on_exit`` run on worker threads only, never on the loop.
# Rule 5: shutdown is a flag first, wake-ups second, joins with a bound, and a thread never
#         joins itself (``work`` may call ``stop()``/``drain()``).
from __future__ import annotations

import collections
import threading
from time import perf_counter
from typing import Any, Callable, Iterable

from ._loop import WAKE_INTERVAL

__all__ = ["WorkerPool"]

#: Work that took less than this (seconds) is quick: no peer is woken to share the queue.
_QUICK_WORK = 100e-6
#: Work is slow once this many items in a row took longer than _QUICK_WORK.
_SLOW_AFTER = 2
#: A worker whose wait ran out leaves quick work to the worker already on it, unless that one's item
#: has run longer than this (seconds): then it is stuck, and the queue needs help.
_STUCK_AFTER = 0.02
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
        self._work = work
        self._on_take = on_take
        self._discard = discard
        self._source_done = source_done
        self._on_exit = on_exit
        self._lock = threading.Lock()
        #: The wake locks of the workers about to wait or waiting, not yet woken, the newest sleeper
        #: last (changed under ``_lock``; its length is read without it).
        self._sleepers: list[threading.Lock] = []
        #: Work is slow: the last items worked took longer than _QUICK_WORK (assumed at first).
        self._slow = True
        #: When the item a worker started last began (perf_counter).
        self._working_since = 0.0
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
        # A worker woken and not yet running is no longer counted: a second batch does not wake a
        # second worker while the first is still on its way.
        sleeping = len(self._sleepers)
        if sleeping and (sleeping >= self._alive or self._slow):
            self._wake_newest()

    def _wake_newest(self) -> None:
        """Wake the worker that went to sleep last (its thread and its caches are the warmest), if any."""
        with self._lock:
            if not self._sleepers:
                return
            waker = self._sleepers.pop()
        waker.release()

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

    def _sleep(self, waker: threading.Lock, idle: bool) -> bool:
        """Wait until ``waker`` (this worker's own lock, held while it is awake) is released, at most
        WAKE_INTERVAL. Counted as sleeping and put on the stack of sleepers *before* the last look at
        the queue and the flags, so a submit or a wake_all either is seen here or finds the sleeper
        and releases it: none is missed. A release that comes after the wait ended only makes the
        next wait return at once. ``idle``: the last wait ran out without a wake-up, so this worker goes
        to the bottom of the stack (a worker looking at the queue every WAKE_INTERVAL does not become
        the newest sleeper, and the one that worked last stays the one woken next). Returns whether
        it was woken (False: the wait ran out)."""
        lock = self._lock
        with lock:
            if idle:
                self._sleepers.insert(0, waker)
            else:
                self._sleepers.append(waker)
        try:
            if not self._items and not self._done():
                return waker.acquire(timeout=WAKE_INTERVAL)
            return True
        finally:
            with lock:
                try:
                    self._sleepers.remove(waker)  # not popped by a waker: nobody will release it
                except ValueError:
                    pass

    def _others_keep_up(self) -> bool:
        """(a worker whose wait ran out) Whether to leave what is queued to the worker already awake:
        work is quick, another worker is awake, and its item is not stuck (Rule 3)."""
        return (not self._slow and self._alive - len(self._sleepers) > 1
                and perf_counter() - self._working_since < _STUCK_AFTER)

    def _run(self) -> None:
        items = self._items
        popleft = items.popleft
        on_take = self._on_take
        work = self._work
        alone = len(self._threads) == 1
        took: list = []  # taken, not yet announced
        waker = threading.Lock()
        waker.acquire()
        idle = False
        # Work is slow once two items in a row took more than _QUICK_WORK (assumed at first): one slow
        # item alone is most often a quick handler that waited for the interpreter lock.
        over = _SLOW_AFTER
        slow = True
        try:
            while True:
                if idle and not alone and self._others_keep_up():
                    idle = not self._sleep(waker, True)
                    continue
                try:
                    item = popleft()
                except IndexError:
                    if took:
                        on_take(took)
                        took = []
                    if self._done():
                        return
                    idle = not self._sleep(waker, idle)
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
                if not alone and items and self._slow and self._sleepers:
                    self._wake_newest()  # more is waiting, work is slow and a peer sleeps: let it help
                started = perf_counter()
                if not alone:
                    self._working_since = started
                work(item)
                over = over + 1 if perf_counter() - started > _QUICK_WORK else 0
                slow = over >= _SLOW_AFTER
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
                self._wake_newest()

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
        """Wake every sleeping worker, so each looks at the flags now (one about to sleep sees them first)."""
        with self._lock:
            sleepers, self._sleepers = self._sleepers, []
        for waker in sleepers:
            waker.release()

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
