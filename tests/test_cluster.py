# Charter: a 3-node JetStream cluster (the session nats_cluster) with an R3 file stream per test:
# stream and consumer leader step-downs, SIGKILL of the stream leader and a rolling restart, each
# while a publisher (msg_id, retried) and consume() with double_ack run. Proves: received == published,
# nothing stored twice, no redelivery after a successful double_ack, management calls retry through elections.
from __future__ import annotations

import collections
import json
import logging
import signal
import threading
import time
import uuid

import pytest

import jetstream_sync as jss

from conftest import wait_for

pytestmark = pytest.mark.cluster

#: Generous: an election after a SIGKILL takes several seconds; every attempt waits at most JS_TIMEOUT.
RETRY = jss.RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5)
JS_TIMEOUT = 2.0
DOUBLE_ACK_TIMEOUT = 1.0
DOUBLE_ACK_TRIES = 2
#: With max_messages=1 a message waits for at most one other handler before its own, so it is held at
#: most 2 * DOUBLE_ACK_TRIES * DOUBLE_ACK_TIMEOUT = 4 s before its ack lands: well inside ACK_WAIT, so the
#: server has no right to redeliver a message whose double_ack succeeded.
ACK_WAIT = 8.0
#: Messages published after the fault is over, so consuming provably goes on.
AFTER_FAULT = 50
#: Every PubAck'ed message must arrive within this; covers an ack_wait redelivery after a new leader.
CATCH_UP = 40.0


