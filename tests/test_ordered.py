# Charter: js.ordered_consumer() (ADR-17 semantics on the ADR-37 API) against a
# real nats-server: every stream sequence exactly once, in order, through fetch,
# next, messages and consume (and across switches between them); the allowed and
# refused config fields; self-healing after deletion, reconnect and missed
# heartbeats; the server-side consumer's shape and cleanup; one read at a time.
from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing, wait_for


@pytest.fixture
def name():
    return "OC" + uuid.uuid4().hex[:10].upper()


@pytest.fixture
def subj(name):
    return name.lower()


@pytest.fixture
def stream(js, name, subj):
    return js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory")


def publish(js, subject, n, start=0):
    """Publish n messages with payloads m<start>..m<start+n-1>; return their stream sequences."""
    futures = [js.publish_async(subject, f"m{i}".encode()) for i in range(start, start + n)]
    js.publish_async_complete(timeout=10.0)
    return [f.result().seq for f in futures]


def seq(msg: jss.Msg) -> int:
    return msg.metadata.sequence.stream


def _process_state(pid: int) -> str:
    """The kernel's state letter of process ``pid`` (T or t: stopped; a SIGSTOP lands in its own time)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def server_consumers(js, stream_name) -> list[str]:
    return list(js.consumer_names(stream_name))


def read_stream(msgs, n, timeout=10.0) -> list[int]:
    """The stream sequences of the next n messages of a MessageStream."""
    deadline = time.monotonic() + timeout
    return [seq(msgs.next(timeout=max(0.01, deadline - time.monotonic()))) for _ in range(n)]


def assert_quiet(msgs, wait=0.3):
    """Nothing more arrives on a MessageStream (no duplicate, no stray message)."""
    with pytest.raises(jss.TimeoutError):
        extra = msgs.next(timeout=wait)
        pytest.fail(f"unexpected extra message, stream sequence {seq(extra)}")


class Recorder:
    """Thread-safe record of what a consume() handler and error handler saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: list[int] = []
        self.errors: list[BaseException] = []
        self.threads: set[str] = set()

    def handler(self, msg: jss.Msg) -> None:
        with self.lock:
            self.seqs.append(seq(msg))
            self.threads.add(threading.current_thread().name)

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def snapshot(self) -> list[int]:
        with self.lock:
            return list(self.seqs)


# --- every sequence once, in order ----------------------------------------------------------


@pytest.mark.timeout(30)
def test_fetch_in_several_batches_yields_every_sequence_once_in_order(js, stream, subj):
    publish(js, f"{subj}.a", 25)
    oc = js.ordered_consumer(stream.name)
    got = []
    for _ in range(3):
        with oc.fetch(10, expires=0.5) as batch:
            got.append([seq(m) for m in batch])
            assert batch.error is None
    assert got == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    assert [seq(m) for m in oc.fetch(10, expires=0.3)] == []  # nothing left: an empty batch, no error
    publish(js, f"{subj}.a", 3, start=25)
    assert [seq(m) for m in oc.fetch(10, expires=0.5)] == [26, 27, 28]


@pytest.mark.timeout(30)
def test_fetch_yields_payloads_and_no_acks_are_needed(js, stream, subj):
    publish(js, f"{subj}.a", 5)
    oc = js.ordered_consumer(stream.name)
    msgs = list(oc.fetch(5, expires=1.0))
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert [m.subject for m in msgs] == [f"{subj}.a"] * 5
    # AckNone: nothing is waiting for an ack, nothing will be redelivered.
    (cname,) = server_consumers(js, stream.name)
    info = js.consumer_info(stream.name, cname)
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


@pytest.mark.timeout(30)
def test_next_returns_each_sequence_in_order_then_times_out(js, stream, subj):
    publish(js, f"{subj}.a", 5)
    oc = js.ordered_consumer(stream.name)
    assert seq(oc.next(timeout=5)) == 1
    first = server_consumers(js, stream.name)
    assert [seq(oc.next(timeout=5)) for _ in range(4)] == [2, 3, 4, 5]
    assert server_consumers(js, stream.name) == first  # one consumer serves every next()
    start = time.monotonic()
    with pytest.raises(jss.TimeoutError):
        oc.next(timeout=0.5)
    assert 0.4 <= time.monotonic() - start < 3.0
    publish(js, f"{subj}.a", 1, start=5)
    assert seq(oc.next(timeout=5)) == 6


