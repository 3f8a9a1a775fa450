# Charter: the Consumer handle against a real nats-server: info/cached_info/
# delete, and the one-shot pulls (fetch, fetch_no_wait, next): counts, bytes,
# expiry (each next() timeout its own), ordering and metadata, a consumer deleted
# while a pull waits, and fetch options refused before any pull request is sent.
from __future__ import annotations

import builtins
import threading
import time

import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing, wait_for


@pytest.fixture
def stream(js):
    return js.create_stream(name="CS", subjects=["cs.>"], storage="memory")


@pytest.fixture
def consumer(stream):
    return stream.create_consumer(durable_name="worker")


def publish(js, n, subject="cs.a", size=None):
    for i in range(n):
        js.publish(subject, b"x" * size if size else f"m{i}".encode())


def delete_once_waiting(js, stream: str, name: str):
    """Start a thread that deletes the consumer once a pull request waits on it.

    Waits on the server's state (num_waiting), not on a clock. Returns the
    thread and a list that receives any exception it hit.
    """
    failures: list[BaseException] = []

    def run() -> None:
        try:
            deadline = time.monotonic() + 5.0
            while js.consumer_info(stream, name).num_waiting < 1:
                if time.monotonic() > deadline:
                    raise AssertionError("the pull request never reached the server")
                time.sleep(0.01)
            js.delete_consumer(stream, name)
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    thread = threading.Thread(target=run, name="test-deleter", daemon=True)
    thread.start()
    return thread, failures


# --- info, cached_info, delete -------------------------------------------------------------


def test_a_consumer_handle_knows_its_names_and_info(js, stream, consumer):
    assert (consumer.name, consumer.stream_name) == ("worker", "CS")
    info = consumer.cached_info
    assert isinstance(info, jss.ConsumerInfo)
    assert (info.name, info.stream_name, info.config.durable_name) == ("worker", "CS", "worker")


def test_cached_info_makes_no_request_and_info_refreshes_it(js, stream, consumer, api_spy):
    publish(js, 3)
    mark = api_spy.mark(js)
    assert consumer.cached_info.num_pending == 0  # as create_consumer said
    sentinel = api_spy.sync(js)
    assert api_spy.since(mark) == [sentinel]
    info = consumer.info()
    assert info.num_pending == 3
    assert consumer.cached_info is info


def test_delete_removes_the_consumer(js, stream, consumer):
    assert consumer.delete() is None
    assert list(stream.consumer_names()) == []
    with pytest.raises(jss.ConsumerNotFoundError):
        consumer.info()
    with pytest.raises(jss.ConsumerNotFoundError):
        consumer.delete()
    assert consumer.cached_info.name == "worker"  # the handle still says what it last knew


# --- fetch -----------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_fetch_yields_up_to_max_messages_in_order_with_metadata(js, stream, consumer):
    publish(js, 25)
    # The server counts a consumer's pending messages asynchronously; wait until it has all 25.
    wait_for(lambda: consumer.info().num_pending == 25, what="the consumer to count 25 pending")
    batch = consumer.fetch(max_messages=10)
    assert isinstance(batch, jss.MessageBatch)
    msgs = list(batch)
    assert [m.data for m in msgs] == [f"m{i}".encode() for i in range(10)]
    for i, m in enumerate(msgs, start=1):
        md = m.metadata
        assert (md.stream, md.consumer) == ("CS", "worker")
        assert (md.sequence.stream, md.sequence.consumer, md.num_delivered) == (i, i, 1)
        assert md.num_pending == 25 - i
        assert md.timestamp.tzinfo is not None
        m.ack()
    assert batch.error is None
    more = [m.data for m in consumer.fetch(max_messages=10)]
    assert more == [f"m{i}".encode() for i in range(10, 20)]


@pytest.mark.timeout(20)
def test_fetch_sends_the_pull_request_when_called_not_on_first_iteration(js, stream, consumer, api_spy):
    mark = api_spy.mark(js)
    with consumer.fetch(max_messages=5, expires=5) as batch:
        api_spy.sync(js)
        assert "$JS.API.CONSUMER.MSG.NEXT.CS.worker" in api_spy.since(mark)
        assert consumer.info().num_waiting == 1
        publish(js, 1)
        assert next(batch).data == b"m0"