class RetryCounter(logging.Handler):
    """Counts the retry policy's "retrying after ..." log lines, by error type."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.by_error: collections.Counter = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("jetstream_sync: retrying after"):
            self.by_error[type(record.args[0]).__name__] += 1


def api(client: jss.Client, subject: str, payload: dict | None = None) -> dict:
    """One raw JetStream API request (not retried: a step-down is not idempotent)."""
    data = json.dumps(payload).encode() if payload else b""
    return json.loads(client.request(subject, data, timeout=5.0).data)


class Scenario:
    """An R3 stream, a publisher thread and a consume() with double_ack, with everything they saw."""

    def __init__(self, cluster, tag: str) -> None:
        self.cluster = cluster
        self.name = f"CL_{tag}_{uuid.uuid4().hex[:6]}"
        self.subject = f"{self.name.lower()}.m"
        self.client = jss.connect(cluster.urls, name=f"cluster-{tag}", timeout=JS_TIMEOUT,
                                  reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        self.js = self.client.jetstream(timeout=JS_TIMEOUT, retry=RETRY)
        self.stream = self.js.create_stream(name=self.name, subjects=[self.subject], storage="file",
                                            num_replicas=3)
        self.consumer = self.stream.create_consumer(durable_name="c", ack_policy="explicit", ack_wait=ACK_WAIT)
        self.lock = threading.Lock()
        # publisher side
        self.published: dict[str, int] = {}     # msg id -> stream seq from its PubAck
        self.publish_errors: list[BaseException] = []  # publishes the retry policy did not absorb
        self.duplicate_acks = 0                  # PubAcks flagged duplicate (a retried publish that had landed)
        self._stop_publishing = threading.Event()
        # consumer side
        self.received: dict[str, int] = {}      # msg id -> stream seq as delivered
        self.deliveries = 0
        self.acked: dict[str, tuple[float, float]] = {}  # msg id -> (double_ack ok at, delivery sent no earlier than)
        self.after_ack: list[tuple[str, int]] = []       # redelivered although its double_ack succeeded
        self.expired_before_ack: list[str] = []          # redelivered after being held longer than ack_wait
        self.double_ack_failures = 0
        self.seq_mismatch: list[tuple[str, int, int]] = []
        self.errors: list[BaseException] = []
        self._prev_take = time.monotonic()
        self.handle: jss.ConsumeHandle | None = None
        self.publisher = threading.Thread(target=self._publish, name="cluster-test-publisher", daemon=True)
        # management calls made all along, through every election
        self.management_ok = 0
        self.management_errors: list[BaseException] = []
        self.manager = threading.Thread(target=self._manage, name="cluster-test-manager", daemon=True)

    # -- publishing ------------------------------------------------------------

    def _publish(self) -> None:
        i = 0
        while not self._stop_publishing.is_set():
            mid = f"{self.name}-{i}"
            try:
                ack = self.js.publish(self.subject, mid.encode(), msg_id=mid)
            except jss.JetStreamError as exc:
                with self.lock:
                    self.publish_errors.append(exc)
                if self.client.is_closed:
                    return
                continue  # same msg_id again: the server deduplicates
            with self.lock:
                self.published[mid] = ack.seq
                self.duplicate_acks += ack.duplicate
            i += 1
            self._stop_publishing.wait(0.005)  # pacing, so the consumer keeps up and pulls wait on the leader

    def _manage(self) -> None:
        while not self._stop_publishing.is_set():
            try:
                self.management_calls()
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported by check()
                with self.lock:
                    self.management_errors.append(exc)
                if self.client.is_closed:
                    return
            else:
                with self.lock:
                    self.management_ok += 1
            self._stop_publishing.wait(0.05)

    # -- consuming -------------------------------------------------------------

    def _handle(self, msg: jss.Msg) -> None:
        took = time.monotonic()
        mid = msg.data.decode()
        seq = msg.metadata.sequence.stream
        with self.lock:
            self.deliveries += 1
            if mid in self.acked:
                acked_at, sent_after = self.acked[mid]
                if acked_at - sent_after < ACK_WAIT:
                    self.after_ack.append((mid, msg.metadata.num_delivered))
                else:
                    self.expired_before_ack.append(mid)
            if self.received.setdefault(mid, seq) != seq:
                self.seq_mismatch.append((mid, self.received[mid], seq))
        # This delivery was pulled once the previous message was taken (max_messages=1).
        sent_after, self._prev_take = self._prev_take, took
        for _ in range(DOUBLE_ACK_TRIES):
            try:
                msg.double_ack(timeout=DOUBLE_ACK_TIMEOUT)
            except (jss.TimeoutError, jss.NoRespondersError, jss.NotConnectedError):
                with self.lock:
                    self.double_ack_failures += 1
                continue  # left unacked after the last try: the server redelivers it after ack_wait
            with self.lock:
                self.acked[mid] = (time.monotonic(), sent_after)
            return

    def _on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    # -- driving -----------------------------------------------------------------

    def start(self, warm_up: int = 50) -> None:
        self.handle = self.consumer.consume(self._handle, error_handler=self._on_error, max_messages=1,
                                            expires=2.0, idle_heartbeat=0.5)
        self.publisher.start()
        self.manager.start()
        wait_for(lambda: len(self.received) >= warm_up, timeout=20, what=f"{warm_up} messages consumed")

    def published_count(self) -> int:
        with self.lock:
            return len(self.published)

    def finish(self) -> None:
        """Publish AFTER_FAULT more, stop publishing, then wait until every PubAck'ed message arrived."""
        target = self.published_count() + AFTER_FAULT
        wait_for(lambda: self.published_count() >= target, timeout=30, what="publishing after the fault")
        self._stop_publishing.set()
        self.publisher.join(10)
        self.manager.join(10)
        assert not self.publisher.is_alive() and not self.manager.is_alive()

        def all_received() -> bool:
            assert not self.handle.closed, f"consume() ended: {self.handle.error!r}"
            with self.lock:
                return self.published.keys() <= self.received.keys()

        wait_for(all_received, timeout=CATCH_UP, what="every published message to be consumed")

    def close(self) -> None:
        self._stop_publishing.set()
        for t in (self.publisher, self.manager):
            if t.is_alive():
                t.join(30)
        if self.handle is not None:
            self.handle.stop()
        try:
            for _ in range(3):  # a delete is not retried by the policy; one that timed out may have landed
                try:
                    self.js.delete_stream(self.name)
                    break
                except jss.StreamNotFoundError:
                    break
                except (jss.TimeoutError, jss.NoRespondersError):
                    continue
        finally:
            self.client.close()

    # -- cluster state ---------------------------------------------------------

    def stream_leader(self) -> str | None:
        return self.stream.info().cluster.leader

    def consumer_leader(self) -> str | None:
        return self.js.consumer_info(self.name, "c").cluster.leader

    def healthy(self) -> bool:
        """A stream and consumer leader, and both followers current (all three nodes have caught up)."""
        for info in (self.stream.info(), self.js.consumer_info(self.name, "c")):
            cl = info.cluster
            if not cl.leader or len(cl.replicas or []) != 2:
                return False
            if not all(r.current and not r.offline for r in cl.replicas):
                return False
        return True

    def connected_node(self) -> int:
        url = self.client.connected_url
        return next(i for i, n in enumerate(self.cluster.nodes) if url and url.endswith(f":{n.port}"))

    def move_leaders_to(self, server: str) -> None:
        """Step the stream and consumer leaders down in favour of ``server`` (placement.preferred).

        nats-server < 2.11 ignores the preference and picks a follower at random: step down again.
        """
        moves = ((f"$JS.API.STREAM.LEADER.STEPDOWN.{self.name}", self.stream_leader),
                 (f"$JS.API.CONSUMER.LEADER.STEPDOWN.{self.name}.c", self.consumer_leader))
        for subject, leader in moves:
            for _ in range(8):
                old = leader()
                if old == server:
                    break
                resp = api(self.client, subject, {"placement": {"preferred": server}})
                assert resp.get("success") is True, resp
                wait_for(lambda: leader() not in (None, old), timeout=20, what=f"a new leader ({subject})")
            assert leader() == server

    def management_calls(self) -> None:
        """Info and listing calls that must ride out an election on the retry policy."""
        assert self.stream.info().config.name == self.name
        assert self.js.consumer_info(self.name, "c").name == "c"
        assert self.name in list(self.js.stream_names())

    # -- the verdict -------------------------------------------------------------

    def check(self, label: str, retries: RetryCounter) -> None:
        info = self.stream.info()
        with self.lock:
            published = dict(self.published)
            received = dict(self.received)
            figures = {
                "published": len(published),
                "received": len(received),
                "deliveries": self.deliveries,
                "redelivered": self.deliveries - len(received),
                "redelivered_after_double_ack": len(self.after_ack),
                "held_past_ack_wait": len(self.expired_before_ack),
                "duplicates_stored": info.state.messages - len(published),
                "lost": len(published.keys() - received.keys()),
                "double_ack_failures": self.double_ack_failures,
                "publish_errors": len(self.publish_errors),
                "duplicate_pubacks": self.duplicate_acks,
                "management_calls_ok": self.management_ok,
                "management_errors": len(self.management_errors),
            }
            warnings = collections.Counter(f"{type(e).__name__}({getattr(e, 'code', '')})" for e in self.errors)
        print(f"\n[{label}] " + " ".join(f"{k}={v}" for k, v in figures.items())
              + f" warnings={dict(warnings)} retries={dict(retries.by_error)}")
        assert self.handle is not None and not self.handle.closed and self.handle.error is None
        assert received == published  # same ids, each at the stream sequence its PubAck named
        assert not self.seq_mismatch
        assert sorted(published.values()) == list(range(1, len(published) + 1))
        assert info.state.messages == len(published) and info.state.last_seq == len(published)
        assert self.after_ack == []
        assert self.publish_errors == []  # every publish was absorbed by the retry policy
        assert self.management_errors == [] and self.management_ok > 0
        unexpected = [e for e in self.errors
                      if not isinstance(e, (jss.NoHeartbeatError, jss.NoRespondersError))
                      and not (isinstance(e, jss.APIError) and e.code == 409)]
        assert unexpected == []


