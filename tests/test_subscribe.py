# js.subscribe() / js.pull_subscribe(): every rule of ADR-15 (the JetStream subscribe workflow) against
# a real server: the checks made before anything is sent, the stream lookup, binding and its errors,
# creating (and deleting what this call created), queue groups across threads and processes, auto-ack,
# reading without a handler, and ordered push subscriptions.
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing, publish_n, wait_for

pytestmark = pytest.mark.timeout(60)


def publish(js, subject, n, size=0):
    return publish_n(js, subject, n, size)


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: list[int] = []
        self.errors: list[BaseException] = []

    def handler(self, msg: jss.Msg) -> None:
        with self.lock:
            self.seqs.append(msg.metadata.sequence.stream)

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def count(self) -> int:
        with self.lock:
            return len(self.seqs)


def consumers(js, stream_name) -> list[str]:
    return sorted(js.consumer_names(stream_name))


# --- checked before anything is sent --------------------------------------------------------------


@pytest.mark.parametrize("option", [{"idle_heartbeat": 1.0}, {"flow_control": True},
                                    {"config": {"idle_heartbeat": 1.0}}])
def test_a_queue_with_heartbeats_or_flow_control_is_refused_first_and_nothing_is_sent(js, api_spy, option):
    # First of all checks: the subject is bad and no stream exists, yet this is the error.
    key = "idle_heartbeat" if "config" in option else next(iter(option))
    assert_sends_nothing(api_spy, js, lambda: js.subscribe("no stream here!", queue="workers", **option),
                         jss.SubscriptionConfigError, f"queue='workers' with {key}")


def test_bad_arguments_are_refused_naming_them_before_anything_is_sent(js, stream, subj, api_spy):
    assert_sends_nothing(api_spy, js, lambda: js.subscribe(f"{subj}.a", handler="nope"), TypeError, "handler")
    assert_sends_nothing(api_spy, js, lambda: js.subscribe(f"{subj}.a", handler=print, workers=0), ValueError,
                         "workers")
    assert_sends_nothing(api_spy, js, lambda: js.subscribe(f"{subj}.a", pending_msgs_limit=-1), ValueError,
                         "pending_msgs_limit")
    assert_sends_nothing(api_spy, js, lambda: js.subscribe(f"{subj}.a", queue="two words"), ValueError, "queue")
    assert_sends_nothing(api_spy, js, lambda: js.pull_subscribe(f"{subj}.a", config={"ack_policy": "none"}),
                         jss.SubscriptionConfigError, "ack_policy=none")


# --- finding the stream ---------------------------------------------------------------------------


def test_no_stream_for_the_subject_names_it(js):
    with pytest.raises(jss.NoStreamForSubjectError, match="'nowhere.at.all'.*no stream") as info:
        js.subscribe("nowhere.at.all")
    assert info.value.subject == "nowhere.at.all"
    assert "create a stream with that subject" in str(info.value) and "stream=" not in str(info.value)


def test_two_streams_for_the_subject_is_an_error_naming_both_unless_stream_is_given(js, name, subj):
    one = js.create_stream(name=name + "_1", subjects=[f"two{subj}.1"], storage="memory")
    two = js.create_stream(name=name + "_2", subjects=[f"two{subj}.2"], storage="memory")
    with pytest.raises(jss.NoStreamForSubjectError, match="2 streams capture it") as info:
        js.subscribe(f"two{subj}.*")
    assert one.name in str(info.value) and two.name in str(info.value)
    with js.subscribe(f"two{subj}.*", stream=two.name) as sub:
        assert sub.stream_name == two.name


# --- creating -------------------------------------------------------------------------------------


def test_a_handler_gets_every_message_acked_after_it_returns_and_the_ephemeral_consumer_goes_with_unsubscribe(
        js, stream, subj):
    seen = Seen()
    sub = js.subscribe(f"{subj}.a", handler=seen.handler, workers=2, error_handler=seen.on_error)
    info = sub.consumer_info()
    assert info.config.filter_subject == f"{subj}.a" and info.config.ack_policy is jss.AckPolicy.EXPLICIT
    assert info.config.durable_name is None  # ephemeral
    seqs = publish(js, f"{subj}.a", 100)
    publish(js, f"{subj}.other", 5)  # outside the filter
    wait_for(lambda: seen.count() == 100, 20, what="100 handled")
    wait_for(lambda: sub.consumer_info().num_ack_pending == 0, 5, what="the auto-acks applied")
    assert sorted(seen.seqs) == seqs and seen.errors == [] and sub.delivered == 100
    sub.unsubscribe()
    assert sub.closed and consumers(js, stream.name) == []


