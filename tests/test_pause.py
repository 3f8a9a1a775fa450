# Charter: pausing and resuming a consumer (servers 2.11+) against a real nats-server: what the server
# answers and reports in a raw CONSUMER.INFO (``paused`` true, then absent after a resume, read as
# False), nothing delivered while paused, the pause ending by itself, consume() and messages() pulling
# again at once after a resume from the same client (the server would leave their waiting request
# unanswered), in a cluster too, bad ``until`` values and an old server refused before anything is sent.
from __future__ import annotations

import json
import math
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import jetstream_sync as jss
from jetstream_sync import pull
from jetstream_sync.jetstream import pause_deadline

from conftest import assert_sends_nothing, wait_for

pytestmark = pytest.mark.timeout(60)

#: A pull that waits through a pause: long enough that only a fresh pull explains a prompt delivery
#: (the server looks at a waiting request again at its next idle heartbeat, expires / 2 = 30 s).
LONG_EXPIRES = 60.0
#: How soon after resume() a message must arrive: far below LONG_EXPIRES / 2, generous for a loaded machine.
PROMPTLY = 10.0


def raw_info(client: jss.Client, stream: str, consumer: str) -> dict:
    """CONSUMER.INFO as the server sends it, through a plain request (none of the client's decoding)."""
    return json.loads(client.request(f"$JS.API.CONSUMER.INFO.{stream}.{consumer}", b"").data)


@pytest.fixture
def consumer(stream):
    return stream.create_consumer(durable_name="paused", ack_wait=30.0)


# -- until ---------------------------------------------------------------------------------------


NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.mark.parametrize("until, expected", [
    (NOW + timedelta(minutes=5), NOW + timedelta(minutes=5)),
    (datetime(2030, 1, 2, 5, 4, 6, tzinfo=timezone(timedelta(hours=2))), NOW + timedelta(seconds=1)),
    (30, NOW + timedelta(seconds=30)),
    (1.5, NOW + timedelta(seconds=1.5)),
    (timedelta(hours=1), NOW + timedelta(hours=1)),
])
def test_until_is_an_aware_time_or_seconds_from_now(until, expected):
    assert pause_deadline(until, NOW) == expected


@pytest.mark.parametrize("until, exc, match", [
    (datetime(2030, 1, 2, 4, 0, 0), ValueError, "until must be a timezone-aware datetime"),
    (NOW - timedelta(seconds=1), ValueError, "until must be in the future"),
    (NOW.astimezone(timezone(timedelta(hours=2))), ValueError, "until must be in the future"),
    (0, ValueError, "until must be in the future"),
    (-5, ValueError, "until must be in the future"),
    (timedelta(0), ValueError, "until must be in the future"),
    (math.nan, ValueError, "until must be a finite number"),
    (math.inf, ValueError, "until must be a finite number"),
    (1e300, ValueError, "until is too far ahead"),
    (True, TypeError, "until must be an aware datetime"),
    ("10m", TypeError, "until must be an aware datetime"),
    (None, TypeError, "until must be an aware datetime"),
])
def test_a_bad_until_names_the_argument(until, exc, match):
    with pytest.raises(exc, match=match):
        pause_deadline(until, NOW)


def test_a_bad_until_is_refused_before_anything_is_sent(api_spy, js, consumer):
    naive = datetime.now() + timedelta(hours=1)
    past = datetime.now(timezone.utc) - timedelta(seconds=1)
    assert_sends_nothing(api_spy, js, lambda: consumer.pause(naive), ValueError, "until must be a timezone-aware")
    assert_sends_nothing(api_spy, js, lambda: consumer.pause(past), ValueError, "until must be in the future")
    assert_sends_nothing(api_spy, js, lambda: js.pause_consumer(consumer.stream_name, consumer.name, 0),
                         ValueError, "until must be in the future")
    assert_sends_nothing(api_spy, js, lambda: js.pause_consumer(consumer.stream_name, consumer.name, "1h"),
                         TypeError, "until")
    assert_sends_nothing(api_spy, js, lambda: js.pause_consumer(consumer.stream_name, "bad.name", 5),
                         ValueError, "name")
    assert raw_info(js.client, consumer.stream_name, consumer.name).get("paused") is None


# -- what the server answers and reports -----------------------------------------------------------


