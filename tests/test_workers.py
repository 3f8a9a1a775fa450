# _workers: the pool that runs consume() handlers. Plain threads, no server: what is taken is announced
# once, on the worker that took it (a lone item before its work starts, a run of items in groups),
# stop() discards instead of working and never joins itself, drain() waits for the source to finish,
# the last worker out runs on_exit once. Its use with a real server is in
# test_consume.py (slow handlers, stop/drain from a handler, nothing acked that was not handled).
from __future__ import annotations

import threading

import pytest

from jetstream_sync._workers import WorkerPool

from conftest import wait_for


class Recorder:
    """The pool's hooks, writing down which thread saw what, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, object, str]] = []
        self.exits = 0
        self.source_done = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    def note(self, what: str, item: object) -> None:
        with self.lock:
            self.events.append((what, item, threading.current_thread().name))

    def work(self, item: object) -> None:
        self.note("work", item)
        self.gate.wait(10)

    def pool(self, workers: int = 2, **hooks) -> WorkerPool:
        def on_exit() -> None:
            with self.lock:
                self.exits += 1

        def on_take(items: list) -> None:
            for i in items:
                self.note("take", i)

        kw = dict(work=self.work, on_take=on_take, discard=lambda i: self.note("discard", i),
                  source_done=self.source_done, on_exit=on_exit)
        kw.update(hooks)
        return WorkerPool("test-pool", workers, **kw)

    def of(self, what: str) -> list[object]:
        with self.lock:
            return [item for w, item, _ in self.events if w == what]


@pytest.fixture
def rec():
    return Recorder()


def test_each_item_is_announced_once_on_the_worker_that_takes_it(rec):
    pool = rec.pool(workers=2)
    pool.start()
    for i in range(50):
        pool.submit(i)
    pool.submit_many(range(50, 200))
    wait_for(lambda: len(rec.of("work")) == 200, 10, what="200 items worked")
    wait_for(lambda: len(rec.of("take")) == 200, 10, what="200 items announced")  # the last group as the queue ran dry
    assert sorted(rec.of("take")) == list(range(200))
    with rec.lock:
        took = {item: t for w, item, t in rec.events if w == "take"}
        worked = {item: t for w, item, t in rec.events if w == "work"}
    assert took == worked  # announced by the worker that worked it
    assert set(took.values()) <= {"test-pool-0", "test-pool-1"}
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5) and rec.exits == 1


def test_drain_works_off_what_arrives_until_the_source_is_done(rec):
    pool = rec.pool(workers=3)
    pool.start()
    pool.submit("a")
    pool.drain()
    wait_for(lambda: rec.of("work") == ["a"], 5, what="a worked")
    pool.submit("late")  # the source is still finishing: this must be worked too
    wait_for(lambda: rec.of("work") == ["a", "late"], 5, what="late worked")
    assert not pool.closed.is_set()
    rec.source_done.set()
    assert pool.closed.wait(5)
    assert rec.exits == 1 and rec.of("discard") == []


def test_stop_discards_what_is_queued_and_waits_for_the_item_in_hand(rec):
    rec.gate.clear()
    pool = rec.pool(workers=1)
    pool.start()
    for i in range(5):
        pool.submit(i)
    wait_for(lambda: rec.of("work") == [0], 5, what="the first item in hand")
    stopper = threading.Thread(target=pool.stop)
    stopper.start()
    wait_for(lambda: rec.of("discard") == [1, 2, 3, 4], 5, what="the queue discarded")
    assert stopper.is_alive()  # still waiting for the handler holding item 0
    rec.gate.set()
    stopper.join(5)
    assert not stopper.is_alive() and pool.closed.is_set()
    # Every discarded item was announced as taken first: credit is never lost.
    assert rec.of("take") == [0, 1, 2, 3, 4] and rec.of("work") == [0] and rec.exits == 1


def test_stop_from_inside_work_returns_and_the_pool_closes_after(rec):
    stopped = threading.Event()

    def work(item: object) -> None:
        rec.note("work", item)
        pool.stop()  # would deadlock if it joined its own thread
        stopped.set()

    pool = rec.pool(workers=2, work=work)
    pool.start()
    pool.submit("x")
    pool.submit("y")
    assert stopped.wait(5) and pool.closed.wait(5)
    assert rec.exits == 1
    worked, discarded = rec.of("work"), rec.of("discard")
    assert sorted(worked + discarded) == ["x", "y"]  # each item either worked or discarded, once


def test_the_last_worker_out_runs_on_exit_once_before_closed(rec):
    seen_closed: list[bool] = []

    def on_exit() -> None:
        seen_closed.append(pool.closed.is_set())

    pool = rec.pool(workers=4, on_exit=on_exit)
    pool.start()
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)
    assert seen_closed == [False]
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("test-pool-"))


def test_a_batch_is_worked_in_order_by_a_single_worker(rec):
    pool = rec.pool(workers=1)
    pool.start()
    pool.submit_many(range(100))
    pool.submit_many(range(100, 200))
    wait_for(lambda: len(rec.of("work")) == 200, 10, what="200 items worked")
    assert rec.of("take") == rec.of("work") == list(range(200))
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)


def test_slow_work_handed_over_as_one_batch_spreads_over_every_worker(rec):
    rec.gate.clear()  # every item blocks its worker until the gate opens
    pool = rec.pool(workers=4)
    pool.start()
    pool.submit_many(["a", "b", "c", "d", "e"])
    wait_for(lambda: len(rec.of("work")) == 4, 10, what="four items in hand at once")
    with rec.lock:
        threads = {t for w, _, t in rec.events if w == "work"}
    assert len(threads) == 4  # one batch, four workers: nothing waits behind a blocked handler
    rec.gate.set()
    wait_for(lambda: sorted(rec.of("work")) == ["a", "b", "c", "d", "e"], 10, what="all five worked")
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)


def test_stop_discards_a_batch_nobody_took_yet(rec):
    rec.gate.clear()
    pool = rec.pool(workers=1)
    pool.start()
    pool.submit("first")
    wait_for(lambda: rec.of("work") == ["first"], 5, what="the first item in hand")
    pool.submit_many([1, 2, 3])
    stopper = threading.Thread(target=pool.stop)
    stopper.start()
    wait_for(lambda: rec.of("discard") == [1, 2, 3], 5, what="the batch discarded")
    rec.gate.set()
    stopper.join(5)
    assert not stopper.is_alive() and pool.closed.is_set() and rec.of("work") == ["first"]


def test_a_lone_item_is_announced_before_its_work_starts(rec):
    # A lone message's credit must come back while its handler runs (the next pull overlaps it).
    rec.gate.clear()
    pool = rec.pool(workers=1)
    pool.start()
    pool.submit("only")
    wait_for(lambda: rec.of("work") == ["only"], 5, what="the item in hand")
    assert rec.of("take") == ["only"]
    rec.gate.set()
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)


def test_slow_work_is_announced_item_by_item_before_it_is_worked(rec):
    # A slow handler's message gives its credit back before the handler runs (the next pull overlaps it).
    rec.gate.clear()
    pool = rec.pool(workers=1)
    pool.start()
    pool.submit_many(range(100))
    wait_for(lambda: rec.of("work") == [0], 5, what="the first item in hand")
    assert rec.of("take") == [0]
    rec.gate.set()
    wait_for(lambda: len(rec.of("take")) == 100, 10, what="all announced")
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)


def test_quick_work_is_announced_in_groups(rec):
    calls: list[int] = []
    pool = rec.pool(workers=1, work=lambda item: None, on_take=lambda items: calls.append(len(items)))
    pool.submit_many(range(1000))  # queued before the worker starts: the queue runs dry only at the end
    pool.start()
    wait_for(lambda: sum(calls) == 1000, 10, what="all announced")
    assert len(calls) < 100 and max(calls) <= 16  # one call per group of quick items, not per item
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)


def test_a_worker_stuck_on_one_item_after_quick_work_gets_help_with_the_queue(rec):
    # Quick work stays on the worker that is awake; once its item hangs, a sleeping worker takes what waits.
    release = threading.Event()

    def work(item: object) -> None:
        rec.note("work", item)
        if item == "stuck":
            release.wait(10)

    pool = rec.pool(workers=2, work=work)
    pool.start()
    pool.submit_many(range(200))  # quick: the pool learns that work is quick
    wait_for(lambda: len(rec.of("work")) == 200, 10, what="the quick items worked")
    pool.submit_many(["stuck", "after-1", "after-2"])
    wait_for(lambda: {"after-1", "after-2"} <= set(rec.of("work")), 10, what="the items behind the stuck one")
    assert not release.is_set()  # handled while the first worker still hangs
    release.set()
    rec.source_done.set()
    pool.drain()
    assert pool.closed.wait(5)
