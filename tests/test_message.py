# Msg: parse_metadata as pure unit tests of both ADR-15 ack-subject formats, then the
# acknowledgements against a real nats-server (ack, nak, nak with delay, in_progress, term,
# double_ack, the already-acked guard, concurrent acks, closed clients) and msg.size as the
# server counts it. Code under test: message.py (delivery through pull.py's fetch).
from __future__ import annotations

import datetime as dt
import threading
import time
import uuid

import pytest

import jetstream_sync as jss
from conftest import wait_for
from jetstream_sync._protocol import (
    ACK_CONSUMER_SEQ, ACK_PENDING, ACK_STREAM_SEQ, ACK_TIMESTAMP_NS, parse_ack_subject, wire_consumer_seq,
)
from jetstream_sync.message import Msg, SequencePair, parse_metadata

TS_NANOS = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z


# -- parse_metadata (pure) ----------------------------------------------------------------------


class TestParseMetadata:
    def test_the_nine_token_format_gives_every_field(self):
        md = parse_metadata(f"$JS.ACK.ORDERS.worker.3.42.7.{TS_NANOS}.5")
        assert md.stream == "ORDERS"
        assert md.consumer == "worker"
        assert md.num_delivered == 3
        assert md.sequence == jss.SequencePair(stream=42, consumer=7)
        assert md.sequence.stream == 42 and md.sequence.consumer == 7
        assert md.num_pending == 5
        assert md.domain is None

    def test_the_twelve_token_format_carries_the_domain(self):
        md = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.3.42.7.{TS_NANOS}.5.r4nd0m")
        assert md.domain == "hub"
        assert md.stream == "ORDERS"
        assert md.consumer == "worker"
        assert md.num_delivered == 3
        assert md.sequence == jss.SequencePair(stream=42, consumer=7)
        assert md.num_pending == 5

    def test_an_underscore_domain_means_no_domain(self):
        md = parse_metadata(f"$JS.ACK._.ACCHASH.ORDERS.worker.1.2.3.{TS_NANOS}.0.r4nd0m")
        assert md.domain is None
        assert md.stream == "ORDERS"

    def test_eleven_tokens_without_the_random_token_are_accepted(self):
        md = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.2.3.{TS_NANOS}.0")
        assert (md.domain, md.stream, md.consumer, md.sequence.stream) == ("hub", "ORDERS", "worker", 2)

    def test_tokens_beyond_twelve_are_ignored(self):
        md = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.2.3.{TS_NANOS}.0.r4nd0m.future")
        assert (md.stream, md.num_pending) == ("ORDERS", 0)

    @pytest.mark.parametrize(
        "reply",
        [
            f"$JS.ACK.hub.ORDERS.worker.1.2.3.{TS_NANOS}.0",  # 10 tokens
            f"$JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}",  # 8 tokens
            "$JS.ACK.ORDERS",
            "$JS.ACK",
            "_INBOX.abc",
            f"$JS.NAK.ORDERS.worker.1.2.3.{TS_NANOS}.0",  # not an ack subject
            f"JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}.0",
            "",
        ],
        ids=["10-tokens", "8-tokens", "3-tokens", "2-tokens", "inbox", "not-ACK", "not-$JS", "empty"],
    )
    def test_a_subject_of_the_wrong_shape_is_rejected(self, reply):
        with pytest.raises(ValueError):
            parse_metadata(reply)

    @pytest.mark.parametrize(
        "reply",
        [
            f"$JS.ACK.ORDERS.worker.x.2.3.{TS_NANOS}.0",
            f"$JS.ACK.ORDERS.worker.1.two.3.{TS_NANOS}.0",
            f"$JS.ACK.ORDERS.worker.1.2.three.{TS_NANOS}.0",
            "$JS.ACK.ORDERS.worker.1.2.3.yesterday.0",
            f"$JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}.none",
            f"$JS.ACK.hub.ACC.ORDERS.worker.1.2.3.{TS_NANOS}.lots.r4nd0m",
        ],
        ids=["delivered", "stream-seq", "consumer-seq", "timestamp", "pending", "pending-12-tokens"],
    )
    def test_a_non_numeric_field_is_rejected(self, reply):
        with pytest.raises(ValueError):
            parse_metadata(reply)

    def test_the_timestamp_is_timezone_aware_utc(self):
        ts = parse_metadata(f"$JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}.0").timestamp
        assert ts.tzinfo is not None
        assert ts.utcoffset() == dt.timedelta(0)
        assert ts.replace(tzinfo=dt.timezone.utc) == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.timezone.utc)
        assert ts.microsecond == 123456

    def test_the_timestamp_keeps_its_nanoseconds(self):
        md = parse_metadata(f"$JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}.0")
        assert md.timestamp_ns == TS_NANOS
        assert md.timestamp.nanosecond == TS_NANOS % 1000 and md.timestamp.timestamp_ns() == TS_NANOS

    def test_the_timestamp_of_the_twelve_token_format_is_parsed_the_same_way(self):
        nine = parse_metadata(f"$JS.ACK.ORDERS.worker.1.2.3.{TS_NANOS}.0").timestamp
        twelve = parse_metadata(f"$JS.ACK.hub.ACC.ORDERS.worker.1.2.3.{TS_NANOS}.0.r4nd0m").timestamp
        assert nine == twelve


