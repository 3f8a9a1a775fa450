# JetStream events (docs/events.md) against a real nats-server: each event type is made to happen for
# real (a NAK, a term, a consumer out of deliveries, an ack sample, creating and deleting), read typed
# through js.events(), stream.events() and consumer.events(); plus the parser on its own: unknown and
# malformed events never break the stream, times keep their nanoseconds.
from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

import jetstream_sync as jss
from jetstream_sync.events import event_from

from conftest import publish_n
from test_cli import CLI, cli_env

pytestmark = pytest.mark.timeout(60)


def next_of(events: jss.EventStream, cls: type, timeout: float = 10.0):
    """The next event of class ``cls`` (others are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        ev = events.next(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(ev, cls):
            return ev


def test_a_nak_a_term_and_running_out_of_deliveries_each_arrive_typed(js, stream, subj):
    consumer = stream.create_consumer(durable_name="poison", max_deliver=2, ack_wait=30)
    with consumer.events() as events:
        publish_n(js, f"{subj}.a", 2)
        first = consumer.next(timeout=5)
        first.nak()
        naked = next_of(events, jss.MessageNaked)
        assert (naked.stream, naked.consumer, naked.stream_seq, naked.deliveries) == (stream.name, "poison", 1, 1)
        second = consumer.next(timeout=5)  # message 2 (message 1 comes back after it or before: either)
        msgs = {second.metadata.sequence.stream: second}
        while 2 not in msgs or 1 not in msgs:
            m = consumer.next(timeout=5)
            msgs[m.metadata.sequence.stream] = m
        msgs[2].term(reason="cannot parse")
        termed = next_of(events, jss.MessageTerminated)
        assert (termed.stream_seq, termed.reason) == (2, "cannot parse")
        msgs[1].nak()  # its second and last delivery
        with pytest.raises(jss.TimeoutError):
            consumer.next(timeout=1)  # the pull that finds message 1 out of deliveries
        exceeded = next_of(events, jss.MaxDeliveriesExceeded)
        assert (exceeded.stream, exceeded.consumer, exceeded.stream_seq, exceeded.deliveries) == (
            stream.name, "poison", 1, 2)
        assert exceeded.timestamp is not None and exceeded.timestamp_ns == exceeded.timestamp.timestamp_ns()


def test_ack_samples_arrive_with_the_delay_in_seconds_and_exact_nanoseconds(js, stream, subj):
    consumer = stream.create_consumer(durable_name="sampled", sample_freq="100%")
    with js.events("METRIC.>", types=[jss.ConsumerAckMetric]) as events:
        publish_n(js, f"{subj}.a", 1)
        consumer.next(timeout=5).ack()
        sample = events.next(timeout=10)
    assert isinstance(sample, jss.ConsumerAckMetric)
    assert (sample.stream, sample.consumer, sample.stream_seq, sample.deliveries) == (stream.name, "sampled", 1, 1)
    assert sample.ack_time_ns == sample.raw["ack_time"] and sample.ack_time == pytest.approx(sample.ack_time_ns / 1e9)


def test_creating_and_deleting_streams_and_consumers_are_actions_with_the_servers_words(js, name, subj):
    with js.events("ADVISORY.>", types=[jss.StreamAction, jss.ConsumerAction]) as events:
        stream = js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory")
        stream.create_consumer(durable_name="c1")
        js.delete_consumer(name, "c1")
        js.delete_stream(name)
        seen = []
        while len(seen) < 4:  # this stream's only: a late advisory of an earlier test may come first
            e = events.next(timeout=10)
            if e.stream == name:
                seen.append((type(e).__name__, e.action, getattr(e, "consumer", None)))
    assert seen == [("StreamAction", "create", None), ("ConsumerAction", "create", "c1"),
                    ("ConsumerAction", "delete", "c1"), ("StreamAction", "delete", None)]


def test_stream_events_keep_one_stream_and_types_accepts_type_strings(js, stream, subj, name):
    other = js.create_stream(name=name + "_O", subjects=[f"other{subj}.>"], storage="memory")
    with stream.events(types=["io.nats.jetstream.advisory.v1.consumer_action"]) as events:
        other.create_consumer(durable_name="elsewhere")
        stream.create_consumer(durable_name="here")
        ev = events.next(timeout=10)
    assert (ev.stream, ev.consumer, ev.action) == (stream.name, "here", "create")


def test_an_event_of_an_unknown_type_arrives_as_unknown_and_the_stream_goes_on(js, client, stream):
    # One subject family only (API audits of the create would interleave with a wider filter).
    with js.events(f"ADVISORY.CONSUMER.CREATED.{stream.name}.>") as events:
        client.publish(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.{stream.name}.x",
                       json.dumps({"type": "io.example.v1.new_kind", "x": 1}))
        client.publish(f"$JS.EVENT.ADVISORY.CONSUMER.CREATED.{stream.name}.x", b"not json")
        stream.create_consumer(durable_name="after")
        got = [events.next(timeout=10) for _ in range(3)]
    assert isinstance(got[0], jss.UnknownEvent) and got[0].type == "io.example.v1.new_kind" and got[0].raw["x"] == 1
    assert isinstance(got[1], jss.UnknownEvent) and got[1].raw == {"data": "not json"}
    assert isinstance(got[2], jss.ConsumerAction)


def test_next_times_out_and_stop_ends_iteration(js):
    events = js.events("ADVISORY.NOTHING.>")
    with pytest.raises(jss.TimeoutError, match="no event"):
        events.next(timeout=0.2)
    events.stop()
    with pytest.raises(StopIteration):
        events.next(timeout=0.2)


# --- the parser on its own ----------------------------------------------------------------------


def test_the_parser_keeps_nanoseconds_and_never_raises():
    doc = {"type": "io.nats.jetstream.advisory.v1.terminated", "id": "x1", "timestamp": "2026-11-25T07:00:00.123456789Z",
           "stream": "S", "consumer": "C", "consumer_seq": 3, "stream_seq": 40, "deliveries": 2, "reason": "bad"}
    ev = event_from(json.dumps(doc).encode())
    assert isinstance(ev, jss.MessageTerminated) and ev.timestamp_ns % 1_000_000_000 == 123456789
    assert (ev.stream_seq, ev.deliveries, ev.reason) == (40, 2, "bad")
    broken = event_from({**doc, "timestamp": "yesterday"})
    assert isinstance(broken, jss.MessageTerminated) and broken.timestamp is None
    assert isinstance(event_from(b"[1, 2]"), jss.UnknownEvent)
    assert isinstance(event_from({"type": 7}), jss.UnknownEvent)


def test_events_show_as_a_small_table_in_a_notebook():
    ev = event_from({"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": "ORDERS", "consumer": "NEW",
                     "stream_seq": 40, "deliveries": 5})
    html = ev._repr_html_()
    assert "MaxDeliveriesExceeded" in html and "ORDERS" in html and "40" in html and "deliveries" in html


def test_bad_filters_and_types_are_refused_before_anything_is_sent(js):
    with pytest.raises(ValueError, match="subject_filter"):
        js.events("two words")
    with pytest.raises(TypeError, match="types"):
        js.events(types=[42])


@pytest.mark.timeout(120)
def test_a_leader_step_down_on_the_cluster_is_a_leader_elected_event(nats_cluster):
    name = f"EV_{int(time.time() * 1000) % 10**8}"
    client = jss.connect(nats_cluster.urls, name="events-cluster", timeout=5.0)
    try:
        js = client.jetstream(retry=jss.RetryPolicy(attempts=30, initial_backoff=0.1, max_backoff=1.0))
        stream = js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="file", num_replicas=3)
        stream.create_consumer(durable_name="c", num_replicas=3)
        with stream.events(types=[jss.LeaderElected]) as events:
            old = stream.info().cluster.leader
            answer = json.loads(client.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{name}", b"", timeout=5.0).data)
            assert answer.get("success") is True, answer
            elected = events.next(timeout=30)
            while elected.consumer is not None:  # a consumer's election may come first: a stream's is wanted
                elected = events.next(timeout=30)
        assert elected.stream == name and elected.leader and elected.leader != old
        assert len(elected.replicas) == 3 and elected.leader in elected.replicas
        js.delete_stream(name)
    finally:
        client.close()


# --- the command line ------------------------------------------------------------------------------


def _cli_while(args: list[str], server, act) -> list[str]:
    """Run the console script and call ``act()`` every 0.2 s until it exits (it subscribes on its own
    time: acting until it has seen enough needs no view of its subscription); return stdout's lines."""
    proc = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(server))
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            act()
            time.sleep(0.2)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0 and err == "", err
        return out.splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_the_events_command_prints_one_json_object_per_line_with_the_servers_fields(js, stream, nats_server):
    made = iter(range(1000))
    lines = _cli_while(["events", "--filter", f"ADVISORY.CONSUMER.CREATED.{stream.name}.>", "--count", "2", "--json"],
                       nats_server,
                       lambda: stream.create_consumer(durable_name=f"probe{next(made)}"))
    docs = [json.loads(line) for line in lines]  # every line parses on its own
    assert len(docs) == 2
    assert all(d["type"] == "io.nats.jetstream.advisory.v1.consumer_action" and d["action"] == "create" and
               d["stream"] == stream.name for d in docs)


