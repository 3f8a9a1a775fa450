# Charter: every public call given bad input (wrong types, out-of-range values, bad subjects and
# names, payloads over the server's max_payload) raises TypeError/ValueError naming the argument,
# before anything reaches the server (a wire spy on a second connection sees nothing), and the
# client stays usable afterwards. One table, one row per (call, bad argument).
from __future__ import annotations

import datetime as dt
import itertools
import ssl

import pytest

import jetstream_sync as jss

from conftest import wait_for

STREAM = "BADINPUT"


class WireSpy:
    """Sees every message published on the server (a second connection subscribed to ``>``).

    Replies to inboxes, JetStream deliveries and the server's own advisories are left out: a bad call
    must not publish anything, so any other subject seen between two syncs is
    something the call sent (an API request, an ack, a core publish, a pull).
    """

    IGNORED = ("_INBOX.", "$JS.EVENT.")

    def __init__(self, url: str) -> None:
        self.subjects: list[str] = []
        self._sentinels = itertools.count()
        self._client = jss.connect(url, name="wire-spy")
        try:
            # subscribe_raw is the package's raw subscription (no public subscribe
            # exists); the handler runs on the spy's loop thread and only appends.
            self._client._conn.call(self._client._conn.subscribe_raw(">", self._on_msg), 5.0)
            self._client.flush()
        except BaseException:
            self._client.close()
            raise

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        s = subject.decode()
        # A JetStream delivery to a client's inbox reaches ``>`` too, under the
        # stored message's subject and with a $JS.ACK reply: the server sent it.
        if not s.startswith(self.IGNORED) and not reply.startswith(b"$JS.ACK."):
            self.subjects.append(s)

    def sync(self, js: jss.JetStream) -> int:
        """Make a round trip on ``js``, then publish a unique sentinel and wait until the spy saw it.

        Returns the position just after the sentinel. One connection's messages
        reach the spy in the order they were sent, and the round trip lets the
        client's loop finish anything a call scheduled, so afterwards the spy
        has seen everything sent before.
        """
        js.account_info()
        sentinel = f"spy.sync.{next(self._sentinels)}"
        js.client.publish(sentinel)
        wait_for(lambda: sentinel in self.subjects, timeout=5.0, what=f"the spy to see {sentinel}")
        return self.subjects.index(sentinel) + 1

    def sent_between(self, start: int, end: int) -> list[str]:
        """Subjects seen in [start, end), less the sync (account info request, sentinel) closing the range."""
        seen = self.subjects[start:end]
        assert seen[-2] == "$JS.API.INFO" and seen[-1].startswith("spy.sync."), seen
        return seen[:-2]

    def close(self) -> None:
        self._client.close()