@pytest.mark.timeout(30)
def test_messages_yields_every_sequence_once_in_order_through_a_small_buffer(js, stream, subj):
    publish(js, f"{subj}.a", 60)
    oc = js.ordered_consumer(stream.name)
    with oc.messages(max_messages=7, expires=2.0) as msgs:
        assert read_stream(msgs, 60) == list(range(1, 61))
        publish(js, f"{subj}.a", 15, start=60)  # published while the stream is open
        assert read_stream(msgs, 15) == list(range(61, 76))
        assert_quiet(msgs)
        assert msgs.error is None and msgs.warnings == []


@pytest.mark.timeout(30)
def test_a_handler_slower_than_the_heartbeat_alarm_with_a_full_buffer_causes_no_missed_heartbeat(js, stream, subj):
    # A full buffer means no pull request waits at the server, which then owes no heartbeat: the silence
    # is no sign of a lost consumer (with the short default heartbeat of an ordered consumer, counting it
    # re-created the consumer every few seconds under a slow handler).
    publish(js, f"{subj}.a", 10)
    oc = js.ordered_consumer(stream.name)
    rec = Recorder()

    def slow(msg: jss.Msg) -> None:
        rec.handler(msg)
        time.sleep(1.2)  # the handler's own work, longer than 2 x idle_heartbeat (0.5 s)

    handle = oc.consume(slow, error_handler=rec.on_error, max_messages=4, expires=1.0)
    try:
        wait_for(lambda: len(rec.snapshot()) >= 3, 15, what="3 slow messages handled")
    finally:
        handle.stop()
    assert handle.wait(5)
    assert rec.snapshot() == [1, 2, 3]
    assert rec.errors == [] and handle.error is None


@pytest.mark.timeout(30)
def test_consume_hands_every_sequence_once_in_order_to_a_single_worker(js, stream, subj):
    publish(js, f"{subj}.a", 80)
    oc = js.ordered_consumer(stream.name)
    rec = Recorder()
    handle = oc.consume(rec.handler, error_handler=rec.on_error, max_messages=9, expires=2.0)
    try:
        wait_for(lambda: len(rec.snapshot()) >= 80, 10, what="80 messages handled")
        publish(js, f"{subj}.a", 20, start=80)
        wait_for(lambda: len(rec.snapshot()) >= 100, 10, what="100 messages handled")
    finally:
        handle.stop()
    assert handle.wait(5)
    assert rec.snapshot() == list(range(1, 101))
    assert rec.errors == [] and handle.error is None
    assert len(rec.threads) == 1  # one worker: order is the point


@pytest.mark.timeout(30)
def test_messages_continues_from_the_cursor_after_fetch_and_next(js, stream, subj):
    publish(js, f"{subj}.a", 30)
    oc = js.ordered_consumer(stream.name)
    assert [seq(m) for m in oc.fetch(10, expires=1.0)] == list(range(1, 11))
    assert seq(oc.next(timeout=5)) == 11
    with oc.messages(max_messages=5, expires=2.0) as msgs:
        assert read_stream(msgs, 19) == list(range(12, 31))
        assert_quiet(msgs)
        # The fetch's server-side consumer was replaced, not left beside the new one.
        wait_for(lambda: len(server_consumers(js, stream.name)) == 1, 5,
                 what="only the messages() consumer on the server")


@pytest.mark.timeout(30)
def test_a_read_after_messages_stopped_continues_after_the_last_message_handed_over(js, stream, subj):
    # messages() buffers ahead of the reader; what it buffered but never handed
    # over must come again in the next read, not be skipped.
    publish(js, f"{subj}.a", 40)
    oc = js.ordered_consumer(stream.name)
    msgs = oc.messages(max_messages=20, expires=2.0)
    assert read_stream(msgs, 5) == [1, 2, 3, 4, 5]
    wait_for(lambda: msgs._engine.received >= 20, 5, what="the buffer to fill ahead of the reader")
    msgs.stop()
    assert [seq(m) for m in oc.fetch(10, expires=1.0)] == list(range(6, 16))
    with oc.messages(max_messages=10, expires=2.0) as again:
        assert read_stream(again, 25) == list(range(16, 41))
        assert_quiet(again)


