# Charter: consumer.messages() (MessageStream over the ADR-37 continuous pull)
# against a real nats-server: ordered iteration and acks, next(timeout),
# stop/drain/context manager, a consumer deleted mid-stream, Ctrl-C, the
# buffer bounds (max_messages, max_bytes) with a slow reader, and missed
# heartbeats across a server crash and restart.
from __future__ import annotations

import _thread
import asyncio
import os
import signal
import sys
import threading
import time
import uuid

import pytest

import jetstream_sync as jss
from jetstream_sync._engine import Target
from jetstream_sync.consume import MessageStream

from conftest import wait_for


@pytest.fixture
def name():
    return "MS" + uuid.uuid4().hex[:10].upper()


@pytest.fixture
def stream(js, name):
    return js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="memory")


@pytest.fixture
def subject(name):
    return f"{name.lower()}.a"


@pytest.fixture
def consumer(stream):
    return stream.create_consumer(durable_name="reader", ack_policy="explicit", ack_wait=30.0)


def publish(js, subject, n, size=None, start=0):
    for i in range(start, start + n):
        js.publish_async(subject, b"x" * size if size else f"m{i}".encode())
    js.publish_async_complete(timeout=10.0)


class Sampler:
    """Samples a value on a thread until stopped and keeps the maximum seen."""

    def __init__(self, read):
        self._read = read
        self.max = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-sampler", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.max = max(self.max, self._read())
            self.samples += 1
            self._stop.wait(0.0005)

    def stop(self):
        self._stop.set()
        self._thread.join(5)


# --- iteration and next() -------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_iterating_gets_a_thousand_messages_in_stream_order_and_acks_them(js, stream, subject, consumer):
    publish(js, subject, 1000)
    got = []
    with consumer.messages() as msgs:
        for msg in msgs:
            got.append((msg.metadata.sequence.stream, msg.data))
            msg.ack()
            if len(got) == 1000:
                break
    assert got == [(i + 1, f"m{i}".encode()) for i in range(1000)]
    wait_for(lambda: consumer.info().num_ack_pending == 0, 5, what="every ack to reach the server")
    info = consumer.info()
    assert (info.num_pending, info.delivered.stream_seq, info.ack_floor.stream_seq) == (0, 1000, 1000)


@pytest.mark.timeout(20)
def test_next_with_a_timeout_raises_jss_timeout_error_on_an_empty_stream(js, stream, consumer):
    with consumer.messages() as msgs:
        start = time.monotonic()
        with pytest.raises(jss.TimeoutError):
            msgs.next(timeout=0.5)
        elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 2.0
    assert issubclass(jss.TimeoutError, TimeoutError)


@pytest.mark.timeout(20)
def test_next_returns_a_message_published_while_it_waits(js, stream, subject, consumer):
    with consumer.messages() as msgs:
        with pytest.raises(jss.TimeoutError):
            msgs.next(timeout=0.3)
        js.publish(subject, b"late")
        msg = msgs.next(timeout=5)
        assert msg.data == b"late"
        msg.ack()


# --- stop, drain, context manager -----------------------------------------------------------


@pytest.mark.timeout(20)
def test_stop_ends_iteration(js, stream, subject, consumer):
    publish(js, subject, 3)
    msgs = consumer.messages(max_messages=10)
    first = msgs.next(timeout=5)
    first.ack()
    msgs.stop()
    start = time.monotonic()
    assert list(msgs) == []  # buffered messages are not handed out after stop()
    assert time.monotonic() - start < 2.0
    with pytest.raises(StopIteration):
        msgs.next(timeout=1)
    assert msgs.error is None


@pytest.mark.timeout(20)
def test_stop_naks_buffered_messages_so_the_server_redelivers_them_at_once(js, stream, subject, consumer):
    # ack_wait is 30 s: a redelivery within a few seconds can only come from a NAK.
    publish(js, subject, 10)
    msgs = consumer.messages(max_messages=10)
    first = msgs.next(timeout=5)
    first.ack()
    wait_for(lambda: msgs._engine.buffered() == 9, 5, what="the other nine messages to be buffered")
    msgs.stop()  # and walk away without iterating again, as `break` out of a loop would
    wait_for(lambda: msgs._engine.halted.is_set(), 2, what="the pull to halt")
    start = time.monotonic()
    batch = consumer.fetch(9, expires=5.0)
    again = list(batch)
    assert [m.data for m in again] == [f"m{i}".encode() for i in range(1, 10)], \
        "stop() left the buffered messages un-NAKed: the server holds them until ack_wait (30 s)"
    assert time.monotonic() - start < 5.0
    assert all(m.metadata.num_delivered == 2 for m in again)
    for m in again:
        m.ack()


