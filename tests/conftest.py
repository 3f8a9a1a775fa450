# Charter: shared pytest fixtures. Server part: real nats-server processes
# from jetstream_sync.server (one shared server, a per-test server for
# tests that restart/kill, a shared 3-node cluster) and a session-end check
# that no nats-server child is left running. Client fixtures go below it.
from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from jetstream_sync.server import NatsCluster, NatsServer


@pytest.fixture(scope="session")
def nats_server():
    """A JetStream server shared by the whole session; do not restart it."""
    with NatsServer() as server:
        yield server


@pytest.fixture
def fresh_server():
    """A JetStream server of this test's own, free to restart or kill."""
    with NatsServer() as server:
        yield server


@pytest.fixture(scope="session")
def nats_cluster():
    """A shared 3-node JetStream cluster. A test that restarts a node must
    call wait_ready() before returning it."""
    with NatsCluster(3) as cluster:
        yield cluster


def _child_nats_servers() -> list[tuple[int, str]]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process went away while scanning
            continue
        # comm sits in parentheses and may itself contain ") "
        head, _, rest = text.rpartition(")")
        comm = head.partition("(")[2]
        state, ppid = rest.split()[:2]
        if comm == "nats-server" and int(ppid) == os.getpid() and state != "Z":
            found.append((int(stat.parent.name), state))
    return found


# Autouse and session-scoped, so it is set up first and torn down last:
# after every server fixture has stopped its processes.
@pytest.fixture(scope="session", autouse=True)
def _no_nats_server_left_behind():
    yield
    if not Path("/proc/self/stat").exists():
        return
    leftovers = _child_nats_servers()
    for pid, _ in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)  # our own children; don't let them outlive the run
        except ProcessLookupError:
            pass
    if leftovers:
        pytest.fail(f"nats-server processes left running by the tests: {leftovers}", pytrace=False)


# --- client fixtures ----------------------------------------------------------

import threading  # noqa: E402
import time  # noqa: E402

import jetstream_sync as jss  # noqa: E402

_OUR_THREADS = ("jetstream-sync-loop", "jetstream-sync-events", "jetstream-sync-worker", "jetstream-sync-reporter",
                "jetstream-sync-progress", "jetstream-sync-kv",
                "jetstream-sync-obj")


def our_threads() -> list[threading.Thread]:
    """Threads jetstream_sync started that are still alive."""
    return [t for t in threading.enumerate() if t.name.startswith(_OUR_THREADS)]


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.01, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(autouse=True)
def _no_thread_left_behind():
    """Every test must close what it opens: no jetstream_sync thread survives it."""
    before = set(our_threads())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        left = [t for t in our_threads() if t not in before]
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"threads left running after the test: {[t.name for t in left]}", pytrace=False)
        time.sleep(0.01)


@pytest.fixture
def client(nats_server):
    """A connected client to the shared server, closed after the test."""
    c = jss.connect(nats_server.url, name="test", timeout=5.0)
    yield c
    c.close()


@pytest.fixture
def js(client):
    """A JetStream context; every stream the test made is deleted afterwards."""
    ctx = client.jetstream()
    yield ctx
    if not client.is_closed:
        for name in list(ctx.stream_names()):
            ctx.delete_stream(name)


# --- Spark ----------------------------------------------------------------------


@pytest.fixture
def name():
    """A stream name of this test's own."""
    return "T" + uuid.uuid4().hex[:11].upper()


@pytest.fixture
def subj(name):
    """The subject prefix of ``stream``: ``<name lower-cased>.>``."""
    return name.lower()


@pytest.fixture
def stream(js, name, subj):
    """A memory stream on ``<subj>.>``, deleted with the rest by ``js``."""
    return js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory")


def publish_n(js: jss.JetStream, subject: str, n: int, size: int = 0) -> list[int]:
    """Publish ``m0``..``m<n-1>`` (padded by ``size`` bytes) and return their stream sequences."""
    futures = [js.publish_async(subject, f"m{i}".encode() + b"x" * size) for i in range(n)]
    js.publish_async_complete(timeout=30.0)
    return [f.result().seq for f in futures]


@pytest.fixture(scope="session")
def spark():
    """One local[2,2] SparkSession for the whole run (created only if a test asks for it).

    Python workers run this interpreter and Spark binds to loopback only.
    """
    import os
    import sys

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("jetstream-sync-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --- a spy on the JetStream API -------------------------------------------------------


class ApiSpy:
    """Sees every JetStream API request a server receives, in order.

    A second connection subscribes to ``$JS.API.>``: plain subscribers get a
    copy of every request. Its handler runs on the spy's own loop thread and
    only appends the subject. (A server with a JetStream domain maps
    ``$JS.<domain>.API.>`` onto ``$JS.API.>`` before delivery, so domain tests
    read the server's trace log instead: see ``TraceLog``.)
    """

    PATTERNS = ("$JS.API.>",)

    def __init__(self, url: str) -> None:
        self.subjects: list[str] = []
        self._client = jss.connect(url, name="api-spy")
        try:
            for pattern in self.PATTERNS:
                # subscribe_raw is the package's raw subscription (no public
                # subscribe exists); the handler gets (subject, reply, data, headers).
                self._client._conn.call(self._client._conn.subscribe_raw(pattern, self._on_request), 5.0)
            self._client.flush()
        except BaseException:
            self._client.close()
            raise

    def _on_request(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        self.subjects.append(subject.decode())

    def mark(self, js: jss.JetStream) -> int:
        """A position after everything ``js`` sent so far (the spy receives asynchronously)."""
        self.sync(js)
        return len(self.subjects)

    def since(self, mark: int) -> list[str]:
        return self.subjects[mark:]

    def sync(self, js: jss.JetStream) -> str:
        """Send a sentinel request on ``js`` and wait until the spy saw it.

        One connection's messages reach the spy in the order they were sent,
        so afterwards the spy has seen everything ``js`` sent before.
        """
        mark = len(self.subjects)
        js.account_info()
        sentinel = f"{js._api.prefix}.INFO"
        wait_for(lambda: sentinel in self.since(mark), timeout=5.0, what=f"the spy to see {sentinel}")
        return sentinel

    def close(self) -> None:
        self._client.close()


def assert_sends_nothing(spy: ApiSpy, js: jss.JetStream, call, exc: type[BaseException], match: str) -> None:
    """``call()`` raises ``exc`` (message matching ``match``) and sends no API request."""
    mark = spy.mark(js)
    with pytest.raises(exc, match=match):
        call()
    sentinel = spy.sync(js)
    assert spy.since(mark) == [sentinel], "the failed call sent a request to the server"


@pytest.fixture
def api_spy(nats_server):
    spy = ApiSpy(nats_server.url)
    yield spy
    spy.close()
