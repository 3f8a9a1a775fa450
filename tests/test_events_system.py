# The advisories that need more than one account, a cluster or a server feature the client does not
# drive, each made to happen for real: a system user reading events on an account without JetStream
# (API limit reached), an abandoned atomic batch, a priority group pinned and unpinned, the meta
# leader elected, a server removed, a stream and a consumer losing quorum, and the meta group rescued.
# Every cluster here is the test's own: these tests step down, stop and remove nodes.
from __future__ import annotations

import json
import time
from contextlib import contextmanager

import pytest

import jetstream_sync as jss
from jetstream_sync.server import NatsCluster, NatsServer

from test_events import next_of

pytestmark = pytest.mark.timeout(60)

ACCOUNTS = """
accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP { jetstream: enabled, users: [{user: app, password: app}] }
}
system_account: SYS
"""


def as_user(url: str, user: str) -> str:
    return url.replace("nats://", f"nats://{user}:{user}@", 1)


@contextmanager
def connected(urls, user: str):
    client = jss.connect([as_user(u, user) for u in ([urls] if isinstance(urls, str) else urls)],
                         name=f"events-{user}", timeout=5.0)
    try:
        yield client
    finally:
        client.close()


def api(client: jss.Client, subject: str, body: dict, timeout: float = 5.0) -> dict:
    """A JetStream API request by hand (for what the client has no call for); its answer, checked."""
    answer = json.loads(client.request(subject, json.dumps(body).encode(), timeout=timeout).data)
    assert "error" not in answer, answer
    return answer


# --- one server, two accounts ------------------------------------------------------------------------


def test_a_system_user_reads_system_advisories_on_an_account_without_jetstream():
    with NatsServer(config_text=ACCOUNTS) as server, connected(server.url, "sys") as system:
        with pytest.raises(jss.JetStreamNotEnabledForAccountError):
            system.jetstream().account_info()
    # A request queue of one: every JetStream API request finds it full (and may be dropped).
    with NatsServer(name="jss-limited", config_text=ACCOUNTS + "jetstream { request_queue_limit: 1 }\n") as server:
        with connected(server.url, "sys") as system, connected(server.url, "app") as app:
            with system.jetstream().events(types=[jss.ApiLimitReached]) as events:
                # Bursts until the queue overflows: on a loaded machine one burst can arrive slowly enough
                # for the server to drain it request by request.
                deadline = time.monotonic() + 40
                while True:
                    for _ in range(200):
                        app.publish("$JS.API.INFO", b"", reply="_INBOX.unread")
                    app.flush()
                    try:
                        reached = events.next(timeout=5)
                        break
                    except jss.TimeoutError:
                        if time.monotonic() > deadline:
                            raise
    assert reached.type == "io.nats.jetstream.advisory.v1.api_limit_reached"
    assert reached.server == "jss-limited" and reached.dropped >= 0 and reached.timestamp_ns > 0


def test_an_atomic_batch_with_a_gap_is_abandoned_as_incomplete(client, js, name, subj):
    api(client, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [f"{subj}.>"], "allow_atomic": True})
    with js.events(types=[jss.StreamBatchAbandoned]) as events:
        client.request(f"{subj}.a", b"1", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}, timeout=5.0)
        answer = json.loads(client.request(f"{subj}.a", b"3", timeout=5.0,
                                           headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "3"}).data)
        abandoned = next_of(events, jss.StreamBatchAbandoned)
    assert "incomplete" in answer["error"]["description"]
    assert (abandoned.stream, abandoned.batch, abandoned.reason) == (name, "b1", "incomplete")


def test_a_pinned_client_of_a_priority_group_is_pinned_then_unpinned_when_it_stops_pulling(client, js, name, subj):
    stream = js.create_stream(name=name, subjects=[f"{subj}.>"])
    api(client, f"$JS.API.CONSUMER.CREATE.{name}.P", {"stream_name": name, "config": {
        "durable_name": "P", "ack_policy": "explicit", "priority_groups": ["G"],
        "priority_policy": "pinned_client", "priority_timeout": 1_000_000_000}})
    js.publish(f"{subj}.a", b"x")
    with stream.consumer("P").events(types=[jss.ConsumerGroupPinned, jss.ConsumerGroupUnpinned]) as events:
        inbox = f"_INBOX.pin.{name}"
        with client.subscribe(inbox) as replies:
            client.publish(f"$JS.API.CONSUMER.MSG.NEXT.{name}.P", reply=inbox,
                           data=json.dumps({"batch": 1, "expires": 5_000_000_000, "group": "G"}).encode())
            pin = replies.next(timeout=10).headers["Nats-Pin-Id"]
        pinned = events.next(timeout=10)
        unpinned = events.next(timeout=10)  # one second without a pull from the pinned client
    assert isinstance(pinned, jss.ConsumerGroupPinned) and (pinned.group, pinned.pinned_id) == ("G", pin)
    assert isinstance(unpinned, jss.ConsumerGroupUnpinned) and (unpinned.group, unpinned.reason) == ("G", "timeout")
    assert unpinned.timestamp_ns > pinned.timestamp_ns


# --- clusters of the test's own ---------------------------------------------------------------------