@pytest.mark.timeout(30)
def test_a_read_after_consume_stopped_continues_after_the_last_message_handled(js, stream, subj):
    publish(js, f"{subj}.a", 40)
    oc = js.ordered_consumer(stream.name)
    handled = threading.Event()
    release = threading.Event()
    seen: list[int] = []

    def handler(msg):
        seen.append(seq(msg))
        if len(seen) == 5:
            handled.set()
            release.wait(5)  # hold the worker so more is buffered behind it

    handle = oc.consume(handler, max_messages=20, expires=2.0)
    try:
        assert handled.wait(5)
        wait_for(lambda: handle.stats.received >= 20, 5, what="the buffer to fill behind the handler")
    finally:
        release.set()
        # stop() returns once the worker finished message 5; nothing after it is handled.
        handle.stop()
    assert handle.wait(5)
    assert seen == [1, 2, 3, 4, 5]
    assert [seq(m) for m in oc.fetch(35, expires=1.0)] == list(range(6, 41))


# --- configuration ---------------------------------------------------------------------------


@pytest.fixture
def mixed(js, stream, subj):
    """Interleaved subjects: a at odd sequences 1..19, b at even ones, c at 21..23."""
    for i in range(10):
        js.publish(f"{subj}.a", f"a{i}".encode())
        js.publish(f"{subj}.b", f"b{i}".encode())
    for i in range(3):
        js.publish(f"{subj}.c", f"c{i}".encode())
    return stream


@pytest.mark.timeout(30)
def test_filter_subject_yields_only_matching_sequences_in_order(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, filter_subject=f"{subj}.a")
    assert [seq(m) for m in oc.fetch(20, expires=0.5)] == list(range(1, 20, 2))
    with oc.messages(max_messages=3, expires=2.0) as msgs:
        js.publish(f"{subj}.b", b"skip")
        js.publish(f"{subj}.a", b"take")
        msg = msgs.next(timeout=5)
        assert (seq(msg), msg.data) == (25, b"take")
        assert_quiet(msgs)


@pytest.mark.timeout(30)
def test_filter_subjects_yields_the_union_in_stream_order(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, filter_subjects=[f"{subj}.b", f"{subj}.c"])
    with oc.messages(max_messages=4, expires=2.0) as msgs:
        assert read_stream(msgs, 13) == list(range(2, 21, 2)) + [21, 22, 23]
        assert_quiet(msgs)


@pytest.mark.timeout(30)
def test_deliver_policy_last_starts_at_the_last_message(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, deliver_policy="last")
    assert seq(oc.next(timeout=5)) == 23
    js.publish(f"{subj}.a", b"new")
    assert seq(oc.next(timeout=5)) == 24


@pytest.mark.timeout(30)
def test_deliver_policy_new_yields_only_what_is_published_afterwards(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, deliver_policy=jss.DeliverPolicy.NEW)
    with oc.messages(max_messages=5, expires=2.0) as msgs:
        assert_quiet(msgs)
        js.publish(f"{subj}.b", b"new")
        assert read_stream(msgs, 1) == [24]


@pytest.mark.timeout(30)
def test_opt_start_seq_starts_there_and_the_cursor_takes_over_after_a_reset(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, deliver_policy="by_start_sequence", opt_start_seq=15)
    assert [seq(m) for m in oc.fetch(3, expires=0.5)] == [15, 16, 17]
    # Recreated after the cursor, not at opt_start_seq again.
    (cname,) = server_consumers(js, mixed.name)
    js.delete_consumer(mixed.name, cname)
    assert [seq(oc.next(timeout=5)) for _ in range(6)] == [18, 19, 20, 21, 22, 23]


@pytest.mark.timeout(30)
def test_filter_survives_a_reset(js, mixed, subj):
    oc = js.ordered_consumer(mixed.name, filter_subject=f"{subj}.b")
    with oc.messages(max_messages=2, threshold_messages=1, expires=2.0) as msgs:
        assert read_stream(msgs, 3) == [2, 4, 6]
        (cname,) = server_consumers(js, mixed.name)
        js.delete_consumer(mixed.name, cname)
        assert read_stream(msgs, 7) == [8, 10, 12, 14, 16, 18, 20]
        assert_quiet(msgs)


@pytest.mark.parametrize("field, value", [
    ("name", "mine"),
    ("durable_name", "mine"),
    ("ack_policy", "explicit"),
    ("ack_policy", "none"),  # even the value it would use: the policy is not the caller's to set
    ("num_replicas", 3),
    ("max_deliver", 5),
    ("mem_storage", False),
    ("ack_wait", 10.0),
    ("max_ack_pending", 10),
])
def test_fields_that_contradict_an_ordered_consumer_are_refused_before_anything_is_sent(
        js, stream, api_spy, field, value):
    assert_sends_nothing(api_spy, js, lambda: js.ordered_consumer(stream.name, **{field: value}),
                         ValueError, field)


