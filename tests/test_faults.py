# Charter: reliability under faults, against real nats-server processes (issue 5, items 1 and 3).
# consume() across SIGTERM/SIGKILL restarts with a deduplicating, retrying publisher (nothing lost,
# nothing stored twice); closing the client and exhausted reconnects end every blocked call promptly;
# a paused (SIGSTOP) server; handlers that raise, sleep or call back into the client; a stream or
# consumer deleted under every reader ends it with an error naming both.
from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
import signal
import threading
import time
from typing import Any, Callable

import pytest

import jetstream_sync as jss

from conftest import wait_for

pytestmark = pytest.mark.faults

MSG_ID = "Nats-Msg-Id"


def connect(server, name: str, **options: Any) -> jss.Client:
    opts = dict(timeout=5.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    opts.update(options)
    return jss.connect(server.url, name=name, **opts)


class Handled:
    """Thread-safe record of every handler call: (msg id or seq, stream seq, num_delivered)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, int, int]] = []
        self.reported: list[BaseException] = []

    def record(self, msg: jss.Msg) -> None:
        md = msg.metadata
        key = (msg.headers or {}).get(MSG_ID) or str(md.sequence.stream)
        with self.lock:
            self.calls.append((key, md.sequence.stream, md.num_delivered))

    def handler(self, msg: jss.Msg) -> None:
        self.record(msg)
        msg.ack()

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.reported.append(exc)

    def keys(self) -> set[str]:
        with self.lock:
            return {k for k, _, _ in self.calls}

    def errors(self) -> list[BaseException]:
        with self.lock:
            return list(self.reported)


def is_warning(exc: BaseException) -> bool:
    """What consume() reports without ending: missed heartbeats and refused pulls (409/503 statuses)."""
    return isinstance(exc, (jss.NoHeartbeatError, jss.APIError))


def settled(consumer: jss.Consumer) -> bool:
    info = consumer.info()
    return info.num_pending == 0 and info.num_ack_pending == 0


def read_back_ids(js: jss.JetStream, stream: str, count: int) -> list[str]:
    """Every stored message's Nats-Msg-Id, in stream order, read with an ordered consumer."""
    oc = js.ordered_consumer(stream)
    ids: list[str] = []
    deadline = time.monotonic() + 20
    while len(ids) < count and time.monotonic() < deadline:
        for msg in oc.fetch(max_messages=min(500, count - len(ids)), expires=2.0):
            ids.append((msg.headers or {}).get(MSG_ID, ""))
    return ids


# --- 1. restarts ---------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_consume_through_a_server_restart_handles_every_acked_message_and_the_stream_stores_none_twice(
        fresh_server, sig, caplog):
    caplog.set_level(logging.INFO, logger="jetstream_sync")  # to count the publish retries
    total, restart_after = 400, 120
    with connect(fresh_server, "restart") as client:
        # Publishes carry a msg_id, so the context's retry policy may resend them: the server deduplicates.
        js = client.jetstream(timeout=1.0, retry=jss.RetryPolicy(attempts=60, initial_backoff=0.05, max_backoff=0.5))
        js.create_stream(name="FAULTS", subjects=["faults.>"], storage="file", duplicate_window=120.0)
        consumer = js.create_consumer("FAULTS", durable_name="survivor", ack_policy="explicit", ack_wait=3.0)
        rec = Handled()
        acked: dict[str, jss.PubAck] = {}
        failures: list[BaseException] = []
        reached = threading.Event()

        def publisher() -> None:
            for i in range(total):
                if i == restart_after:
                    reached.set()
                try:
                    acked[f"id-{i}"] = js.publish("faults.x", f"m{i}".encode(), msg_id=f"id-{i}")
                except BaseException as exc:  # the retry policy gave up: the test fails on it below
                    failures.append(exc)
                time.sleep(0.003)  # a steady trickle, so the restart lands mid-stream
            reached.set()

        handle = consumer.consume(rec.handler, expires=2.0, idle_heartbeat=0.5, max_messages=50,
                                  error_handler=rec.on_error)
        pub = threading.Thread(target=publisher, name="test-publisher", daemon=True)
        pub.start()
        try:
            assert reached.wait(30)
            wait_for(lambda: len(rec.keys()) >= restart_after // 2, 10, what="messages handled before the restart")
            fresh_server.restart(sig)
            pub.join(90)
            assert not pub.is_alive()
            assert failures == []
            assert len(acked) == total
            wait_for(lambda: rec.keys() >= set(acked), 30, what="every PubAck'ed message handled")
            wait_for(lambda: settled(consumer), 30, what="nothing pending or unacked on the consumer")
            assert not handle.closed and handle.error is None
            reported = rec.errors()
            assert all(is_warning(e) for e in reported), reported
        finally:
            handle.stop()
        assert handle.wait(5)
        assert handle.error is None

        state = js.stream("FAULTS").info().state
        assert state.messages == len(acked), "the stream stores a message twice (or lost one)"
        stored = read_back_ids(js, "FAULTS", state.messages)
        assert len(stored) == state.messages
        dupes = [k for k, n in collections.Counter(stored).items() if n > 1]
        assert dupes == []
        assert set(stored) == set(acked)

        with rec.lock:
            calls = list(rec.calls)
        lost = set(acked) - {k for k, _, _ in calls}
        redelivered = len(calls) - len({k for k, _, _ in calls})
        print(f"\n[{signal.Signals(sig).name}] published={len(acked)} handled={len(calls)} "
              f"redelivered={redelivered} lost={len(lost)} stored={state.messages} "
              f"duplicate_pubacks={sum(1 for a in acked.values() if a.duplicate)} warnings={len(reported)} "
              f"publish_retries={sum('retrying after' in r.getMessage() for r in caplog.records)}")
        assert lost == set()


# --- 3. client faults: every blocked call ends -----------------------------------------------------


class Blocked:
    """Blocking calls parked in threads; records how and when each one ended."""

    def __init__(self) -> None:
        self.threads: dict[str, threading.Thread] = {}
        self.outcome: dict[str, tuple[str, BaseException | None, float]] = {}

    def start(self, name: str, fn: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                fn()
                self.outcome[name] = ("returned", None, time.monotonic())
            except BaseException as exc:
                self.outcome[name] = ("raised", exc, time.monotonic())

        t = threading.Thread(target=run, name=f"test-blocked-{name}", daemon=True)
        self.threads[name] = t
        t.start()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads.values():
            t.join(max(0.0, deadline - time.monotonic()))


def _fail_reconnects(server, client) -> None:
    server.kill()  # no restart: the one reconnect attempt fails and the connection gives up


def _close(server, client) -> None:
    client.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", [_close, _fail_reconnects], ids=["client_closed", "reconnects_exhausted"])
def test_a_dead_client_ends_every_blocked_call_with_client_closed_within_five_seconds(fresh_server, fault):
    client = connect(fresh_server, "doomed", max_reconnect_attempts=1, reconnect_time_wait=0.2)
    try:
        js = client.jetstream(timeout=30.0)
        js.create_stream(name="CF", subjects=["cf.>"], storage="memory")
        # A stream that stores but never sends a PubAck: publishes to it stay in flight.
        js.create_stream(name="CF_SILENT", subjects=["cfsilent.>"], storage="memory", no_ack=True)
        consumers = {name: js.create_consumer("CF", durable_name=name, ack_policy="explicit")
                     for name in ("fetch", "next", "messages", "consume")}
        blocked = Blocked()
        blocked.start("fetch", lambda: list(consumers["fetch"].fetch(10, expires=30.0)))
        blocked.start("next", lambda: consumers["next"].next(timeout=30.0))
        stream = consumers["messages"].messages(expires=30.0)
        blocked.start("messages", lambda: list(stream))
        reports: list[BaseException] = []
        handle = consumers["consume"].consume(lambda m: m.ack(), error_handler=reports.append, expires=30.0)
        blocked.start("publish", lambda: js.publish("cfsilent.x", b"never acked", timeout=30.0))
        futures = [js.publish_async("cfsilent.y", b"never acked", timeout=30.0) for _ in range(3)]

        for name, c in consumers.items():
            wait_for(lambda: c.info().num_waiting >= 1, 5, what=f"the {name} pull waiting on the server")
        wait_for(lambda: js.publish_async_pending() == 4, 5, what="four publishes in flight")
        assert not blocked.outcome, blocked.outcome

        t0 = time.monotonic()
        fault(fresh_server, client)
        blocked.join(5.0)
        handle.wait(max(0.0, t0 + 5.0 - time.monotonic()))
        concurrent.futures.wait(futures, max(0.0, t0 + 5.0 - time.monotonic()))
        # Every call is judged after the same 5 s, so one report names all that hung.
        problems = {}
        for name in ("fetch", "next", "messages", "publish"):
            if name not in blocked.outcome:
                problems[name] = "still blocked after 5 s"
                continue
            how, exc, when = blocked.outcome[name]
            if not isinstance(exc, jss.ClientClosedError) or when - t0 >= 5.0:
                problems[name] = f"{how} {exc!r} after {when - t0:.1f}s"
        if not handle.closed or not isinstance(handle.error, jss.ClientClosedError):
            problems["consume"] = f"closed={handle.closed} error={handle.error!r}"
        for i, fut in enumerate(futures):
            if not fut.done():
                problems[f"publish_async[{i}]"] = "still pending after 5 s"
            elif not isinstance(fut.exception(), jss.ClientClosedError):
                problems[f"publish_async[{i}]"] = repr(fut.exception())
        assert problems == {}
        assert [type(e) for e in reports] == [jss.ClientClosedError]
        assert isinstance(stream.error, jss.ClientClosedError)

        # And the client says so on the next call instead of hanging.
        assert client.is_closed
        with pytest.raises(jss.ClientClosedError):
            js.publish("cf.x", b"after", timeout=2.0)
        with pytest.raises(jss.ClientClosedError):
            consumers["fetch"].next(timeout=2.0)
    finally:
        client.close()


# --- 3. a paused server ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_paused_server_gives_missed_heartbeat_warnings_then_consume_recovers_without_loss(fresh_server):
    with connect(fresh_server, "paused") as client:
        js = client.jetstream(retry=jss.RetryPolicy(attempts=20, initial_backoff=0.05, max_backoff=0.5))
        js.create_stream(name="PAUSE", subjects=["pause.>"], storage="file")
        consumer = js.create_consumer("PAUSE", durable_name="patient", ack_policy="explicit", ack_wait=30.0)
        rec = Handled()
        handle = consumer.consume(rec.handler, expires=1.0, idle_heartbeat=0.5, workers=2,
                                  error_handler=rec.on_error)
        try:
            for i in range(50):
                js.publish("pause.a", b"before", msg_id=f"before-{i}")
            wait_for(lambda: len(rec.keys()) == 50, 10, what="the first 50 handled")

            pid = fresh_server.pid
            os.kill(pid, signal.SIGSTOP)
            try:
                # Sent while the server is frozen: they sit in its socket until it wakes.
                during = [js.publish_async("pause.b", b"during", msg_id=f"during-{i}", timeout=15.0)
                          for i in range(50)]
                # Two missed-heartbeat warnings: the server stays frozen for 2-3 s.
                wait_for(lambda: sum(isinstance(e, jss.NoHeartbeatError) for e in rec.errors()) >= 2, 5,
                         what="two missed-heartbeat warnings while the server is paused")
            finally:
                os.kill(pid, signal.SIGCONT)
            assert all(f.result(15).seq for f in during)
            for i in range(50):
                js.publish("pause.c", b"after", msg_id=f"after-{i}")
            wait_for(lambda: len(rec.keys()) == 150, 15, what="all 150 messages handled after the pause")
            wait_for(lambda: settled(consumer), 10, what="nothing pending or unacked")
            assert client.is_connected
            assert not handle.closed and handle.error is None
            reported = rec.errors()
            assert all(is_warning(e) for e in reported), reported
            assert any(isinstance(e, jss.NoHeartbeatError) for e in reported)
        finally:
            handle.stop()
        assert handle.wait(5)
        assert js.stream("PAUSE").info().state.messages == 150


# --- 3. handlers that misbehave do not wedge the pipeline ---------------------------------------------


def _raises_on_first_delivery(ctx, msg):
    if msg.metadata.num_delivered == 1:
        raise RuntimeError(f"handler failed on seq {msg.metadata.sequence.stream}")
    msg.ack()


def _sleeps(ctx, msg):
    time.sleep(0.2)  # the simulated slow work itself, not a wait on state
    msg.ack()


def _publishes(ctx, msg):
    ctx["js"].publish("echo.x", msg.data, msg_id=f"echo-{msg.metadata.sequence.stream}")
    msg.ack()


def _asks_stream_info(ctx, msg):
    assert ctx["stream"].info().config.name == "WEDGE"
    msg.ack()


def _double_acks(ctx, msg):
    msg.double_ack(timeout=5.0)


def _all_of_them(ctx, msg):
    seq = msg.metadata.sequence.stream
    step = seq % 5
    if step == 0 and msg.metadata.num_delivered == 1:
        raise RuntimeError("first delivery fails")
    if step == 1:
        time.sleep(0.2)  # slow work
    if step == 2:
        _publishes(ctx, msg)
        return
    if step == 3:
        ctx["stream"].info()
    msg.double_ack(timeout=5.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("behaviour, workers, max_messages", [
    (_raises_on_first_delivery, 2, 2),
    (_sleeps, 2, 2),
    (_publishes, 2, 2),
    (_asks_stream_info, 2, 2),
    (_double_acks, 2, 2),
    (_all_of_them, 1, 1),
    (_all_of_them, 3, 4),
], ids=["raises", "sleeps", "publishes", "stream_info", "double_ack", "mixed_one_worker", "mixed_three_workers"])
def test_handlers_that_raise_sleep_or_call_back_into_the_client_do_not_wedge_the_pipeline(
        js, behaviour, workers, max_messages):
    total = 20
    stream = js.create_stream(name="WEDGE", subjects=["wedge.>"], storage="memory")
    echo = js.create_stream(name="ECHO", subjects=["echo.>"], storage="memory")
    for i in range(total):
        js.publish_async("wedge.x", f"m{i}".encode())
    js.publish_async_complete(timeout=10)
    consumer = stream.create_consumer(durable_name="wedge", ack_policy="explicit", ack_wait=30.0)
    rec = Handled()
    ctx = {"js": js, "stream": stream}

    done: set[int] = set()

    def handler(msg):
        rec.record(msg)
        behaviour(ctx, msg)
        done.add(msg.metadata.sequence.stream)  # reached only when the behaviour did not raise

    handle = consumer.consume(handler, workers=workers, max_messages=max_messages, error_handler=rec.on_error)
    try:
        wait_for(lambda: len(done) == total, 20, what="every message handled to the end")
        wait_for(lambda: settled(consumer), 5, what="every ack applied")
        assert rec.keys() == {str(s) for s in range(1, total + 1)}
        assert not handle.closed and handle.error is None
        raised = [e for e in rec.errors() if not is_warning(e)]
        assert all(isinstance(e, RuntimeError) for e in raised), raised
        expected_failures = {"_raises_on_first_delivery": total, "_all_of_them": total // 5}.get(behaviour.__name__, 0)
        assert len(raised) == expected_failures
        assert handle.stats.handler_errors == expected_failures
    finally:
        handle.stop()
    assert handle.wait(5)
    if behaviour in (_publishes, _all_of_them):
        echoed = {"_publishes": total, "_all_of_them": total // 5}[behaviour.__name__]
        assert echo.info().state.messages == echoed


# --- 5. the stream or the consumer deleted under a reader ---------------------------------------------

READERS = ("fetch", "next", "messages", "consume")


def _delete(js: jss.JetStream, stream: str, consumers: dict[str, jss.Consumer], what: str) -> None:
    if what == "stream":
        js.delete_stream(stream)
    else:
        for c in consumers.values():
            c.delete()


def _check_gone(outcome: dict, t0: float, stream: str, what: str, within: dict[str, float]) -> dict[str, str]:
    """What is wrong with each reader's ending: it must be a ConsumerDeletedError naming the consumer and
    the stream (and that the stream went, when it did), within its time."""
    problems = {}
    for name in READERS:
        if name not in outcome:
            problems[name] = f"still reading after {within[name]} s"
            continue
        how, exc, when = outcome[name]
        said = f"{how} {exc!r} after {when - t0:.1f}s"
        if not isinstance(exc, jss.ConsumerDeletedError) or when - t0 >= within[name]:
            problems[name] = said
        elif (exc.stream, exc.consumer) != (stream, name):
            problems[name] = f"names {exc.stream!r}/{exc.consumer!r}: {said}"
        elif what == "stream" and f"consumer {name!r} of stream {stream!r} is gone: stream {stream!r} was " \
                                  f"deleted" != str(exc):
            problems[name] = said
        elif what == "consumer" and str(exc) != f"consumer {name!r} of stream {stream!r} was deleted":
            problems[name] = said
    return problems


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["stream", "consumer"])
def test_deleting_under_waiting_pulls_ends_every_reader_with_an_error_naming_consumer_and_stream(js, name, what):
    # The waiting pulls hear 409 Consumer Deleted at once, except now and then (a race in the server drops
    # some when the stream goes): then the missed heartbeat (2 x 1 s here; next(): 2 x 5 s) makes them ask.
    within = {"fetch": 6.0, "next": 15.0, "messages": 6.0, "consume": 6.0}
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    consumers = {reader: js.create_consumer(name, durable_name=reader) for reader in READERS}
    blocked = Blocked()
    handle = None
    try:
        blocked.start("fetch", lambda: list(consumers["fetch"].fetch(10, expires=30.0, idle_heartbeat=1.0)))
        blocked.start("next", lambda: consumers["next"].next(timeout=30.0))
        stream = consumers["messages"].messages(expires=30.0, idle_heartbeat=1.0)
        blocked.start("messages", lambda: list(stream))
        handle = consumers["consume"].consume(lambda m: m.ack(), expires=30.0, idle_heartbeat=1.0,
                                              error_handler=lambda e: None)
        blocked.start("consume", lambda: handle.wait(30.0) and (_ for _ in ()).throw(handle.error))
        for reader, c in consumers.items():
            wait_for(lambda: c.info().num_waiting >= 1, 10, what=f"the {reader} pull waiting on the server")

        t0 = time.monotonic()
        _delete(js, name, consumers, what)
        blocked.join(max(within.values()))
        assert _check_gone(blocked.outcome, t0, name, what, within) == {}
    finally:
        if handle is not None:
            handle.stop()
            handle.wait(5)
        blocked.join(5.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["stream", "consumer"])
def test_deleting_between_pulls_ends_every_reader_at_its_next_pull_naming_consumer_and_stream(js, name, what):
    # No pull waits on the server when it goes: the next pull hears 503 (no responders), and one
    # consumer info request tells a consumer that is gone from a passing outage.
    js.create_stream(name=name, subjects=[f"{name}.>"], storage="memory")
    consumers = {reader: js.create_consumer(name, durable_name=reader) for reader in READERS}
    for i in range(3):
        js.publish(f"{name}.x", f"m{i}".encode())
    # messages() and consume() buffer 2 and pull again only when both are taken: none waits.
    stream = consumers["messages"].messages(max_messages=2, threshold_messages=0, expires=30.0)
    release = threading.Event()
    handle = consumers["consume"].consume(lambda m: release.wait(30) and m.ack(), max_messages=2,
                                          threshold_messages=0, expires=30.0, error_handler=lambda e: None)
    blocked = Blocked()
    try:
        for reader in ("messages", "consume"):
            c = consumers[reader]
            wait_for(lambda: c.info().num_ack_pending == 2 and c.info().num_waiting == 0, 10,
                     what=f"{reader} holding 2 messages with no pull waiting")

        t0 = time.monotonic()
        _delete(js, name, consumers, what)
        blocked.start("fetch", lambda: list(consumers["fetch"].fetch(10, expires=30.0)))
        blocked.start("next", lambda: consumers["next"].next(timeout=30.0))
        blocked.start("messages", lambda: [stream.next(timeout=30.0) for _ in range(3)])
        release.set()
        blocked.start("consume", lambda: handle.wait(30.0) and (_ for _ in ()).throw(handle.error))
        blocked.join(5.0)
        assert _check_gone(blocked.outcome, t0, name, what, dict.fromkeys(READERS, 5.0)) == {}
        assert stream.error is blocked.outcome["messages"][1] and handle.stats.handled == 2
    finally:
        release.set()
        stream.stop()
        handle.stop()
        handle.wait(5)
        blocked.join(5.0)
