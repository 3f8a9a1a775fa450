# Every timeout says what timed out, on what, and after how long (real nats-server; a SIGSTOPped
# server answers nothing while the connection stays up).
import os
import pickle
import re
import signal
from contextlib import ExitStack, contextmanager

import pytest

import jetstream_sync as jss

from conftest import wait_for


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@contextmanager
def paused(server):
    os.kill(server.pid, signal.SIGSTOP)
    # The stop lands on every thread of the server in its own time: a thread still running could answer
    # one more request (seen once, two suites at once). Wait until the kernel says it is stopped.
    wait_for(lambda: _state(server.pid) in ("T", "t"), 5, interval=0.001, what="the server to be stopped")
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


@pytest.fixture
def setup(fresh_server):
    client = jss.connect(fresh_server.url, name="timeouts", timeout=5.0)
    js = client.jetstream(retry=jss.RetryPolicy(attempts=1))
    stream = js.create_stream(name="ORDERS", subjects=["ORDERS.*"], storage="memory")
    consumer = stream.create_consumer(durable_name="C")
    try:
        yield fresh_server, client, js, stream, consumer
    finally:
        client.close()


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_a_timed_out_management_call_names_the_operation_its_target_and_the_wait(setup):
    server, _client, js, _stream, _consumer = setup
    with paused(server):
        with pytest.raises(jss.TimeoutError) as info:
            js.create_consumer("ORDERS", durable_name="NEW", timeout=0.5)
    assert str(info.value) == ("create consumer 'NEW' on stream 'ORDERS' ($JS.API.CONSUMER.CREATE.ORDERS.NEW) "
                               "timed out after 0.5 s")
    assert (info.value.operation, info.value.timeout) == (
        "create consumer 'NEW' on stream 'ORDERS' ($JS.API.CONSUMER.CREATE.ORDERS.NEW)", 0.5)
    assert isinstance(info.value, TimeoutError)  # the builtin too
    again = pickle.loads(pickle.dumps(info.value))  # crosses to a Spark driver intact
    assert str(again) == str(info.value) and again.operation == info.value.operation


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_a_retried_lookup_says_which_attempt_timed_out(setup):
    server, client, _js, _stream, _consumer = setup
    js = client.jetstream(retry=jss.RetryPolicy(attempts=2, initial_backoff=0.01))
    with paused(server):
        with pytest.raises(jss.TimeoutError, match=re.escape(
                "stream info of 'ORDERS' ($JS.API.STREAM.INFO.ORDERS) timed out after 0.3 s: attempt 2 of 2")):
            js.stream_info("ORDERS", timeout=0.3)


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_a_timed_out_publish_names_the_subject(setup):
    server, _client, js, _stream, _consumer = setup
    with paused(server):
        with pytest.raises(jss.TimeoutError, match=re.escape(
                "publish to 'ORDERS.new' timed out after 0.5 s: no PubAck from the server")):
            js.publish("ORDERS.new", b"x", timeout=0.5)
        future = js.publish_async("ORDERS.new", b"y", timeout=0.5)
        with pytest.raises(jss.TimeoutError, match=re.escape("publish to 'ORDERS.new' timed out after 0.5 s")):
            future.result(timeout=10)


@pytest.mark.timeout(60)
def test_next_without_a_message_names_the_consumer_and_stream(setup):
    _server, _client, _js, _stream, consumer = setup
    with pytest.raises(jss.TimeoutError, match=re.escape(
            "next() on consumer 'C' of stream 'ORDERS' timed out after 0.3 s: no message")) as info:
        consumer.next(timeout=0.3)
    assert info.value.timeout == 0.3
    with consumer.messages() as msgs:
        with pytest.raises(jss.TimeoutError, match=re.escape(
                "messages().next() on consumer 'C' of stream 'ORDERS' timed out after 0.2 s")):
            msgs.next(timeout=0.2)


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_a_fetch_from_a_silent_server_names_the_consumer_and_stream(setup):
    server, _client, _js, _stream, consumer = setup
    batch = None
    with paused(server):
        batch = consumer.fetch(max_messages=5, expires=2.0, idle_heartbeat=0.25)
        with pytest.raises(jss.NoHeartbeatError, match=re.escape(
                "fetch from consumer 'C' of stream 'ORDERS': no heartbeat for 0.5s")):
            list(batch)
    assert batch.error is not None


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_a_core_request_and_a_double_ack_name_their_target(setup):
    server, client, js, _stream, consumer = setup
    js.publish("ORDERS.new", b"x")
    msg = consumer.next(timeout=5)
    with paused(server):
        with pytest.raises(jss.TimeoutError, match=re.escape("request to 'svc.echo' timed out after 0.3 s")):
            client.request("svc.echo", b"hi", timeout=0.3)
        with pytest.raises(jss.TimeoutError, match=re.escape(
                "double_ack of message 1 of stream 'ORDERS' (consumer 'C', subject 'ORDERS.new') "
                "timed out after 0.3 s")):
            msg.double_ack(timeout=0.3)
    msg.double_ack(timeout=5)  # still unacked after the timeout: it can be retried


@pytest.mark.timeout(60)
@pytest.mark.faults
def test_an_object_put_whose_chunks_get_no_puback_names_the_publish_that_timed_out(setup):
    server, _client, js, _stream, _consumer = setup
    store = js.create_object_store("FILES", storage="memory")
    frozen = ExitStack()

    def freeze_after_the_first_chunk(done: int, total: int | None) -> None:
        if done == 1024:
            frozen.enter_context(paused(server))  # the next chunks go out to a server that answers nothing

    with frozen:
        with pytest.raises(TimeoutError) as info:
            store.put("big", b"x" * 4096, chunk_size=1024, progress=freeze_after_the_first_chunk, timeout=0.5)
    # Ours, saying what waited and how long: not concurrent.futures' bare TimeoutError() of a wait that
    # ran out before the PubAck's own deadline was called.
    assert isinstance(info.value, jss.TimeoutError), repr(info.value)
    assert re.fullmatch(r"publish to '\$O\.FILES\.C\.\w+' timed out after 0\.5 s: no PubAck from the server",
                        str(info.value)), str(info.value)
    store.put("big", b"y" * 4096, chunk_size=1024, timeout=5)  # the server is back: a put works
    assert store.get_bytes("big") == b"y" * 4096