def test_every_refused_field_is_named_also_when_given_as_a_config(js, stream, api_spy):
    config = jss.ConsumerConfig(durable_name="d", ack_policy="all", num_replicas=1, max_deliver=2)
    mark = api_spy.mark(js)
    with pytest.raises(ValueError) as err:
        js.ordered_consumer(stream.name, config)
    sentinel = api_spy.sync(js)
    assert api_spy.since(mark) == [sentinel], "the refused call sent a request"
    for field in ("durable_name", "ack_policy", "num_replicas", "max_deliver"):
        assert field in str(err.value)
    with pytest.raises(ValueError, match="name"):
        js.ordered_consumer(stream.name, {"name": "x"})


def test_an_unknown_field_is_a_type_error(js, stream):
    with pytest.raises(TypeError, match="no_such_field"):
        js.ordered_consumer(stream.name, no_such_field=1)


# --- the server-side consumer -----------------------------------------------------------------


@pytest.mark.timeout(30)
def test_the_server_side_consumer_is_ephemeral_in_memory_r1_and_ack_none(js, stream, subj):
    publish(js, f"{subj}.a", 3)
    oc = js.ordered_consumer(stream.name, description="ordered reader")
    with oc.messages(max_messages=5, expires=2.0) as msgs:
        assert read_stream(msgs, 3) == [1, 2, 3]
        (cname,) = server_consumers(js, stream.name)
        info = js.consumer_info(stream.name, cname)
    cfg = info.config
    assert cfg.durable_name is None
    assert cfg.inactive_threshold and cfg.inactive_threshold > 0  # the server removes it if abandoned
    assert cfg.mem_storage is True
    assert cfg.num_replicas == 1
    assert cfg.ack_policy == jss.AckPolicy.NONE
    assert cfg.max_deliver == 1
    assert cfg.description == "ordered reader"
    assert info.num_ack_pending == 0


@pytest.mark.timeout(30)
def test_stopping_messages_deletes_the_server_side_consumer(js, stream, subj):
    publish(js, f"{subj}.a", 3)
    oc = js.ordered_consumer(stream.name)
    msgs = oc.messages(max_messages=5, expires=2.0)
    assert read_stream(msgs, 3) == [1, 2, 3]
    assert len(server_consumers(js, stream.name)) == 1
    msgs.stop()
    wait_for(lambda: server_consumers(js, stream.name) == [], 5, what="the consumer to be deleted")


@pytest.mark.timeout(30)
def test_stopping_consume_deletes_the_server_side_consumer(js, stream, subj):
    publish(js, f"{subj}.a", 3)
    oc = js.ordered_consumer(stream.name)
    rec = Recorder()
    handle = oc.consume(rec.handler, max_messages=5, expires=2.0)
    try:
        wait_for(lambda: len(rec.snapshot()) == 3, 5, what="3 messages handled")
        assert len(server_consumers(js, stream.name)) == 1
    finally:
        handle.stop()
    assert handle.wait(5)
    wait_for(lambda: server_consumers(js, stream.name) == [], 5, what="the consumer to be deleted")


@pytest.mark.timeout(30)
def test_a_healed_reset_leaves_a_single_consumer_on_the_server(js, stream, subj):
    publish(js, f"{subj}.a", 10)
    oc = js.ordered_consumer(stream.name)
    assert [seq(m) for m in oc.fetch(4, expires=0.5)] == [1, 2, 3, 4]
    (first,) = server_consumers(js, stream.name)
    js.delete_consumer(stream.name, first)
    assert [seq(oc.next(timeout=5)) for _ in range(6)] == [5, 6, 7, 8, 9, 10]
    names = server_consumers(js, stream.name)
    assert len(names) == 1 and names != [first]