def test_pause_until_a_time_is_what_the_server_answers_and_reports(js, consumer):
    until = (datetime.now(timezone.utc) + timedelta(minutes=10)).replace(microsecond=250_000)  # within 601 s
    resp = consumer.pause(until)
    assert isinstance(resp, jss.ConsumerPauseResponse)
    assert resp.paused is True and resp.pause_until == until
    assert 590 < resp.pause_remaining <= 601

    raw = raw_info(js.client, consumer.stream_name, consumer.name)
    assert raw["paused"] is True
    assert raw["config"]["pause_until"] == jss.config.format_time(until)
    assert 590 * 1_000_000_000 < raw["pause_remaining"] <= 601 * 1_000_000_000
    info = consumer.info()
    assert info.paused is True and info.config.pause_until == until and 590 < info.pause_remaining <= 601


def test_pause_for_seconds_or_a_timedelta_counts_from_now(js, consumer):
    before = datetime.now(timezone.utc)
    resp = js.pause_consumer(consumer.stream_name, consumer.name, 30)
    after = datetime.now(timezone.utc)
    assert resp.paused is True
    assert before + timedelta(seconds=30) <= resp.pause_until <= after + timedelta(seconds=30)
    resp = consumer.pause(timedelta(hours=1))
    assert resp.paused is True and 3000 < resp.pause_remaining <= 3600
    assert 3000 < raw_info(js.client, consumer.stream_name, consumer.name)["pause_remaining"] / 1e9 <= 3600


def test_after_a_resume_the_server_omits_paused_and_it_reads_false(js, consumer):
    consumer.pause(600)
    resp = consumer.resume()
    assert resp.paused is False and resp.pause_until is None and resp.pause_remaining is None
    raw = raw_info(js.client, consumer.stream_name, consumer.name)
    assert "paused" not in raw and "pause_remaining" not in raw and "pause_until" not in raw["config"]
    info = consumer.info()
    assert info.paused is False and info.pause_remaining is None and info.config.pause_until is None
    # resuming a consumer that is not paused changes nothing
    assert js.resume_consumer(consumer.stream_name, consumer.name).paused is False


def test_a_consumer_never_paused_reads_not_paused(js, consumer):
    info = js.consumer_info(consumer.stream_name, consumer.name)
    assert info.paused is False and info.pause_remaining is None


@pytest.mark.timeout(60)
def test_a_push_consumer_pauses_and_after_a_resume_delivers_by_its_next_idle_heartbeat(js, stream, subj):
    push = stream.create_push_consumer(durable_name="pushed", deliver_subject=f"deliver.{subj}", idle_heartbeat=1.0)
    assert push.pause(60).paused is True
    assert raw_info(js.client, stream.cached_info.config.name, "pushed")["paused"] is True
    arrived = threading.Event()
    with push.consume(lambda msg: (msg.ack(), arrived.set())):
        js.publish(f"{subj}.a", b"pushed")
        assert not arrived.wait(0.5), "delivered while paused"
        assert push.resume().paused is False
        assert arrived.wait(PROMPTLY)
    assert "paused" not in raw_info(js.client, stream.cached_info.config.name, "pushed")


def test_pausing_a_missing_consumer_or_stream_is_not_found(js, stream):
    with pytest.raises(jss.ConsumerNotFoundError):
        js.pause_consumer(stream.cached_info.config.name, "nobody", 60)
    with pytest.raises(jss.ConsumerNotFoundError):
        js.resume_consumer(stream.cached_info.config.name, "nobody")
    with pytest.raises(jss.StreamNotFoundError):
        js.pause_consumer("NO_SUCH_STREAM", "nobody", 60)


# -- delivery ----------------------------------------------------------------------------------------


def test_a_paused_consumer_delivers_nothing_until_resumed(js, consumer, subj):
    consumer.pause(600)
    js.publish(f"{subj}.a", b"held")
    assert list(consumer.fetch(max_messages=1, expires=1.0)) == []
    assert consumer.info().num_pending == 1
    consumer.resume()
    msgs = list(consumer.fetch(max_messages=1, expires=10.0))
    assert [m.data for m in msgs] == [b"held"]
    msgs[0].ack()


@pytest.mark.timeout(60)
def test_a_pause_ends_by_itself_when_its_time_comes(js, consumer, subj):
    js.publish(f"{subj}.a", b"later")
    resp = consumer.pause(2.0)
    assert resp.paused is True
    msgs = list(consumer.fetch(max_messages=1, expires=30.0))  # waits through the pause
    assert [m.data for m in msgs] == [b"later"]
    assert datetime.now(timezone.utc) >= resp.pause_until
    assert consumer.info().paused is False


def _waiting(consumer: jss.Consumer) -> bool:
    return consumer.info().num_waiting >= 1


