# Charter: batch direct gets (ADR-31) against a real nats-server: stream.get_batch by sequence,
# subject filter (wildcards), start time and max_bytes, stream.get_last_for with several subjects
# and a point in time; what comes back checked against what the server stored (one direct get and
# STREAM.MSG.GET per message); a range larger than one request (the requests counted with the API
# spy, the next one sent only as the iterator is read); deleted messages skipped, 404 as an empty
# iterator, 503 and a silent responder as errors; a single direct get left unanswered asked of the
# stream leader next; the argument, allow_direct and server-version
# checks made before anything is sent; nothing left subscribed by an iterator left unread.
from __future__ import annotations

import _thread
import gc
import json
import threading
import time
from datetime import datetime, timedelta, timezone

import attrs
import pytest

import jetstream_sync as jss
from jetstream_sync import _jsapi
from jetstream_sync._headers import decode_headers, encode_headers
from jetstream_sync._time import format_time, parse_time, time_from_parts, times_from_parts

from conftest import assert_sends_nothing, publish_n, wait_for


@pytest.fixture
def direct(js, name, subj):
    """A memory stream on ``<subj>.>`` that allows direct gets."""
    return js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory", allow_direct=True)


@pytest.fixture
def per_request(monkeypatch):
    """Set how many messages one request asks for (the default is 20,000)."""
    def set_to(n: int) -> None:
        monkeypatch.setattr(_jsapi, "BATCH_PER_REQUEST", n)
    return set_to


def seqs(msgs) -> list[int]:
    return [m.seq for m in msgs]


def direct_gets(spy, mark, name) -> list[str]:
    return [s for s in spy.since(mark) if s == f"$JS.API.DIRECT.GET.{name}"]


def stored(js, name, seq):
    """The message at ``seq`` as STREAM.MSG.GET has it (not a direct get)."""
    return js._jsapi.msg_get(name, seq=seq)


def fields(msg) -> tuple:
    headers = None if msg.headers is None else msg.headers.multi()
    return msg.seq, msg.subject, msg.data, headers, msg.time, msg.time.nanosecond


# --- get_batch ----------------------------------------------------------------------------------


def test_get_batch_reads_each_message_as_stored_from_the_first(js, direct, name, subj):
    js.publish(f"{subj}.a", b"one")
    js.publish(f"{subj}.b", b"two", headers={"X-Id": "2", "Many": ["a", "b"]})
    js.publish(f"{subj}.a", b"")
    js.publish(f"{subj}.c.d", b"\x00\xff" * 50, headers={"Nats-Msg-Id": "m4"})
    got = list(direct.get_batch(100))
    assert [fields(m) for m in got] == [fields(stored(js, name, s)) for s in (1, 2, 3, 4)]
    assert [fields(m) for m in got] == [fields(direct.get_msg(s)) for s in (1, 2, 3, 4)]
    assert got[1].headers == {"X-Id": "2", "Many": "a"} and got[1].headers.get_all("Many") == ["a", "b"]
    assert got[0].headers is None and got[2].data == b""
    assert all(isinstance(m, jss.StoredMsg) and m.time.tzinfo == timezone.utc for m in got)


def test_get_batch_stops_at_batch_and_starts_at_seq(js, direct, subj):
    publish_n(js, f"{subj}.a", 6)
    assert seqs(direct.get_batch(3)) == [1, 2, 3]
    assert [m.data for m in direct.get_batch(3, seq=4)] == [b"m3", b"m4", b"m5"]
    assert seqs(direct.get_batch(10, seq=5)) == [5, 6]
    assert seqs(direct.get_batch(1, seq=6)) == [6]


def test_get_batch_filters_by_subject_with_wildcards(js, direct, subj):
    for s in ("a", "b", "a", "c.d", "b", "a", "c.e"):
        js.publish(f"{subj}.{s}", s.encode())
    assert seqs(direct.get_batch(10, subject=f"{subj}.a")) == [1, 3, 6]
    assert seqs(direct.get_batch(10, subject=f"{subj}.a", seq=2)) == [3, 6]
    assert seqs(direct.get_batch(2, subject=f"{subj}.*")) == [1, 2]
    assert [(m.seq, m.subject) for m in direct.get_batch(10, subject=f"{subj}.c.>")] == [
        (4, f"{subj}.c.d"), (7, f"{subj}.c.e")]
    assert seqs(direct.get_batch(10, subject=f"{subj}.*", seq=4)) == [5, 6]


