# Push consumers (docs/push.md) against a real nats-server: the handles, consume() and messages() on
# the push engine, deliver groups, back pressure (flow control, a full buffer), the heartbeat alarm
# and gap detection, and the rule that pull calls and push calls do not mix.
from __future__ import annotations

import gc
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync._engine import Target, Warning_
from jetstream_sync.push import PushEngine, push_options

from conftest import assert_sends_nothing, publish_n, wait_for

pytestmark = pytest.mark.timeout(60)


def publish(js, subject, n, size=0):
    return publish_n(js, subject, n, size)


class Recorder:
    """What handlers and error handlers saw, thread-safe."""

    def __init__(self, ack: bool = True) -> None:
        self.lock = threading.Lock()
        self.seqs: list[int] = []
        self.errors: list[BaseException] = []
        self.threads: set[str] = set()
        self.ack = ack

    def handler(self, msg: jss.Msg) -> None:
        with self.lock:
            self.seqs.append(msg.metadata.sequence.stream)
            self.threads.add(threading.current_thread().name)
        if self.ack:
            msg.ack()

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def count(self) -> int:
        with self.lock:
            return len(self.seqs)

    def of(self, cls: type) -> list[BaseException]:
        with self.lock:
            return [e for e in self.errors if isinstance(e, cls)]


# --- handles -------------------------------------------------------------------------------------


def test_a_push_consumer_needs_a_deliver_subject_and_nothing_is_sent_without_one(js, stream, api_spy):
    assert_sends_nothing(api_spy, js, lambda: js.create_push_consumer(stream.name, durable_name="p"),
                         ValueError, "deliver_subject")
    assert_sends_nothing(api_spy, js, lambda: stream.create_push_consumer(durable_name="p"),
                         ValueError, "deliver_subject")


def test_a_deliver_subject_on_a_pull_call_is_refused_before_anything_is_sent(js, stream, api_spy):
    assert_sends_nothing(api_spy, js, lambda: js.create_consumer(stream.name, durable_name="p",
                                                                 deliver_subject="x.y"),
                         ValueError, "create_push_consumer")


def test_pull_calls_on_a_push_consumer_and_push_calls_on_a_pull_consumer_name_the_consumer(js, stream):
    push = js.create_push_consumer(stream.name, durable_name="pushy", deliver_subject=f"dl.{stream.name}")
    js.create_consumer(stream.name, durable_name="pully")
    with pytest.raises(jss.ConsumerTypeError, match="'pushy'.*push consumer"):
        js.consumer(stream.name, "pushy")
    with pytest.raises(jss.ConsumerTypeError, match="'pushy'.*push consumer"):
        stream.consumer("pushy")
    with pytest.raises(jss.ConsumerTypeError, match="'pully'.*pull consumer"):
        js.push_consumer(stream.name, "pully")
    with pytest.raises(jss.ConsumerTypeError, match="'pully'.*pull consumer"):
        stream.push_consumer("pully")
    assert isinstance(push, jss.PushConsumer) and not hasattr(push, "fetch") and not hasattr(push, "next")
    found = js.push_consumer(stream.name, "pushy")
    assert found.deliver_subject == f"dl.{stream.name}" and found.info().config.deliver_subject == found.deliver_subject


def test_update_and_create_or_update_keep_a_push_consumer_push(js, stream):
    deliver = f"dl.{stream.name}"
    stream.create_or_update_push_consumer(durable_name="p", deliver_subject=deliver, description="one")
    updated = js.update_push_consumer(stream.name, durable_name="p", deliver_subject=deliver, description="two")
    assert updated.cached_info.config.description == "two"
    again = stream.create_or_update_push_consumer(durable_name="p", deliver_subject=deliver, description="three")
    assert again.info().config.description == "three"


# --- consume() and messages() ------------------------------------------------------------------


def test_consume_hands_every_message_once_to_the_workers_and_acks_reach_the_server(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="work", deliver_subject=f"dl.{stream.name}", ack_wait=30)
    rec = Recorder()
    with pc.consume(rec.handler, workers=3, error_handler=rec.on_error) as handle:
        seqs = publish(js, f"{subj}.a", 300)
        wait_for(lambda: rec.count() == 300, 20, what="300 messages handled")
    assert handle.closed
    assert sorted(rec.seqs) == seqs and rec.errors == []
    assert rec.threads <= {f"jetstream-sync-worker-work-{i}" for i in range(3)}
    wait_for(lambda: pc.info().num_ack_pending == 0, 5, what="every ack applied")
    assert handle.stats.received == 300 and handle.stats.handled == 300 and handle.stats.pulls == 0