def test_manual_ack_leaves_the_acks_to_the_handler(js, stream, subj):
    seen = Seen()
    with js.subscribe(f"{subj}.a", handler=seen.handler, manual_ack=True, durable="manual") as sub:
        publish(js, f"{subj}.a", 3)
        wait_for(lambda: seen.count() == 3, 10, what="3 handled")
        assert sub.consumer_info().num_ack_pending == 3


def test_a_handler_that_raises_is_naked_and_reported_and_a_message_it_acked_is_not_acked_twice(js, stream, subj):
    calls = []
    errs = []

    def handler(msg):
        calls.append(msg.metadata.num_delivered)
        if len(calls) == 1:
            raise RuntimeError("not yet")
        msg.ack()  # acked by the handler: no second ack after it returns

    with js.subscribe(f"{subj}.a", handler=handler, error_handler=errs.append) as sub:
        publish(js, f"{subj}.a", 1)
        wait_for(lambda: len(calls) == 2, 10, what="the redelivery")
        wait_for(lambda: sub.consumer_info().num_ack_pending == 0, 5, what="the ack applied")
    assert calls == [1, 2] and [str(e) for e in errs] == ["not yet"]


def test_a_durable_made_by_subscribe_stays_and_resumes_where_it_stood_after_drain_and_unsubscribe(js, stream, subj):
    seen = Seen()
    sub = js.subscribe(f"{subj}.a", handler=seen.handler, durable="mine")
    first = publish(js, f"{subj}.a", 10)
    wait_for(lambda: seen.count() == 10, 10, what="10 handled")
    sub.drain()
    assert sub.wait(10)
    assert consumers(js, stream.name) == ["mine"]

    # A restarted subscriber gets what came meanwhile, not the whole stream again.
    later = publish(js, f"{subj}.a", 5)
    again = Seen()
    sub = js.subscribe(f"{subj}.a", handler=again.handler, durable="mine")
    wait_for(lambda: again.count() == 5, 10, what="the 5 published meanwhile")
    sub.unsubscribe()
    assert sorted(again.seqs) == later and not set(again.seqs) & set(first)
    assert consumers(js, stream.name) == ["mine"]

    last = publish(js, f"{subj}.a", 3)
    third = Seen()
    sub = js.subscribe(f"{subj}.a", handler=third.handler, durable="mine")
    wait_for(lambda: third.count() == 3, 10, what="the 3 published after unsubscribe")
    sub.unsubscribe(delete_consumer=True)  # deleted on purpose
    assert sorted(third.seqs) == last and consumers(js, stream.name) == []


def test_a_consumer_it_bound_to_is_kept(js, stream, subj):
    stream.create_push_consumer(durable_name="theirs", deliver_subject=f"dl.{stream.name}",
                                filter_subject=f"{subj}.a")
    with js.subscribe(f"{subj}.a", durable="theirs") as bound:
        assert bound.consumer_name == "theirs"
    assert consumers(js, stream.name) == ["theirs"]


def test_a_queue_member_keeps_receiving_after_the_member_that_made_the_consumer_left(js, stream, subj):
    creator, other = Seen(), Seen()
    first = js.subscribe(f"{subj}.a", queue="workers", handler=creator.handler)
    second = js.subscribe(f"{subj}.a", queue="workers", handler=other.handler)
    try:
        first.unsubscribe()
        assert consumers(js, stream.name) == ["workers"]
        seqs = publish(js, f"{subj}.a", 20)
        wait_for(lambda: other.count() == 20, 10, what="all 20 at the member that stayed")
        assert sorted(other.seqs) == seqs and creator.count() == 0
    finally:
        second.unsubscribe(delete_consumer=True)
    assert consumers(js, stream.name) == []


def test_unsubscribe_takes_delete_consumer_as_a_bool_only(js, stream, subj):
    sub = js.subscribe(f"{subj}.a")
    try:
        with pytest.raises(TypeError, match="delete_consumer must be True or False"):
            sub.unsubscribe(delete_consumer="yes")
    finally:
        sub.unsubscribe()
    assert consumers(js, stream.name) == []  # an ephemeral it made goes with it