@pytest.mark.timeout(30)
def test_the_contexts_retry_policy_governs_each_recreation_of_a_running_read(js, stream, subj):
    # messages()/consume() recreate their consumer on the loop thread through the same request path
    # as every API call: the policy assigned to the context is the one applied there too.
    requests: list[int] = []

    class Counting(jss.RetryPolicy):
        async def call_async(self, fn):
            requests.append(1)
            return await super().call_async(fn)

    js.retry = Counting(attempts=2)
    publish(js, f"{subj}.a", 2)
    oc = js.ordered_consumer(stream.name)
    with oc.messages(max_messages=2, expires=2.0) as msgs:
        assert read_stream(msgs, 2) == [1, 2]
        assert len(requests) == 1  # the create at the start
        (first,) = server_consumers(js, stream.name)
        js.delete_consumer(stream.name, first)
        publish(js, f"{subj}.a", 2, start=2)
        assert read_stream(msgs, 2) == [3, 4]
        assert len(requests) == 3  # the reset: delete the old one (sent first), create the next
    wait_for(lambda: server_consumers(js, stream.name) == [], 5, what="the last consumer deleted")
    assert len(requests) == 4  # and the delete when the read stopped


# --- recovery ----------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_fetch_interrupted_by_consumer_deletion_ends_quietly_and_the_next_fetch_heals(js, stream, subj):
    publish(js, f"{subj}.a", 5)
    oc = js.ordered_consumer(stream.name)
    batch = oc.fetch(10, expires=5.0)  # 5 arrive, then the pull waits for more
    got = [seq(next(batch)) for _ in range(5)]
    (cname,) = server_consumers(js, stream.name)
    start = time.monotonic()
    js.delete_consumer(stream.name, cname)
    assert [seq(m) for m in batch] == []  # ends at once, without an error
    assert time.monotonic() - start < 3.0 and batch.error is None
    assert got == [1, 2, 3, 4, 5]
    publish(js, f"{subj}.a", 5, start=5)
    assert [seq(m) for m in oc.fetch(10, expires=0.5)] == [6, 7, 8, 9, 10]


@pytest.mark.timeout(30)
def test_fetch_after_the_consumer_was_deleted_between_reads_loses_and_repeats_nothing(js, stream, subj):
    publish(js, f"{subj}.a", 10)
    oc = js.ordered_consumer(stream.name)
    assert [seq(m) for m in oc.fetch(4, expires=0.5)] == [1, 2, 3, 4]
    (cname,) = server_consumers(js, stream.name)
    js.delete_consumer(stream.name, cname)
    # The pull finds nobody serving it (503); the same call recreates the consumer and goes on.
    assert [seq(m) for m in oc.fetch(6, expires=2.0)] == [5, 6, 7, 8, 9, 10]


@pytest.mark.timeout(30)
def test_messages_continues_without_loss_or_duplicates_when_the_consumer_is_deleted(js, stream, subj):
    publish(js, f"{subj}.a", 30)
    oc = js.ordered_consumer(stream.name)
    with oc.messages(max_messages=5, expires=2.0) as msgs:
        assert read_stream(msgs, 10) == list(range(1, 11))
        (cname,) = server_consumers(js, stream.name)
        js.delete_consumer(stream.name, cname)
        assert read_stream(msgs, 20) == list(range(11, 31))
        publish(js, f"{subj}.a", 5, start=30)
        assert read_stream(msgs, 5) == list(range(31, 36))
        assert_quiet(msgs)
        assert msgs.error is None
        assert not any(isinstance(w, jss.ConsumerDeletedError) for w in msgs.warnings)
        names = server_consumers(js, stream.name)
        assert len(names) == 1 and names != [cname]


@pytest.mark.timeout(30)
def test_consume_continues_without_loss_or_duplicates_when_the_consumer_is_deleted(js, stream, subj):
    publish(js, f"{subj}.a", 20)
    oc = js.ordered_consumer(stream.name)
    rec = Recorder()
    handle = oc.consume(rec.handler, error_handler=rec.on_error, max_messages=5, expires=2.0)
    try:
        wait_for(lambda: len(rec.snapshot()) == 20, 5, what="20 messages handled")
        (cname,) = server_consumers(js, stream.name)
        js.delete_consumer(stream.name, cname)
        publish(js, f"{subj}.a", 20, start=20)
        wait_for(lambda: len(rec.snapshot()) >= 40, 10, what="40 messages handled")
        assert not handle.closed and handle.error is None
    finally:
        handle.stop()
    assert handle.wait(5)
    assert rec.snapshot() == list(range(1, 41))
    assert not any(isinstance(e, jss.ConsumerDeletedError) for e in rec.errors), rec.errors