class Env:
    """What the table's calls act on: a client, a stream, a consumer and one delivered message."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = jss.connect(url, name="bad-input")
        self.js = self.client.jetstream()
        try:
            self.js.delete_stream(STREAM)
        except jss.StreamNotFoundError:
            pass
        self.stream = self.js.create_stream(name=STREAM, subjects=["badin.>"], storage=jss.StorageType.MEMORY)
        self.consumer = self.stream.create_consumer(durable_name="C", ack_wait=300.0)
        self.js.publish("badin.first", b"one")
        msgs = list(self.consumer.fetch(1, expires=2.0))
        assert len(msgs) == 1
        self.msg = msgs[0]
        self.max_payload = self.client.max_payload
        self.spy = WireSpy(url)

    def close(self) -> None:
        try:
            self.spy.close()
            self.js.delete_stream(STREAM)
        finally:
            self.client.close()


@pytest.fixture(scope="module")
def env(nats_server):
    e = Env(nats_server.url)
    yield e
    e.close()


def _oversize(e: Env) -> bytes:
    return b"x" * (e.max_payload + 1)


def _handler(msg: jss.Msg) -> None:  # pragma: no cover - never called: the calls are refused
    msg.ack()


# (call, exception, match). Every match names the argument at fault.
T, V = TypeError, ValueError
CASES = {
    # --- Client.publish / request -------------------------------------------------------------
    "Client.publish subject None": (lambda e: e.client.publish(None, b"x"), T, "subject"),
    "Client.publish subject int": (lambda e: e.client.publish(42, b"x"), T, "subject"),
    "Client.publish subject empty": (lambda e: e.client.publish("", b"x"), V, "subject"),
    "Client.publish subject with space": (lambda e: e.client.publish("badin.a b", b"x"), V, "subject"),
    "Client.publish subject with empty token": (lambda e: e.client.publish("badin..a", b"x"), V, "subject"),
    "Client.publish subject ends with dot": (lambda e: e.client.publish("badin.", b"x"), V, "subject"),
    "Client.publish subject with newline": (lambda e: e.client.publish("badin.a\r\nPUB x 1", b"x"), V, "subject"),
    "Client.publish data int": (lambda e: e.client.publish("badin.a", 42), T, "data"),
    "Client.publish data list": (lambda e: e.client.publish("badin.a", [1, 2]), T, "data"),
    "Client.publish data over max_payload": (lambda e: e.client.publish("badin.a", _oversize(e)), V, "data"),
    "Client.publish reply with space": (lambda e: e.client.publish("badin.a", b"x", reply="a b"), V, "reply"),
    "Client.publish reply int": (lambda e: e.client.publish("badin.a", b"x", reply=7), T, "reply"),
    "Client.publish headers value int": (lambda e: e.client.publish("badin.a", b"x", headers={"K": 1}), T, "header"),
    "Client.publish headers name with colon": (
        lambda e: e.client.publish("badin.a", b"x", headers={"K:": "v"}), V, "header"),
    "Client.publish headers value with CRLF": (
        lambda e: e.client.publish("badin.a", b"x", headers={"K": "v\r\nX: y"}), V, "header"),
    "Client.publish headers not a mapping": (lambda e: e.client.publish("badin.a", b"x", headers=["K"]), T, "header"),
    "Client.request subject None": (lambda e: e.client.request(None, b"x"), T, "subject"),
    "Client.request subject with space": (lambda e: e.client.request("badin.a b", b"x"), V, "subject"),
    "Client.request data int": (lambda e: e.client.request("badin.a", 42), T, "data"),
    "Client.request data over max_payload": (lambda e: e.client.request("badin.a", _oversize(e)), V, "data"),
    "Client.request timeout zero": (lambda e: e.client.request("badin.a", b"x", timeout=0), V, "timeout"),
    "Client.request timeout negative": (lambda e: e.client.request("badin.a", b"x", timeout=-1), V, "timeout"),
    "Client.request timeout str": (lambda e: e.client.request("badin.a", b"x", timeout="1"), T, "timeout"),
    "Client.request headers value int": (lambda e: e.client.request("badin.a", b"x", headers={"K": 1}), T, "header"),
    "Client.request headers value with CRLF": (
        lambda e: e.client.request("badin.a", b"x", headers={"K": "v\r\nX: y"}), V, "header"),
    "Client.flush timeout negative": (lambda e: e.client.flush(timeout=-1), V, "timeout"),
    # --- Client.jetstream -----------------------------------------------------------------------
    "Client.jetstream timeout zero": (lambda e: e.client.jetstream(timeout=0), V, "timeout"),
    "Client.jetstream timeout str": (lambda e: e.client.jetstream(timeout="5"), T, "timeout"),
    "Client.jetstream retry wrong type": (lambda e: e.client.jetstream(retry=3), T, "retry"),
    "Client.jetstream domain with dot": (lambda e: e.client.jetstream(domain="a.b"), V, "domain"),
    "Client.jetstream domain int": (lambda e: e.client.jetstream(domain=5), (T, V), "domain"),
    "Client.jetstream domain and api_prefix": (
        lambda e: e.client.jetstream(domain="hub", api_prefix="$JS.X.API"), V, "domain|api_prefix"),
    "Client.jetstream api_prefix with space": (lambda e: e.client.jetstream(api_prefix="$JS. API"), V, "api_prefix"),
    "Client.jetstream max_pending zero": (lambda e: e.client.jetstream(max_pending=0), V, "max_pending"),
    "Client.jetstream max_pending str": (lambda e: e.client.jetstream(max_pending="10"), (T, V), "max_pending"),
    # --- streams ------------------------------------------------------------------------------
    "create_stream name missing": (lambda e: e.js.create_stream(subjects=["bad.x"]), (T, V), "name"),
    "create_stream name with dot": (lambda e: e.js.create_stream(name="A.B", subjects=["bad.x"]), V, "name"),
    "create_stream name with space": (lambda e: e.js.create_stream(name="A B", subjects=["bad.x"]), V, "name"),
    "create_stream name int": (lambda e: e.js.create_stream(name=5, subjects=["bad.x"]), T, "name"),
    "create_stream subjects str": (lambda e: e.js.create_stream(name="BADX", subjects="bad.x"), T, "subjects"),
    "create_stream subjects with bad subject": (
        lambda e: e.js.create_stream(name="BADX", subjects=["bad..x"]), V, "subjects"),
    "create_stream subjects with space": (
        lambda e: e.js.create_stream(name="BADX", subjects=["bad.x y"]), V, "subjects"),
    "create_stream max_msgs str": (lambda e: e.js.create_stream(name="BADX", max_msgs="10"), T, "max_msgs"),
    "create_stream max_age negative": (lambda e: e.js.create_stream(name="BADX", max_age=-5), V, "max_age"),
    "create_stream storage unknown": (lambda e: e.js.create_stream(name="BADX", storage="floppy"), V, "storage"),
    "create_stream num_replicas zero": (lambda e: e.js.create_stream(name="BADX", num_replicas=0), V, "num_replicas"),
    "create_stream unknown field": (lambda e: e.js.create_stream(name="BADX", colour="red"), T, "colour"),
    "create_stream config wrong type": (lambda e: e.js.create_stream(42), T, "config"),
    "create_stream timeout negative": (lambda e: e.js.create_stream(name="BADX", timeout=-1), V, "timeout"),
    "update_stream name with star": (lambda e: e.js.update_stream(name="A*", subjects=["bad.x"]), V, "name"),
    "update_stream max_bytes str": (lambda e: e.js.update_stream(name=STREAM, max_bytes="1MB"), T, "max_bytes"),
    "create_or_update_stream name with gt": (lambda e: e.js.create_or_update_stream(name="A>"), V, "name"),
    "stream name with dot": (lambda e: e.js.stream("A.B"), V, "name"),
    "stream name None": (lambda e: e.js.stream(None), T, "name"),
    "stream timeout zero": (lambda e: e.js.stream(STREAM, timeout=0), V, "timeout"),
    "stream_info name empty": (lambda e: e.js.stream_info(""), V, "name"),
    "delete_stream name with space": (lambda e: e.js.delete_stream("A B"), V, "name"),
    "delete_stream name int": (lambda e: e.js.delete_stream(1), T, "name"),
    "streams subject with space": (lambda e: list(e.js.streams("a b")), V, "subject"),
    "stream_names subject int": (lambda e: list(e.js.stream_names(5)), T, "subject"),
    "account_info timeout negative": (lambda e: e.js.account_info(timeout=-1), V, "timeout"),
    # --- consumers ----------------------------------------------------------------------------
    "create_consumer stream with dot": (lambda e: e.js.create_consumer("A.B", durable_name="D"), V, "stream"),
    "create_consumer stream None": (lambda e: e.js.create_consumer(None, durable_name="D"), T, "stream"),
    "create_consumer durable_name with dot": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D.1"), V, "durable_name"),
    "create_consumer name with space": (lambda e: e.js.create_consumer(STREAM, name="D 1"), V, "name"),
    "create_consumer ack_policy unknown": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", ack_policy="sometimes"), V, "ack_policy"),
    "create_consumer deliver_policy unknown": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", deliver_policy="later"), V, "deliver_policy"),
    "create_consumer ack_wait negative": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", ack_wait=-1), V, "ack_wait"),
    "create_consumer max_deliver str": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", max_deliver="3"), T, "max_deliver"),
    "create_consumer filter_subject with space": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", filter_subject="badin.a b"), V, "filter_subject"),
    "create_consumer filter_subjects with bad subject": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", filter_subjects=["badin.a", "badin..b"]), V,
        "filter_subjects"),
    "create_consumer filter_subjects str": (
        lambda e: e.js.create_consumer(STREAM, durable_name="D", filter_subjects="badin.a"), T, "filter_subjects"),
    "create_consumer unknown field": (lambda e: e.js.create_consumer(STREAM, durable_name="D", speed=3), T, "speed"),
    "create_consumer config wrong type": (lambda e: e.js.create_consumer(STREAM, 42), T, "config"),
    "update_consumer without a name": (lambda e: e.js.update_consumer(STREAM, ack_wait=5.0), V, "name"),
    "create_or_update_consumer max_ack_pending str": (
        lambda e: e.js.create_or_update_consumer(STREAM, durable_name="D", max_ack_pending="1"), T,
        "max_ack_pending"),
    "consumer name with gt": (lambda e: e.js.consumer(STREAM, "C>"), V, "name"),
    "consumer stream int": (lambda e: e.js.consumer(1, "C"), T, "stream"),
    "consumer_info name empty": (lambda e: e.js.consumer_info(STREAM, ""), V, "name"),
    "delete_consumer name with space": (lambda e: e.js.delete_consumer(STREAM, "C 1"), V, "name"),
    "consumers stream with dot": (lambda e: list(e.js.consumers("A.B")), V, "stream"),
    "consumer_names stream None": (lambda e: list(e.js.consumer_names(None)), T, "stream"),
    "ordered_consumer stream with dot": (lambda e: e.js.ordered_consumer("A.B"), V, "stream"),
    "ordered_consumer with a durable name": (
        lambda e: e.js.ordered_consumer(STREAM, durable_name="D"), V, "durable_name"),
    "ordered_consumer ack_policy explicit": (
        lambda e: e.js.ordered_consumer(STREAM, ack_policy="explicit"), V, "ack_policy"),
    "Stream.create_consumer ack_wait str": (
        lambda e: e.stream.create_consumer(durable_name="D", ack_wait="5s"), T, "ack_wait"),
    "Stream.consumer name with star": (lambda e: e.stream.consumer("C*"), V, "name"),
    "Stream.delete_consumer name int": (lambda e: e.stream.delete_consumer(3), T, "name"),
    # --- publishing ---------------------------------------------------------------------------
    "publish subject None": (lambda e: e.js.publish(None, b"x"), T, "subject"),
    "publish subject with space": (lambda e: e.js.publish("badin.a b", b"x"), V, "subject"),
    "publish subject empty": (lambda e: e.js.publish("", b"x"), V, "subject"),
    "publish data int": (lambda e: e.js.publish("badin.a", 5), T, "data"),
    "publish data over max_payload": (lambda e: e.js.publish("badin.a", _oversize(e)), V, "data"),
    "publish data plus headers over max_payload": (
        lambda e: e.js.publish("badin.a", b"x" * (e.max_payload - 10), msg_id="m" * 20), V, "data|max_payload"),
    "publish headers not a mapping": (lambda e: e.js.publish("badin.a", b"x", headers=[("K", "v")]), T, "headers"),
    "publish headers value int": (lambda e: e.js.publish("badin.a", b"x", headers={"K": 1}), T, "header"),
    "publish msg_id int": (lambda e: e.js.publish("badin.a", b"x", msg_id=5), T, "msg_id"),
    "publish msg_id empty": (lambda e: e.js.publish("badin.a", b"x", msg_id=""), (T, V), "msg_id"),
    "publish msg_id with CRLF": (lambda e: e.js.publish("badin.a", b"x", msg_id="a\r\nb"), V, "msg_id|Nats-Msg-Id"),
    "publish expected_stream with dot": (
        lambda e: e.js.publish("badin.a", b"x", expected_stream="A.B"), V, "expected_stream"),
    "publish expected_stream int": (lambda e: e.js.publish("badin.a", b"x", expected_stream=1), T, "expected_stream"),
    "publish expected_last_seq negative": (
        lambda e: e.js.publish("badin.a", b"x", expected_last_seq=-1), V, "expected_last_seq"),
    "publish expected_last_seq str": (
        lambda e: e.js.publish("badin.a", b"x", expected_last_seq="3"), T, "expected_last_seq"),
    "publish expected_last_seq bool": (
        lambda e: e.js.publish("badin.a", b"x", expected_last_seq=True), T, "expected_last_seq"),
    "publish expected_last_subject_seq float": (
        lambda e: e.js.publish("badin.a", b"x", expected_last_subject_seq=1.5), T, "expected_last_subject_seq"),
    "publish expected_last_msg_id int": (
        lambda e: e.js.publish("badin.a", b"x", expected_last_msg_id=9), T, "expected_last_msg_id"),
    "publish timeout zero": (lambda e: e.js.publish("badin.a", b"x", timeout=0), V, "timeout"),
    "publish timeout str": (lambda e: e.js.publish("badin.a", b"x", timeout="1"), T, "timeout"),
    "publish_async subject with space": (lambda e: e.js.publish_async("badin.a b", b"x"), V, "subject"),
    "publish_async data dict": (lambda e: e.js.publish_async("badin.a", {"k": 1}), T, "data"),
    "publish_async data over max_payload": (lambda e: e.js.publish_async("badin.a", _oversize(e)), V, "data"),
    "publish_async msg_id int": (lambda e: e.js.publish_async("badin.a", b"x", msg_id=1), T, "msg_id"),
    "publish_async expected_last_seq negative": (
        lambda e: e.js.publish_async("badin.a", b"x", expected_last_seq=-2), V, "expected_last_seq"),
    "publish_async timeout negative": (lambda e: e.js.publish_async("badin.a", b"x", timeout=-1), V, "timeout"),
    "publish_async_complete timeout negative": (lambda e: e.js.publish_async_complete(timeout=-1), V, "timeout"),
    # --- Stream -------------------------------------------------------------------------------
    "Stream.purge subject with space": (lambda e: e.stream.purge(subject="badin.a b"), V, "subject"),
    "Stream.purge subject int": (lambda e: e.stream.purge(subject=5), T, "subject"),
    "Stream.purge sequence zero": (lambda e: e.stream.purge(sequence=0), V, "sequence"),
    "Stream.purge sequence str": (lambda e: e.stream.purge(sequence="5"), T, "sequence"),
    "Stream.purge keep negative": (lambda e: e.stream.purge(keep=-1), V, "keep"),
    "Stream.purge sequence and keep": (lambda e: e.stream.purge(sequence=2, keep=1), V, "sequence.*keep"),
    "Stream.get_msg seq zero": (lambda e: e.stream.get_msg(0), V, "seq"),
    "Stream.get_msg seq negative": (lambda e: e.stream.get_msg(-3), V, "seq"),
    "Stream.get_msg seq str": (lambda e: e.stream.get_msg("1"), T, "seq"),
    "Stream.get_msg seq bool": (lambda e: e.stream.get_msg(True), T, "seq"),
    "Stream.get_msg seq float": (lambda e: e.stream.get_msg(1.0), T, "seq"),
    "Stream.get_msg timeout zero": (lambda e: e.stream.get_msg(1, timeout=0), V, "timeout"),
    "Stream.get_last_msg subject None": (lambda e: e.stream.get_last_msg(None), T, "subject"),
    "Stream.get_last_msg subject with space": (lambda e: e.stream.get_last_msg("badin.a b"), V, "subject"),
    "Stream.delete_msg seq zero": (lambda e: e.stream.delete_msg(0), V, "seq"),
    "Stream.delete_msg seq str": (lambda e: e.stream.delete_msg("1"), T, "seq"),
    "Stream.delete_msg erase str": (lambda e: e.stream.delete_msg(1, erase="yes"), T, "erase"),
    "Stream.info timeout negative": (lambda e: e.stream.info(timeout=-1), V, "timeout"),
    # --- Consumer -----------------------------------------------------------------------------
    "fetch max_messages zero": (lambda e: e.consumer.fetch(0), V, "max_messages"),
    "fetch max_messages negative": (lambda e: e.consumer.fetch(-1), V, "max_messages"),
    "fetch max_messages str": (lambda e: e.consumer.fetch("10"), T, "max_messages"),
    "fetch max_messages float": (lambda e: e.consumer.fetch(2.5), T, "max_messages"),
    "fetch neither max_messages nor max_bytes": (lambda e: e.consumer.fetch(), V, "max_messages"),
    "fetch max_messages and max_bytes": (lambda e: e.consumer.fetch(1, max_bytes=1000), V, "max_bytes"),
    "fetch max_bytes zero": (lambda e: e.consumer.fetch(max_bytes=0), V, "max_bytes"),
    "fetch expires zero": (lambda e: e.consumer.fetch(1, expires=0), V, "expires"),
    "fetch expires negative": (lambda e: e.consumer.fetch(1, expires=-1), V, "expires"),
    "fetch expires str": (lambda e: e.consumer.fetch(1, expires="1s"), T, "expires"),
    "fetch idle_heartbeat above half of expires": (
        lambda e: e.consumer.fetch(1, expires=10, idle_heartbeat=6), V, "idle_heartbeat"),
    "fetch idle_heartbeat negative": (lambda e: e.consumer.fetch(1, idle_heartbeat=-1), V, "idle_heartbeat"),
    "fetch timeout negative": (lambda e: e.consumer.fetch(1, timeout=-1), V, "timeout"),
    "fetch_no_wait max_messages zero": (lambda e: e.consumer.fetch_no_wait(0), V, "max_messages"),
    "fetch_no_wait neither limit": (lambda e: e.consumer.fetch_no_wait(), V, "max_messages"),
    "fetch_no_wait max_bytes str": (lambda e: e.consumer.fetch_no_wait(max_bytes="1k"), T, "max_bytes"),
    "next timeout zero": (lambda e: e.consumer.next(timeout=0), V, "timeout"),
    "next timeout negative": (lambda e: e.consumer.next(timeout=-1), V, "timeout"),
    "next timeout None": (lambda e: e.consumer.next(timeout=None), V, "timeout"),
    "next timeout str": (lambda e: e.consumer.next(timeout="1"), T, "timeout"),
    "next timeout list": (lambda e: e.consumer.next(timeout=[1]), T, "timeout"),
    "messages max_messages zero": (lambda e: e.consumer.messages(max_messages=0), V, "max_messages"),
    "messages max_messages and max_bytes": (
        lambda e: e.consumer.messages(max_messages=10, max_bytes=1000), V, "max_bytes"),
    "messages expires below one second": (lambda e: e.consumer.messages(expires=0.5), V, "expires"),
    "messages idle_heartbeat above half of expires": (
        lambda e: e.consumer.messages(expires=10, idle_heartbeat=6), V, "idle_heartbeat"),
    "messages idle_heartbeat below half a second": (
        lambda e: e.consumer.messages(idle_heartbeat=0.1), V, "idle_heartbeat"),
    "messages threshold_messages above max_messages": (
        lambda e: e.consumer.messages(max_messages=10, threshold_messages=11), V, "threshold_messages"),
    "messages threshold_bytes with max_messages": (
        lambda e: e.consumer.messages(max_messages=10, threshold_bytes=5), V, "threshold_bytes"),
    "messages threshold_bytes above max_bytes": (
        lambda e: e.consumer.messages(max_bytes=100, threshold_bytes=101), V, "threshold_bytes"),
    "consume handler None": (lambda e: e.consumer.consume(None), T, "handler"),
    "consume handler not callable": (lambda e: e.consumer.consume("print"), T, "handler"),
    "consume workers zero": (lambda e: e.consumer.consume(_handler, workers=0), V, "workers"),
    "consume workers str": (lambda e: e.consumer.consume(_handler, workers="2"), (T, V), "workers"),
    "consume error_handler not callable": (lambda e: e.consumer.consume(_handler, error_handler=5), T,
                                           "error_handler"),
    "consume max_messages negative": (lambda e: e.consumer.consume(_handler, max_messages=-5), V, "max_messages"),
    "consume max_bytes str": (lambda e: e.consumer.consume(_handler, max_bytes="1MB"), T, "max_bytes"),
    "consume expires below one second": (lambda e: e.consumer.consume(_handler, expires=0.2), V, "expires"),
    "consume idle_heartbeat above half of expires": (
        lambda e: e.consumer.consume(_handler, expires=4, idle_heartbeat=3), V, "idle_heartbeat"),
    "consume threshold_messages above max_messages": (
        lambda e: e.consumer.consume(_handler, max_messages=4, threshold_messages=5), V, "threshold_messages"),
    "Consumer.info timeout zero": (lambda e: e.consumer.info(timeout=0), V, "timeout"),
    # --- Msg ----------------------------------------------------------------------------------
    "Msg.nak delay negative": (lambda e: e.msg.nak(delay=-1), V, "delay"),
    "Msg.nak delay negative timedelta": (lambda e: e.msg.nak(delay=dt.timedelta(seconds=-1)), V, "delay"),
    "Msg.nak delay str": (lambda e: e.msg.nak(delay="5s"), T, "delay"),
    "Msg.nak delay bool": (lambda e: e.msg.nak(delay=True), T, "delay"),
    "Msg.term reason int": (lambda e: e.msg.term(reason=3), T, "reason"),
    "Msg.term reason bytes": (lambda e: e.msg.term(reason=b"bad"), T, "reason"),
    "Msg.double_ack timeout negative": (lambda e: e.msg.double_ack(timeout=-1), V, "timeout"),
    "Msg.double_ack timeout str": (lambda e: e.msg.double_ack(timeout="1"), T, "timeout"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_bad_argument_is_refused_naming_it_before_anything_is_sent_and_the_client_stays_usable(env, case):
    call, exc, match = CASES[case]
    start = env.spy.sync(env.js)
    with pytest.raises(exc, match=match):
        call(env)
    end = env.spy.sync(env.js)
    assert env.spy.sent_between(start, end) == [], f"{case}: the refused call sent something to the server"
    # Still usable: a publish is stored and an API call answers.
    ack = env.js.publish("badin.after", case.encode())
    assert ack.stream == STREAM and not ack.duplicate
    assert env.js.account_info().streams >= 1
    # The message the Msg rows act on is still unacknowledged: a refused ack sent nothing.
    assert not env.msg.acked


@pytest.mark.timeout(30)
def test_the_wire_spy_sees_every_kind_of_send_the_table_guards(env):
    # The table's negative checks rely on the spy; prove it sees an API request,
    # a JetStream publish, a core publish and a pull, in order.
    start = env.spy.sync(env.js)
    env.js.publish("badin.spy", b"1")
    env.client.publish("elsewhere.spy", b"2")
    list(env.consumer.fetch_no_wait(1))
    with pytest.raises(jss.StreamNotFoundError):
        env.js.stream("NOSUCHSTREAM")
    end = env.spy.sync(env.js)
    assert env.spy.sent_between(start, end) == [
        "badin.spy", "elsewhere.spy", f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.C", "$JS.API.STREAM.INFO.NOSUCHSTREAM"]


@pytest.mark.timeout(30)
def test_a_refused_nak_leaves_the_message_ackable(env, nats_server):
    # A throwaway message of its own, so the shared one stays unacked for the table.
    env.js.publish("badin.nak", b"n")
    consumer = env.stream.create_consumer(durable_name="NAK", filter_subject="badin.nak", ack_wait=300.0)
    try:
        msg = consumer.next(timeout=2.0)
        with pytest.raises(ValueError, match="delay"):
            msg.nak(delay=-5)
        assert not msg.acked
        msg.double_ack(timeout=5.0)
        assert msg.acked
        assert consumer.info().num_ack_pending == 0
    finally:
        consumer.delete()


# --- connect() ----------------------------------------------------------------------------------

SEED_ONLY = "-----BEGIN USER NKEY SEED-----\nSUAFAKESEEDFORATESTONLYNOTAREALKEY\n" \
    "------END USER NKEY SEED------\n"

# (call(url, tmp_path), exception, match)
CONNECT_CASES = {
    "servers int": (lambda url, tmp: jss.connect(42), T, "servers"),
    "servers empty list": (lambda url, tmp: jss.connect([]), V, "servers"),
    "servers empty string": (lambda url, tmp: jss.connect(""), V, "servers"),
    "servers list with a non-str": (lambda url, tmp: jss.connect([url, 5]), (T, V), "servers"),
    # nats-py would take "http" for a host name and report a DNS failure.
    "servers with an http:// URL": (lambda url, tmp: jss.connect(url.replace("nats://", "http://")), V,
                                    r"servers: 'http://.*nats://, tls://, ws:// or wss://"),
    "servers list with an https:// URL": (lambda url, tmp: jss.connect([url, "https://u:secret@example.com"]), V,
                                          r"servers: 'https://u:\*\*\*@example.com'"),
    "timeout zero": (lambda url, tmp: jss.connect(url, timeout=0), V, "timeout"),
    "timeout negative": (lambda url, tmp: jss.connect(url, timeout=-1), V, "timeout"),
    "timeout str": (lambda url, tmp: jss.connect(url, timeout="5"), T, "timeout"),
    "tls not an SSLContext": (lambda url, tmp: jss.connect(url, tls=True), T, "tls"),
    "tls a protocol number": (lambda url, tmp: jss.connect(url, tls=ssl.PROTOCOL_TLS_CLIENT), T, "tls"),
    "error_cb not callable": (lambda url, tmp: jss.connect(url, error_cb="log"), T, "error_cb"),
    "error_cb a coroutine function": (lambda url, tmp: jss.connect(url, error_cb=_async_cb), T, "error_cb"),
    "closed_cb not callable": (lambda url, tmp: jss.connect(url, closed_cb=1), T, "closed_cb"),
    "nkeys_seed_str malformed": (lambda url, tmp: jss.connect(url, nkeys_seed_str="SUNOTASEED"), V, "nkeys_seed"),
    "nkeys_seed_str int": (lambda url, tmp: jss.connect(url, nkeys_seed_str=5), T, "nkeys_seed_str"),
    "nkeys_seed missing file": (
        lambda url, tmp: jss.connect(url, nkeys_seed=str(tmp / "missing.nk")), V, "nkeys_seed"),
    "user_credentials missing file": (
        lambda url, tmp: jss.connect(url, user_credentials=str(tmp / "missing.creds")), V, "user_credentials"),
    # nats-py would spin forever on the event loop looking for the JWT block of this file.
    "user_credentials without a JWT": (
        lambda url, tmp: jss.connect(url, user_credentials=_write(tmp / "seed-only.creds", SEED_ONLY)), V,
        "user_credentials"),
    "user_credentials int": (lambda url, tmp: jss.connect(url, user_credentials=7), T, "user_credentials"),
    "unknown option": (lambda url, tmp: jss.connect(url, colour="red"), T, "colour"),
}


def _write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


async def _async_cb(*args):  # pragma: no cover - never called
    pass


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(CONNECT_CASES), ids=list(CONNECT_CASES))
def test_connect_refuses_a_bad_option_naming_it_and_leaves_nothing_running(nats_server, tmp_path, case):
    call, exc, match = CONNECT_CASES[case]
    with pytest.raises(exc, match=match):
        call(nats_server.url, tmp_path)
    # (the autouse fixture checks that no loop thread was left behind)
    with jss.connect(nats_server.url, timeout=5.0) as client:
        client.publish("connect.after", b"ok")
        client.flush()