def test_without_a_handler_next_msg_and_iteration_give_the_messages_and_the_caller_acks(js, stream, subj):
    sub = js.subscribe(f"{subj}.a", durable="reader")
    try:
        with pytest.raises(jss.TimeoutError):
            sub.next_msg(timeout=0.2)
        seqs = publish(js, f"{subj}.a", 5)
        first = sub.next_msg()
        first.ack()
        rest = []
        for msg in sub:
            msg.ack()
            rest.append(msg.metadata.sequence.stream)
            if len(rest) == 4:
                break
        assert [first.metadata.sequence.stream] + rest == seqs
        assert sub.pending == 0 and sub.delivered == 5
    finally:
        sub.unsubscribe()
    assert consumers(js, stream.name) == ["reader"]  # a named durable stays


# --- binding --------------------------------------------------------------------------------------


def test_a_consumer_with_a_subscriber_and_no_group_is_a_duplicate_subscription(js, stream, subj):
    stream.create_push_consumer(durable_name="one", deliver_subject=f"dl.{stream.name}", filter_subject=f"{subj}.a")
    with js.subscribe(f"{subj}.a", durable="one"):
        wait_for(lambda: stream.push_consumer("one").info().push_bound, 5, what="push_bound")
        with pytest.raises(jss.DuplicateSubscriptionError, match="'one'"):
            js.subscribe(f"{subj}.a", durable="one")


def test_deliver_group_and_queue_must_agree(js, stream, subj):
    stream.create_push_consumer(durable_name="grp", deliver_subject=f"dl.{stream.name}.g", deliver_group="g",
                                filter_subject=f"{subj}.a")
    stream.create_push_consumer(durable_name="solo", deliver_subject=f"dl.{stream.name}.s",
                                filter_subject=f"{subj}.a")
    with pytest.raises(jss.SubscriptionConfigError, match="deliver_group='g'.*queue='g'"):
        js.subscribe(f"{subj}.a", durable="grp")
    with pytest.raises(jss.SubscriptionConfigError, match="deliver_group='g'.*queue='h'"):
        js.subscribe(f"{subj}.a", queue="h", durable="grp")
    with pytest.raises(jss.SubscriptionConfigError, match="without a deliver_group.*queue='g'"):
        js.subscribe(f"{subj}.a", queue="g", durable="solo")


def test_the_subscribed_subject_must_match_the_consumers_filter(js, stream, subj):
    stream.create_push_consumer(durable_name="f", deliver_subject=f"dl.{stream.name}", filter_subject=f"{subj}.a")
    with pytest.raises(jss.SubscriptionConfigError, match=f"filter_subject='{subj}.a'.*'{subj}.b'"):
        js.subscribe(f"{subj}.b", durable="f")
    stream.create_consumer(durable_name="pf", filter_subject=f"{subj}.a")
    with pytest.raises(jss.SubscriptionConfigError, match="filter_subject"):
        js.pull_subscribe(f"{subj}.b", durable="pf")


def test_push_and_pull_do_not_mix(js, stream, subj):
    stream.create_consumer(durable_name="pull", filter_subject=f"{subj}.a")
    stream.create_push_consumer(durable_name="push", deliver_subject=f"dl.{stream.name}", filter_subject=f"{subj}.a")
    with pytest.raises(jss.ConsumerTypeError, match="'pull'.*pull consumer.*pull_subscribe"):
        js.subscribe(f"{subj}.a", durable="pull")
    with pytest.raises(jss.ConsumerTypeError, match="'push'.*push consumer.*subscribe"):
        js.pull_subscribe(f"{subj}.a", durable="push")


def test_an_option_that_differs_from_the_existing_consumer_names_the_field_and_both_values(js, stream, subj):
    stream.create_push_consumer(durable_name="cfg", deliver_subject=f"dl.{stream.name}", filter_subject=f"{subj}.a",
                                max_deliver=5)
    with pytest.raises(jss.SubscriptionConfigError, match="deliver_policy=all.*deliver_policy=new"):
        js.subscribe(f"{subj}.a", durable="cfg", deliver_policy="new")
    with pytest.raises(jss.SubscriptionConfigError, match="max_deliver=5.*max_deliver=3"):
        js.subscribe(f"{subj}.a", durable="cfg", config={"max_deliver": 3})
    with js.subscribe(f"{subj}.a", durable="cfg", deliver_policy="all", config={"max_deliver": 5}):
        pass  # the same values bind


def test_pull_subscribe_creates_a_filtered_durable_then_binds_to_it(js, stream, subj):
    consumer = js.pull_subscribe(f"{subj}.a", durable="pulled")
    assert isinstance(consumer, jss.Consumer)
    assert consumer.cached_info.config.filter_subject == f"{subj}.a"
    seqs = publish(js, f"{subj}.a", 3)
    again = js.pull_subscribe(f"{subj}.a", durable="pulled")
    got = []
    for msg in again.fetch(3, expires=2):
        msg.ack()
        got.append(msg.metadata.sequence.stream)
    assert got == seqs