def test_consumer_events_prints_ack_samples_as_the_jetstream_model_shows_them(js, stream, subj, nats_server):
    consumer = stream.create_consumer(durable_name="NEW", sample_freq="100%")

    def ack_one() -> None:
        publish_n(js, f"{subj}.a", 1)
        consumer.next(timeout=5).ack()

    lines = _cli_while(["consumer", "events", stream.name, "NEW", "--count", "1"], nats_server, ack_one)
    text = "\n".join(lines)
    assert "Acknowledgement Sample" in lines[0]
    assert f"Consumer: {stream.name} > NEW" in text and "Stream Sequence: " in text
    assert "Deliveries: 1" in text and "Delay: " in text


def test_ctrl_c_ends_the_events_command_within_a_second_with_one_line(js, stream, nats_server):
    proc = subprocess.Popen([str(CLI), "events", "--filter", f"ADVISORY.CONSUMER.CREATED.{stream.name}.>"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(nats_server))
    try:
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)
        reader.start()
        made = 0
        while reader.is_alive() and made < 100:  # until it has printed an event, so it is surely subscribed
            stream.create_consumer(durable_name=f"probe{made}")
            made += 1
            reader.join(0.2)
        assert first and "Consumer Action" in first[0]
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and time.monotonic() - started < 1.5
    assert err.splitlines() == ["jetstream-sync: error: interrupted"]