def test_get_batch_from_a_start_time_includes_the_message_stored_at_it(js, direct, subj):
    for i in range(5):
        js.publish(f"{subj}.{'ab'[i % 2]}", f"m{i}")  # one at a time: stored microseconds apart at least
    t4 = direct.get_msg(4).time
    assert seqs(direct.get_batch(10, start_time=t4)) == [4, 5]
    assert seqs(direct.get_batch(10, start_time=t4 - timedelta(microseconds=1))) == [4, 5]
    assert seqs(direct.get_batch(10, start_time=t4 + timedelta(microseconds=1))) == [5]
    assert seqs(direct.get_batch(10, start_time=t4, subject=f"{subj}.a")) == [5]
    assert seqs(direct.get_batch(10, start_time=datetime(2000, 1, 1, tzinfo=timezone.utc))) == [1, 2, 3, 4, 5]
    assert list(direct.get_batch(10, start_time=datetime.now(timezone.utc) + timedelta(hours=1))) == []


def test_max_bytes_counts_subject_stored_headers_and_data_and_ends_with_the_message_that_reaches_it(
        js, direct, subj, per_request):
    subject = f"{subj}.a"
    for i in range(10):
        js.publish(subject, b"0123456789")
    size = len(subject) + 10
    assert seqs(direct.get_batch(100, max_bytes=2 * size)) == [1, 2]
    assert seqs(direct.get_batch(100, max_bytes=2 * size + 1)) == [1, 2, 3]
    assert seqs(direct.get_batch(100, max_bytes=1)) == [1]
    assert seqs(direct.get_batch(2, max_bytes=5 * size)) == [1, 2]
    per_request(2)  # the limit holds across requests
    assert seqs(direct.get_batch(100, max_bytes=5 * size)) == [1, 2, 3, 4, 5]
    assert seqs(direct.get_batch(100, max_bytes=5 * size - 1, seq=3)) == [3, 4, 5, 6, 7]
    headers = {"X-Trace": ["a", "b"], "Other": "1"}
    js.publish(subject, b"0123456789", headers=headers)  # seq 11
    js.publish(subject, b"0123456789")  # seq 12
    with_headers = len(subject) + len(encode_headers(headers)) + 10
    assert seqs(direct.get_batch(100, seq=10, max_bytes=size + with_headers)) == [10, 11]
    assert seqs(direct.get_batch(100, seq=10, max_bytes=size + with_headers + 1)) == [10, 11, 12]


def test_a_range_larger_than_one_request_is_read_request_by_request_as_the_iterator_goes(
        js, direct, name, subj, api_spy, per_request):
    per_request(10)
    publish_n(js, f"{subj}.a", 100)
    mark = api_spy.mark(js)
    it = direct.get_batch(1000)
    api_spy.sync(js)
    assert direct_gets(api_spy, mark, name) == []  # nothing is sent before iteration starts
    first = next(it)
    assert first.seq == 1
    # The requests go ahead of the reader by one request's worth at most: not all ten at once.
    ahead = (_jsapi.AHEAD + 1) * 10
    wait_for(lambda: len(direct_gets(api_spy, mark, name)) == _jsapi.AHEAD + 1, 10, what="the requests ahead")
    api_spy.sync(js)
    assert len(direct_gets(api_spy, mark, name)) == _jsapi.AHEAD + 1
    assert it.received <= ahead
    rest = list(it)
    assert seqs([first, *rest]) == list(range(1, 101))
    api_spy.sync(js)
    assert len(direct_gets(api_spy, mark, name)) == 10  # the tenth says none pending
    mark = api_spy.mark(js)
    assert seqs(direct.get_batch(25, seq=3)) == list(range(3, 28))
    api_spy.sync(js)
    assert len(direct_gets(api_spy, mark, name)) == 3  # 10 + 10 + 5: stops at the batch asked for