@contextmanager
def cluster(name: str):
    with NatsCluster(3, config_text=ACCOUNTS, name=name) as nodes:
        yield nodes


def test_a_meta_leader_step_down_is_a_domain_leader_elected_event_for_the_system_account():
    with cluster("jss-evmeta") as nodes, connected(nodes.urls, "sys") as system:
        with system.jetstream().events(types=[jss.DomainLeaderElected]) as events:
            api(system, "$JS.API.META.LEADER.STEPDOWN", {})
            elected = events.next(timeout=30)
    assert elected.cluster == "jss-evmeta" and elected.leader
    assert sorted(elected.replicas) == ["jss-evmeta-n0", "jss-evmeta-n1", "jss-evmeta-n2"]


def meta_group_current(system: jss.Client, timeout: float = 30.0) -> dict:
    """Wait until the meta group has a leader and every other member is current (a system user asks);
    return the meta group as one server reports it."""
    deadline = time.monotonic() + timeout
    while True:
        meta = json.loads(system.request("$SYS.REQ.SERVER.PING.JSZ", b"{}", timeout=5).data)["data"].get(
            "meta_cluster") or {}
        replicas = meta.get("replicas") or []
        if meta.get("leader") and len(replicas) == 2 and all(r.get("current") for r in replicas):
            return meta
        if time.monotonic() > deadline:
            pytest.fail(f"the meta group did not settle within {timeout}s: {meta}")
        time.sleep(0.1)


@pytest.mark.timeout(150)
def test_a_server_removed_from_the_cluster_says_so_itself():
    with cluster("jss-evrm") as nodes, connected(nodes.nodes[0].url, "sys") as system:
        # A member that is not current yet is not removed; a loaded machine takes a while to settle one.
        meta = meta_group_current(system, timeout=60.0)
        # Not the meta leader: removing the leader itself may go unanswered.
        victim = next(r["name"] for r in meta["replicas"] if r["name"] != meta["leader"])
        with system.jetstream().events(types=[jss.ServerRemoved]) as events:
            try:  # a raft proposal: a loaded cluster may take a while to commit and answer it
                api(system, "$JS.API.SERVER.REMOVE", {"peer": victim}, timeout=20.0)
            except jss.TimeoutError:
                pass  # the advisory below says whether it happened
            removed = events.next(timeout=30)
    assert (removed.server, removed.cluster) == (victim, "jss-evrm") and removed.server_id


@pytest.mark.timeout(150)
def test_a_stream_and_a_consumer_that_lose_quorum_say_so_and_the_meta_group_can_be_rescued():
    with cluster("jss-evq") as nodes:
        with connected(nodes.urls, "app") as app:
            js = app.jetstream(retry=jss.RetryPolicy(attempts=30, initial_backoff=0.1, max_backoff=1.0))
            stream = js.create_stream(name="Q", subjects=["q.>"], storage="file", num_replicas=3)
            consumer = stream.create_consumer(durable_name="c", num_replicas=3)
            leader = stream.info().cluster.leader
            # Both leaders on one node: the one left running when the others stop.
            # A step-down elects the preferred node only if it is current: ask again until it is.
            deadline = time.monotonic() + 60
            asked = 0.0
            while consumer.info().cluster.leader != leader:
                assert time.monotonic() < deadline, "the consumer's leader never moved to the stream's"
                if time.monotonic() - asked > 2.0:
                    asked = time.monotonic()
                    try:
                        api(app, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.c", {"placement": {"preferred": leader}})
                    except (jss.JetStreamError, AssertionError):
                        pass  # no leader right now, or one not current yet: the next round asks again
                time.sleep(0.05)
        survivor = next(n for n in nodes.nodes if n.name == leader)
        with connected(survivor.url, "app") as app, connected(survivor.url, "sys") as system:
            with app.jetstream().events("ADVISORY.*.QUORUM_LOST.>") as events:
                # A group younger than five seconds steps down without the advisory (the server's rule).
                time.sleep(5)
                for node in nodes.nodes:
                    if node is not survivor:
                        node.stop()
                lost = {}
                for _ in range(2):
                    event = events.next(timeout=60)  # the server notices after 10 to 20 s
                    lost[event.consumer] = event
            assert set(lost) == {None, "c"}
            assert lost[None].type.endswith("stream_quorum_lost") and lost["c"].type.endswith("consumer_quorum_lost")
            assert all(e.stream == "Q" and len(e.replicas) == 3 for e in lost.values())
            # Alone, the survivor has no meta leader either: lower the quorum it needs to one.
            with system.jetstream().events(types=[jss.MetaRescue]) as events:
                deadline = time.monotonic() + 60
                while True:  # until the survivor has noticed that its meta leader is gone too
                    answer = json.loads(system.request("$JS.API.META.RESCUE", b'{"quorum_needed": 1}',
                                                       timeout=5).data)
                    if "leader is known" not in answer.get("error", {}).get("description", ""):
                        break
                    assert time.monotonic() < deadline, answer
                    time.sleep(0.5)
                assert "error" not in answer, answer
                rescued = events.next(timeout=10)
    assert (answer["prev_quorum"], answer["new_quorum"]) == (2, 1)
    assert (rescued.server, rescued.prev_quorum, rescued.new_quorum) == (leader, 2, 1)