SAMPLES = [
    ("consumer_pause", jss.ConsumerPause, {"stream": "S", "consumer": "C", "paused": True,
                                          "pause_until": "2026-11-25T08:00:00.000000001Z"},
     {"paused": True, "consumer": "C"}),
    ("consumer_group_pinned", jss.ConsumerGroupPinned, {"account": "ACC", "stream": "S", "consumer": "C", "group": "A",
                                                        "pinned_id": "p1"},
     {"account": "ACC", "group": "A", "pinned_id": "p1"}),
    ("consumer_group_unpinned", jss.ConsumerGroupUnpinned, {"stream": "S", "consumer": "C", "group": "A",
                                                            "reason": "timeout"}, {"reason": "timeout"}),
    ("stream_quorum_lost", jss.QuorumLost, {"account": "ACC", "stream": "S",
                                            "replicas": [{"name": "n1"}, {"name": "n2"}]},
     {"account": "ACC", "consumer": None, "replicas": ("n1", "n2")}),
    ("consumer_quorum_lost", jss.QuorumLost, {"stream": "S", "consumer": "C", "replicas": []}, {"consumer": "C"}),
    ("domain_leader_elected", jss.DomainLeaderElected, {"leader": "n1", "replicas": [{"name": "n1"}],
                                                        "cluster": "c1"}, {"leader": "n1", "cluster": "c1"}),
    ("snapshot_create", jss.SnapshotCreated, {"stream": "S", "state": {"messages": 3}, "client": {"name": "app"}},
     {"state": {"messages": 3}, "client": {"name": "app"}}),
    ("snapshot_complete", jss.SnapshotCompleted, {"stream": "S", "start": "2026-11-25T08:00:00Z",
                                                  "end": "2026-11-25T08:00:01Z"}, {"error": None}),
    ("restore_create", jss.RestoreCreated, {"stream": "S"}, {"stream": "S"}),
    ("restore_complete", jss.RestoreCompleted, {"stream": "S", "bytes": 1024, "client": {"acc": "A"}},
     {"bytes": 1024, "client": {"acc": "A"}}),
    ("stream_batch_abandoned", jss.StreamBatchAbandoned, {"account": "ACC", "stream": "S", "batch": "b1",
                                                          "reason": "timeout"},
     {"account": "ACC", "batch": "b1", "reason": "timeout"}),
    ("server_out_of_space", jss.ServerOutOfSpace, {"server": "n1", "server_id": "X", "cluster": "c1"},
     {"server": "n1", "stream": None}),
    ("server_removed", jss.ServerRemoved, {"server": "n1", "server_id": "X", "cluster": "c1"}, {"server_id": "X"}),
    ("meta_rescue", jss.MetaRescue, {"server": "n1", "prev_quorum": 2, "new_quorum": 1}, {"new_quorum": 1}),
    ("api_limit_reached", jss.ApiLimitReached, {"server": "n1", "dropped": 7}, {"dropped": 7}),
]