class TestParseAckSubject:
    """The one ack-subject parser: the tuple the pull engines, the ordered consumer and Spark read."""

    def test_str_and_wire_bytes_give_the_same_numbers(self):
        reply = f"$JS.ACK.hub.ACC.ORDERS.worker.3.42.7.{TS_NANOS}.5.r4nd0m"
        text = parse_ack_subject(reply)
        wire = parse_ack_subject(reply.encode())
        assert text == ("ORDERS", "worker", 3, 42, 7, TS_NANOS, 5, "hub")
        assert wire == (b"ORDERS", b"worker", 3, 42, 7, TS_NANOS, 5, b"hub")
        assert (text[ACK_STREAM_SEQ], text[ACK_CONSUMER_SEQ], text[ACK_PENDING]) == (42, 7, 5)
        assert text[ACK_TIMESTAMP_NS] == TS_NANOS

    def test_an_underscore_domain_in_bytes_means_no_domain(self):
        assert parse_ack_subject(f"$JS.ACK._.ACC.S.c.1.2.3.{TS_NANOS}.0.tok".encode())[-1] is None

    @pytest.mark.parametrize("reply", [b"_INBOX.abc", b"$JS.ACK.S.c.1.x.3.4.0", b""])
    def test_wire_bytes_that_are_not_an_ack_subject_are_rejected(self, reply):
        with pytest.raises(ValueError):
            parse_ack_subject(reply)

    @pytest.mark.parametrize("reply", [
        f"$JS.ACK.ORDERS.worker.3.42.7.{TS_NANOS}.5",
        f"$JS.ACK.hub.ACC.ORDERS.worker.3.42.7.{TS_NANOS}.5",
        f"$JS.ACK.hub.ACC.ORDERS.worker.3.42.7.{TS_NANOS}.5.r4nd0m",
        f"$JS.ACK.hub.ACC.ORDERS.worker.3.42.7.{TS_NANOS}.5.r4nd0m.future",
        f"$JS.ACK.ORDERS.c.1.2.{2 ** 64 - 1}.{TS_NANOS}.0",
    ], ids=["9-tokens", "11-tokens", "12-tokens", "13-tokens", "huge"])
    def test_the_loop_threads_consumer_sequence_reader_agrees_with_the_parser(self, reply):
        assert wire_consumer_seq(reply.encode()) == parse_ack_subject(reply)[ACK_CONSUMER_SEQ]

    @pytest.mark.parametrize("reply", [b"$JS.ACK.S.c.1.2.x.4.0", b"$JS.ACK.h.A.S.c.1.2.x.4.0", b"$JS.ACK.S.c.1"])
    def test_the_consumer_sequence_reader_rejects_what_is_not_a_number(self, reply):
        with pytest.raises(ValueError):
            wire_consumer_seq(reply)

    def test_a_message_parses_its_reply_once_and_builds_metadata_from_it(self):
        msg = Msg(None, "orders.new", f"$JS.ACK.ORDERS.worker.3.42.7.{TS_NANOS}.5", b"x")
        fields = msg._ack_fields()
        assert msg._ack_fields() is fields
        assert msg.metadata == parse_metadata(msg.reply)
        assert msg.metadata.sequence == SequencePair(stream=42, consumer=7)

    def test_metadata_numbers_are_the_metadata_numbers_from_the_same_single_parse(self):
        for reply in (f"$JS.ACK.ORDERS.worker.3.42.7.{TS_NANOS}.5",
                      f"$JS.ACK.hub.ACC.ORDERS.worker.3.42.7.{TS_NANOS}.5.r4nd0m"):
            msg = Msg(None, "orders.new", reply, b"x")
            seq, delivered, pending, ts_ns = msg.metadata_numbers()
            assert (seq, delivered, pending, ts_ns) == (42, 3, 5, TS_NANOS)
            fields = msg._ack_fields()
            assert msg.metadata_numbers() == (seq, delivered, pending, ts_ns) and msg._ack_fields() is fields
            md = msg.metadata
            assert (md.sequence.stream, md.num_delivered, md.num_pending, md.timestamp_ns) == (seq, delivered,
                                                                                               pending, ts_ns)

    def test_metadata_numbers_of_a_message_without_an_ack_subject_raise(self):
        with pytest.raises(ValueError, match="no reply subject"):
            Msg(None, "orders.new", "", b"x").metadata_numbers()
        with pytest.raises(ValueError, match="not a JetStream ack subject"):
            Msg(None, "orders.new", "_INBOX.abc", b"x").metadata_numbers()

    def test_a_message_without_an_ack_subject_raises_on_metadata(self):
        with pytest.raises(ValueError, match="no reply subject"):
            Msg(None, "orders.new", "", b"x").metadata