@pytest.fixture
def fresh_client(fresh_server):
    client = jss.connect(fresh_server.url, timeout=5.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    yield client
    client.close()


@pytest.fixture
def file_stream(fresh_client):
    js = fresh_client.jetstream()
    js.create_stream(name="ORDFILE", subjects=["of.>"], storage="file")
    return js


@pytest.mark.timeout(60)
def test_messages_continues_across_a_server_restart_without_loss_or_duplicates(fresh_server, fresh_client,
                                                                                file_stream):
    js = file_stream
    publish(js, "of.a", 20)
    oc = js.ordered_consumer("ORDFILE")
    with oc.messages(max_messages=5, expires=1.0, idle_heartbeat=0.5) as msgs:
        assert read_stream(msgs, 8) == list(range(1, 9))
        fresh_server.restart()
        wait_for(lambda: fresh_client.is_connected, 10, what="the client to reconnect")
        publish(js, "of.a", 20, start=20)
        assert read_stream(msgs, 32, timeout=20) == list(range(9, 41))
        assert_quiet(msgs)
        assert msgs.error is None


@pytest.mark.timeout(60)
def test_consume_continues_across_a_server_restart_without_loss_or_duplicates(fresh_server, fresh_client,
                                                                               file_stream):
    js = file_stream
    publish(js, "of.a", 20)
    oc = js.ordered_consumer("ORDFILE")
    rec = Recorder()
    handle = oc.consume(rec.handler, error_handler=rec.on_error, max_messages=5, expires=1.0, idle_heartbeat=0.5)
    try:
        wait_for(lambda: len(rec.snapshot()) == 20, 5, what="20 messages handled")
        fresh_server.restart()
        wait_for(lambda: fresh_client.is_connected, 10, what="the client to reconnect")
        publish(js, "of.a", 20, start=20)
        wait_for(lambda: len(rec.snapshot()) >= 40, 20, what="40 messages handled")
        assert not handle.closed and handle.error is None
    finally:
        handle.stop()
    assert handle.wait(5)
    assert rec.snapshot() == list(range(1, 41))


@pytest.mark.timeout(60)
def test_fetch_continues_across_a_server_restart(fresh_server, fresh_client, file_stream):
    js = file_stream
    publish(js, "of.a", 10)
    oc = js.ordered_consumer("ORDFILE")
    assert [seq(m) for m in oc.fetch(4, expires=0.5)] == [1, 2, 3, 4]
    fresh_server.restart()
    wait_for(lambda: fresh_client.is_connected, 10, what="the client to reconnect")
    publish(js, "of.a", 5, start=10)
    # The in-memory consumer did not survive the restart: the first fetch recreates it.
    assert [seq(m) for m in oc.fetch(11, expires=2.0)] == list(range(5, 16))


@pytest.mark.timeout(60)
def test_a_missed_heartbeat_is_reported_and_reading_resumes_with_no_gap(fresh_server, fresh_client, file_stream):
    # SIGSTOP freezes the server with the connection up: no heartbeat arrives and
    # there is no disconnect to pause the timer for.
    js = file_stream
    publish(js, "of.a", 10)
    oc = js.ordered_consumer("ORDFILE")
    with oc.messages(max_messages=3, threshold_messages=1, expires=1.0, idle_heartbeat=0.5) as msgs:
        got = read_stream(msgs, 5)
        pid = fresh_server.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            while not any(isinstance(w, jss.NoHeartbeatError) for w in msgs.warnings):
                try:
                    got.append(seq(msgs.next(timeout=0.1)))  # what was already buffered may still come
                except jss.TimeoutError:
                    pass
                assert time.monotonic() - start < 3.0, f"no NoHeartbeatError; warnings: {msgs.warnings!r}"
            assert time.monotonic() - start >= 0.9  # 2 x idle_heartbeat
            # Keep it frozen for about 2 s in all (real time passing, not a wait on state).
            time.sleep(max(0.0, 2.0 - (time.monotonic() - start)))
        finally:
            os.kill(pid, signal.SIGCONT)
        publish(js, "of.a", 5, start=10)
        got += read_stream(msgs, 15 - len(got), timeout=15)
        assert got == list(range(1, 16))
        assert_quiet(msgs)
        assert msgs.error is None


@pytest.mark.timeout(60)
def test_a_read_whose_start_times_out_leaves_no_consumer_and_no_pull_behind(fresh_server, fresh_client, file_stream):
    # The server answers nothing while messages() creates its first consumer, so the call gives up after
    # the context's timeout (an object read during a leader's SIGKILL meets this). Once the server is
    # back, nothing of that read may live on: not the consumer whose create the server takes late, not a
    # pull that recreates one at its next missed heartbeat.
    publish(file_stream, "of.a", 3)
    oc = fresh_client.jetstream(timeout=1.0).ordered_consumer("ORDFILE")
    pid = fresh_server.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _process_state(pid) in ("T", "t"), 5, interval=0.001, what="the server to be stopped")
        with pytest.raises(jss.TimeoutError):
            oc.messages(expires=1.0, idle_heartbeat=0.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: server_consumers(file_stream, "ORDFILE") == [], 15, interval=0.1,
             what="no consumer left on the stream")
    # A pull left running without its reader would make a consumer again on the next reconnect.
    fresh_server.restart()
    wait_for(lambda: fresh_client.is_connected, 10, what="the client to reconnect")
    with oc.messages() as msgs:  # the ordered consumer is free for the next read, which starts at the cursor
        assert read_stream(msgs, 3) == [1, 2, 3]
        assert len(server_consumers(file_stream, "ORDFILE")) == 1  # this read's own, and no other
    wait_for(lambda: server_consumers(file_stream, "ORDFILE") == [], 10, what="the read's consumer deleted")