def test_the_default_request_size_reads_twenty_five_thousand_messages_in_two_requests(js, direct, name, subj,
                                                                                      api_spy):
    publish_n(js, f"{subj}.a", 25_000)
    mark = api_spy.mark(js)
    it = direct.get_batch(50_000)
    assert next(it).data == b"m0"
    got = [m.seq for m in it]
    assert got == list(range(2, 25_001))
    api_spy.sync(js)
    assert len(direct_gets(api_spy, mark, name)) == 2


def test_deleted_messages_are_skipped_even_where_the_range_starts(js, direct, subj, per_request):
    publish_n(js, f"{subj}.a", 8)
    for seq in (1, 3, 4, 7):
        direct.delete_msg(seq)
    assert seqs(direct.get_batch(10)) == [2, 5, 6, 8]
    assert seqs(direct.get_batch(2, seq=3)) == [5, 6]
    per_request(1)
    assert seqs(direct.get_batch(10, seq=1)) == [2, 5, 6, 8]


def test_nothing_matched_is_an_empty_iterator(js, direct, subj):
    assert list(direct.get_batch(10)) == []
    publish_n(js, f"{subj}.a", 3)
    assert list(direct.get_batch(10, seq=4)) == []
    assert list(direct.get_batch(10, subject=f"{subj}.none")) == []
    assert list(direct.get_last_for([f"{subj}.none", f"{subj}.x.*"])) == []
    assert list(direct.get_last_for(f"{subj}.a", up_to_time=datetime(2000, 1, 1, tzinfo=timezone.utc))) == []


def test_messages_stored_while_reading_are_read_when_the_iterator_gets_to_them(js, direct, subj, per_request):
    per_request(1)  # the first message's request, and the next one, are out when the first is read: no more
    publish_n(js, f"{subj}.a", 3)
    it = direct.get_batch(100)
    assert next(it).seq == 1
    js.publish(f"{subj}.a", b"late")
    assert [(m.seq, m.data) for m in it] == [(2, b"m1"), (3, b"m2"), (4, b"late")]


# --- get_last_for -------------------------------------------------------------------------------


@pytest.fixture
def lasts(js, direct, subj):
    """a a b a b | b c: the last of a is 4, of b 6 (5 before the bar), of c 7."""
    for s in ("a", "a", "b", "a", "b", "b", "c"):
        js.publish(f"{subj}.{s}", f"{s}".encode(), headers={"K": s})
    return direct


def test_get_last_for_reads_the_last_message_of_each_subject_in_sequence_order(js, lasts, name, subj):
    got = list(lasts.get_last_for([f"{subj}.*"]))
    assert [(m.seq, m.subject, m.data, m.headers) for m in got] == [
        (4, f"{subj}.a", b"a", {"K": "a"}), (6, f"{subj}.b", b"b", {"K": "b"}), (7, f"{subj}.c", b"c", {"K": "c"})]
    assert [fields(m) for m in got] == [fields(stored(js, name, s)) for s in (4, 6, 7)]
    assert seqs(lasts.get_last_for([f"{subj}.b", f"{subj}.a"])) == [4, 6]
    assert seqs(lasts.get_last_for(f"{subj}.c")) == [7]
    assert seqs(lasts.get_last_for([f"{subj}.*"], batch=2)) == [4, 6]


def test_get_last_for_up_to_a_sequence_or_before_a_time(lasts, subj):
    assert seqs(lasts.get_last_for([f"{subj}.*"], up_to_seq=3)) == [2, 3]
    assert seqs(lasts.get_last_for([f"{subj}.*"], up_to_seq=5)) == [4, 5]
    t6 = lasts.get_msg(6).time
    assert seqs(lasts.get_last_for([f"{subj}.*"], up_to_time=t6)) == [4, 5]  # 6 itself is not before t6
    assert seqs(lasts.get_last_for([f"{subj}.*"], up_to_time=t6 + timedelta(microseconds=1))) == [4, 6]
    assert seqs(lasts.get_last_for([f"{subj}.a", f"{subj}.b"], up_to_seq=5, batch=1)) == [4]