@pytest.mark.timeout(20)
def test_stop_then_iterating_naks_buffered_messages(js, stream, subject, consumer):
    publish(js, subject, 10)
    msgs = consumer.messages(max_messages=10)
    msgs.next(timeout=5).ack()
    wait_for(lambda: msgs._engine.buffered() == 9, 5, what="the other nine messages to be buffered")
    msgs.stop()
    assert list(msgs) == []
    again = list(consumer.fetch(9, expires=3.0))
    assert [m.data for m in again] == [f"m{i}".encode() for i in range(1, 10)]
    assert all(m.metadata.num_delivered == 2 for m in again)


@pytest.mark.timeout(20)
def test_drain_still_yields_the_buffered_messages_then_ends(js, stream, subject, consumer):
    publish(js, subject, 10)
    msgs = consumer.messages(max_messages=10)
    wait_for(lambda: msgs._engine.buffered() == 10, 5, what="ten messages to be buffered")
    msgs.drain()
    wait_for(lambda: msgs._engine.halted.is_set(), 2, what="the pull to halt")
    publish(js, subject, 5, start=10)  # after drain: must not be pulled any more
    got = []
    for msg in msgs:
        got.append(msg.data)
        msg.ack()
    assert got == [f"m{i}".encode() for i in range(10)]
    assert msgs.error is None
    with pytest.raises(StopIteration):
        msgs.next(timeout=1)
    info = consumer.info()
    assert info.delivered.stream_seq == 10
    assert info.num_pending == 5


@pytest.mark.timeout(20)
def test_leaving_the_context_manager_stops_the_stream(js, stream, subject, consumer):
    publish(js, subject, 5)
    with consumer.messages(max_messages=10) as msgs:
        msg = msgs.next(timeout=5)
        msg.ack()
    wait_for(lambda: msgs._engine.halted.is_set(), 2, what="the pull to halt")
    with pytest.raises(StopIteration):
        msgs.next(timeout=1)
    publish(js, subject, 1, start=5)
    # nothing pulls any more: the new message stays pending on the server
    assert consumer.info().num_waiting == 0


@pytest.mark.timeout(20)
def test_leaving_the_context_manager_with_an_exception_stops_and_propagates(js, stream, subject, consumer):
    publish(js, subject, 2)
    with pytest.raises(RuntimeError, match="boom"):
        with consumer.messages() as msgs:
            msgs.next(timeout=5).ack()
            raise RuntimeError("boom")
    wait_for(lambda: msgs._engine.halted.is_set(), 2, what="the pull to halt")


# --- terminal errors and interrupts ---------------------------------------------------------


@pytest.mark.timeout(20)
def test_deleting_the_consumer_raises_consumer_deleted_after_the_messages_already_received(
        js, stream, subject, consumer):
    publish(js, subject, 5)
    msgs = consumer.messages(max_messages=10)
    wait_for(lambda: msgs._engine.buffered() == 5, 5, what="five messages to be buffered")
    consumer.delete()
    deleted_at = time.monotonic()
    got = []
    with pytest.raises(jss.ConsumerDeletedError):
        for msg in msgs:
            got.append(msg.data)
    assert time.monotonic() - deleted_at < 2.0
    assert got == [f"m{i}".encode() for i in range(5)]
    assert isinstance(msgs.error, jss.ConsumerDeletedError)
    with pytest.raises(jss.ConsumerDeletedError):  # and it stays raised
        msgs.next(timeout=1)


@pytest.mark.timeout(20)
def test_deleting_the_consumer_while_next_waits_raises_consumer_deleted_within_two_seconds(
        js, stream, subject, consumer):
    msgs = consumer.messages()
    wait_for(lambda: consumer.info().num_waiting >= 1, 5, what="the pull request to wait on the server")
    threading.Timer(0.2, consumer.delete).start()
    start = time.monotonic()
    with pytest.raises(jss.ConsumerDeletedError):
        msgs.next(timeout=10)
    assert time.monotonic() - start < 2.2


@pytest.mark.timeout(20)
def test_iteration_is_interruptible_with_ctrl_c_and_the_client_stays_usable(js, stream, subject, consumer):
    msgs = consumer.messages()
    sent = []

    def main_waits_in_next() -> bool:
        # Interrupt only once the main thread waits inside the stream: an interrupt that lands earlier
        # (still in Thread.start(), say, on a loaded machine) would escape the test.
        frame = sys._current_frames().get(threading.main_thread().ident)
        while frame is not None:
            if frame.f_code.co_name == "_next" and "consume" in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    def interrupt():
        wait_for(lambda: consumer.info().num_waiting >= 1, 5, what="the pull request to wait on the server")
        wait_for(main_waits_in_next, 5, what="the main thread to wait in the stream")
        sent.append(time.monotonic())
        _thread.interrupt_main()

    helper = threading.Thread(target=interrupt, name="test-interrupter", daemon=True)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        for _msg in msgs:
            pytest.fail("no message was published")
    caught = time.monotonic()
    helper.join(5)
    assert sent and caught - sent[0] < 1.0
    wait_for(lambda: msgs._engine.halted.is_set(), 2, what="the interrupted stream to stop")
    # the client still works: publish, and pull the message with a new stream
    js.publish(subject, b"after")
    with consumer.messages() as again:
        msg = again.next(timeout=5)
        assert msg.data == b"after"
        msg.ack()