@pytest.fixture
def retries():
    counter = RetryCounter()
    logger = logging.getLogger("jetstream_sync")
    old_level = logger.level
    logger.addHandler(counter)
    logger.setLevel(logging.INFO)
    yield counter
    logger.removeHandler(counter)
    logger.setLevel(old_level)


@pytest.fixture
def scenario(nats_cluster, request):
    nats_cluster.wait_ready()
    s = Scenario(nats_cluster, request.node.name.split("_")[1][:8])
    wait_for(s.healthy, timeout=20, what="the R3 stream and consumer to be current on every node")
    try:
        yield s
    finally:
        try:
            for i, node in enumerate(nats_cluster.nodes):
                if not node.is_running:
                    nats_cluster.start_node(i)
            nats_cluster.wait_ready()
        finally:
            s.close()


@pytest.mark.timeout(90)
def test_stream_leader_step_down_loses_nothing_and_stores_nothing_twice(scenario, retries):
    scenario.start()
    old = scenario.stream_leader()
    resp = api(scenario.client, f"$JS.API.STREAM.LEADER.STEPDOWN.{scenario.name}")
    assert resp.get("success") is True, resp
    scenario.management_calls()
    wait_for(lambda: scenario.stream_leader() not in (None, old), timeout=20, what="a new stream leader")
    scenario.finish()
    scenario.check("stream leader step-down", retries)