def test_get_last_for_over_several_requests_keeps_the_point_in_time_of_the_first(js, lasts, name, subj, api_spy,
                                                                                 per_request):
    per_request(1)
    mark = api_spy.mark(js)
    it = lasts.get_last_for([f"{subj}.*"])
    assert next(it).seq == 4
    js.publish(f"{subj}.a", b"after")  # seq 8: a later a, not part of what the first request saw
    assert seqs(it) == [6, 7]
    api_spy.sync(js)
    assert len(direct_gets(api_spy, mark, name)) >= 3
    assert seqs(lasts.get_last_for([f"{subj}.*"])) == [6, 7, 8]


# --- errors -------------------------------------------------------------------------------------


def test_a_stream_without_allow_direct_is_refused_before_anything_is_sent(js, stream, subj, api_spy):
    publish_n(js, f"{subj}.a", 2)
    assert_sends_nothing(api_spy, js, lambda: stream.get_batch(10), ValueError, "allow_direct=True")
    assert_sends_nothing(api_spy, js, lambda: stream.get_last_for([f"{subj}.a"]), ValueError,
                         f"stream '{stream.name}' does not allow them")


def test_the_check_reads_the_cached_info_and_info_refreshes_it(js, stream, name, subj):
    publish_n(js, f"{subj}.a", 2)
    js.update_stream(attrs.evolve(stream.cached_info.config, allow_direct=True))
    with pytest.raises(ValueError, match="stream.info"):
        stream.get_batch(10)
    stream.info()
    assert seqs(stream.get_batch(10)) == [1, 2]


@pytest.mark.parametrize("call, exc, match", [
    (lambda s: s.get_batch(0), ValueError, "batch"),
    (lambda s: s.get_batch(-1), ValueError, "batch"),
    (lambda s: s.get_batch(True), TypeError, "batch"),
    (lambda s: s.get_batch(2.0), TypeError, "batch"),
    (lambda s: s.get_batch(5, seq=0), ValueError, "seq"),
    (lambda s: s.get_batch(5, seq="1"), TypeError, "seq"),
    (lambda s: s.get_batch(5, seq=2, start_time=datetime.now(timezone.utc)), ValueError, "exclusive"),
    (lambda s: s.get_batch(5, start_time=datetime(2026, 1, 1)), ValueError, "start_time must be a timezone-aware"),
    (lambda s: s.get_batch(5, start_time="2026-01-01T00:00:00Z"), TypeError, "start_time"),
    (lambda s: s.get_batch(5, max_bytes=0), ValueError, "max_bytes"),
    (lambda s: s.get_batch(5, subject="a b"), ValueError, "subject"),
    (lambda s: s.get_batch(5, timeout=-1), ValueError, "timeout"),
    (lambda s: s.get_last_for([]), ValueError, "subjects"),
    (lambda s: s.get_last_for(""), ValueError, "subjects"),
    (lambda s: s.get_last_for(["a", 1]), TypeError, "subjects"),
    (lambda s: s.get_last_for(7), TypeError, "subjects"),
    (lambda s: s.get_last_for(["a"], up_to_seq=1, up_to_time=datetime.now(timezone.utc)), ValueError, "exclusive"),
    (lambda s: s.get_last_for(["a"], up_to_seq=0), ValueError, "up_to_seq"),
    (lambda s: s.get_last_for(["a"], up_to_time=datetime(2026, 1, 1)), ValueError, "up_to_time"),
    (lambda s: s.get_last_for(["a"], batch=0), ValueError, "batch"),
])
def test_bad_arguments_are_refused_naming_them_before_anything_is_sent(js, direct, api_spy, call, exc, match):
    assert_sends_nothing(api_spy, js, lambda: call(direct), exc, match)


