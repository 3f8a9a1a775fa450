# Charter: the fault scenarios of the pull side, run against push consumers, plain and ordered:
# SIGTERM/SIGKILL restarts of the server, a paused server (the heartbeat alarm fires only while it
# is really gone), an R3 consumer leader step-down on the 3-node cluster, and a client closed under
# a blocked read. Nothing is lost, the
# subscription survives, only warnings are reported.
from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from typing import Any

import pytest

import jetstream_sync as jss

from conftest import wait_for

pytestmark = pytest.mark.faults

WARNINGS = (jss.NoHeartbeatError, jss.MessageGapError, jss.SlowConsumerError, jss.APIError, jss.JetStreamError)


def connect(url: Any, name: str) -> jss.Client:
    return jss.connect(url, name=name, timeout=5.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1)


class Seen:
    """Thread-safe record of what a handler and error handler saw."""

    def __init__(self, ack: bool = True) -> None:
        self.lock = threading.Lock()
        self.ids: list[str] = []
        self.seqs: list[int] = []
        self.errors: list[BaseException] = []
        self.ack = ack

    def handler(self, msg: jss.Msg) -> None:
        with self.lock:
            self.ids.append(msg.data.decode())
            self.seqs.append(msg.metadata.sequence.stream)
        if self.ack:
            msg.ack()

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def distinct(self) -> set[str]:
        with self.lock:
            return set(self.ids)

    def count(self) -> int:
        with self.lock:
            return len(self.seqs)