# --- buffer bounds with a slow reader -------------------------------------------------------


@pytest.mark.timeout(30)
def test_max_bytes_mode_delivers_every_message_and_never_buffers_more_than_max_bytes(
        js, stream, subject, consumer):
    publish(js, subject, 60, size=200)
    max_bytes = 2000
    msgs = consumer.messages(max_bytes=max_bytes)
    engine = msgs._engine
    sampler = Sampler(lambda: engine._credit.buffered_bytes)
    got = []
    sizes = set()
    try:
        for msg in msgs:
            assert engine._credit.buffered_bytes <= max_bytes
            got.append(msg.metadata.sequence.stream)
            sizes.add(msg.size)
            msg.ack()
            if len(got) == 60:
                break
            time.sleep(0.005)  # a slow reader: the buffer fills up while it works
    finally:
        sampler.stop()
        msgs.stop()
    assert got == list(range(1, 61))
    assert sampler.samples > 10
    assert 0 < sampler.max <= max_bytes
    # the buffer actually filled near its limit (so the bound was exercised)
    assert sampler.max > max_bytes - 2 * max(sizes)
    assert engine.pulls > 1


@pytest.mark.timeout(30)
def test_a_slow_reader_never_has_more_than_max_messages_buffered(js, stream, subject, consumer):
    publish(js, subject, 100)
    msgs = consumer.messages(max_messages=10)
    engine = msgs._engine
    sampler = Sampler(lambda: engine.buffered())
    got = []
    try:
        for msg in msgs:
            assert engine.buffered() <= 10
            assert msgs._q.qsize() <= 10
            got.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(got) == 100:
                break
            time.sleep(0.003)  # a slow reader
    finally:
        sampler.stop()
        msgs.stop()
    assert got == list(range(1, 101))
    assert 5 < sampler.max <= 10  # it filled past its threshold, and never past the limit


@pytest.mark.timeout(20)
def test_max_messages_one_never_stalls(js, stream, subject, consumer):
    publish(js, subject, 20)
    got = []
    with consumer.messages(max_messages=1) as msgs:
        for msg in msgs:
            assert msgs._engine.buffered() <= 1
            got.append(msg.data)
            msg.ack()
            if len(got) == 20:
                break
    assert got == [f"m{i}".encode() for i in range(20)]


# --- heartbeats and server restarts ---------------------------------------------------------


@pytest.fixture
def fresh_client(fresh_server):
    client = jss.connect(fresh_server.url, timeout=5.0, reconnect_time_wait=0.2, max_reconnect_attempts=-1)
    yield client
    client.close()


def hb_consumer(client):
    js = client.jetstream()
    js.create_stream(name="HB", subjects=["hb.>"], storage="file")
    return js, js.create_consumer("HB", durable_name="hb", ack_policy="explicit")


def wait_for_warning(msgs, kind, within):
    """Iterate (nothing is published) until a warning of ``kind`` shows up; return when it did."""
    start = time.monotonic()
    while not any(isinstance(w, kind) for w in msgs.warnings):
        with pytest.raises(jss.TimeoutError):
            msgs.next(timeout=0.1)
        assert time.monotonic() - start < within, f"no {kind.__name__} warning; got {msgs.warnings!r}"
    return time.monotonic() - start


@pytest.mark.timeout(40)
def test_a_silent_server_gives_a_missed_heartbeat_warning_and_iteration_goes_on(fresh_server, fresh_client):
    # SIGSTOP freezes the server with the connection still up: no heartbeats
    # arrive, and the client has no disconnect to pause its timer for.
    js, consumer = hb_consumer(fresh_client)
    js.publish("hb.a", b"before")
    with consumer.messages(expires=1.0, idle_heartbeat=0.5) as msgs:
        first = msgs.next(timeout=5)
        assert first.data == b"before"
        first.double_ack(timeout=5)
        pid = fresh_server.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            assert wait_for_warning(msgs, jss.NoHeartbeatError, within=2.5) >= 0.9
        finally:
            os.kill(pid, signal.SIGCONT)
        assert fresh_client.is_connected
        js.publish("hb.a", b"after", timeout=5.0)
        msg = msgs.next(timeout=5)
        assert msg.data == b"after"
        msg.ack()
        assert msgs.error is None


