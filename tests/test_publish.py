# JetStream publishing against a real nats-server: PubAcks, msg_id dedup, the expected_*
# headers, headers and payload round trips, argument checks, no responders, and the
# publish_async window (bounded in flight, blocking when full, completion, close, reconnect)
# plus msg_id retries through a server restart, and publish_async's own msg_id retries (its slot
# kept through the backoff, attempts bounded, timeouts retried, a close ending them); the blocking
# publish's own wait (interrupted, given up, many threads at once); the headers of one publish as
# pure unit tests.
# Code under test: jetstream.py, _publish.py.
from __future__ import annotations

import _thread
import builtins
import concurrent.futures
import os
import signal
import sys
import threading
import time
import uuid

import pytest

import jetstream_sync as jss
from conftest import wait_for
from jetstream_sync import _publish
from jetstream_sync._publish import publish_headers, publish_parts


def unique(prefix: str = "P") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10].upper()}"


@pytest.fixture
def stream(js):
    """A fresh stream capturing ``<name>.>``; the js fixture deletes it afterwards."""
    name = unique()
    return js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")


@pytest.fixture
def silent_stream(js):
    """A stream that stores messages but never sends a PubAck (no_ack): publishes to it stay
    in flight until their own timeout, deterministically, with the server up."""
    name = unique("SILENT")
    return js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", no_ack=True)