def publisher(js: jss.JetStream, subject: str, total: int, started: threading.Event,
              acked: dict[str, int], failures: list[BaseException]) -> threading.Thread:
    def run() -> None:
        for i in range(total):
            if i == total // 3:
                started.set()
            mid = f"id-{i}"
            try:
                acked[mid] = js.publish(subject, mid, msg_id=mid).seq
            except BaseException as exc:  # the retry policy gave up: the test fails on it
                failures.append(exc)
            threading.Event().wait(0.003)  # a steady trickle, so the fault lands mid-stream
        started.set()

    t = threading.Thread(target=run, name="push-fault-publisher", daemon=True)
    t.start()
    return t


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_push_consumer_handles_every_message_through_a_server_restart(fresh_server, sig):
    total = 300
    with connect(fresh_server.url, "push-restart") as client:
        js = client.jetstream(timeout=1.0, retry=jss.RetryPolicy(attempts=60, initial_backoff=0.05, max_backoff=0.5))
        js.create_stream(name="PFAULT", subjects=["pfault.>"], storage="file", duplicate_window=120.0)
        seen = Seen()
        sub = js.subscribe("pfault.x", handler=seen.handler, durable="survivor", idle_heartbeat=0.5,
                           flow_control=True, config={"ack_wait": 2.0}, error_handler=seen.on_error)
        acked: dict[str, int] = {}
        failures: list[BaseException] = []
        started = threading.Event()
        pub = publisher(js, "pfault.x", total, started, acked, failures)
        try:
            assert started.wait(30)
            wait_for(lambda: len(seen.distinct()) >= total // 6, 10, what="messages handled before the restart")
            fresh_server.restart(sig)
            pub.join(90)
            assert not pub.is_alive() and failures == [] and len(acked) == total
            wait_for(lambda: seen.distinct() >= set(acked), 40, what="every published message handled")
            wait_for(lambda: sub.consumer_info().num_ack_pending == 0, 20, what="every ack applied")
            assert not sub.closed and sub.error is None
            with seen.lock:
                assert all(isinstance(e, WARNINGS) for e in seen.errors), seen.errors
        finally:
            sub.unsubscribe()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_an_ordered_push_subscription_yields_every_sequence_once_in_order_through_a_restart(fresh_server, sig):
    total = 300
    with connect(fresh_server.url, "ordered-push-restart") as client:
        js = client.jetstream(timeout=1.0, retry=jss.RetryPolicy(attempts=60, initial_backoff=0.05, max_backoff=0.5))
        js.create_stream(name="OPFAULT", subjects=["opfault.>"], storage="file", duplicate_window=120.0)
        seen = Seen(ack=False)
        sub = js.subscribe("opfault.x", handler=seen.handler, ordered_consumer=True, idle_heartbeat=0.5,
                           error_handler=seen.on_error)
        acked: dict[str, int] = {}
        failures: list[BaseException] = []
        started = threading.Event()
        pub = publisher(js, "opfault.x", total, started, acked, failures)
        try:
            assert started.wait(30)
            wait_for(lambda: seen.count() >= total // 6, 10, what="messages handled before the restart")
            fresh_server.restart(sig)
            pub.join(90)
            assert not pub.is_alive() and failures == [] and len(acked) == total
            stored = js.stream_info("OPFAULT").state.messages
            wait_for(lambda: seen.count() >= stored, 40, what="every stored message delivered")
            with seen.lock:
                assert seen.seqs == list(range(1, stored + 1))  # once each, in order, no gap
                assert all(isinstance(e, WARNINGS) for e in seen.errors), seen.errors
            assert not sub.closed and sub.error is None
        finally:
            sub.unsubscribe()


@pytest.mark.timeout(60)
def test_the_heartbeat_alarm_fires_while_the_server_is_frozen_and_delivery_resumes_after(fresh_server):
    with connect(fresh_server.url, "push-paused") as client:
        js = client.jetstream(retry=jss.RetryPolicy(attempts=20, initial_backoff=0.05, max_backoff=0.5))
        js.create_stream(name="PPAUSE", subjects=["ppause.>"], storage="file")
        seen = Seen()
        sub = js.subscribe("ppause.a", handler=seen.handler, durable="patient", idle_heartbeat=0.5,
                           error_handler=seen.on_error)
        try:
            for i in range(20):
                js.publish("ppause.a", f"before-{i}")
            wait_for(lambda: seen.count() == 20, 10, what="the first 20 handled")
            # Idle and alive: heartbeats every 0.5 s keep the alarm quiet for several intervals.
            threading.Event().wait(2.0)
            with seen.lock:
                assert [e for e in seen.errors if isinstance(e, jss.NoHeartbeatError)] == []
            pid = fresh_server.pid
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_for(lambda: any(isinstance(e, jss.NoHeartbeatError) for e in seen.errors), 5,
                         what="the missed heartbeat while the server is frozen")
            finally:
                os.kill(pid, signal.SIGCONT)
            for i in range(20):
                js.publish("ppause.a", f"after-{i}")
            wait_for(lambda: seen.count() >= 40, 15, what="delivery resumed")
            assert seen.distinct() == {f"before-{i}" for i in range(20)} | {f"after-{i}" for i in range(20)}
            assert not sub.closed and sub.error is None
        finally:
            sub.unsubscribe()


def _api(client: jss.Client, subject: str) -> dict:
    return json.loads(client.request(subject, b"", timeout=5.0).data)


@pytest.mark.timeout(120)
def test_a_push_consumer_rides_out_an_r3_consumer_leader_step_down(nats_cluster):
    name = f"PCL_{uuid.uuid4().hex[:6]}"
    subject = f"{name.lower()}.m"
    client = jss.connect(nats_cluster.urls, name="push-cluster", timeout=5.0, reconnect_time_wait=0.1,
                         max_reconnect_attempts=-1)
    try:
        js = client.jetstream(retry=jss.RetryPolicy(attempts=30, initial_backoff=0.1, max_backoff=1.0))
        js.create_stream(name=name, subjects=[subject], storage="file", num_replicas=3)
        pc = js.create_push_consumer(name, durable_name="c", deliver_subject=f"dl.{name}", ack_wait=2.0,
                                     idle_heartbeat=1.0, flow_control=True, num_replicas=3)
        seen = Seen()
        handle = pc.consume(seen.handler, workers=2, error_handler=seen.on_error)
        acked: dict[str, int] = {}
        failures: list[BaseException] = []
        started = threading.Event()
        pub = publisher(js, subject, 300, started, acked, failures)
        try:
            assert started.wait(30)

            def leader() -> str | None:
                return js.consumer_info(name, "c").cluster.leader

            for _ in range(2):
                old = leader()
                resp = _api(client, f"$JS.API.CONSUMER.LEADER.STEPDOWN.{name}.c")
                assert resp.get("success") is True, resp
                wait_for(lambda: leader() not in (None, old), 20, what="a new consumer leader")
            pub.join(60)
            assert not pub.is_alive() and failures == [] and len(acked) == 300
            wait_for(lambda: seen.distinct() >= set(acked), 40, what="every published message handled")
            assert not handle.closed and handle.error is None
            with seen.lock:
                assert all(isinstance(e, WARNINGS) for e in seen.errors), seen.errors
        finally:
            handle.stop()
        js.delete_stream(name)
    finally:
        client.close()


@pytest.mark.timeout(60)
def test_closing_the_client_ends_a_blocked_push_read_and_a_push_consume_with_client_closed(fresh_server):
    client = connect(fresh_server.url, "push-closing")
    js = client.jetstream()
    js.create_stream(name="PCLOSE", subjects=["pclose.>"], storage="memory")
    reader = js.subscribe("pclose.a", durable="reader")
    seen = Seen()
    worker = js.create_push_consumer("PCLOSE", durable_name="worker", deliver_subject="dl.pclose",
                                     filter_subject="pclose.b")
    handle = worker.consume(seen.handler, error_handler=seen.on_error)
    outcome: list[BaseException] = []

    def blocked() -> None:
        try:
            reader.next_msg(timeout=None)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    wait_for(lambda: js.consumer_info("PCLOSE", "reader").push_bound, 5, what="the reader subscribed")
    client.close()
    t.join(5)
    assert not t.is_alive() and len(outcome) == 1 and isinstance(outcome[0], jss.ClientClosedError), outcome
    assert handle.wait(5) and isinstance(handle.error, jss.ClientClosedError)