def test_one_worker_keeps_stream_order(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="ord", deliver_subject=f"dl.{stream.name}")
    seqs = publish(js, f"{subj}.a", 200)
    rec = Recorder()
    handle = pc.consume(rec.handler, error_handler=rec.on_error)
    try:
        wait_for(lambda: rec.count() == 200, 20, what="200 handled")
    finally:
        handle.stop()
    assert rec.seqs == seqs


def test_messages_iterates_in_order_and_stop_hands_back_what_was_not_taken(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="it", deliver_subject=f"dl.{stream.name}", ack_wait=30)
    seqs = publish(js, f"{subj}.a", 50)
    msgs = pc.messages()
    got = []
    for msg in msgs:
        got.append(msg.metadata.sequence.stream)
        msg.ack()
        if len(got) == 10:
            break
    assert got == seqs[:10]
    wait_for(lambda: msgs._engine.buffered() == 40, 5, what="the rest buffered")
    msgs.stop()
    with pytest.raises(StopIteration):
        msgs.next(timeout=1)
    # NAKed, not left to ack_wait: a new reader gets the other 40 at once.
    rec = Recorder()
    with pc.consume(rec.handler) as handle:
        wait_for(lambda: rec.count() == 40, 10, what="the 40 handed back")
    assert sorted(rec.seqs) == seqs[10:] and handle.closed


def test_drain_delivers_everything_the_server_sent_before_interest_stopped(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="dr", deliver_subject=f"dl.{stream.name}", ack_wait=30)
    rec = Recorder()
    gate = threading.Event()

    def slow(msg):
        gate.wait(10)
        rec.handler(msg)

    handle = pc.consume(slow, error_handler=rec.on_error)
    publish(js, f"{subj}.a", 100)
    wait_for(lambda: handle.stats.received == 100, 10, what="100 delivered")
    handle.drain()
    gate.set()
    assert handle.wait(20)
    assert rec.count() == 100 and rec.errors == []
    wait_for(lambda: pc.info().num_ack_pending == 0, 5, what="every ack applied")


def test_a_handler_that_raises_gets_its_message_naked_and_the_error_reported(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="boom", deliver_subject=f"dl.{stream.name}", ack_wait=30)
    publish(js, f"{subj}.a", 1)
    seen = []
    errs = []

    def handler(msg):
        seen.append(msg.metadata.num_delivered)
        if len(seen) == 1:
            raise RuntimeError("first time fails")
        msg.ack()

    with pc.consume(handler, error_handler=errs.append):
        wait_for(lambda: len(seen) == 2, 10, what="the redelivery after the NAK")
    assert seen == [1, 2] and [str(e) for e in errs] == ["first time fails"]


# --- deliver groups ----------------------------------------------------------------------------


def test_a_deliver_group_shares_the_messages_among_its_members_each_delivered_once(js, stream, subj, nats_server):
    pc = stream.create_push_consumer(durable_name="grp", deliver_subject=f"dl.{stream.name}", deliver_group="g",
                                     ack_wait=30)
    other = jss.connect(nats_server.url, name="member-2")
    try:
        pc2 = other.jetstream().push_consumer(stream.name, "grp")
        a, b = Recorder(), Recorder()
        with pc.consume(a.handler, workers=2), pc2.consume(b.handler, workers=2):
            seqs = publish(js, f"{subj}.a", 400)
            wait_for(lambda: a.count() + b.count() == 400, 20, what="400 handled by the group")
        assert sorted(a.seqs + b.seqs) == seqs
        assert a.count() > 0 and b.count() > 0  # both members got a share
    finally:
        other.close()


# --- back pressure ------------------------------------------------------------------------------