@pytest.mark.timeout(60)
def test_consume_reports_a_missed_heartbeat_and_goes_on_with_no_gap(fresh_server, fresh_client, file_stream):
    js = file_stream
    publish(js, "of.a", 5)
    oc = js.ordered_consumer("ORDFILE")
    rec = Recorder()
    handle = oc.consume(rec.handler, error_handler=rec.on_error, max_messages=3, expires=1.0, idle_heartbeat=0.5)
    try:
        wait_for(lambda: len(rec.snapshot()) == 5, 5, what="5 messages handled")
        pid = fresh_server.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(lambda: any(isinstance(e, jss.NoHeartbeatError) for e in list(rec.errors)), 3,
                     what="a NoHeartbeatError reported to error_handler")
        finally:
            os.kill(pid, signal.SIGCONT)
        publish(js, "of.a", 5, start=5)
        wait_for(lambda: len(rec.snapshot()) >= 10, 15, what="10 messages handled")
        assert not handle.closed and handle.error is None
    finally:
        handle.stop()
    assert handle.wait(5)
    assert rec.snapshot() == list(range(1, 11))


@pytest.mark.timeout(30)
def test_fetch_no_wait_yields_what_is_there_in_order(js, stream, subj):
    publish(js, f"{subj}.a", 7)
    oc = js.ordered_consumer(stream.name)
    assert [seq(m) for m in oc.fetch_no_wait(5)] == [1, 2, 3, 4, 5]
    assert [seq(m) for m in oc.fetch_no_wait(5)] == [6, 7]
    assert [seq(m) for m in oc.fetch_no_wait(5)] == []


@pytest.mark.timeout(30)
def test_next_waiting_when_the_consumer_is_deleted_still_returns_the_next_message(js, stream, subj):
    publish(js, f"{subj}.a", 1)
    oc = js.ordered_consumer(stream.name)
    assert seq(oc.next(timeout=5)) == 1
    (cname,) = server_consumers(js, stream.name)
    result: list = []
    t = threading.Thread(target=lambda: result.append(seq(oc.next(timeout=8))), name="test-next")
    t.start()
    try:
        wait_for(lambda: js.consumer_info(stream.name, cname).num_waiting == 1, 5, what="next() to wait")
        js.delete_consumer(stream.name, cname)
        wait_for(lambda: len(server_consumers(js, stream.name)) == 1
                 and server_consumers(js, stream.name) != [cname], 5, what="the consumer to be recreated")
        publish(js, f"{subj}.a", 1, start=1)
    finally:
        t.join(10)
    assert result == [2]


# --- one read at a time ------------------------------------------------------------------------


def assert_busy(call):
    with pytest.raises(RuntimeError, match="one read at a time"):
        call()


@pytest.mark.timeout(30)
def test_a_second_read_while_a_fetch_is_unfinished_is_refused_until_the_batch_ends(js, stream, subj):
    publish(js, f"{subj}.a", 6)
    oc = js.ordered_consumer(stream.name)
    batch = oc.fetch(3, expires=2.0)
    assert seq(next(batch)) == 1
    assert_busy(lambda: oc.fetch(3, expires=0.5))
    assert_busy(lambda: oc.next(timeout=0.5))
    assert_busy(lambda: oc.messages(expires=2.0))
    assert_busy(lambda: oc.consume(lambda m: None, expires=2.0))
    assert [seq(m) for m in batch] == [2, 3]  # the refused calls took nothing from it
    assert [seq(m) for m in oc.fetch(3, expires=2.0)] == [4, 5, 6]