def test_a_server_older_than_2_11_is_refused_naming_the_version(js, direct, subj, api_spy, monkeypatch):
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 0)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.10.24")
    assert_sends_nothing(api_spy, js, lambda: direct.get_batch(10), jss.FeatureNotSupportedError,
                         r"a batch direct get \(get_batch\) needs nats-server 2.11 or later \(JetStream API level 1\); "
                         r"the server runs 2.10.24")
    assert_sends_nothing(api_spy, js, lambda: direct.get_last_for(f"{subj}.a"), jss.FeatureNotSupportedError,
                         r"get_last_for\) needs nats-server 2.11")
    assert direct.get_msg  # single gets are older than batches: untouched
    js.publish(f"{subj}.a", b"x")
    assert direct.get_msg(1).data == b"x"


def test_a_stream_deleted_under_the_handle_is_no_responders_naming_it(js, direct, name):
    js.delete_stream(name)
    with pytest.raises(jss.NoRespondersError, match=f"no responders for direct gets on stream '{name}'"):
        list(direct.get_batch(10))


def bare_reply(name: str, subject: str, seq: int) -> dict[str, str]:
    """The headers the server puts on a batch direct get reply of a message stored without headers."""
    return {"Nats-Stream": name, "Nats-Subject": subject, "Nats-Sequence": str(seq),
            "Nats-Time-Stamp": f"2026-05-01T10:11:{seq:02d}.5Z", "Nats-Num-Pending": "5", "Nats-Last-Sequence": "0"}


@pytest.fixture
def silent_responder(js, nats_server, name):
    """A handle on a stream that is gone, with a responder in its place that answers each batch direct get
    with two messages and never ends the batch."""
    handle = js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="memory", allow_direct=True)
    js.delete_stream(name)
    with jss.connect(nats_server.url, name="fake-responder") as other:
        requests = other.subscribe(f"$JS.API.DIRECT.GET.{name}")
        other.flush()
        stop = threading.Event()

        def answer() -> None:
            while not stop.is_set():
                try:
                    req = requests.next(timeout=0.25)
                except jss.TimeoutError:
                    continue
                for seq in (1, 2):
                    other.publish(req.reply, f"m{seq}", headers=bare_reply(name, "fake.a", seq))
                other.flush()

        thread = threading.Thread(target=answer, name="fake-responder")
        thread.start()
        try:
            yield handle
        finally:
            stop.set()
            thread.join(10)
            requests.stop()


@pytest.mark.timeout(60)
def test_a_responder_that_goes_silent_times_out_after_what_it_sent_is_yielded(client, silent_responder, name):
    subs_before = len(client._conn._nc._subs)
    it = silent_responder.get_batch(10, timeout=1.0)
    got = [next(it), next(it)]
    assert [(m.seq, m.subject, m.data, m.headers) for m in got] == [(1, "fake.a", b"m1", None),
                                                                   (2, "fake.a", b"m2", None)]
    assert got[1].time == datetime(2026, 5, 1, 10, 11, 2, 500000, tzinfo=timezone.utc)
    with pytest.raises(jss.TimeoutError, match=f"batch direct get from stream '{name}'.* timed out after 1.0 s"):
        next(it)
    assert list(it) == []
    wait_for(lambda: len(client._conn._nc._subs) == subs_before, 10, what="the request's inbox to be unsubscribed")


@pytest.mark.timeout(60)
def test_a_client_closed_while_reading_ends_the_iterator_with_client_closed(client, silent_responder):
    it = silent_responder.get_batch(10, timeout=30.0)
    assert [m.seq for m in (next(it), next(it))] == [1, 2]
    client.close()
    with pytest.raises(jss.ClientClosedError):
        next(it)
    with pytest.raises(jss.ClientClosedError):
        next(silent_responder.get_batch(10))



@pytest.mark.timeout(60)
def test_ctrl_c_while_waiting_lands_within_a_wake_and_stops_the_read(client, silent_responder):
    subs_before = len(client._conn._nc._subs)
    it = silent_responder.get_batch(10, timeout=30.0)
    assert [m.seq for m in (next(it), next(it))] == [1, 2]
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
    finally:
        timer.join(5)
    assert time.monotonic() - t0 < 5.0  # not the 30 s timeout
    assert list(it) == []
    wait_for(lambda: len(client._conn._nc._subs) == subs_before, 10, what="the request's inbox to be unsubscribed")