def test_without_flow_control_a_full_buffer_drops_says_so_and_explicit_acks_bring_everything_back(
        js, stream, subj):
    pc = stream.create_push_consumer(durable_name="slow", deliver_subject=f"dl.{stream.name}", ack_wait=1,
                                     max_ack_pending=1000)
    gate = threading.Event()
    rec = Recorder()

    def handler(msg):
        gate.wait(10)
        rec.handler(msg)

    handle = pc.consume(handler, error_handler=rec.on_error, pending_msgs_limit=10)
    try:
        seqs = publish(js, f"{subj}.a", 100)
        wait_for(lambda: handle._engine.dropped > 0, 10, what="a drop")
        assert handle.stats.buffered <= 10
        # Out of band: the warning arrives while the only worker is still stuck in its handler.
        wait_for(lambda: rec.of(jss.SlowConsumerError), 10, what="the slow consumer warning")
        assert rec.count() == 0 and not gate.is_set()
        gate.set()
        wait_for(lambda: set(rec.seqs) == set(seqs), 30, what="every message, dropped ones redelivered")
    finally:
        gate.set()
        handle.stop()
    assert rec.of(jss.MessageGapError) == []  # a drop is not a gap: it was counted and said


def test_warnings_reach_the_error_handler_in_order_on_one_thread_that_is_not_a_worker(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="blocked", deliver_subject=f"dl.{stream.name}", ack_wait=30,
                                     idle_heartbeat=0.5)
    gate = threading.Event()
    warnings: list[tuple[str, str]] = []

    def on_error(exc):
        warnings.append((type(exc).__name__, threading.current_thread().name))

    handle = pc.consume(lambda msg: gate.wait(20), workers=2, error_handler=on_error, pending_msgs_limit=3)
    try:
        publish(js, f"{subj}.a", 50)
        wait_for(lambda: ("SlowConsumerError", f"jetstream-sync-reporter-{pc.name}") in warnings, 10,
                 what="the slow consumer warning on the reporter thread while both workers are blocked")
        assert not gate.is_set() and handle.stats.handled == 0
    finally:
        gate.set()
        handle.stop()
    assert handle.wait(5)
    assert all(thread == f"jetstream-sync-reporter-{pc.name}" for _, thread in warnings)


def test_with_flow_control_a_slow_handler_pauses_the_server_and_nothing_is_dropped(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="fc", deliver_subject=f"dl.{stream.name}", flow_control=True,
                                     idle_heartbeat=1.0, ack_policy="none")
    seqs = publish(js, f"{subj}.a", 3000, size=1024)
    gate = threading.Event()
    rec = Recorder(ack=False)

    def handler(msg):
        gate.wait(10)
        rec.handler(msg)

    handle = pc.consume(handler, error_handler=rec.on_error)
    try:
        wait_for(lambda: handle.stats.received > 0, 10, what="the first delivery")
        time.sleep(0.5)  # the server keeps sending only while its flow-control window lasts
        held = handle.stats.received
        assert held < 3000, "the server did not wait for the flow-control answer"
        gate.set()
        wait_for(lambda: rec.count() == 3000, 30, what="every message once the handler caught up")
    finally:
        gate.set()
        handle.stop()
    assert rec.seqs == seqs and handle._engine.dropped == 0 and rec.of(jss.SlowConsumerError) == []


# --- automatic management ----------------------------------------------------------------------


def test_the_heartbeat_alarm_fires_when_the_consumer_goes_silent(js, stream, subj):
    pc = stream.create_push_consumer(durable_name="hb", deliver_subject=f"dl.{stream.name}", idle_heartbeat=0.5)
    rec = Recorder()
    with pc.consume(rec.handler, error_handler=rec.on_error) as handle:
        publish(js, f"{subj}.a", 5)
        wait_for(lambda: rec.count() == 5, 10, what="5 handled")
        assert rec.of(jss.NoHeartbeatError) == []  # heartbeats keep it quiet while the consumer lives
        pc.delete()
        wait_for(lambda: rec.of(jss.NoHeartbeatError), 5, what="the missed heartbeat")
        assert "'hb'" in str(rec.of(jss.NoHeartbeatError)[0])
        assert not handle.closed  # a warning: the subscription stays