@pytest.mark.timeout(30)
def test_a_fetch_stopped_early_frees_the_consumer_and_nothing_is_skipped(js, stream, subj):
    publish(js, f"{subj}.a", 10)
    oc = js.ordered_consumer(stream.name)
    with oc.fetch(10, expires=2.0) as batch:
        assert seq(next(batch)) == 1
    # The server already sent the rest of the batch (AckNone: it will not resend it to that
    # consumer); the next read starts again right after the last message yielded.
    assert [seq(m) for m in oc.fetch(10, expires=0.5)] == list(range(2, 11))


@pytest.mark.timeout(30)
def test_a_second_read_while_messages_runs_is_refused_and_allowed_after_stop(js, stream, subj):
    publish(js, f"{subj}.a", 4)
    oc = js.ordered_consumer(stream.name)
    msgs = oc.messages(max_messages=2, expires=2.0)
    try:
        assert read_stream(msgs, 2) == [1, 2]
        assert_busy(lambda: oc.messages(expires=2.0))
        assert_busy(lambda: oc.fetch(1, expires=0.5))
        assert_busy(lambda: oc.fetch_no_wait(1))
        assert_busy(lambda: oc.next(timeout=0.5))
    finally:
        msgs.stop()
    assert [seq(oc.next(timeout=5)) for _ in range(2)] == [3, 4]


@pytest.mark.timeout(30)
def test_a_second_read_while_consume_runs_is_refused_also_from_another_thread(js, stream, subj):
    publish(js, f"{subj}.a", 3)
    oc = js.ordered_consumer(stream.name)
    rec = Recorder()
    handle = oc.consume(rec.handler, max_messages=5, expires=2.0)
    outcome: list[BaseException] = []
    try:
        wait_for(lambda: len(rec.snapshot()) == 3, 5, what="3 messages handled")

        def other():
            try:
                oc.fetch(1, expires=0.5)
            except BaseException as exc:
                outcome.append(exc)

        t = threading.Thread(target=other, name="test-other-reader")
        t.start()
        t.join(5)
        assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
        assert "one read at a time" in str(outcome[0])
    finally:
        handle.stop()
    assert handle.wait(5)
    publish(js, f"{subj}.a", 2, start=3)
    with oc.messages(max_messages=5, expires=2.0) as msgs:
        assert read_stream(msgs, 2) == [4, 5]


@pytest.mark.timeout(30)
def test_a_new_read_is_allowed_after_messages_ended_with_an_error(js, stream, subj):
    publish(js, f"{subj}.a", 2)
    oc = js.ordered_consumer(stream.name)
    msgs = oc.messages(max_messages=5, expires=2.0)
    assert read_stream(msgs, 2) == [1, 2]
    js.delete_stream(stream.name)
    with pytest.raises(jss.StreamNotFoundError):
        msgs.next(timeout=5)  # the stream is gone: the consumer cannot be recreated
    with pytest.raises(jss.StreamNotFoundError):
        oc.fetch(1, expires=0.5)  # a new read is allowed (and fails on its own merits)


# --- Stream.ordered_consumer ---------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_stream_ordered_consumer_reads_the_stream_in_order(js, stream, subj):
    publish(js, f"{subj}.a", 5)
    publish(js, f"{subj}.b", 5, start=5)
    oc = js.stream(stream.name).ordered_consumer(filter_subject=f"{subj}.b")
    assert isinstance(oc, jss.OrderedConsumer)
    assert oc.stream_name == stream.name
    assert [m.data for m in oc.fetch(10, expires=0.5)] == [b"m5", b"m6", b"m7", b"m8", b"m9"]
    with pytest.raises(ValueError, match="durable_name"):
        stream.ordered_consumer(durable_name="no")


@pytest.mark.timeout(30)
def test_close_deletes_the_server_side_consumer_of_fetch_reads(js):
    js.create_stream(name="OCLOSE", subjects=["oclose.>"], storage="memory")
    js.publish("oclose.a", b"1")
    with js.ordered_consumer("OCLOSE") as oc:
        assert [m.data for m in oc.fetch(1, expires=1)] == [b"1"]
        assert len(list(js.consumer_names("OCLOSE"))) == 1
    wait_for(lambda: not list(js.consumer_names("OCLOSE")), what="the ordered consumer to be deleted")