@pytest.mark.timeout(20)
def test_fetch_on_an_empty_consumer_returns_an_empty_batch_when_it_expires(consumer):
    start = time.monotonic()
    batch = consumer.fetch(max_messages=10, expires=1)
    assert list(batch) == []
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 2.5, elapsed  # ends at the 1 s expiry, not early and not at a 30 s default
    assert batch.error is None


@pytest.mark.timeout(30)
def test_fetch_with_a_timeout_returns_within_it_not_at_the_default_expiry(js, consumer):
    start = time.monotonic()
    batch = consumer.fetch(10, timeout=1)
    assert list(batch) == [] and batch.error is None   # an empty batch, as when expires passes
    assert time.monotonic() - start < 10.0             # not the 30 s default expiry
    publish(js, 2)
    assert [m.data for m in consumer.fetch(10, timeout=1)] == [b"m0", b"m1"]


@pytest.mark.timeout(20)
def test_fetch_returns_what_arrived_before_expiry(js, consumer):
    publish(js, 3)
    start = time.monotonic()
    msgs = list(consumer.fetch(max_messages=10, expires=1))
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    assert time.monotonic() - start < 2.5


@pytest.mark.timeout(20)
def test_fetch_max_bytes_returns_only_the_messages_that_fit(js, consumer):
    publish(js, 5, size=1000)  # each about 1050 bytes as the server counts them
    start = time.monotonic()
    msgs = list(consumer.fetch(max_bytes=2500, expires=5))
    assert len(msgs) == 2
    assert sum(m.size for m in msgs) <= 2500
    assert [m.metadata.sequence.stream for m in msgs] == [1, 2]
    assert time.monotonic() - start < 2.0  # ended by the byte limit, not by expiry
    assert [m.metadata.sequence.stream for m in consumer.fetch(max_bytes=2500, expires=5)] == [3, 4]


@pytest.mark.timeout(20)
def test_fetch_no_wait_returns_what_is_available_and_ends_at_once(js, consumer):
    publish(js, 3)
    start = time.monotonic()
    assert [m.data for m in consumer.fetch_no_wait(10)] == [b"m0", b"m1", b"m2"]
    assert list(consumer.fetch_no_wait(max_messages=10)) == []
    publish(js, 2, size=1000)
    assert len(list(consumer.fetch_no_wait(max_bytes=1500))) == 1
    assert time.monotonic() - start < 2.0  # three pulls, none waiting for an expiry


@pytest.mark.timeout(20)
def test_a_fetch_abandoned_early_hands_back_what_it_did_not_yield_for_prompt_redelivery(js, stream):
    slow = stream.create_consumer(durable_name="slow", ack_wait=60)
    publish(js, 5)
    batch = slow.fetch(5, expires=5.0)
    first = next(batch)
    first.ack()
    wait_for(lambda: slow.info().num_ack_pending == 4, 5, what="the other 4 delivered to the batch")
    batch.stop()  # 4 unread: NAKed, not left to the 60 s ack wait
    again = list(slow.fetch(4, expires=5.0))
    assert [(m.data, m.metadata.num_delivered) for m in again] == [(b"m%d" % i, 2) for i in range(1, 5)]


@pytest.mark.timeout(20)
def test_next_returns_one_message(js, consumer):
    publish(js, 2)
    msg = consumer.next(timeout=5)
    assert isinstance(msg, jss.Msg)
    assert (msg.data, msg.metadata.sequence.stream) == (b"m0", 1)
    msg.ack()
    assert consumer.next(timeout=5).data == b"m1"


@pytest.mark.timeout(20)
def test_next_raises_timeout_error_when_nothing_arrives(consumer):
    start = time.monotonic()
    with pytest.raises(jss.TimeoutError) as info:
        consumer.next(timeout=0.5)
    assert isinstance(info.value, builtins.TimeoutError)
    assert 0.4 <= time.monotonic() - start < 2.5


@pytest.mark.timeout(30)
def test_each_timeout_of_next_is_the_expiry_of_its_own_pull(js, consumer):
    # next() keeps the request of each timeout it was given: a short one must not cut a longer one.
    for _ in range(2):
        start = time.monotonic()
        with pytest.raises(jss.TimeoutError):
            consumer.next(timeout=0.5)
        assert time.monotonic() - start < 2.5
    later = threading.Timer(1.5, publish, args=(js, 1))
    later.start()
    try:
        assert consumer.next(timeout=6).data == b"m0"  # still waiting when it arrives, 1.5 s in
    finally:
        later.cancel()
        later.join(5)


