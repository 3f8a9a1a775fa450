# Charter: publishes with a msg_id to an R3 stream of the shared 3-node cluster (nats_cluster), where the
# server answers "duplicate message id is in process" (409, err_code 10158) to an id whose earlier publish
# is still being replicated, and no responders while the stream elects a leader: publish and publish_async
# retry both (per the context's RetryPolicy) and every id is stored exactly once, through repeated stream
# leader step-downs too. Code under test: jetstream.py, _publish.py, _retry.py, errors.py.
from __future__ import annotations

import collections
import json
import logging
import threading
import uuid

import pytest

import jetstream_sync as jss

from conftest import wait_for

pytestmark = pytest.mark.cluster

#: Generous: an election takes a few seconds on a loaded machine, and every attempt waits at most JS_TIMEOUT.
RETRY = jss.RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.5)
JS_TIMEOUT = 2.0
#: Publishes in flight per publish_async window (each id twice: the second meets the first in process).
WINDOW = 100
STEP_DOWNS = 4


class RetryCounter(logging.Handler):
    """Counts the retry policy's "retrying after ..." log lines, by error type."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.by_error: collections.Counter = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("jetstream_sync: retrying after"):
            self.by_error[type(record.args[0]).__name__] += 1


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


class Cluster:
    """A client on every node of the cluster and an R3 file stream of this test's own."""

    def __init__(self, cluster, retry: jss.RetryPolicy) -> None:
        self.name = f"PC_{uuid.uuid4().hex[:8].upper()}"
        self.subject = f"{self.name.lower()}.m"
        self.client = jss.connect(cluster.urls, name="publish-cluster", timeout=JS_TIMEOUT,
                                  reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        self.js = self.client.jetstream(timeout=JS_TIMEOUT, retry=retry)
        self.stream = self.js.create_stream(name=self.name, subjects=[self.subject], storage="file",
                                            num_replicas=3, allow_direct=True)

    def leader(self) -> str | None:
        return self.stream.info().cluster.leader

    def healthy(self) -> bool:
        cl = self.stream.info().cluster
        return bool(cl.leader) and len(cl.replicas or []) == 2 and all(r.current and not r.offline
                                                                       for r in cl.replicas)

    def stored_ids(self) -> collections.Counter:
        """How many times each Nats-Msg-Id is stored (read back by batch direct gets)."""
        return collections.Counter(m.headers["Nats-Msg-Id"] for m in self.stream.get_batch(10**6, timeout=10))

    def close(self) -> None:
        try:
            self.js.retry = RETRY
            self.js.delete_stream(self.name)
        except jss.JetStreamError:
            pass  # a delete is not retried; the cluster is shared, a leftover stream harms nobody
        finally:
            self.client.close()


@pytest.fixture
def cluster_stream(nats_cluster, request):
    nats_cluster.wait_ready()
    c = Cluster(nats_cluster, getattr(request, "param", RETRY))
    try:
        wait_for(c.healthy, timeout=30, what="the R3 stream to be current on every node")
        yield c
    finally:
        c.close()


def in_process_errors(futures) -> list[BaseException]:
    return [f.exception(60) for f in futures if isinstance(f.exception(60), jss.MsgIdInProcessError)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cluster_stream", [jss.RetryPolicy(attempts=1)], indirect=True)
def test_without_retries_a_repeated_id_in_process_raises_msg_id_in_process_with_its_err_code(cluster_stream):
    # The server's own behaviour, with the retry policy out of the way: the second publish of an id, sent
    # right behind the first, reaches the leader while the first is still being replicated.
    js, subject = cluster_stream.js, cluster_stream.subject
    seen: list[BaseException] = []
    for i in range(50):
        pair = [js.publish_async(subject, b"x", msg_id=f"once-{i}", timeout=30) for _ in range(2)]
        seen += in_process_errors(pair)
        try:
            js.publish(subject, b"x", msg_id=f"once-{i}", timeout=30)  # the first of the pair may still be in process
        except jss.MsgIdInProcessError as exc:
            seen.append(exc)
        if len(seen) >= 2:
            break
    assert seen, "the server never answered 'duplicate message id is in process'"
    assert all((e.code, e.err_code, e.retriable) == (409, 10158, True) for e in seen)


@pytest.mark.timeout(120)
def test_a_repeated_id_in_process_is_retried_and_stored_once_by_publish_and_publish_async(cluster_stream):
    js, subject = cluster_stream.js, cluster_stream.subject
    acks: dict[str, set[int]] = collections.defaultdict(set)
    for i in range(50):
        mid = f"pair-{i}"
        pair = [js.publish_async(subject, b"x", msg_id=mid, timeout=30) for _ in range(2)]
        acks[mid].add(js.publish(subject, b"x", msg_id=mid, timeout=30).seq)  # never raises 10158
        acks[mid].update(f.result(60).seq for f in pair)  # neither does the second future of the pair
    assert all(len(seqs) == 1 for seqs in acks.values()), acks  # every attempt names the one message
    assert sorted(s for seqs in acks.values() for s in seqs) == list(range(1, 51))
    assert cluster_stream.stream.info().state.messages == 50
    wait_for(cluster_stream.healthy, timeout=30, what="every replica to be current")
    assert cluster_stream.stored_ids() == collections.Counter({mid: 1 for mid in acks})


class Publishers:
    """A thread of blocking publishes and a thread of publish_async windows (each id twice), all with ids."""

    def __init__(self, js: jss.JetStream, subject: str) -> None:
        self.js, self.subject = js, subject
        self.lock = threading.Lock()
        self.acks: dict[str, set[int]] = collections.defaultdict(set)  # id -> the seqs its PubAcks named
        self.errors: list[BaseException] = []
        self.sync_done = 0
        self.windows_done = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._sync, name="test-sync-publisher", daemon=True),
                        threading.Thread(target=self._async, name="test-async-publisher", daemon=True)]

    def _record(self, mid: str, call) -> None:
        try:
            seq = call()
        except Exception as exc:  # noqa: BLE001 - every error is a finding; the assertion lists them
            with self.lock:
                self.errors.append(exc)
            return
        with self.lock:
            self.acks[mid].add(seq)

    def _sync(self) -> None:
        i = 0
        while not self.stop.is_set():
            mid = f"s-{i}"
            self._record(mid, lambda: self.js.publish(self.subject, mid.encode(), msg_id=mid).seq)
            with self.lock:
                self.sync_done += 1
            i += 1

    def _async(self) -> None:
        w = 0
        while not self.stop.is_set():
            futures = []
            for k in range(WINDOW // 2):
                mid = f"a-{w}-{k}"
                futures += [(mid, self.js.publish_async(self.subject, mid.encode(), msg_id=mid)) for _ in range(2)]
            for mid, fut in futures:
                self._record(mid, lambda: fut.result(300).seq)
            with self.lock:
                self.windows_done += 1
            w += 1

    def progress(self) -> tuple[int, int]:
        with self.lock:
            return self.sync_done, self.windows_done

    def made_progress(self, since: tuple[int, int], sync: int = 20, windows: int = 2) -> bool:
        now = self.progress()
        return now[0] >= since[0] + sync and now[1] >= since[1] + windows


@pytest.mark.timeout(300)
def test_publishes_with_ids_ride_out_stream_leader_step_downs_each_id_stored_once(cluster_stream, retries):
    c = cluster_stream
    pubs = Publishers(c.js, c.subject)
    for t in pubs.threads:
        t.start()
    try:
        mark = (0, 0)
        for n in range(STEP_DOWNS):
            wait_for(lambda: pubs.made_progress(mark), timeout=120, what=f"publishing before step-down {n + 1}")
            mark = pubs.progress()
            old = c.leader()
            resp = json.loads(c.client.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{c.name}", b"", timeout=10).data)
            assert resp.get("success") is True, resp
            wait_for(lambda: c.leader() not in (None, old), timeout=60, what=f"a new leader after step-down {n + 1}")
        wait_for(lambda: pubs.made_progress(mark), timeout=120, what="publishing after the last step-down")
    finally:
        pubs.stop.set()
        for t in pubs.threads:
            t.join(120)
    assert not any(t.is_alive() for t in pubs.threads)
    print(f"\n[step-downs] ids={len(pubs.acks)} blocking={pubs.sync_done} windows={pubs.windows_done} "
          f"errors={len(pubs.errors)} retries={dict(retries.by_error)}")
    assert pubs.errors == []  # no publish raised: 10158, no responders and timeouts were all retried
    acks = dict(pubs.acks)
    assert all(len(seqs) == 1 for seqs in acks.values()), {m: s for m, s in acks.items() if len(s) != 1}
    seqs = sorted(s for ss in acks.values() for s in ss)
    assert seqs == list(range(1, len(acks) + 1))  # one message per id, no gap, nothing else stored
    wait_for(c.healthy, timeout=60, what="every replica to be current")
    info = c.stream.info()
    assert (info.state.messages, info.state.last_seq) == (len(acks), len(acks))
    assert c.stored_ids() == collections.Counter({mid: 1 for mid in acks})