def test_a_heartbeat_saying_more_was_delivered_than_received_is_reported_as_a_gap(js, stream, subj,
                                                                                   nats_server):
    pc = stream.create_push_consumer(durable_name="gap", deliver_subject=f"dl.{stream.name}", ack_policy="none")
    rec = Recorder(ack=False)
    with pc.consume(rec.handler, error_handler=rec.on_error):
        publish(js, f"{subj}.a", 2)
        wait_for(lambda: rec.count() == 2, 10, what="2 handled")
        assert rec.of(jss.MessageGapError) == []
        # The heartbeat the server sends after deliveries 3..7 were lost on the way (the server refuses
        # client publishes with $JS.ACK replies, so the heartbeat form is the one a test can provoke).
        other = jss.connect(nats_server.url)
        try:
            hdr = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\nNats-Last-Stream: 9\r\n\r\n"
            other._conn.write(b"HPUB dl.%s %d %d\r\n%s\r\n" % (stream.name.encode(), len(hdr), len(hdr), hdr))
            other.flush()
        finally:
            other.close()
        wait_for(lambda: rec.of(jss.MessageGapError), 5, what="the gap warning")
    (gap,) = rec.of(jss.MessageGapError)
    assert (gap.last, gap.received) == (2, 7) and "consumer sequence 7" in str(gap)
    assert rec.count() == 2  # a status is never handed to the handler


def test_a_bad_limit_is_refused_naming_it_before_anything_is_sent(js, stream, api_spy):
    pc = stream.create_push_consumer(durable_name="lim", deliver_subject=f"dl.{stream.name}")
    assert_sends_nothing(api_spy, js, lambda: pc.consume(print, pending_msgs_limit=0), ValueError,
                         "pending_msgs_limit")
    assert_sends_nothing(api_spy, js, lambda: pc.messages(pending_bytes_limit="lots"), TypeError,
                         "pending_bytes_limit")
    assert_sends_nothing(api_spy, js, lambda: pc.consume("not callable"), TypeError, "handler")


def _send_status(url: str, subject: str, status: bytes, reply: str = "", **headers: str) -> None:
    """Write a status message as the server would (a second connection, raw HPUB)."""
    hdr = b"NATS/1.0 " + status + b"\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n"
    other = jss.connect(url)
    try:
        head = f"HPUB {subject} {reply} {len(hdr)} {len(hdr)}" if reply else f"HPUB {subject} {len(hdr)} {len(hdr)}"
        other._conn.write(head.encode() + b"\r\n" + hdr + b"\r\n")
        other.flush()
    finally:
        other.close()


def test_flow_control_is_answered_once_when_the_reader_reaches_it_and_a_stall_at_once(
        js, client, stream, subj, nats_server):
    pc = stream.create_push_consumer(durable_name="fcs", deliver_subject=f"dl.{stream.name}", ack_policy="none")
    answers: list[str] = []
    lock = threading.Lock()
    fc_subject, stall_subject = f"fcreply.{stream.name}", f"stall.{stream.name}"
    listener = jss.connect(nats_server.url)
    try:
        for s in (fc_subject, stall_subject):
            listener._conn.call(listener._conn.subscribe_raw(
                s, lambda subject, *_: (lock.acquire(), answers.append(subject.decode()), lock.release())), 5)
        listener._conn.call(listener._conn.subscribe_raw(
            stall_subject + ".2", lambda subject, *_: (lock.acquire(), answers.append(subject.decode()),
                                                       lock.release())), 5)
        listener.flush()
        gate = threading.Event()
        handle = pc.consume(lambda msg: gate.wait(10), pending_msgs_limit=100)
        try:
            publish(js, f"{subj}.a", 3)
            wait_for(lambda: handle.stats.received == 3, 10, what="3 delivered")
            # A flow-control request behind 3 messages a blocked handler has not all taken: no answer yet.
            _send_status(nats_server.url, f"dl.{stream.name}", b"100 FlowControl Request", reply=fc_subject)
            _send_status(nats_server.url, f"dl.{stream.name}", b"100 Idle Heartbeat",
                         **{"Nats-Consumer-Stalled": stall_subject})
            wait_for(lambda: stall_subject in answers, 5, what="the stall answered at once")
            listener.flush()
            assert fc_subject not in answers
            gate.set()
            wait_for(lambda: fc_subject in answers, 5, what="the flow-control answer once the reader got there")
            # The same request again (the server repeats it when unsure): not answered twice.
            _send_status(nats_server.url, f"dl.{stream.name}", b"100 FlowControl Request", reply=fc_subject)
            # A marker behind it on the same path: once its answer is in, any answer to the repeat would be.
            _send_status(nats_server.url, f"dl.{stream.name}", b"100 Idle Heartbeat",
                         **{"Nats-Consumer-Stalled": stall_subject + ".2"})
            wait_for(lambda: stall_subject + ".2" in answers, 5, what="the marker answered")
            with lock:
                assert answers.count(fc_subject) == 1 and answers.count(stall_subject) == 1
            assert handle.stats.handled == 3  # statuses never reach the handler
        finally:
            gate.set()
            handle.stop()
    finally:
        listener.close()