# -- against a server ---------------------------------------------------------------------------


def unique(prefix: str = "M") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10].upper()}"


class Setup:
    """A stream with ``count`` messages and a durable explicit-ack pull consumer on it."""

    def __init__(self, js, count: int, **consumer_fields) -> None:
        self.js = js
        self.name = unique()
        self.subject = f"{self.name}.x"
        self.stream = js.create_stream(name=self.name, subjects=[f"{self.name}.>"], storage="memory")
        for i in range(count):
            js.publish_async(self.subject, f"m{i + 1}")
        js.publish_async_complete(timeout=10)
        self.consumer = js.create_consumer(self.name, durable_name="c", ack_policy="explicit", **consumer_fields)

    def fetch(self, n: int = 1, expires: float = 2.0) -> list:
        return list(self.consumer.fetch(n, expires=expires))

    def one(self) -> jss.Msg:
        msgs = self.fetch(1)
        assert len(msgs) == 1, "expected a message"
        return msgs[0]

    def info(self) -> jss.ConsumerInfo:
        return self.consumer.info()


@pytest.fixture
def setup(js):
    return lambda count=1, **fields: Setup(js, count, **fields)


def test_a_fetched_message_carries_its_metadata(setup):
    s = setup(2)
    msg = s.one()
    md = msg.metadata
    assert (md.stream, md.consumer) == (s.name, "c")
    assert md.sequence == jss.SequencePair(stream=1, consumer=1)
    assert md.num_delivered == 1
    assert md.num_pending == 1
    assert md.domain is None
    assert md.timestamp.tzinfo is not None
    assert abs(dt.datetime.now(dt.timezone.utc) - md.timestamp) < dt.timedelta(minutes=1)
    assert s.stream.get_msg(1).time == md.timestamp


@pytest.mark.timeout(30)
def test_ack_advances_the_consumers_ack_floor(setup):
    s = setup(2)
    msg = s.one()
    assert s.info().num_ack_pending == 1
    msg.ack()
    assert msg.acked
    info = wait_for(lambda: (i := s.info()).ack_floor.stream_seq == 1 and i, what="ack floor at 1")
    assert info.num_ack_pending == 0
    assert info.ack_floor.consumer_seq == 1