@pytest.mark.timeout(40)
def test_heartbeats_arriving_give_no_warning(fresh_client):
    js, consumer = hb_consumer(fresh_client)
    with consumer.messages(expires=1.0, idle_heartbeat=0.5) as msgs:
        deadline = time.monotonic() + 3.0  # three expiries, six heartbeat intervals
        while time.monotonic() < deadline:
            with pytest.raises(jss.TimeoutError):
                msgs.next(timeout=0.25)
        assert msgs.warnings == []
        assert msgs._engine.pulls >= 2  # expired pulls were renewed


@pytest.mark.timeout(40)
def test_iteration_resumes_after_a_server_crash_and_restart(fresh_server, fresh_client):
    js, consumer = hb_consumer(fresh_client)
    js.publish("hb.a", b"before")
    with consumer.messages(expires=1.0, idle_heartbeat=0.5) as msgs:
        first = msgs.next(timeout=5)
        assert first.data == b"before"
        first.double_ack(timeout=5)
        fresh_server.kill()
        wait_for(lambda: not fresh_client.is_connected, 5, what="the client to see the crash")
        with pytest.raises(jss.TimeoutError):  # nothing arrives, nothing ends the stream
            msgs.next(timeout=1.5)
        fresh_server.start()
        wait_for(lambda: fresh_client.is_connected, 10, what="the client to reconnect")
        js.publish("hb.a", b"after", timeout=5.0)
        deadline = time.monotonic() + 10
        while True:
            msg = msgs.next(timeout=max(0.1, deadline - time.monotonic()))
            msg.ack()
            if msg.data == b"after":
                break
            assert msg.data == b"before"  # only a redelivery of the first may come first
        assert msgs.error is None


@pytest.mark.timeout(30)
def test_stop_from_another_thread_ends_an_iteration_blocked_on_an_empty_stream(js, stream, subject, consumer):
    for _ in range(20):  # the race between stop() and the end marker is short: try it often
        msgs = consumer.messages(max_messages=10)
        ended = threading.Event()

        def read():
            for _msg in msgs:
                pass
            ended.set()

        reader = threading.Thread(target=read, name="test-reader", daemon=True)
        reader.start()
        msgs.stop()
        assert ended.wait(3.0), "the reader stayed blocked after stop() from another thread"
        reader.join(2)


@pytest.mark.timeout(30)
def test_a_message_larger_than_max_bytes_is_reported_once_and_does_not_make_the_pull_spin(
        js, stream, subject, consumer):
    js.publish(subject, b"x" * 200)
    msgs = consumer.messages(max_bytes=100)
    with pytest.raises(jss.TimeoutError):
        msgs.next(timeout=1.5)
    msgs.stop()
    assert any("larger than max_bytes" in str(w) for w in msgs.warnings)
    assert msgs._engine.pulls <= 4  # one pull, then one per 1 s back-off; not thousands


# --- the end means every ack reached the server -------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["stop", "drain"])
def test_once_the_stream_ends_every_ack_has_reached_the_server_two_hundred_times_in_a_row(
        js, subject, consumer, how):
    for run in range(200):
        publish(js, subject, 3)
        with consumer.messages(max_messages=10) as msgs:
            if how == "drain":
                msgs.next(timeout=5).ack()
                # All three in before the drain: one still on the wire when the pull ends is handed back
                # (NAKed), which is right but leaves it pending (seen once, two suites at once).
                wait_for(lambda: msgs._engine.received >= 3, 5, what=f"run {run}: all three delivered")
                msgs.drain()
                for msg in msgs:  # the buffered rest, then the end
                    msg.ack()
            else:
                for _ in range(3):
                    msgs.next(timeout=5).ack()
        # stop() on leaving the block; the end of iteration after drain()
        # The server has read every ack (the client's PING/PONG); its consumer applies them from its own
        # queue, so on a loaded machine info() may need a moment (seen once in 800 runs, two suites at once).
        wait_for(lambda: consumer.info().num_ack_pending == 0, 2, what=f"run {run}: every ack applied")


@pytest.mark.timeout(30)
def test_a_start_that_finishes_as_its_wait_gives_up_is_stopped_not_left_running(client):
    # The wait for an engine's start timed out, and the start finished on the loop at that very moment
    # (its consumer made, its inbox subscribed): nobody will read it, so it must be stopped.
    class LateEngine:
        def __init__(self, target, opts, sink):
            self.halted = threading.Event()
            self.stopped = threading.Event()

        async def start(self):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                return  # finished all the same, as the caller's wait gave up

        def stop_soon(self):
            self.stopped.set()

    engines = []

    def factory(target, opts, sink):
        engines.append(LateEngine(target, opts, sink))
        return engines[-1]

    target = Target(conn=client._conn, label="a late start", timeout=0.05, name="late")
    with pytest.raises(jss.TimeoutError):
        MessageStream(target, None, engine=factory)
    assert engines[0].stopped.wait(5)