# --- nothing left behind --------------------------------------------------------------------------


def test_an_iterator_left_unread_leaves_nothing_subscribed(js, client, direct, subj, per_request):
    per_request(10)
    publish_n(js, f"{subj}.a", 50)
    subs_before = len(client._conn._nc._subs)
    it = direct.get_batch(100)
    assert next(it).seq == 1
    del it
    gc.collect()
    wait_for(lambda: len(client._conn._nc._subs) == subs_before, 10, what="the inboxes to be unsubscribed")
    with direct.get_batch(100) as it:
        assert next(it).seq == 1
    assert list(it) == []
    wait_for(lambda: len(client._conn._nc._subs) == subs_before, 10, what="the inboxes to be unsubscribed")
    it = direct.get_last_for([f"{subj}.a"])
    it.close()
    assert list(it) == []
    assert len(client._conn._nc._subs) == subs_before


def test_stored_msg_of_sets_every_field():
    names = [a.name for a in attrs.fields(jss.StoredMsg)]
    msg = jss.StoredMsg._of(3, "a.b", b"x", None, None)
    assert [getattr(msg, n) for n in names] == [3, "a.b", b"x", None, None, {}]
    assert msg == jss.StoredMsg(seq=3, subject="a.b", data=b"x")


def parts(text: str) -> tuple[bytes, bytes]:
    """``2026-05-01T10:11:12.5Z`` as the reader takes it: ``(b"2026-05-01T10:11:12", b"5")``."""
    return text[:19].encode(), text[20:-1].encode() if text[19] == "." else b""


@pytest.mark.parametrize("text", ["2026-05-01T10:11:12Z", "2026-05-01T10:11:12.5Z", "2026-05-01T10:11:12.123456789Z",
                                  "2026-05-01T10:11:12.000000001Z", "2026-05-01T10:11:12.00001Z",
                                  "1999-12-31T23:59:59.999999999Z"])
def test_the_fast_time_reader_gives_what_parse_time_gives_for_the_servers_form(text):
    for _ in range(2):  # once to learn the second, once from what it learned
        fast, slow = time_from_parts(*parts(text)), parse_time(text)
        assert (fast, fast.nanosecond, fast.tzinfo, type(fast)) == (slow, slow.nanosecond, slow.tzinfo, type(slow))
        assert format_time(fast) == text


def test_the_times_of_a_run_are_what_parse_time_gives_for_each():
    texts = ["2031-02-03T04:05:06.5Z", "2031-02-03T04:05:06Z", "2031-02-03T04:05:06.000000007Z",
             "2031-02-03T04:05:07.25Z", "2031-02-03T04:05:07.1234567891Z", "0001-01-01T00:00:00Z",
             "2031-02-03T04:05:06.999Z"]
    seconds, fractions = zip(*(parts(t) for t in texts))
    for _ in range(2):
        got = times_from_parts(seconds, fractions)
        assert [(t, t and t.nanosecond) for t in got] == [(t, t and t.nanosecond) for t in map(parse_time, texts)]
    with pytest.raises(ValueError):
        times_from_parts([b"2031-02-03T04:05:06", b"2031-02-03T04:05:06"], [b"1", b"x"])


def test_the_fast_time_reader_falls_back_to_parse_time():
    time_from_parts(b"2026-05-01T10:11:12", b"5")
    for _ in range(2):
        assert time_from_parts(b"2026-05-01T10:11:12", b"1234567891") == parse_time("2026-05-01T10:11:12.1234567891Z")
        assert time_from_parts(b"0001-01-01T00:00:00") is None  # Go's zero time: unset
    for seconds, fraction in ((b"2026-13-01T10:11:12", b""), (b"2026-05-01T10:11:12", b"5x5"), (b"soon", b"")):
        with pytest.raises(ValueError):
            time_from_parts(seconds, fraction)


def reply_block(stored: bytes, subject: str, seq: int, stamp: str) -> bytes:
    """A batch direct get reply's header block as the server writes it: the stored headers (``b""`` for
    none), then its own."""
    own = (f"Nats-Stream: S\r\nNats-Subject: {subject}\r\nNats-Sequence: {seq}\r\nNats-Time-Stamp: {stamp}\r\n"
           f"Nats-Num-Pending: 0\r\nNats-Last-Sequence: {seq - 1}\r\n\r\n").encode()
    return (stored or b"NATS/1.0\r\n") + own