@pytest.mark.timeout(90)
def test_consumer_leader_step_down_is_absorbed_whether_the_pull_hears_409_or_503(scenario, retries):
    scenario.start()

    def election_warnings() -> list[BaseException]:
        # What the server tells a pull about the step-down depends on timing: the pull waiting on the
        # old leader gets 409 Leadership Change; a pull sent while no leader is elected gets 503 No
        # Responders (seen on a loaded machine, with no 409 at all). Both must reach error_handler as
        # warnings, and consume() must go on.
        with scenario.lock:
            return [e for e in scenario.errors
                    if (isinstance(e, jss.APIError) and "leadership change" in e.description.lower())
                    or isinstance(e, jss.NoRespondersError)]

    for _ in range(5):
        wait_for(lambda: scenario.consumer.info().num_waiting > 0, timeout=20, what="a pull waiting on the leader")
        old = scenario.consumer_leader()
        resp = api(scenario.client, f"$JS.API.CONSUMER.LEADER.STEPDOWN.{scenario.name}.c")
        assert resp.get("success") is True, resp
        scenario.management_calls()
        wait_for(lambda: scenario.consumer_leader() not in (None, old), timeout=20, what="a new consumer leader")
        if election_warnings():
            break
    assert election_warnings(), f"no 409 Leadership Change or 503 reached the pull; warnings: {scenario.errors!r}"
    assert not scenario.handle.closed, f"consume() ended: {scenario.handle.error!r}"
    scenario.finish()
    scenario.check("consumer leader step-down", retries)


@pytest.mark.timeout(120)
def test_sigkill_of_the_stream_leader_loses_nothing_and_stores_nothing_twice(scenario, nats_cluster, retries):
    scenario.start()
    # The worst case, every time: the node that dies leads the stream and the consumer and holds
    # the client's connection, so publishes, pulls, acks and API calls all lose their peer at once.
    victim = scenario.connected_node()
    leader = nats_cluster.nodes[victim].name
    scenario.move_leaders_to(leader)
    nats_cluster.kill_node(victim)
    scenario.management_calls()  # answered by the survivors once they elect new leaders
    wait_for(lambda: scenario.stream_leader() not in (None, leader), timeout=30, what="a new stream leader")
    nats_cluster.start_node(victim)
    nats_cluster.wait_ready()
    wait_for(scenario.healthy, timeout=30, what="the killed node to catch up")
    scenario.finish()
    scenario.check("SIGKILL of the stream leader", retries)


@pytest.mark.timeout(120)
def test_rolling_restart_of_every_node_loses_nothing_and_stores_nothing_twice(scenario, nats_cluster, retries):
    scenario.start()
    for i in range(len(nats_cluster.nodes)):
        nats_cluster.restart_node(i, signal.SIGTERM)
        scenario.management_calls()
        nats_cluster.wait_ready()
        # The next node goes down only once this one has caught up, so quorum holds throughout.
        wait_for(scenario.healthy, timeout=30, what=f"node {i} to catch up after its restart")
    scenario.finish()
    scenario.check("rolling restart", retries)
