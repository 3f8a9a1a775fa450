# Charter: a key-value get (a direct get) is one write and one reply on an inbox the client already
# has: no subscription made and removed per get, so many threads reading keys cost the server (and a
# cluster's routes) no interest changes, and each thread still gets its own key's value.
from __future__ import annotations

import json
import threading
import urllib.request

import pytest

import jetstream_sync as jss
from jetstream_sync.server import NatsServer

THREADS = 8
GETS = 40


def _subscriptions_made(server: NatsServer) -> int:
    with urllib.request.urlopen(server.monitor_url + "/subsz", timeout=5) as resp:
        return json.load(resp)["num_inserts"]


@pytest.fixture
def monitored():
    with NatsServer(monitor=True) as server:
        yield server


def test_gets_from_many_threads_make_no_subscription_and_each_gets_its_own_key(monitored):
    with jss.connect(monitored.url, timeout=10.0) as client:
        js = client.jetstream()
        kv = js.create_key_value("PERF", storage="memory")
        for i in range(THREADS):
            kv.put(f"k.{i}", f"value {i}")
        assert kv.get("k.0").value == b"value 0"  # the first get may set up what every get shares
        before = _subscriptions_made(monitored)

        wrong: list[tuple[int, bytes]] = []
        failed: list[BaseException] = []

        def read(i: int) -> None:
            try:
                for _ in range(GETS):
                    entry = kv.get(f"k.{i}", timeout=10.0)
                    if entry.value != f"value {i}".encode():
                        wrong.append((i, entry.value))
            except BaseException as exc:  # reported below, on the test's thread
                failed.append(exc)

        threads = [threading.Thread(target=read, args=(i,), name=f"kv-get-{i}") for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60.0)
        assert not any(t.is_alive() for t in threads), "gets still running after 60 s"
        assert not failed, failed
        assert not wrong, wrong[:5]
        made = _subscriptions_made(monitored) - before
        assert made == 0, f"{THREADS * GETS} gets made {made} subscriptions on the server"
        js.delete_key_value("PERF")