def test_a_run_with_stored_headers_reads_as_each_reply_decoded_in_full():
    raws = [
        reply_block(b"NATS/1.0\r\nNats-Msg-Id: a\r\nk: v1\r\nk: v2\r\n", "s.a", 5, "2031-02-03T04:05:06.5Z"),
        reply_block(b"", "s.b", 6, "2031-02-03T04:05:06Z"),  # nothing stored, in a run with headers
        # copied from another stream: a stored header named like the server's own stays
        reply_block(b"NATS/1.0\r\nNats-Stream: OTHER\r\nNats-Subject: t.x\r\n", "s.c", 9,
                    "2031-02-03T04:05:07.000000007Z"),
    ]
    datas = [b"one", b"", b"three"]
    run = _jsapi._columns(datas, raws)
    full = [_jsapi._stored(data, raw)[0] for data, raw in zip(datas, raws)]
    assert run.seqs == [m.seq for m in full] == [5, 6, 9]
    assert run.subjects == [m.subject for m in full] == ["s.a", "s.b", "s.c"]
    assert run.times_ns == [m.time.timestamp_ns() for m in full]
    assert run.datas == datas
    stored = [decode_headers(h) or None for h in run.headers]  # kept raw, decoded when a column is built
    assert [h and h.multi() for h in stored] == [m.headers and m.headers.multi() for m in full] == [
        {"Nats-Msg-Id": ["a"], "k": ["v1", "v2"]}, None, {"Nats-Stream": ["OTHER"], "Nats-Subject": ["t.x"]}]
    # A block of another shape (a header the server added after its own) is still decoded in full.
    odd = raws[0][:-2] + b"Nats-Extra: 1\r\n\r\n"
    run = _jsapi._columns([b"x"], [odd])
    expected = _jsapi._stored(b"x", odd)[0].headers.multi()
    assert (run.seqs, run.subjects, run.headers[0].multi(), run.decoded) == ([5], ["s.a"], expected, True)


@pytest.mark.timeout(60)
def test_a_direct_get_a_replica_leaves_unanswered_is_asked_of_the_stream_leader_next(client, nats_server, name):
    # A replica catching up drops direct gets unanswered, and the server hands a request to a replica on the
    # client's own node first, so every retry could meet it again: the next attempt asks the leader. Here a
    # silent responder stands in for that replica and another answers STREAM.MSG.GET as the leader would,
    # both in a JetStream domain no server serves.
    js = client.jetstream(domain="fakerep")
    with jss.connect(nats_server.url, name="fake-replicas") as other:
        direct = other.subscribe(f"$JS.fakerep.API.DIRECT.GET.{name}")
        leader = other.subscribe(f"$JS.fakerep.API.STREAM.MSG.GET.{name}")
        other.flush()
        answered: list[dict] = []

        def answer_as_leader() -> None:
            req = leader.next(timeout=20)
            answered.append(json.loads(req.data))
            other.publish(req.reply, json.dumps({"type": "io.nats.jetstream.api.v1.stream_msg_get_response",
                                                 "message": {"subject": f"{name.lower()}.a", "seq": 7, "data": "aGk=",
                                                             "time": "2026-05-01T10:11:12.5Z"}}))

        thread = threading.Thread(target=answer_as_leader, name="fake-leader")
        thread.start()
        try:
            msg = js._jsapi.direct_get(name, seq=7, timeout=0.5)
        finally:
            thread.join(30)
            direct_requests = []
            while True:
                try:
                    direct_requests.append(direct.next(timeout=0.1))
                except jss.TimeoutError:
                    break
            direct.stop()
            leader.stop()
    assert not thread.is_alive()
    assert (msg.seq, msg.subject, msg.data) == (7, f"{name.lower()}.a", b"hi")
    assert len(direct_requests) == 1 and answered == [{"seq": 7}]