def blocked_in(thread: threading.Thread, function: str) -> bool:
    """True while ``thread`` is inside a call of ``function`` (read from its live stack)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def first_msg(js, stream_name: str):
    consumer = js.create_consumer(stream_name, ack_policy="none")
    msgs = list(consumer.fetch(1, expires=2))
    assert len(msgs) == 1
    return msgs[0]


# -- PubAck and deduplication ------------------------------------------------------------------


def test_publish_returns_the_stream_and_sequence_of_each_stored_message(js, stream):
    first = js.publish(f"{stream.name}.a", b"one")
    second = js.publish(f"{stream.name}.b", b"two")
    assert isinstance(first, jss.PubAck)
    assert (first.stream, first.seq, first.duplicate) == (stream.name, 1, False)
    assert (second.stream, second.seq, second.duplicate) == (stream.name, 2, False)
    assert stream.info().state.messages == 2


def test_a_repeated_msg_id_is_reported_duplicate_and_stored_once(js, stream):
    first = js.publish(f"{stream.name}.a", b"payload", msg_id="order-1")
    again = js.publish(f"{stream.name}.a", b"payload", msg_id="order-1")
    assert first.duplicate is False
    assert again.duplicate is True
    assert again.seq == first.seq == 1
    assert stream.info().state.messages == 1


def test_publish_async_with_a_repeated_msg_id_resolves_duplicate(js, stream):
    a = js.publish_async(f"{stream.name}.a", b"x", msg_id="same")
    b = js.publish_async(f"{stream.name}.a", b"x", msg_id="same")
    assert a.result(5).duplicate is False
    assert b.result(5).duplicate is True
    assert stream.info().state.messages == 1


# -- expected_* headers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "error", "err_code"),
    [
        ({"expected_stream": "SOME_OTHER_STREAM"}, jss.StreamWrongStreamError, 10060),
        ({"expected_last_seq": 5}, jss.StreamWrongLastSequenceError, 10071),
        ({"expected_last_subject_seq": 5}, jss.StreamWrongLastSequenceError, 10071),
        ({"expected_last_msg_id": "not-the-last"}, jss.StreamWrongLastMsgIdError, 10070),
    ],
    ids=["expected_stream", "expected_last_seq", "expected_last_subject_seq", "expected_last_msg_id"],
)
def test_a_failed_expectation_raises_its_error_and_stores_nothing(js, stream, expectation, error, err_code):
    js.publish(f"{stream.name}.a", b"first", msg_id="the-last")
    with pytest.raises(error) as info:
        js.publish(f"{stream.name}.a", b"second", **expectation)
    assert info.value.err_code == err_code
    assert isinstance(info.value, jss.APIError)
    fut = js.publish_async(f"{stream.name}.a", b"second", **expectation)
    assert isinstance(fut.exception(5), error)
    assert stream.info().state.messages == 1


def test_expected_stream_matching_the_capturing_stream_is_stored(js, stream):
    ack = js.publish(f"{stream.name}.a", b"x", expected_stream=stream.name)
    assert (ack.stream, ack.seq) == (stream.name, 1)


def test_expected_last_seq_matching_the_stream_is_stored(js, stream):
    assert js.publish(f"{stream.name}.a", b"x", expected_last_seq=0).seq == 1
    assert js.publish(f"{stream.name}.b", b"x", expected_last_seq=1).seq == 2
    assert stream.info().state.messages == 2


def test_expected_last_subject_seq_compares_against_the_subjects_own_last_sequence(js, stream):
    js.publish(f"{stream.name}.a", b"a1")  # seq 1
    js.publish(f"{stream.name}.b", b"b1")  # seq 2, the stream's last
    ack = js.publish(f"{stream.name}.a", b"a2", expected_last_subject_seq=1)
    assert ack.seq == 3
    with pytest.raises(jss.StreamWrongLastSequenceError):
        js.publish(f"{stream.name}.a", b"a3", expected_last_subject_seq=2)


def test_expected_last_msg_id_matching_the_last_message_is_stored(js, stream):
    js.publish(f"{stream.name}.a", b"x", msg_id="m1")
    ack = js.publish(f"{stream.name}.a", b"y", msg_id="m2", expected_last_msg_id="m1")
    assert ack.seq == 2
    with pytest.raises(jss.StreamWrongLastMsgIdError):
        js.publish(f"{stream.name}.a", b"z", expected_last_msg_id="m1")


# -- headers and payloads ------------------------------------------------------------------------


def test_headers_including_multi_valued_ones_come_back_through_fetch(js, stream):
    js.publish(f"{stream.name}.a", b"body", headers={"X-Tag": ["a", "b"], "X-One": "1"}, msg_id="h-1")
    msg = first_msg(js, stream.name)
    assert msg.data == b"body"
    assert msg.headers.get_all("X-Tag") == ["a", "b"]
    assert msg.headers["X-Tag"] == "a"
    assert msg.headers["X-One"] == "1"
    assert msg.headers["Nats-Msg-Id"] == "h-1"


def test_a_headers_object_keeps_every_value_when_expectations_add_headers(js, stream):
    hdrs = jss.Headers({"X-Tag": ["a", "b"]})
    js.publish(f"{stream.name}.a", b"", headers=hdrs, expected_stream=stream.name)
    msg = first_msg(js, stream.name)
    assert msg.headers.get_all("X-Tag") == ["a", "b"]
    assert msg.headers["Nats-Expected-Stream"] == stream.name


@pytest.mark.parametrize("allow_direct", [False, True], ids=["msg-get", "direct-get"])
def test_headers_including_multi_valued_ones_come_back_through_get_msg(js, allow_direct):
    name = unique()
    stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", allow_direct=allow_direct)
    js.publish(f"{name}.a", b"body", headers={"X-Tag": ["a", "b"], "X-One": "1"})
    stored = stream.get_msg(1)
    assert stored.data == b"body"
    assert stored.subject == f"{name}.a"
    assert stored.headers is not None
    assert stored.headers.get_all("X-Tag") == ["a", "b"]
    assert stored.headers["X-One"] == "1"


def test_str_data_is_stored_as_utf8(js, stream):
    text = "héllo wörld ✓ 日本"
    js.publish(f"{stream.name}.a", text)
    js.publish_async(f"{stream.name}.b", text).result(5)
    assert stream.get_msg(1).data == text.encode("utf-8")
    assert stream.get_msg(2).data == text.encode("utf-8")


def test_a_payload_of_exactly_max_payload_is_stored(client, js, stream):
    data = b"x" * client.max_payload
    assert js.publish(f"{stream.name}.big", data).seq == 1
    assert stream.get_msg(1).data == data


# -- the headers of one publish (pure: no server) -------------------------------------------------


@pytest.mark.parametrize("headers", [None, {"X-Tag": "a"}, jss.Headers({"X-Tag": ["a", "b"]})],
                         ids=["none", "dict", "multi"])
def test_without_options_the_callers_headers_are_sent_as_they_are(headers):
    assert publish_headers(headers) is headers


@pytest.mark.parametrize("option, value, header, sent", [
    ("msg_id", "m-1", "Nats-Msg-Id", "m-1"),
    ("expected_stream", "ORDERS", "Nats-Expected-Stream", "ORDERS"),
    ("expected_last_seq", 0, "Nats-Expected-Last-Sequence", "0"),
    ("expected_last_subject_seq", 42, "Nats-Expected-Last-Subject-Sequence", "42"),
    ("expected_last_msg_id", "m-0", "Nats-Expected-Last-Msg-Id", "m-0"),
])
def test_each_publish_option_is_one_header(option, value, header, sent):
    assert publish_headers(None, **{option: value}) == {header: sent}


def test_options_join_the_callers_headers_keeping_every_value_and_replacing_a_header_of_their_name():
    mine = {"X-Tag": ["a", "b"], "Nats-Msg-Id": "old"}
    hdrs = publish_headers(mine, msg_id="new", expected_last_seq=7)
    assert isinstance(hdrs, jss.Headers)
    assert hdrs.multi() == {"X-Tag": ["a", "b"], "Nats-Msg-Id": ["new"], "Nats-Expected-Last-Sequence": ["7"]}
    assert mine == {"X-Tag": ["a", "b"], "Nats-Msg-Id": "old"}  # the caller's mapping is left alone


@pytest.mark.parametrize("kwargs, error, named", [
    ({"headers": "X-Tag: a"}, TypeError, "headers"),
    ({"msg_id": ""}, TypeError, "msg_id"),
    ({"msg_id": 5}, TypeError, "msg_id"),
    ({"expected_stream": "A.B"}, ValueError, "expected_stream"),
    ({"expected_last_seq": -1}, ValueError, "expected_last_seq"),
    ({"expected_last_seq": True}, TypeError, "expected_last_seq"),
    ({"expected_last_subject_seq": "3"}, TypeError, "expected_last_subject_seq"),
    ({"expected_last_msg_id": ""}, TypeError, "expected_last_msg_id"),
])
def test_a_bad_publish_option_is_refused_by_name(kwargs, error, named):
    kwargs.setdefault("headers", None)
    with pytest.raises(error, match=named):
        publish_headers(**kwargs)


def test_the_pub_command_carries_the_option_headers_in_an_hpub():
    assert publish_parts("a.b", b"x", 1024) == (b"PUB a.b ", b" 1\r\nx\r\n")
    head, tail = publish_parts("a.b", b"x", 1024, msg_id="m")
    block = b"NATS/1.0\r\nNats-Msg-Id: m\r\n\r\n"
    assert (head, tail) == (b"HPUB a.b ", b" %d %d\r\n" % (len(block), len(block) + 1) + block + b"x\r\n")


# -- argument checks -----------------------------------------------------------------------------

BAD_ARGUMENTS = [
    pytest.param("subject", {"subject": ""}, ValueError, id="empty-subject"),
    pytest.param("subject", {"subject": "has space"}, ValueError, id="subject-with-space"),
    pytest.param("subject", {"subject": "a..b"}, ValueError, id="subject-with-empty-token"),
    pytest.param("subject", {"subject": b"bytes.subject"}, TypeError, id="bytes-subject"),
    pytest.param("data", {"data": 42}, TypeError, id="int-data"),
    pytest.param("data", {"data": [1, 2]}, TypeError, id="list-data"),
    pytest.param("expected_last_seq", {"expected_last_seq": -1}, ValueError, id="negative-expected_last_seq"),
    pytest.param("expected_last_subject_seq", {"expected_last_subject_seq": -1}, ValueError,
                 id="negative-expected_last_subject_seq"),
    pytest.param("expected_last_seq", {"expected_last_seq": "3"}, TypeError, id="str-expected_last_seq"),
    pytest.param("msg_id", {"msg_id": ""}, (ValueError, TypeError), id="empty-msg_id"),
    pytest.param("expected_stream", {"expected_stream": ""}, (ValueError, TypeError), id="empty-expected_stream"),
    pytest.param("headers", {"headers": "X-Tag: a"}, TypeError, id="str-headers"),
]


@pytest.mark.parametrize("method", ["publish", "publish_async"])
@pytest.mark.parametrize(("argument", "override", "error"), BAD_ARGUMENTS)
def test_a_bad_argument_is_rejected_by_name_before_anything_is_sent(client, js, stream, method, argument,
                                                                    override, error):
    kwargs = {"subject": f"{stream.name}.a", "data": b"x", **override}
    with pytest.raises(error, match=argument):
        getattr(js, method)(**kwargs)
    client.flush()
    assert js.publish_async_pending() == 0
    assert stream.info().state.messages == 0


@pytest.mark.parametrize("method", ["publish", "publish_async"])
def test_data_larger_than_max_payload_is_rejected_before_anything_is_sent(client, js, stream, method):
    with pytest.raises(ValueError, match="data"):
        getattr(js, method)(f"{stream.name}.a", b"x" * (client.max_payload + 1))
    client.flush()
    assert js.publish_async_pending() == 0
    assert stream.info().state.messages == 0


def test_headers_pushing_the_message_past_max_payload_are_rejected(client, js, stream):
    with pytest.raises(ValueError, match="max_payload"):
        js.publish(f"{stream.name}.a", b"x" * (client.max_payload - 10), headers={"X-Pad": "y" * 64})
    assert stream.info().state.messages == 0


# -- no responders ---------------------------------------------------------------------------------


def test_publish_to_a_subject_no_stream_captures_raises_no_responders_at_once(js):
    started = time.monotonic()
    with pytest.raises(jss.NoRespondersError):
        js.publish(f"{unique('NOWHERE')}.x", b"lost", timeout=5)
    assert time.monotonic() - started < 1.0


def test_a_full_stream_with_discard_new_refuses_a_publish_with_msg_id_without_retrying(client, caplog):
    name = unique("FULL")
    js = client.jetstream(retry=jss.RetryPolicy(attempts=5, initial_backoff=0.2))
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory", max_msgs=1, discard="new")
    js.publish(f"{name}.x", b"1", msg_id="first")
    with caplog.at_level("INFO", logger="jetstream_sync"), pytest.raises(jss.APIError) as refused:
        js.publish(f"{name}.x", b"2", msg_id="second")
    assert refused.value.err_code == 10077 and not refused.value.retriable
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    assert js.stream_info(name).state.messages == 1


def test_publish_async_to_a_subject_no_stream_captures_fails_its_future_at_once(js):
    started = time.monotonic()
    fut = js.publish_async(f"{unique('NOWHERE')}.x", b"lost", timeout=5)
    assert isinstance(fut.exception(timeout=5), jss.NoRespondersError)
    assert time.monotonic() - started < 1.0
    assert js.publish_async_pending() == 0


# -- the blocking publish's wait ---------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_ctrl_c_during_publish_returns_promptly_and_leaves_nothing_in_flight(js, stream, silent_stream):
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):  # the timer starts inside: its interrupt cannot escape the test
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        js.publish(f"{silent_stream.name}.x", b"never acked", timeout=30)
    timer.cancel()
    assert time.monotonic() - started < 0.3 + 1.0
    assert js.publish_async_pending() == 0  # its window slot is free at once, not after 30 s
    ack = js.publish(f"{stream.name}.after", b"after ctrl-c")
    assert (ack.stream, ack.seq) == (stream.name, 1)


@pytest.mark.timeout(30)
def test_a_publish_that_gives_up_on_a_stalled_loop_leaves_nothing_behind_and_the_next_gets_its_own_puback(
        client, js, stream):
    assert js.publish(f"{stream.name}.first", b"first").seq == 1  # the PubAck inbox is set up
    # The loop thread is held (as a stalled loop would be): neither the PUB nor the sweeper runs, so the
    # caller gives up by itself after its timeout plus the grace period.
    held, release = threading.Event(), threading.Event()
    client._conn.loop_thread.call_soon(lambda: (held.set(), release.wait(20)))
    try:
        assert held.wait(5)
        started = time.monotonic()
        with pytest.raises(jss.TimeoutError, match="no PubAck"):
            js.publish(f"{stream.name}.late", b"late", timeout=0.3)
        assert time.monotonic() - started < 5.0
        assert js.publish_async_pending() == 0
    finally:
        release.set()
    # The given-up PUB goes out now and its PubAck arrives for nobody; the next publish on this
    # thread gets its own.
    ack = js.publish(f"{stream.name}.next", b"next")
    assert ack.seq == 3
    assert stream.get_msg(3).data == b"next"
    assert stream.get_msg(2).data == b"late"


@pytest.mark.timeout(60)
def test_many_threads_publishing_at_once_each_get_their_own_puback(js, stream):
    n_threads, per_thread = 8, 150
    barrier = threading.Barrier(n_threads)
    acks: dict[int, list[int]] = {}
    failures: list[BaseException] = []

    def publisher(i: int) -> None:
        try:
            barrier.wait(10)
            acks[i] = [js.publish(f"{stream.name}.t{i}", f"{i}:{j}").seq for j in range(per_thread)]
        except BaseException as exc:  # reported in the test, not in the thread
            failures.append(exc)

    threads = [threading.Thread(target=publisher, args=(i,), name=f"test-publisher-{i}") for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(45)
    assert not failures, failures
    seqs = sorted(seq for got in acks.values() for seq in got)
    assert seqs == list(range(1, n_threads * per_thread + 1))
    consumer = js.create_consumer(stream.name, ack_policy="none")
    stored = {m.metadata.sequence.stream: m.data for m in consumer.fetch(n_threads * per_thread, expires=10)}
    for i, got in acks.items():
        assert got == sorted(got)  # one thread's publishes are stored in its order
        assert [stored[seq] for seq in got] == [f"{i}:{j}".encode() for j in range(per_thread)]


# -- the publish_async window ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_hundred_thousand_async_publishes_all_resolve_with_the_window_bounded(client):
    js = client.jetstream(max_pending=256)
    name = unique("BULK")
    stream = js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    try:
        total = 100_000
        futures = []
        max_in_flight = max_outbox = 0
        subject = f"{name}.x"
        for _ in range(total):
            futures.append(js.publish_async(subject, b"tiny"))
            in_flight = js.publish_async_pending()
            queued = client._conn._outbox.pending()
            if in_flight > max_in_flight:
                max_in_flight = in_flight
            if queued > max_outbox:
                max_outbox = queued
        js.publish_async_complete(timeout=30)
        assert max_in_flight <= 256
        # Every queued PUB is an in-flight publish: the outbox is bounded by the same window.
        assert max_outbox <= 256
        assert max_in_flight > 1, "publish_async waited for each PubAck: nothing was pipelined"
        assert all(f.done() for f in futures)
        acks = [f.result() for f in futures]
        assert all(a.stream == name and not a.duplicate for a in acks)
        assert sorted(a.seq for a in acks) == list(range(1, total + 1))
        assert js.publish_async_pending() == 0
        assert stream.info().state.messages == total
    finally:
        js.delete_stream(name)


@pytest.mark.timeout(30)
def test_publish_async_raises_timeout_when_the_window_stays_full(client, silent_stream):
    js = client.jetstream(max_pending=4)
    subject = f"{silent_stream.name}.x"
    held = [js.publish_async(subject, b"x", timeout=30) for _ in range(4)]
    assert js.publish_async_pending() == 4
    started = time.monotonic()
    with pytest.raises(jss.TimeoutError) as info:
        js.publish_async(subject, b"one too many", timeout=0.5)
    waited = time.monotonic() - started
    assert isinstance(info.value, builtins.TimeoutError)
    assert 0.45 <= waited < 2.0
    assert js.publish_async_pending() == 4
    assert not any(f.done() for f in held)


@pytest.mark.timeout(30)
def test_a_blocked_publish_async_goes_ahead_once_a_slot_frees(client, stream, silent_stream):
    js = client.jetstream(max_pending=2)
    # These two never get a PubAck: their slots free when they time out (after ~1 s).
    stuck = [js.publish_async(f"{silent_stream.name}.x", b"x", timeout=1) for _ in range(2)]
    started = time.monotonic()
    fut = js.publish_async(f"{stream.name}.a", b"waited", timeout=10)
    waited = time.monotonic() - started
    assert waited >= 0.9, "publish_async did not block while the window was full"
    assert fut.result(5).seq == 1
    assert all(isinstance(f.exception(0), jss.TimeoutError) for f in stuck)


@pytest.mark.timeout(30)
def test_publish_async_complete_raises_timeout_while_futures_remain(client, silent_stream):
    js = client.jetstream()
    held = [js.publish_async(f"{silent_stream.name}.x", b"x", timeout=30) for _ in range(3)]
    started = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        js.publish_async_complete(timeout=0.5)
    assert 0.45 <= time.monotonic() - started < 2.0
    assert not any(f.done() for f in held)
    assert js.publish_async_pending() == 3


@pytest.mark.timeout(30)
def test_publish_async_complete_returns_once_every_future_resolved(js, stream):
    futures = [js.publish_async(f"{stream.name}.a", str(i)) for i in range(500)]
    js.publish_async_complete(timeout=10)
    assert all(f.done() for f in futures)
    assert sorted(f.result().seq for f in futures) == list(range(1, 501))
    assert js.publish_async_pending() == 0


@pytest.mark.timeout(30)
def test_publish_async_complete_counts_failed_futures_as_resolved(client, stream, silent_stream):
    js = client.jetstream()
    ok = js.publish_async(f"{stream.name}.a", b"x", timeout=10)
    failing = js.publish_async(f"{silent_stream.name}.x", b"x", timeout=0.5)
    js.publish_async_complete(timeout=10)
    assert ok.result(0).seq == 1
    assert isinstance(failing.exception(0), jss.TimeoutError)
    assert js.publish_async_pending() == 0


@pytest.mark.timeout(30)
def test_closing_the_client_fails_outstanding_futures_with_client_closed(nats_server, silent_stream):
    other = jss.connect(nats_server.url, name="closer")
    js = other.jetstream()
    held = [js.publish_async(f"{silent_stream.name}.x", b"x", timeout=30) for _ in range(5)]
    other.close()
    for fut in held:
        assert isinstance(fut.exception(timeout=0), jss.ClientClosedError)
    assert js.publish_async_pending() == 0
    with pytest.raises(jss.ClientClosedError):
        js.publish_async(f"{silent_stream.name}.x", b"x")
    with pytest.raises(jss.ClientClosedError):
        js.publish(f"{silent_stream.name}.x", b"x")


@pytest.mark.timeout(30)
def test_closing_the_client_releases_callers_blocked_in_publish_and_publish_async(nats_server, silent_stream):
    other = jss.connect(nats_server.url, name="releaser")
    js = other.jetstream(max_pending=1)
    subject = f"{silent_stream.name}.x"
    outcomes: dict[str, BaseException | None] = {}

    def call(label: str, fn) -> None:
        try:
            fn()
            outcomes[label] = None
        except BaseException as exc:
            outcomes[label] = exc

    waiting_for_ack = threading.Thread(target=call, name="test-publish",
                                       args=("publish", lambda: js.publish(subject, b"x", timeout=30)))
    waiting_for_ack.start()
    wait_for(lambda: js.publish_async_pending() == 1, what="the publish to be in flight")
    # The window (1) is now full: this one blocks for a slot.
    waiting_for_slot = threading.Thread(target=call, name="test-publish-async",
                                        args=("publish_async", lambda: js.publish_async(subject, b"y", timeout=30)))
    waiting_for_slot.start()
    wait_for(lambda: blocked_in(waiting_for_slot, "submit"), what="publish_async to block on the full window")
    started = time.monotonic()
    other.close()
    waiting_for_ack.join(5)
    waiting_for_slot.join(5)
    assert time.monotonic() - started < 3.0
    assert isinstance(outcomes["publish"], jss.ClientClosedError)
    assert isinstance(outcomes["publish_async"], jss.ClientClosedError)


def test_publish_async_complete_on_a_closed_client_raises_client_closed(nats_server):
    other = jss.connect(nats_server.url, name="closed")
    js = other.jetstream()
    other.close()
    with pytest.raises(jss.ClientClosedError):
        js.publish_async_complete(timeout=1)


@pytest.mark.timeout(30)
def test_publishes_buffered_while_disconnected_are_acked_after_reconnect(fresh_server):
    with jss.connect(fresh_server.url, reconnect_time_wait=0.1) as client:
        js = client.jetstream()
        js.create_stream(name="BUFFERED", subjects=["buffered.>"])
        assert js.publish("buffered.a", b"before").seq == 1
        fresh_server.kill()
        wait_for(lambda: not client.is_connected, what="the client to notice the server is gone")
        futures = [js.publish_async("buffered.a", f"during {i}", timeout=20) for i in range(3)]
        assert js.publish_async_pending() == 3
        fresh_server.start()
        js.publish_async_complete(timeout=15)
        assert sorted(f.result(0).seq for f in futures) == [2, 3, 4]
        assert js.stream_info("BUFFERED").state.messages == 4


def test_a_publish_async_future_answered_already_is_read_without_a_lock_and_parsed_only_by_result():
    # Millions of futures: looking at one that is answered makes no Condition (what waiting would need),
    # and only result() turns the server's reply into a PubAck.
    answered = _publish.PubAckFuture()
    answered._finish_raw(b'{"stream": "S", "seq": 7}')
    assert answered.done() and answered.exception() is None and answered.exception(timeout=0) is None
    assert "_condition" not in answered.__dict__ and answered._result is _publish._LAZY
    assert answered.result() == jss.PubAck(stream="S", seq=7) and answered.result(timeout=0).seq == 7
    assert "_condition" not in answered.__dict__
    failed = _publish.PubAckFuture()
    failed._fail(jss.JetStreamError("no"))
    assert failed.done() and str(failed.exception()) == "no"
    with pytest.raises(jss.JetStreamError, match="no"):
        failed.result()
    cancelled = _publish.PubAckFuture()
    assert not cancelled.done() and cancelled.cancel() and cancelled.done()
    with pytest.raises(concurrent.futures.CancelledError):
        cancelled.exception()
    with pytest.raises(concurrent.futures.CancelledError):
        cancelled.result()
    pending = _publish.PubAckFuture()
    with pytest.raises(concurrent.futures.TimeoutError):
        pending.exception(timeout=0.01)
    with pytest.raises(concurrent.futures.TimeoutError):
        pending.result(timeout=0.01)


@pytest.mark.timeout(60)
def test_publishes_lost_on_their_way_are_sent_again_once_a_later_one_to_their_subject_is_answered(
        client, nats_server, monkeypatch):
    # A stream answers one subject's publishes in order, so an answer to a publish sent well after an
    # unanswered one to the same subject means that one was lost (a stream leader that died with it). A
    # responder stands in for two streams here: it drops the first publish to each of two subjects and
    # answers everything else. Each lost one is sent again long before its 300 s timeout, whichever
    # subject's answer comes first; a publish without a msg_id is never sent twice.
    monkeypatch.setattr(_publish, "_OVERTAKEN", 0.2)
    seen: list[tuple[str, str | None]] = []
    done = threading.Event()
    with jss.connect(nats_server.url) as helper:
        arrivals = helper.subscribe("ovt.>")
        helper.flush(timeout=10)

        def stream_stand_in() -> None:
            seq = 0
            while not done.is_set():
                try:
                    msg = arrivals.next(timeout=0.1)
                except jss.TimeoutError:
                    continue
                msg_id = msg.headers.get("Nats-Msg-Id") if msg.headers else None
                seen.append((msg.subject, msg_id))
                if msg_id in ("a1", "b1", None) and seen.count((msg.subject, msg_id)) == 1:
                    continue  # lost on its way
                seq += 1
                helper.publish(msg.reply, b'{"stream": "S", "seq": %d}' % seq)

        responder = threading.Thread(target=stream_stand_in, name="test-stream-stand-in")
        responder.start()
        try:
            js = client.jetstream(retry=jss.RetryPolicy(attempts=3))
            lost = [js.publish_async("ovt.a", b"1", msg_id="a1", timeout=300),
                    js.publish_async("ovt.b", b"1", msg_id="b1", timeout=300)]
            no_id = js.publish_async("ovt.b", b"0", timeout=300)
            wait_for(lambda: len(seen) == 3, timeout=10)
            time.sleep(0.3)  # what makes the later publishes "well after": the clock itself
            later = [js.publish_async("ovt.b", b"2", msg_id="b2", timeout=300),
                     js.publish_async("ovt.a", b"2", msg_id="a2", timeout=300)]
            acks = [f.result(timeout=20) for f in later + lost]
        finally:
            done.set()
            responder.join(10)
            arrivals.stop()
    assert not responder.is_alive()
    assert all(not a.duplicate for a in acks)
    assert seen.count(("ovt.a", "a1")) == 2 and seen.count(("ovt.b", "b1")) == 2
    assert seen.count(("ovt.b", None)) == 1 and not no_id.done()  # never sent twice; waits its timeout
    no_id.cancel()


@pytest.mark.timeout(60)
def test_publish_async_with_msg_id_lost_with_its_connection_is_sent_again_on_reconnect_not_at_its_timeout(
        fresh_server):
    # The server is frozen, so the publishes sit unread in its socket, then killed: they die with the
    # connection and no PubAck will ever come. Each attempt may wait 300 s; the reconnect sends them again.
    retry = jss.RetryPolicy(attempts=5, initial_backoff=0.05, max_backoff=0.5)
    with jss.connect(fresh_server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1) as client:
        js = client.jetstream(retry=retry)
        js.create_stream(name="LOST", subjects=["lost.>"], storage="file", duplicate_window=120)
        assert js.publish("lost.a", b"before", msg_id="before").seq == 1
        os.kill(fresh_server.pid, signal.SIGSTOP)
        try:
            futures = [js.publish_async("lost.a", f"m{i}", msg_id=f"m{i}", timeout=300) for i in range(5)]
            plain = js.publish_async("lost.a", b"no id", timeout=300)  # not retried: it is not sent again
            assert js.publish_async_pending() == 6
        finally:
            fresh_server.kill()  # SIGKILL ends a stopped process too
        wait_for(lambda: not client.is_connected, what="the client to notice the server is gone")
        fresh_server.start()
        wait_for(lambda: all(f.done() for f in futures), timeout=30, what="the lost publishes to be acknowledged")
        assert sorted(f.result(0).seq for f in futures) == [2, 3, 4, 5, 6]
        assert not plain.done()  # its PubAck may still come for all the client knows: it waits out its timeout
        info = js.stream_info("LOST")
        assert (info.state.messages, info.state.last_seq) == (6, 6)


@pytest.mark.timeout(30)
def test_closing_while_the_server_is_down_fails_outstanding_futures_with_client_closed(fresh_server):
    client = jss.connect(fresh_server.url, reconnect_time_wait=0.1)
    try:
        js = client.jetstream()
        js.create_stream(name="DOWN", subjects=["down.>"])
        js.publish("down.a", b"up")
        fresh_server.kill()
        wait_for(lambda: not client.is_connected, what="the client to notice the server is gone")
        futures = [js.publish_async("down.a", b"buffered", timeout=20) for _ in range(3)]
        client.close()
        for fut in futures:
            assert isinstance(fut.exception(timeout=0), jss.ClientClosedError)
    finally:
        if not client._conn.loop_thread.closed:  # contain a failed close: don't leak its loop thread
            client._conn.loop_thread.stop()


# -- retries ---------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_publish_with_msg_id_is_retried_through_a_server_restart_without_duplicates(fresh_server):
    retry = jss.RetryPolicy(attempts=10, initial_backoff=0.05, max_backoff=0.5)
    with jss.connect(fresh_server.url, reconnect_time_wait=0.1) as client:
        js = client.jetstream(timeout=1.0, retry=retry)
        js.create_stream(name="RESTART", subjects=["restart.>"], duplicate_window=60)
        go, restarted = threading.Event(), threading.Event()
        failure: list[BaseException] = []

        def restarter() -> None:
            try:
                go.wait(10)
                fresh_server.restart(signal.SIGKILL)
            except BaseException as exc:  # report it in the test, not in the thread
                failure.append(exc)
            finally:
                restarted.set()

        thread = threading.Thread(target=restarter, name="test-restarter")
        thread.start()
        published = 0
        published_at_restart = None
        try:
            while published < 5000:
                ack = js.publish("restart.x", f"m{published}", msg_id=f"id-{published}")
                assert ack.stream == "RESTART"
                published += 1
                if published == 20:
                    go.set()
                if restarted.is_set() and published_at_restart is None:
                    published_at_restart = published
                if published_at_restart is not None and published >= published_at_restart + 20:
                    break
        finally:
            go.set()
            thread.join(20)
        assert not failure, failure
        assert published_at_restart is not None, "the server restart did not happen while publishing"
        info = js.stream_info("RESTART")
        assert info.state.messages == published
        assert info.state.last_seq == published


def retried(caplog, error: str) -> int:
    """How many retries after ``error`` (a class name) the retry policy has logged."""
    return sum(1 for r in caplog.records if r.getMessage().startswith(f"jetstream_sync: retrying after {error}("))


@pytest.mark.timeout(60)
def test_publish_async_with_msg_id_is_retried_keeping_its_slot_until_a_stream_captures_the_subject(client, caplog):
    name = unique("LATER")
    js = client.jetstream(retry=jss.RetryPolicy(attempts=40, initial_backoff=0.5, max_backoff=0.5))
    try:
        with caplog.at_level("INFO", logger="jetstream_sync"):
            fut = js.publish_async(f"{name}.x", b"late", msg_id="late-1", timeout=5)
            plain = js.publish_async(f"{name}.x", b"lost", timeout=5)
            assert isinstance(plain.exception(5), jss.NoRespondersError)  # without msg_id: never retried
            wait_for(lambda: retried(caplog, "NoRespondersError"), timeout=10, what="a retry of the publish")
            wait_for(lambda: js.publish_async_pending() == 1, timeout=5, what="the retried publish in the window")
            assert not fut.done()  # backing off, holding its slot, still counted by publish_async_complete
            js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
            ack = fut.result(30)
        assert (ack.stream, ack.seq, ack.duplicate) == (name, 1, False)
        assert fut._retry is None  # a resolved future keeps no copy of the message for retries
        assert js.publish_async_pending() == 0
        assert js.stream_info(name).state.messages == 1
    finally:
        try:
            js.delete_stream(name)
        except jss.StreamNotFoundError:
            pass


@pytest.mark.timeout(60)
def test_publish_async_with_msg_id_ends_with_the_last_error_once_the_attempts_run_out(client, caplog):
    js = client.jetstream(retry=jss.RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.01))
    with caplog.at_level("INFO", logger="jetstream_sync"):
        fut = js.publish_async(f"{unique('NOWHERE')}.x", b"lost", msg_id="lost-1", timeout=5)
        assert isinstance(fut.exception(30), jss.NoRespondersError)
    assert retried(caplog, "NoRespondersError") == 2  # three attempts in all
    assert js.publish_async_pending() == 0


@pytest.mark.timeout(60)
def test_publish_async_with_msg_id_retries_a_timeout_and_the_stream_stores_it_once(client, silent_stream, caplog):
    # The stream stores every attempt it receives but never answers: each attempt times out, the stream
    # drops the repeats by their msg_id, and the future ends with the last attempt's TimeoutError.
    js = client.jetstream(retry=jss.RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.01))
    with caplog.at_level("INFO", logger="jetstream_sync"):
        fut = js.publish_async(f"{silent_stream.name}.x", b"once", msg_id="once-1", timeout=0.5)
        exc = fut.exception(30)
    assert isinstance(exc, jss.TimeoutError) and exc.timeout == 0.5  # each attempt had the whole timeout
    assert retried(caplog, "TimeoutError") == 2
    assert js.publish_async_pending() == 0
    assert silent_stream.info().state.messages == 1


@pytest.mark.timeout(30)
def test_closing_the_client_ends_a_publish_async_backing_off_before_its_retry(nats_server, caplog):
    other = jss.connect(nats_server.url, name="closer")
    js = other.jetstream(retry=jss.RetryPolicy(attempts=5, initial_backoff=60, max_backoff=60))
    with caplog.at_level("INFO", logger="jetstream_sync"):
        fut = js.publish_async(f"{unique('NOWHERE')}.x", b"lost", msg_id="lost-1", timeout=5)
        wait_for(lambda: retried(caplog, "NoRespondersError"), timeout=10, what="a retry of the publish")
    assert not fut.done()
    other.close()
    assert isinstance(fut.exception(timeout=5), jss.ClientClosedError)
    assert js.publish_async_pending() == 0