# --- queue groups ---------------------------------------------------------------------------------


def test_queue_members_across_threads_share_one_consumer_each_message_delivered_once(js, stream, subj):
    members = 4
    barrier = threading.Barrier(members)
    subs: list = [None] * members
    seen = [Seen() for _ in range(members)]
    failures: list[BaseException] = []

    def join(i):
        try:
            barrier.wait(10)  # all at once: lookups and creates race, and all must end bound to one consumer
            subs[i] = js.subscribe(f"{subj}.a", queue="workers", handler=seen[i].handler)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=join, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert failures == []
        assert consumers(js, stream.name) == ["workers"]
        seqs = publish(js, f"{subj}.a", 400)
        wait_for(lambda: sum(s.count() for s in seen) == 400, 20, what="400 handled by the group")
        assert sorted(q for s in seen for q in s.seqs) == seqs
        assert sum(1 for s in seen if s.count()) >= 2
        assert sum(1 for s in subs if s._created) == 1  # exactly one member made it
    finally:
        for s in subs:
            if s is not None:
                s.unsubscribe()


# --- ordered push consumers -------------------------------------------------------------------------


def seq_of(msg: jss.Msg) -> int:
    return msg.metadata.sequence.stream


def test_an_ordered_subscription_takes_no_queue_durable_or_manual_ack(js, stream, subj, api_spy):
    for option in ({"queue": "q"}, {"durable": "d"}, {"manual_ack": True}):
        assert_sends_nothing(api_spy, js, lambda: js.subscribe(f"{subj}.a", ordered_consumer=True, **option),
                             ValueError, f"ordered_consumer=True takes no {next(iter(option))}")


def test_an_ordered_subscription_yields_every_sequence_once_in_order_without_acks(js, stream, subj):
    seqs = publish(js, f"{subj}.a", 300)
    with js.subscribe(f"{subj}.a", ordered_consumer=True) as sub:
        got = [seq_of(sub.next_msg(timeout=5)) for _ in range(300)]
        assert got == seqs
        cfg = sub.consumer_info().config
        assert cfg.ack_policy is jss.AckPolicy.NONE and cfg.flow_control and cfg.mem_storage
        assert cfg.filter_subject == f"{subj}.a" and cfg.num_replicas == 1
        with pytest.raises(jss.TimeoutError):
            sub.next_msg(timeout=0.2)
    wait_for(lambda: consumers(js, stream.name) == [], 5, what="the ordered consumer deleted")


def test_an_ordered_subscription_recreates_its_consumer_after_the_next_sequence_when_it_vanishes(js, stream, subj):
    seen = Seen()
    sub = js.subscribe(f"{subj}.a", handler=seen.handler, ordered_consumer=True, idle_heartbeat=0.5,
                       error_handler=seen.on_error)
    try:
        first = publish(js, f"{subj}.a", 20)
        wait_for(lambda: seen.count() == 20, 10, what="20 handled")
        (old,) = consumers(js, stream.name)
        js.delete_consumer(stream.name, old)
        wait_for(lambda: any(isinstance(e, jss.NoHeartbeatError) for e in seen.errors), 10,
                 what="the missed heartbeat")
        wait_for(lambda: consumers(js, stream.name) not in ([], [old]), 10, what="a new consumer")
        rest = publish(js, f"{subj}.a", 20)
        wait_for(lambda: seen.count() == 40, 10, what="40 handled")
        assert seen.seqs == first + rest  # no gap, no duplicate, in order
        assert "recreating" in str(next(e for e in seen.errors if isinstance(e, jss.NoHeartbeatError)))
    finally:
        sub.unsubscribe()
    wait_for(lambda: consumers(js, stream.name) == [], 5, what="the last ordered consumer deleted")


QUEUE_MEMBER = r"""
import sys, threading
import jetstream_sync as jss

client = jss.connect(sys.argv[1])
js = client.jetstream()
lock = threading.Lock()


def handle(msg):
    with lock:
        print(msg.metadata.sequence.stream, flush=True)


sub = js.subscribe(sys.argv[2], queue="shared", handler=handle, workers=2)
print("ready", flush=True)
sys.stdin.readline()          # the parent says when to leave
sub.drain()
sub.wait(10)
client.close()
"""