@pytest.mark.parametrize("kind, cls, doc, expect", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_every_advisory_type_of_the_server_has_its_class_with_the_servers_field_names(kind, cls, doc, expect):
    ev = event_from({"type": "io.nats.jetstream.advisory.v1." + kind, "id": "i",
                     "timestamp": "2026-11-25T08:00:00.5Z", **doc})
    assert type(ev) is cls and ev.type.endswith(kind) and ev.raw["id"] == "i"
    for field, value in expect.items():
        assert getattr(ev, field) == value, field


def test_pausing_and_resuming_a_consumer_are_pause_events(js, stream, client):
    stream.create_consumer(durable_name="sleepy")
    until = "2099-01-01T00:00:00.000000001Z"
    with stream.events(types=[jss.ConsumerPause]) as events:
        answer = json.loads(client.request(f"$JS.API.CONSUMER.PAUSE.{stream.name}.sleepy",
                                           json.dumps({"pause_until": until}).encode(), timeout=5).data)
        assert answer.get("paused") is True, answer
        paused = events.next(timeout=10)
        client.request(f"$JS.API.CONSUMER.PAUSE.{stream.name}.sleepy", b"", timeout=5)
        resumed = events.next(timeout=10)
    assert (paused.consumer, paused.paused, paused.pause_until.timestamp_ns() % 10**9) == ("sleepy", True, 1)
    assert resumed.paused is False


def test_every_api_request_is_audited_with_its_subject_and_answer(js):
    with js.events("ADVISORY.API", types=[jss.ApiAudit]) as events:
        js.account_info()
        audit = events.next(timeout=10)
        while audit.subject != "$JS.API.INFO":  # a late audit of an earlier request may come first
            audit = events.next(timeout=10)
    assert audit.subject == "$JS.API.INFO" and "io.nats.jetstream.api.v1.account_info_response" in audit.response
    assert audit.server and audit.client["name"] == "test" and audit.client["acc"] == "$G"


# An api_audit as nats-server 2.15 publishes it (captured from a real server, the response cut short).
API_AUDIT = (
    '{"type":"io.nats.jetstream.advisory.v1.api_audit","id":"RkZTkKa64sgbz6wuOIQw0F",'
    '"timestamp":"2026-11-27T09:57:16.096635751Z",'
    '"server":"NCGVNNLAXUNF4BGGGXM27YXDFAFBA3O5SP7WGZ4SMWZ3HJLQAYLVT62A",'
    '"client":{"start":"2026-11-27T09:57:16.086635327Z","host":"127.0.0.1","id":6,"acc":"$G","name":"capture",'
    '"lang":"python3","ver":"2.16.0","rtt":490310,'
    '"server":"NCGVNNLAXUNF4BGGGXM27YXDFAFBA3O5SP7WGZ4SMWZ3HJLQAYLVT62A","kind":"Client","client_type":"nats"},'
    '"subject":"$JS.API.INFO",'
    '"response":"{\\"type\\":\\"io.nats.jetstream.api.v1.account_info_response\\",\\"streams\\":1}"}'
)


def test_an_api_audit_as_the_server_sends_it_keeps_the_server_and_the_client_that_asked():
    audit = event_from(API_AUDIT.encode())
    assert type(audit) is jss.ApiAudit and audit.subject == "$JS.API.INFO" and audit.request is None
    assert audit.server == "NCGVNNLAXUNF4BGGGXM27YXDFAFBA3O5SP7WGZ4SMWZ3HJLQAYLVT62A"
    assert audit.client == {"start": "2026-11-27T09:57:16.086635327Z", "host": "127.0.0.1", "id": 6, "acc": "$G",
                            "name": "capture", "lang": "python3", "ver": "2.16.0", "rtt": 490310,
                            "server": "NCGVNNLAXUNF4BGGGXM27YXDFAFBA3O5SP7WGZ4SMWZ3HJLQAYLVT62A", "kind": "Client",
                            "client_type": "nats"}
    assert json.loads(audit.response)["streams"] == 1
    assert audit.timestamp_ns % 1_000_000_000 == 96635751
    assert "capture" in audit._repr_html_()


def test_a_snapshot_and_a_restore_each_arrive_as_created_and_completed(js, client, name, subj):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    publish_n(js, f"{subj}.a", 10, size=100)
    with js.events("ADVISORY.STREAM.>", types=[jss.SnapshotCreated, jss.SnapshotCompleted, jss.RestoreCreated,
                                                jss.RestoreCompleted]) as events:
        # The snapshot protocol, through the core calls: chunks arrive on an inbox, each acked by an
        # empty reply; an empty chunk ends it. Then the same chunks restore the stream under its name.
        inbox = f"snap.{name.lower()}"
        chunks: list[bytes] = []
        with client.subscribe(inbox) as sub:
            answer = json.loads(client.request(f"$JS.API.STREAM.SNAPSHOT.{name}",
                                               json.dumps({"deliver_subject": inbox, "chunk_size": 1024}).encode(),
                                               timeout=5).data)
            while True:
                chunk = sub.next(timeout=10)
                if not chunk.data:
                    break
                chunks.append(chunk.data)
                if chunk.reply:  # the server asks for an ack now and then (its window)
                    client.publish(chunk.reply, b"")
        created, completed = events.next(timeout=10), events.next(timeout=10)
        assert (type(created), type(completed)) == (jss.SnapshotCreated, jss.SnapshotCompleted)
        assert created.stream == name and created.state["messages"] == 10 and completed.error is None
        assert created.client["name"] == completed.client["name"] == "test"
        assert completed.start is not None and completed.end >= completed.start

        js.delete_stream(name)
        target = json.loads(client.request(f"$JS.API.STREAM.RESTORE.{name}", json.dumps(
            {"config": answer["config"], "state": answer["state"]}).encode(), timeout=5).data)["deliver_subject"]
        for chunk_data in chunks:
            client.request(target, chunk_data, timeout=5)
        client.request(target, b"", timeout=10)
        started, finished = events.next(timeout=10), events.next(timeout=10)
    assert (type(started), type(finished)) == (jss.RestoreCreated, jss.RestoreCompleted)
    assert finished.stream == name and finished.bytes == sum(len(c) for c in chunks)
    assert started.client["name"] == finished.client["name"] == "test"
    assert stream.info().state.messages == 10