@pytest.mark.timeout(30)
def test_nak_has_the_message_redelivered_at_once(setup):
    s = setup(1)
    first = s.one()
    first.nak()
    again = s.one()
    assert again.data == first.data == b"m1"
    assert again.metadata.sequence.stream == 1
    assert again.metadata.num_delivered == 2
    assert again.metadata.sequence.consumer == 2
    again.ack()


@pytest.mark.timeout(30)
def test_nak_with_a_delay_holds_back_redelivery_until_the_delay_passes(setup):
    s = setup(1)
    msg = s.one()
    nakked_at = time.monotonic()
    msg.nak(delay=1)
    assert s.fetch(1, expires=0.5) == [], "redelivered before the nak delay"
    redelivered = s.fetch(1, expires=3)
    assert time.monotonic() - nakked_at >= 0.9
    assert len(redelivered) == 1, "not redelivered after the nak delay"
    again = redelivered[0]
    assert again.metadata.sequence.stream == 1
    assert again.metadata.num_delivered == 2


def test_nak_accepts_a_timedelta_delay_and_rejects_a_bad_one(setup):
    s = setup(3)
    a, b, c = s.fetch(3)
    a.nak(delay=dt.timedelta(seconds=5))
    with pytest.raises(ValueError, match="delay"):
        b.nak(delay=-1)
    with pytest.raises(TypeError, match="delay"):
        b.nak(delay="soon")
    assert not b.acked  # a rejected argument sends nothing and does not use up the ack
    b.ack()
    c.ack()


@pytest.mark.timeout(30)
def test_in_progress_can_repeat_and_keeps_the_message_past_its_ack_wait(setup):
    s = setup(1, ack_wait=1.0)
    msg = s.one()
    started = time.monotonic()
    # Hold the message for about twice its ack wait, telling the server we are still on it.
    while time.monotonic() - started < 2.0:
        msg.in_progress()
        time.sleep(0.3)
    assert not msg.acked
    info = s.info()
    assert info.num_redelivered == 0
    assert info.num_ack_pending == 1
    assert s.fetch(1, expires=0.3) == [], "redelivered despite in_progress"
    msg.ack()
    msg.in_progress()  # still allowed after a terminal ack
    msg.in_progress()
    wait_for(lambda: s.info().ack_floor.stream_seq == 1, what="ack floor at 1")


@pytest.mark.timeout(30)
def test_term_means_the_message_is_never_redelivered(setup):
    s = setup(1, ack_wait=0.5)
    msg = s.one()
    msg.term()
    assert msg.acked
    wait_for(lambda: s.info().num_ack_pending == 0, what="the term to land")
    # Well past ack_wait: an un-acked message would have come back by now.
    assert s.fetch(1, expires=1.5) == []
    assert s.info().num_redelivered == 0