@pytest.mark.timeout(90)
def test_queue_members_in_other_processes_share_the_messages_each_delivered_once(js, stream, subj, nats_server,
                                                                                 tmp_path):
    script = tmp_path / "member.py"
    script.write_text(QUEUE_MEMBER)
    mine = Seen()
    sub = js.subscribe(f"{subj}.q", queue="shared", handler=mine.handler)  # this member makes the consumer
    procs = [subprocess.Popen([sys.executable, str(script), nats_server.url, f"{subj}.q"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    theirs: list[list[int]] = [[], []]
    readers = []
    try:
        for i, proc in enumerate(procs):
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()

            def read(i=i, proc=proc):
                for line in proc.stdout:
                    theirs[i].append(int(line))

            t = threading.Thread(target=read, daemon=True)
            t.start()
            readers.append(t)
        seqs = publish(js, f"{subj}.q", 600)
        wait_for(lambda: mine.count() + len(theirs[0]) + len(theirs[1]) >= 600, 30, what="600 handled in all")
        for proc in procs:
            proc.stdin.write("\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(30) == 0, proc.stderr.read()
        for t in readers:
            t.join(5)
        everything = mine.seqs + theirs[0] + theirs[1]
        assert sorted(everything) == seqs  # each message once, across the processes
        assert sum(1 for part in (mine.seqs, theirs[0], theirs[1]) if part) >= 2
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        sub.unsubscribe()
    assert consumers(js, stream.name) == ["shared"]  # a queue group's consumer stays for the next member


def test_unsubscribe_naks_what_the_handler_never_got_and_acks_only_what_it_handled(js, stream, subj):
    gate, inside = threading.Event(), threading.Event()
    handled: list[int] = []

    def slow(msg):
        inside.set()
        gate.wait(10)
        handled.append(msg.metadata.sequence.stream)

    stream.create_push_consumer(durable_name="keep", deliver_subject=f"dl.{stream.name}",
                                filter_subject=f"{subj}.a", ack_wait=4)
    sub = js.subscribe(f"{subj}.a", durable="keep", handler=slow)
    publish(js, f"{subj}.a", 20)
    wait_for(lambda: sub.delivered == 20, 10, what="20 delivered")
    assert inside.wait(10)  # the handler holds the first one
    stopper = threading.Thread(target=sub.unsubscribe)
    stopper.start()
    wait_for(lambda: sub.pending == 0, 5, what="the buffer handed back")
    gate.set()  # the one message in the handler finishes, and only it is acked
    stopper.join(10)
    assert handled == [1] and sub.closed
    # The 19 others come back (NAKed; ack_wait is the server's backstop), and none was acked.
    again = js.subscribe(f"{subj}.a", durable="keep")
    try:
        got = [again.next_msg(timeout=10) for _ in range(19)]
        assert sorted(m.metadata.sequence.stream for m in got) == list(range(2, 21))
        assert all(m.metadata.num_delivered >= 2 for m in got)  # redeliveries, not new messages
    finally:
        again.unsubscribe()


def test_a_delete_that_fails_after_unsubscribe_goes_to_the_error_handler(js, stream, subj):
    errors: list[BaseException] = []
    sub = js.subscribe(f"{subj}.a", handler=lambda msg: None, durable="doomed", error_handler=errors.append)
    js.delete_stream(stream.name)  # the consumer goes with it: deleting it afterwards must fail
    sub.unsubscribe(delete_consumer=True)
    assert len(errors) == 1 and isinstance(errors[0], jss.StreamNotFoundError), errors


def test_subscribe_is_listening_before_it_creates_the_consumer(js, stream, subj):
    # ADR-15: subscribe first, then create, so the server sees interest at once. The create call's own
    # answer says whether it did: push_bound is already true in it.
    sub = js.subscribe(f"{subj}.a", durable="early", handler=lambda msg: None)
    try:
        assert sub._created and sub._consumer.cached_info.push_bound is True
    finally:
        sub.unsubscribe()


def test_an_ordered_subscription_whose_buffer_overflows_starts_again_after_the_last_message_kept(js, stream, subj):
    seqs = publish(js, f"{subj}.a", 300)
    errors_seen: list[BaseException] = []
    with js.subscribe(f"{subj}.a", ordered_consumer=True, pending_msgs_limit=20,
                      error_handler=errors_seen.append) as sub:
        got = []
        for _ in range(300):
            got.append(seq_of(sub.next_msg(timeout=10)))
            time.sleep(0.0005)  # slower than the server: the 20-message buffer overflows
        assert got == seqs  # dropped on the way, yet every sequence once and in order
        assert sub.dropped > 0