@pytest.mark.timeout(20)
def test_deleting_the_consumer_during_a_waiting_fetch_raises_consumer_deleted(js, consumer):
    batch = consumer.fetch(max_messages=10, expires=10)
    thread, failures = delete_once_waiting(js, "CS", "worker")
    start = time.monotonic()
    with pytest.raises(jss.ConsumerDeletedError):
        list(batch)
    assert time.monotonic() - start < 5.0  # well before the 10 s expiry
    assert isinstance(batch.error, jss.ConsumerDeletedError)
    thread.join(5)
    assert failures == []


@pytest.mark.timeout(20)
def test_messages_received_before_the_consumer_was_deleted_are_yielded_first(js, consumer):
    publish(js, 2)
    batch = consumer.fetch(max_messages=10, expires=10)
    thread, failures = delete_once_waiting(js, "CS", "worker")
    got = []
    with pytest.raises(jss.ConsumerDeletedError):
        for msg in batch:
            got.append(msg.data)
    assert got == [b"m0", b"m1"]
    thread.join(5)
    assert failures == []


@pytest.mark.timeout(20)
def test_deleting_the_consumer_during_next_raises_consumer_deleted(js, consumer):
    thread, failures = delete_once_waiting(js, "CS", "worker")
    start = time.monotonic()
    with pytest.raises(jss.ConsumerDeletedError):
        consumer.next(timeout=10)
    assert time.monotonic() - start < 5.0
    thread.join(5)
    assert failures == []


# --- fetch options are checked before a pull is sent -----------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda c: c.fetch(max_messages=5, max_bytes=1000), ValueError, "max_messages and max_bytes"),
    (lambda c: c.fetch(), ValueError, "max_messages or max_bytes"),
    (lambda c: c.fetch(0), ValueError, "max_messages"),
    (lambda c: c.fetch(-3), ValueError, "max_messages"),
    (lambda c: c.fetch(max_bytes=0), ValueError, "max_bytes"),
    (lambda c: c.fetch(max_bytes=-1), ValueError, "max_bytes"),
    (lambda c: c.fetch(1.5), TypeError, "max_messages"),
    (lambda c: c.fetch(5, expires=0), ValueError, "expires"),
    (lambda c: c.fetch(5, expires=-1), ValueError, "expires"),
    (lambda c: c.fetch(5, expires=2, idle_heartbeat=1.5), ValueError, "idle_heartbeat"),
    (lambda c: c.fetch(5, idle_heartbeat=0), ValueError, "idle_heartbeat"),
    (lambda c: c.fetch_no_wait(), ValueError, "max_messages or max_bytes"),
    (lambda c: c.fetch_no_wait(5, max_bytes=100), ValueError, "max_messages and max_bytes"),
    (lambda c: c.fetch_no_wait(0), ValueError, "max_messages"),
    (lambda c: c.next(timeout=0), ValueError, "expires|timeout"),
    (lambda c: c.next(timeout=-1), ValueError, "expires|timeout"),
])
def test_bad_fetch_options_are_refused_before_a_pull_is_sent(js, consumer, api_spy, call, exc, match):
    publish(js, 1)
    assert_sends_nothing(api_spy, js, lambda: call(consumer), exc, match)
    assert consumer.info().num_pending == 1  # nothing was delivered either


@pytest.mark.timeout(30)
def test_next_from_several_threads_on_one_handle_delivers_each_message_once(js, consumer):
    publish(js, 200)
    got: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def reader():
        try:
            for _ in range(50):
                msg = consumer.next(timeout=5)
                msg.ack()
                with lock:
                    got.append(msg.metadata.sequence.stream)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader, name=f"test-next-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors
    assert sorted(got) == list(range(1, 201))


@pytest.mark.timeout(30)
def test_repeated_next_calls_reuse_one_subscription(js, consumer, client):
    publish(js, 20)
    subs_before = len(client._conn._nc._subs)
    for _ in range(20):
        consumer.next(timeout=5).ack()
    assert len(client._conn._nc._subs) <= subs_before + 1