@pytest.mark.timeout(30)
def test_term_with_a_reason_reaches_the_servers_advisory(js, setup):
    s = setup(1, ack_wait=0.5)
    adv_name = unique("ADV")
    advisories = js.create_stream(
        name=adv_name, storage="memory",
        subjects=[f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{s.name}.c"])
    msg = s.one()
    msg.term(reason="bad\r\npayload")  # CR/LF cannot travel in a protocol line: they become spaces
    wait_for(lambda: advisories.info().state.messages == 1, what="the termination advisory")
    advisory = advisories.get_msg(1).data.decode()
    assert '"reason":"bad  payload"' in advisory
    assert s.fetch(1, expires=1.5) == []


def test_term_rejects_a_non_str_reason(setup):
    s = setup(1)
    msg = s.one()
    with pytest.raises(TypeError, match="reason"):
        msg.term(reason=42)
    assert not msg.acked
    msg.term()


@pytest.mark.timeout(30)
def test_double_ack_returns_once_the_server_has_the_ack(setup):
    s = setup(1)
    msg = s.one()
    msg.double_ack(timeout=5)
    assert msg.acked
    # No waiting: the server confirmed the ack before double_ack returned.
    info = s.info()
    assert info.ack_floor.stream_seq == 1
    assert info.num_ack_pending == 0


TERMINAL = ["ack", "nak", "term", "double_ack"]


@pytest.mark.parametrize("first", TERMINAL)
def test_a_second_terminal_ack_raises_message_already_acked(setup, first):
    s = setup(1)
    msg = s.one()
    getattr(msg, first)()
    for second in TERMINAL:
        with pytest.raises(jss.MessageAlreadyAckedError):
            getattr(msg, second)()
    msg.in_progress()  # always allowed
    assert msg.acked


@pytest.mark.timeout(30)
def test_concurrent_acks_of_one_message_let_exactly_one_through(setup):
    s = setup(1)
    msg = s.one()
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def ack() -> None:
        barrier.wait(5)
        try:
            msg.ack()
            result = "ok"
        except jss.MessageAlreadyAckedError:
            result = "already"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=ack, name=f"test-acker-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(outcomes) == ["already"] * 7 + ["ok"]


@pytest.mark.timeout(60)
def test_acks_from_eight_threads_on_different_messages_all_land(setup):
    total = 800
    s = setup(total)
    msgs = s.fetch(total, expires=5)
    assert len(msgs) == total
    assert s.info().num_ack_pending == total
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def ack_share(share: list) -> None:
        try:
            barrier.wait(5)
            for m in share:
                m.ack()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ack_share, args=(msgs[i::8],), name=f"test-acker-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert all(m.acked for m in msgs)
    info = wait_for(lambda: (i := s.info()).num_ack_pending == 0 and i, timeout=10, what="every ack to land")
    assert info.ack_floor.stream_seq == total
    assert info.num_redelivered == 0


def test_ack_on_a_message_without_a_reply_subject_raises(client):
    reply = client.request("$JS.API.INFO", b"")  # the API's answer has no reply subject
    assert reply.reply == ""
    for method in ("ack", "nak", "term", "in_progress", "double_ack"):
        with pytest.raises(jss.JetStreamError) as info:
            getattr(reply, method)()
        assert not isinstance(info.value, jss.MessageAlreadyAckedError)
        assert "reply" in str(info.value)
    assert not reply.acked
    with pytest.raises(ValueError):
        reply.metadata


@pytest.mark.timeout(30)
def test_acks_after_the_client_closed_raise_client_closed(nats_server, setup):
    s = setup(2)
    other = jss.connect(nats_server.url, name="closing")
    consumer = other.jetstream().consumer(s.name, "c")
    msgs = list(consumer.fetch(2, expires=2))
    assert len(msgs) == 2
    other.close()
    for msg in msgs:
        for method in ("ack", "nak", "term", "in_progress", "double_ack"):
            with pytest.raises(jss.ClientClosedError):
                getattr(msg, method)()
        assert not msg.acked  # a failed ack does not count as sent


@pytest.mark.timeout(30)
def test_msg_size_counts_subject_reply_headers_and_data_as_the_server_does(js, setup):
    s = setup(0)
    headers = {"X-Tag": ["a", "b"]}
    for _ in range(3):
        js.publish(s.subject, b"0123456789", headers=headers)
    raw_headers = b"NATS/1.0\r\nX-Tag: a\r\nX-Tag: b\r\n\r\n"

    # Three consumers with names of equal length: every delivery has a reply of equal length.
    sizer, two, one = (js.create_consumer(s.name, durable_name=n, ack_policy="none") for n in ("s", "t", "u"))
    msg = list(sizer.fetch(1, expires=2))[0]
    size = len(msg.subject.encode()) + len(msg.reply.encode()) + len(raw_headers) + len(msg.data)
    assert msg.size == size

    # The server stops a max_bytes pull at the first message that does not fit, by its own count.
    exact = list(two.fetch(max_bytes=2 * size, expires=2))
    assert len(exact) == 2
    assert [m.size for m in exact] == [size, size]
    short = list(one.fetch(max_bytes=2 * size - 1, expires=2))
    assert len(short) == 1


def test_msg_size_of_a_message_without_headers_is_subject_reply_and_data(setup):
    s = setup(1)
    msg = s.one()
    assert msg.size == len(s.subject) + len(msg.reply) + len(b"m1")
    assert msg.headers == {}