def test_queue_subscriptions_do_not_report_gaps_since_each_member_sees_part_of_the_sequence(
        js, stream, subj, nats_server):
    pc = stream.create_push_consumer(durable_name="qgap", deliver_subject=f"dl.{stream.name}", deliver_group="g",
                                     ack_policy="none")
    rec = Recorder(ack=False)
    with pc.consume(rec.handler, error_handler=rec.on_error):
        publish(js, f"{subj}.a", 2)
        wait_for(lambda: rec.count() == 2, 10, what="2 handled")
        _send_status(nats_server.url, f"dl.{stream.name}", b"100 Idle Heartbeat",
                     **{"Nats-Last-Consumer": "7", "Nats-Last-Stream": "9"})
        publish(js, f"{subj}.a", 1)  # behind the heartbeat on the same connection path
        wait_for(lambda: rec.count() == 3, 10, what="the third handled")
    assert rec.of(jss.MessageGapError) == []


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.timeout(180)
def test_with_flow_control_a_slow_handler_keeps_memory_flat_and_nothing_is_dropped(js, client, name):
    # The suite's short form of benchmarks/soak_consume.py --push (a million messages): 100,000 x 1 KiB
    # through a handler that sleeps 1 ms every 100 messages. Flow control and the consumer's
    # max_ack_pending pace the server; RSS is sampled while it runs.
    total = 100_000
    js.create_stream(name=name, subjects=[f"{name.lower()}.soak"], storage="file")
    publish(js, f"{name.lower()}.soak", total, size=1024)
    pc = js.create_push_consumer(name, durable_name="soak", deliver_subject=f"dl.{name}", flow_control=True,
                                 idle_heartbeat=1.0, ack_wait=120)
    handled = 0
    done = threading.Event()
    errors_seen: list[BaseException] = []

    def slow(msg):
        nonlocal handled
        handled += 1
        if handled % 100 == 0:
            time.sleep(0.001)
        msg.ack()
        if handled == total:
            done.set()

    gc.collect()
    start = _rss()
    peak = start
    handle = pc.consume(slow, error_handler=errors_seen.append)
    try:
        while not done.wait(0.2):
            peak = max(peak, _rss())
            assert handle.stats.buffered <= 1000  # max_ack_pending bounds what is in flight
        peak = max(peak, _rss())
    finally:
        handle.stop()
    assert handle.stats.dropped == 0 and errors_seen == []
    assert peak - start < 20e6, f"RSS grew by {(peak - start) / 1e6:.1f} MB"
    wait_for(lambda: pc.info().num_ack_pending == 0, 10, what="every ack applied")


def test_a_jump_in_the_consumer_sequence_of_deliveries_is_reported_once_as_a_gap_and_nothing_is_held_back():
    # The ack-subject form of gap detection, fed to the engine's loop-thread handler directly: nats-server
    # refuses client publishes with $JS.ACK replies, so no real server lets a test forge a skipped delivery
    # (the heartbeat form is tested against one above). No I/O happens on this path.
    target = Target(conn=None, label="push consumer 'c' of stream 'S'", timeout=5.0, name="c", stream="S",
                    consumer="c", subject="d")
    items: list = []
    engine = PushEngine(target, push_options(jss.ConsumerConfig(deliver_subject="d")), items.append)
    for dseq in (1, 2, 5, 6):
        engine._on_msg(b"s.a", f"$JS.ACK.S.c.1.{dseq + 10}.{dseq}.0.0".encode(), b"x", b"")
    gaps = [i.error for i in items if type(i) is Warning_]
    assert [(g.last, g.received) for g in gaps] == [(2, 5)] and isinstance(gaps[0], jss.MessageGapError)
    msgs = [i for i in items if type(i) is jss.Msg]
    assert [m.metadata.sequence.consumer for m in msgs] == [1, 2, 5, 6]  # a gap is a warning: all delivered
