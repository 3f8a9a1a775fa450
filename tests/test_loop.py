# Charter: unit tests of jetstream_sync._loop without a server: the
# EventLoopThread bridge (results, exceptions, timeouts + grace, stop failing
# waiters, the loop-thread guard, Ctrl-C, the size of socket reads), the Waiter
# (values, reuse, deadlines, wake-ups) and the Outbox (order, batching, errors).
# Everything here runs on a private loop; no NATS involved.
from __future__ import annotations

import _thread
import asyncio
import builtins
import inspect
import logging
import socket
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync._loop import BRIDGE_GRACE, READ_SIZE, WAKE_INTERVAL, EventLoopThread, Outbox, Waiter

from conftest import wait_for


@pytest.fixture
def lt():
    loop_thread = EventLoopThread("jetstream-sync-loop-test")
    loop_thread.start()
    yield loop_thread
    loop_thread.stop()


def run_in_thread(fn, *args):
    """Run fn(*args) on a plain thread; return (thread, box) where box gets 'result'/'error'/'elapsed'."""
    box: dict = {}

    def target():
        t0 = time.monotonic()
        try:
            box["result"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            box["error"] = exc
        box["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


# --- run() -------------------------------------------------------------------


class TestRun:
    @pytest.mark.timeout(10)
    def test_run_returns_the_coroutine_result(self, lt):
        async def answer():
            await asyncio.sleep(0)
            return 42

        assert lt.run(answer(), 5.0) == 42

    @pytest.mark.timeout(10)
    def test_run_executes_the_coroutine_on_the_loop_thread(self, lt):
        async def where():
            return threading.current_thread()

        assert lt.run(where(), 5.0) is lt.thread
        assert lt.thread.name == "jetstream-sync-loop-test"
        assert lt.thread.daemon

    @pytest.mark.timeout(10)
    def test_run_returns_a_result_that_takes_longer_than_one_wake_interval(self, lt):
        async def slow():
            await asyncio.sleep(0.6)
            return "late"

        assert lt.run(slow(), None) == "late"
        assert lt.run(_sleep_then(0.6, "late"), 2.0) == "late"

    @pytest.mark.timeout(10)
    def test_run_raises_the_exception_the_coroutine_raised(self, lt):
        async def boom():
            raise ValueError("bad value from the loop")

        with pytest.raises(ValueError, match="bad value from the loop"):
            lt.run(boom(), 5.0)

    @pytest.mark.timeout(10)
    @pytest.mark.parametrize("delay", [0.0, 0.4], ids=["at-once", "after-a-wake-interval"])
    def test_a_builtin_timeout_error_from_the_coroutine_is_raised_as_is_not_as_a_wait_timeout(self, lt, delay):
        # In 3.11 concurrent.futures.TimeoutError is builtins.TimeoutError: the
        # bridge must not mistake the coroutine's error for its own wait expiring.
        async def times_out():
            await asyncio.sleep(delay)
            raise builtins.TimeoutError("the coroutine's own timeout")

        t0 = time.monotonic()
        with pytest.raises(builtins.TimeoutError) as info:
            lt.run(times_out(), 10.0)
        assert time.monotonic() - t0 < delay + 1.0
        assert type(info.value) is builtins.TimeoutError
        assert str(info.value) == "the coroutine's own timeout"

    @pytest.mark.timeout(10)
    def test_an_asyncio_wait_for_timeout_inside_the_coroutine_propagates_with_no_limit_on_the_wait(self, lt):
        async def inner_wait_for():
            await asyncio.wait_for(asyncio.sleep(10), 0.3)

        with pytest.raises(builtins.TimeoutError) as info:
            lt.run(inner_wait_for(), None)
        assert not isinstance(info.value, jss.TimeoutError)

    @pytest.mark.timeout(10)
    def test_a_hung_coroutine_raises_jss_timeout_error_after_timeout_plus_grace_and_is_cancelled(self, lt):
        cancelled = threading.Event()

        async def hangs():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        t0 = time.monotonic()
        with pytest.raises(jss.TimeoutError, match="did not finish") as info:
            lt.run(hangs(), 0.3)
        elapsed = time.monotonic() - t0
        assert isinstance(info.value, builtins.TimeoutError)  # jss.TimeoutError is also the builtin
        assert 0.3 + BRIDGE_GRACE - 0.05 <= elapsed < 0.3 + BRIDGE_GRACE + 1.0
        assert cancelled.wait(2), "the hung coroutine was not cancelled"
        # the loop is still usable
        assert lt.run(_sleep_then(0, "ok"), 5.0) == "ok"

    @pytest.mark.timeout(10)
    def test_run_from_many_threads_at_once_returns_each_its_own_result(self, lt):
        results = {}

        def worker(i):
            for j in range(50):
                results[(i, j)] = lt.run(_sleep_then(0, (i, j)), 5.0)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(8)
        assert len(results) == 400
        assert all(k == v for k, v in results.items())

    @pytest.mark.timeout(10)
    def test_run_on_the_loop_thread_raises_runtime_error_saying_it_would_deadlock(self, lt):
        box = {}
        done = threading.Event()

        def on_loop():
            coro = _sleep_then(0, "never")
            try:
                lt.run(coro, 1.0)
            except BaseException as exc:  # noqa: BLE001
                box["error"] = exc
            box["coro_state"] = inspect.getcoroutinestate(coro)
            done.set()

        lt.call_soon(on_loop)
        assert done.wait(5)
        assert isinstance(box["error"], RuntimeError)
        assert "deadlock" in str(box["error"])
        assert "event loop thread" in str(box["error"])
        assert box["coro_state"] == inspect.CORO_CLOSED  # no "never awaited" warning

    @pytest.mark.timeout(10)
    def test_keyboard_interrupt_in_run_returns_promptly_cancels_the_coroutine_and_keeps_the_loop_usable(self, lt):
        cancelled = threading.Event()

        async def hangs():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        timer = threading.Timer(0.3, _thread.interrupt_main)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # started inside: its interrupt cannot escape the test
            timer.start()
            lt.run(hangs(), None)
        timer.cancel()
        assert time.monotonic() - t0 < 0.3 + 1.0
        assert cancelled.wait(2), "the interrupted coroutine was not cancelled"
        assert lt.run(_sleep_then(0, "still usable"), 5.0) == "still usable"


# --- stop() ------------------------------------------------------------------


class TestStop:
    @pytest.mark.timeout(10)
    def test_stop_fails_pending_run_waiters_with_client_closed_error_promptly(self, lt):
        started = threading.Event()

        async def hangs():
            started.set()
            await asyncio.sleep(60)

        waiters = [run_in_thread(lt.run, hangs() if i == 0 else _sleep_then(60, None), None) for i in range(3)]
        assert started.wait(5)
        wait_for(lambda: len(asyncio.all_tasks(lt.loop)) >= 3, what="three tasks on the loop")
        t0 = time.monotonic()
        lt.stop(reason="stopped by the test")
        for t, box in waiters:
            t.join(2)
            assert not t.is_alive(), "a run() waiter was not released by stop()"
            assert isinstance(box.get("error"), jss.ClientClosedError), box
            assert "stopped by the test" in str(box["error"])
        assert time.monotonic() - t0 < 2.0

    @pytest.mark.timeout(15)
    def test_stop_fails_a_run_waiter_even_when_its_coroutine_ignores_cancellation(self, lt):
        started = threading.Event()

        async def stubborn():
            started.set()
            while True:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    continue  # refuses to die

        t, box = run_in_thread(lt.run, stubborn(), None)
        assert started.wait(5)
        lt.stop(timeout=1.0)
        t.join(3)
        assert not t.is_alive(), "run() kept waiting on a coroutine that outlived the loop"
        assert isinstance(box.get("error"), jss.ClientClosedError), box

    @pytest.mark.timeout(10)
    def test_stop_joins_the_thread_and_is_idempotent(self, lt):
        lt.stop()
        assert lt.closed
        assert not lt.thread.is_alive()
        assert lt.loop.is_closed()
        t0 = time.monotonic()
        lt.stop()
        lt.stop(reason="again")
        assert time.monotonic() - t0 < 0.1

    @pytest.mark.timeout(10)
    def test_run_after_stop_raises_client_closed_error_and_closes_the_coroutine(self, lt):
        lt.stop(reason="closed for the test")
        coro = _sleep_then(0, None)
        with pytest.raises(jss.ClientClosedError, match="closed for the test"):
            lt.run(coro, 1.0)
        assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED

    @pytest.mark.timeout(10)
    def test_call_soon_after_stop_raises_client_closed_error(self, lt):
        lt.stop()
        with pytest.raises(jss.ClientClosedError):
            lt.call_soon(print, "never")

    @pytest.mark.timeout(10)
    def test_stop_called_on_the_loop_thread_stops_without_joining_itself(self, lt):
        lt.call_soon(lt.stop)
        wait_for(lambda: not lt.thread.is_alive(), what="the loop thread to end")
        assert lt.closed
        with pytest.raises(jss.ClientClosedError):
            lt.run(_sleep_then(0, None), 1.0)

    @pytest.mark.timeout(10)
    def test_call_soon_runs_the_function_on_the_loop_thread(self, lt):
        ran_on = []
        done = threading.Event()
        lt.call_soon(lambda: (ran_on.append(threading.current_thread()), done.set()))
        assert done.wait(5)
        assert ran_on == [lt.thread]
        assert lt.on_loop_thread() is False

    @pytest.mark.timeout(10)
    def test_a_spawned_task_that_fails_is_logged_with_its_name(self, lt, caplog):
        async def fails():
            raise RuntimeError("background failure")

        with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
            lt.call_soon(lambda: lt.spawn(fails(), name="jetstream-sync-test-task"))
            wait_for(lambda: "jetstream-sync-test-task" in caplog.text, what="the failure to be logged")
        assert "background failure" in caplog.text


# --- socket reads ----------------------------------------------------------------


@pytest.mark.timeout(20)
def test_sockets_on_the_loop_are_read_in_chunks_below_mallocs_mmap_threshold_and_arrive_whole(lt):
    # A larger read buffer would be mapped and unmapped by malloc on every read off the main thread.
    assert READ_SIZE < 128 * 1024
    listener = socket.create_server(("127.0.0.1", 0))
    payload = bytes(range(256)) * 2000  # 512,000 bytes: several reads
    try:
        async def connect():
            return await asyncio.open_connection(*listener.getsockname())

        reader, writer = lt.run(connect(), 5)
        peer, _ = listener.accept()
        with peer:
            assert writer.transport.max_size == READ_SIZE
            peer.sendall(payload)

            async def read_all():
                return await reader.readexactly(len(payload))

            assert lt.run(read_all(), 10) == payload
        writer.close()
    finally:
        listener.close()


# --- Waiter --------------------------------------------------------------------


class TestWaiter:
    @pytest.mark.timeout(10)
    def test_the_loop_hands_each_value_to_the_waiting_thread_and_the_waiter_serves_again(self, lt):
        waiter = Waiter()
        for value in (b"first", b"second", RuntimeError("third")):
            lt.loop.call_soon_threadsafe(waiter.fire, value)
            assert waiter.wait(time.monotonic() + 5, lambda: AssertionError("not fired")) is value

    @pytest.mark.timeout(10)
    def test_a_wait_raises_the_timeout_error_at_its_deadline_and_not_before(self):
        waiter = Waiter()
        started = time.monotonic()
        with pytest.raises(jss.TimeoutError, match="gave up"):
            waiter.wait(started + 0.4, lambda: jss.TimeoutError("gave up"))
        assert 0.4 <= time.monotonic() - started < 2.0

    @pytest.mark.timeout(10)
    def test_a_wait_without_deadline_wakes_every_interval_and_check_can_end_it(self):
        checks: list[float] = []

        def check():
            checks.append(time.monotonic())
            if len(checks) == 3:
                raise jss.ClientClosedError("gone")

        started = time.monotonic()
        with pytest.raises(jss.ClientClosedError):
            Waiter().wait(None, lambda: AssertionError("no deadline"), check)
        assert 3 * WAKE_INTERVAL <= time.monotonic() - started < 3 * WAKE_INTERVAL + 2.0

    @pytest.mark.timeout(10)
    def test_ctrl_c_lands_in_a_wait_within_a_wake_interval(self):
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # started inside: its interrupt cannot escape the test
            timer = threading.Timer(0.3, _thread.interrupt_main)
            timer.start()
            Waiter().wait(None, lambda: AssertionError("no deadline"))
        timer.cancel()
        assert time.monotonic() - started < 0.3 + WAKE_INTERVAL + 1.0


# --- Outbox --------------------------------------------------------------------


class TestOutbox:
    @pytest.mark.timeout(20)
    def test_outbox_keeps_each_threads_put_order_and_flushes_in_batches(self, lt):
        batches = []
        flushed_on = set()

        def flush(items):
            flushed_on.add(threading.current_thread())
            batches.append(list(items))

        box = Outbox(lt, flush)
        n_threads, per_thread = 8, 2000
        barrier = threading.Barrier(n_threads)

        def producer(i):
            barrier.wait()
            for j in range(per_thread):
                box.put((i, j))

        threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        total = n_threads * per_thread
        wait_for(lambda: sum(len(b) for b in batches) >= total, what="every item to be flushed")
        flat = [item for b in batches for item in b]
        assert len(flat) == total
        assert flushed_on == {lt.thread}
        for i in range(n_threads):
            assert [j for (k, j) in flat if k == i] == list(range(per_thread)), f"thread {i} order broken"
        assert len(batches) < total
        assert box.pending() == 0

    @pytest.mark.timeout(10)
    def test_puts_made_while_the_loop_is_busy_are_flushed_in_one_batch(self, lt):
        batches = []
        busy = threading.Event()
        release = threading.Event()
        lt.call_soon(lambda: (busy.set(), release.wait(5)))
        assert busy.wait(5)
        box = Outbox(lt, lambda items: batches.append(list(items)))
        for i in range(100):
            box.put(i)
        assert box.pending() == 100
        release.set()
        wait_for(lambda: batches, what="a flush")
        wait_for(lambda: box.pending() == 0, what="the outbox to empty")
        assert batches == [list(range(100))]

    @pytest.mark.timeout(10)
    def test_a_flush_that_raises_is_logged_and_later_puts_still_flush(self, lt, caplog):
        seen = []

        def flush(items):
            seen.extend(items)
            if "bad" in items:
                raise RuntimeError("flush bug")

        box = Outbox(lt, flush)
        with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
            box.put("bad")
            wait_for(lambda: "bad" in seen, what="the first flush")
            box.put("good")
            wait_for(lambda: "good" in seen, what="a later flush")
        assert "outbox flush failed" in caplog.text

    @pytest.mark.timeout(10)
    def test_put_after_stop_raises_client_closed_error(self, lt):
        box = Outbox(lt, lambda items: None)
        lt.stop()
        with pytest.raises(jss.ClientClosedError):
            box.put("late")


async def _sleep_then(delay, value):
    await asyncio.sleep(delay)
    return value