@pytest.mark.timeout(90)
def test_consume_pulls_again_at_once_after_resume_from_the_same_client(js, consumer, subj):
    consumer.pause(3600)
    got: list[tuple[bytes, float]] = []
    arrived = threading.Event()

    def handler(msg: jss.Msg) -> None:
        got.append((msg.data, time.monotonic()))
        msg.ack()
        arrived.set()

    key = (js._conn, js._api.msg_next(consumer.stream_name, consumer.name))
    handle = consumer.consume(handler, expires=LONG_EXPIRES)
    try:
        assert len(pull._running[key]) == 1
        wait_for(lambda: _waiting(consumer), 10, what="the consume() pull to wait on the server")
        js.publish(f"{subj}.a", b"after the pause")
        assert not arrived.wait(0.5), "delivered while paused"
        resumed_at = time.monotonic()
        consumer.resume()
        assert arrived.wait(PROMPTLY), f"nothing within {PROMPTLY}s of resume() (the pull expires after {LONG_EXPIRES}s)"
        assert got[0][0] == b"after the pause" and got[0][1] - resumed_at < PROMPTLY
        assert handle.error is None
    finally:
        handle.stop()
        assert handle.wait(10)
    # the stopped pull is no longer one a resume wakes
    wait_for(lambda: key not in pull._running, 5, what="the stopped pull to leave the registry")


@pytest.mark.timeout(90)
def test_messages_pulls_again_at_once_after_resume_through_the_context(js, consumer, subj):
    js.pause_consumer(consumer.stream_name, consumer.name, 3600)
    with consumer.messages(expires=LONG_EXPIRES) as stream:
        wait_for(lambda: _waiting(consumer), 10, what="the messages() pull to wait on the server")
        js.publish(f"{subj}.a", b"one")
        js.publish(f"{subj}.a", b"two")
        resumed_at = time.monotonic()
        js.resume_consumer(consumer.stream_name, consumer.name)
        first = stream.next(timeout=PROMPTLY)
        assert time.monotonic() - resumed_at < PROMPTLY
        second = stream.next(timeout=PROMPTLY)
        assert [first.data, second.data] == [b"one", b"two"]
        first.ack()
        second.ack()
    wait_for(lambda: consumer.info().num_ack_pending == 0, 10, what="both acks to land")


@pytest.mark.timeout(90)
def test_a_resume_through_another_context_of_the_same_client_wakes_the_pull_too(js, client, consumer, subj):
    other = client.jetstream(timeout=5.0)
    consumer.pause(3600)
    with consumer.messages(expires=LONG_EXPIRES) as stream:
        wait_for(lambda: _waiting(consumer), 10, what="the messages() pull to wait on the server")
        js.publish(f"{subj}.a", b"woken")
        other.resume_consumer(consumer.stream_name, consumer.name)
        msg = stream.next(timeout=PROMPTLY)
        assert msg.data == b"woken"
        msg.ack()


# -- an older server ------------------------------------------------------------------------------------


def test_pause_and_resume_on_a_server_older_than_2_11_name_the_version(api_spy, js, consumer, monkeypatch):
    # A server before 2.11 says no api_lvl in its INFO: what this client reads it by.
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 0)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.10.24")
    assert_sends_nothing(api_spy, js, lambda: consumer.pause(60), jss.FeatureNotSupportedError,
                         r"pausing a consumer needs nats-server 2.11 or later \(JetStream API level 1\); the "
                         r"server runs 2.10.24")
    assert_sends_nothing(api_spy, js, lambda: js.resume_consumer(consumer.stream_name, consumer.name),
                         jss.FeatureNotSupportedError, r"resuming a consumer needs nats-server 2.11")
    assert consumer.info().paused is False


# -- a cluster ---------------------------------------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_in_a_cluster_messages_pulls_again_at_once_after_resume(nats_cluster):
    # The answer to a resume leaves the meta leader before the consumer's leader has applied it: the
    # fresh pull waits until the consumer's info says it is no longer paused, or it could wait again.
    nats_cluster.wait_ready()
    with jss.connect(nats_cluster.urls, name="pause-cluster", timeout=10.0) as client:
        js = client.jetstream(timeout=10.0)
        name = f"PAUSE_{int(time.time() * 1000) % 10**9}"
        stream = js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="file", num_replicas=3)
        try:
            consumer = stream.create_consumer(durable_name="c", ack_wait=30.0)
            for round_ in range(3):
                consumer.pause(3600)
                wait_for(lambda: consumer.info().paused, 20, what="the pause to reach the consumer leader")
                with consumer.messages(expires=LONG_EXPIRES) as msgs:
                    wait_for(lambda: _waiting(consumer), 20, what="the messages() pull to wait on the server")
                    js.publish(f"{name.lower()}.a", b"%d" % round_)
                    consumer.resume()
                    msg = msgs.next(timeout=PROMPTLY)
                    assert msg.data == b"%d" % round_
                    msg.double_ack(10.0)
        finally:
            js.delete_stream(name)
