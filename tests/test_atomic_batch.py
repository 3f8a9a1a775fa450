# Charter: atomic batch publish (ADR-50; servers 2.12+) against a real nats-server: a committed batch
# stores every message, in order, with the batch headers; a batch left without commit (or by an
# exception) stores nothing, and the server drops it; what goes on the wire (a second connection's
# subscription sees the Nats-Batch-* headers, and only the first message and the commit ask for an
# answer); the 1000-message limit and expectations after the first message refused before anything is
# sent; the server's batch errors typed; publish_batch's two message forms; an old server refused.
# Code under test: atomic_batch.py, _publish.py (publish_headers), jetstream.py (batch, publish_batch).
from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

import jetstream_sync as jss
from jetstream_sync._publish import publish_headers
from jetstream_sync.server import NatsServer

from conftest import assert_sends_nothing

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def batches(js, name, subj):
    """A memory stream on ``<subj>.*`` that takes atomic batches (``<subj>.x.y`` is outside it)."""
    return js.create_stream(name=name, subjects=[f"{subj}.*"], storage="memory", allow_atomic=True)


@contextmanager
def wire(url: str, subject: str):
    """What reaches the server on ``subject``: a core subscription of a second connection."""
    with jss.connect(url, name="wire") as watcher:
        with watcher.subscribe(subject) as sub:
            watcher.flush()  # the server has the subscription before anything is published
            yield sub


def nothing_went_out(client: jss.Client, sub, subj: str) -> None:
    """Nothing the client sent before this reached ``sub``: a core message sent now (outside the
    stream) is the first thing it sees, as one connection's messages keep their order."""
    client.publish(f"{subj}.sentinel.x", b"")
    assert sub.next(timeout=10).subject == f"{subj}.sentinel.x"


def stored(stream: jss.Stream) -> list[tuple[str, bytes, dict]]:
    """(subject, data, headers) of every message of ``stream``, in sequence order."""
    last = stream.info().state.last_seq
    out = []
    for seq in range(1, last + 1):
        msg = stream.get_msg(seq)
        out.append((msg.subject, msg.data, dict(msg.headers or {})))
    return out


# -- the headers of one message of a batch (pure) ---------------------------------------------------


def test_a_message_of_a_batch_carries_its_id_and_place_and_the_last_the_commit():
    assert publish_headers(None, batch_id="b1", batch_seq=1) == {"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}
    assert publish_headers({"X": "y", "Nats-Batch-Id": "mine"}, batch_id="b1", batch_seq=7, batch_commit=True) == {
        "X": "y", "Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "7", "Nats-Batch-Commit": "1"}


@pytest.mark.parametrize("kwargs, error, named", [
    ({"batch_id": "", "batch_seq": 1}, TypeError, "batch_id"),
    ({"batch_id": "x" * 65, "batch_seq": 1}, ValueError, "batch_id"),
    ({"batch_id": "b", "batch_seq": 0}, ValueError, "batch_seq"),
    ({"batch_id": "b"}, TypeError, "batch_seq"),
])
def test_a_bad_batch_header_is_refused_by_name(kwargs, error, named):
    with pytest.raises(error, match=named):
        publish_headers(None, **kwargs)


# -- committed: all of it ----------------------------------------------------------------------------


def test_a_committed_batch_stores_every_message_in_order_with_the_batch_headers(js, batches, subj):
    with js.batch() as batch:
        batch.add(f"{subj}.a", b"one", headers={"Trace": "t1"})
        batch.add(f"{subj}.b", "two")
        batch.add(f"{subj}.a", b"three")
        assert batch.count == 3 and not batch.closed
        ack = batch.commit(f"{subj}.c", b"four")
    assert isinstance(ack, jss.BatchAck)
    assert (ack.stream, ack.seq, ack.batch, ack.count) == (batches.name, 4, batch.id, 4)
    assert batch.closed and batch.count == 4 and len(batch.id) == 32
    base = {"Nats-Batch-Id": batch.id}
    assert stored(batches) == [
        (f"{subj}.a", b"one", {"Trace": "t1", **base, "Nats-Batch-Sequence": "1"}),
        (f"{subj}.b", b"two", {**base, "Nats-Batch-Sequence": "2"}),
        (f"{subj}.a", b"three", {**base, "Nats-Batch-Sequence": "3"}),
        (f"{subj}.c", b"four", {**base, "Nats-Batch-Sequence": "4", "Nats-Batch-Commit": "1"}),
    ]
    with pytest.raises(RuntimeError, match="committed"):
        batch.add(f"{subj}.a", b"late")


def test_only_the_first_message_and_the_commit_ask_for_an_answer_on_the_wire(nats_server, js, batches, subj):
    with wire(nats_server.url, f"{subj}.>") as sub:
        batch = js.batch()
        for i in range(3):
            batch.add(f"{subj}.m", f"m{i}")
        ack = batch.commit(f"{subj}.m", b"last")
        seen = [sub.next(timeout=10) for _ in range(4)]
    assert [m.data for m in seen] == [b"m0", b"m1", b"m2", b"last"]
    assert [m.headers["Nats-Batch-Id"] for m in seen] == [batch.id] * 4
    assert [m.headers["Nats-Batch-Sequence"] for m in seen] == ["1", "2", "3", "4"]
    assert [m.headers.get("Nats-Batch-Commit") for m in seen] == [None, None, None, "1"]
    # The first waits for the server's empty ack, the commit for the BatchAck; the others wait for nothing.
    assert [bool(m.reply) for m in seen] == [True, False, False, True]
    assert ack.count == 4


def test_a_batch_of_one_message_is_its_commit(js, batches, subj):
    assert batches.cached_info.config.allow_atomic is True
    ack = js.batch().commit(f"{subj}.only", b"alone")
    assert (ack.seq, ack.count) == (1, 1)
    assert stored(batches)[0][2]["Nats-Batch-Commit"] == "1"


def test_publish_batch_takes_tuples_and_mappings_and_stores_them_as_one_batch(js, batches, subj):
    ack = js.publish_batch([
        (f"{subj}.a", b"tuple"),
        {"subject": f"{subj}.b", "data": "mapping", "headers": {"Kind": "map"}},
        {"subject": f"{subj}.c", "msg_id": "c-1"},
    ])
    assert (ack.stream, ack.seq, ack.count) == (batches.name, 3, 3)
    messages = stored(batches)
    assert [(s, d) for s, d, _ in messages] == [(f"{subj}.a", b"tuple"), (f"{subj}.b", b"mapping"), (f"{subj}.c", b"")]
    assert messages[1][2]["Kind"] == "map" and messages[2][2]["Nats-Msg-Id"] == "c-1"
    assert {h["Nats-Batch-Id"] for _, _, h in messages} == {ack.batch}


def test_many_threads_adding_to_one_batch_take_turns(js, batches, subj):
    batch = js.batch()
    batch.add(f"{subj}.t", b"first")
    threads = [threading.Thread(target=lambda: [batch.add(f"{subj}.t", b"x") for _ in range(50)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ack = batch.commit(f"{subj}.t", b"last")
    assert ack.count == 202 and batches.info().state.messages == 202
    assert [h["Nats-Batch-Sequence"] for _, _, h in stored(batches)] == [str(i) for i in range(1, 203)]


# -- not committed: none of it -------------------------------------------------------------------------


def test_a_batch_left_by_an_exception_stores_nothing(js, batches, subj):
    with pytest.raises(KeyError):
        with js.batch() as batch:
            batch.add(f"{subj}.a", b"1")
            batch.add(f"{subj}.b", b"2")
            raise KeyError("the caller failed half-way")
    assert batch.closed and batches.info().state.messages == 0
    with pytest.raises(RuntimeError, match="discarded"):
        batch.commit(f"{subj}.c", b"3")
    ack = js.publish_batch([(f"{subj}.c", b"3")])    # another batch stores only its own
    assert (ack.seq, ack.count) == (1, 1) and batches.info().state.messages == 1


def test_a_batch_left_without_commit_stores_nothing(js, batches, subj):
    with js.batch() as batch:
        batch.add(f"{subj}.a", b"1")
    batch.discard()                                  # again: nothing to do
    assert batch.closed and batches.info().state.messages == 0


def test_the_server_drops_an_uncommitted_batch_after_its_timeout_and_a_late_commit_stores_nothing(name, subj):
    # A server whose batches time out after 1 s (10 s by default), so the test need not wait 10 s.
    with NatsServer(config_text='jetstream { limits { batch { timeout: "1s" } } }\n') as server, \
            jss.connect(server.url) as client:
        js = client.jetstream()
        stream = js.create_stream(name=name, subjects=[f"{subj}.*"], storage="memory", allow_atomic=True)
        with js.events(types=[jss.StreamBatchAbandoned]) as events:
            with pytest.raises(ZeroDivisionError):
                with js.batch() as left:
                    left.add(f"{subj}.a", b"1")
                    left.add(f"{subj}.a", b"2")
                    1 / 0
            held = js.batch()
            held.add(f"{subj}.b", b"1")
            dropped = {events.next(timeout=20) for _ in range(2)}
        assert {(e.batch, e.reason) for e in dropped} == {(left.id, "timeout"), (held.id, "timeout")}
        with pytest.raises(jss.BatchPublishIncompleteError) as err:
            held.commit(f"{subj}.b", b"2")
        assert err.value.err_code == 10176 and isinstance(err.value, jss.BatchPublishError)
        assert held.closed and stream.info().state.messages == 0


# -- refused before anything is sent ---------------------------------------------------------------------


def test_the_1001st_message_is_refused_before_it_is_sent(nats_server, client, js, batches, subj):
    with wire(nats_server.url, f"{subj}.>") as sub:
        with pytest.raises(ValueError, match="at most 1000 messages"):
            js.publish_batch([(f"{subj}.m", b"x")] * 1001)
        nothing_went_out(client, sub, subj)
    batch = js.batch()
    for _ in range(999):
        batch.add(f"{subj}.m", b"x")
    with pytest.raises(ValueError, match="leave no room for the commit; commit it instead"):
        batch.add(f"{subj}.m", b"x")
    ack = batch.commit(f"{subj}.m", b"x")           # the 1000th
    assert ack.count == 1000 and batches.info().state.messages == 1000


@pytest.mark.parametrize("later", [
    {"expected_last_seq": 0}, {"expected_stream": "X"}, {"expected_last_subject_seq": 0},
    {"headers": {"Nats-Expected-Last-Sequence": "0"}},
])
def test_an_expectation_after_the_first_message_is_refused_before_it_is_sent(nats_server, client, js, batches,
                                                                             subj, later):
    named = next(iter(later)) if "headers" not in later else "headers"
    with wire(nats_server.url, f"{subj}.>") as sub:
        with pytest.raises(ValueError, match=rf"messages\[1\]: {named}.*only the first message"):
            js.publish_batch([(f"{subj}.a", b"1"), {"subject": f"{subj}.b", **later}])
        nothing_went_out(client, sub, subj)
        batch = js.batch()
        batch.add(f"{subj}.a", b"1", expected_last_seq=0)
        sub.next(timeout=10)
        with pytest.raises(ValueError, match=rf"^{named}.*only the first message of a batch"):
            batch.add(f"{subj}.b", b"2", **later)
        nothing_went_out(client, sub, subj)
    assert not batch.closed and batch.commit(f"{subj}.c", b"3").count == 2   # the refused add did not count


@pytest.mark.parametrize("messages, error, match", [
    ([], ValueError, "at least one message"),
    ("S.b", TypeError, "messages must be a list"),
    ([(1, b"x")], TypeError, r"messages\[0\]: subject must be a str"),
    ([("S.b", b"x", {})], ValueError, r"messages\[0\] must be a \(subject, data\) tuple"),
    ([{"data": b"x"}], ValueError, r"messages\[0\] has no 'subject'"),
    ([("S.b", b"x"), {"subject": "S.b", "reply": "r"}], ValueError, r"messages\[1\] has keys .*\['reply'\]"),
    ([("S.b", b"x"), ["S.b", b"x"]], TypeError, r"messages\[1\] must be a \(subject, data\) tuple or a mapping"),
    ([("S.b", b"x"), {"subject": "S.b", "msg_id": ""}], TypeError, r"messages\[1\]: msg_id"),
    ([("S.b", b"x"), ("S.b", b"x" * 2_000_000)], ValueError, r"messages\[1\]: data: .* exceed the server's"),
])
def test_a_bad_message_of_publish_batch_is_refused_by_its_place_before_anything_is_sent(
        nats_server, client, js, batches, subj, messages, error, match):
    def ours(value):  # "S" stands for this test's subject prefix
        if isinstance(value, str):
            return value.replace("S.", f"{subj}.")
        if isinstance(value, (list, tuple)):
            return type(value)(ours(v) for v in value)
        return {k: ours(v) for k, v in value.items()} if isinstance(value, dict) else value

    with wire(nats_server.url, f"{subj}.>") as sub:
        with pytest.raises(error, match=match):
            js.publish_batch(ours(messages))
        nothing_went_out(client, sub, subj)


# -- the server's answers, typed --------------------------------------------------------------------------


def test_a_batch_to_a_stream_without_allow_atomic_fails_at_its_first_message(js, stream, subj):
    batch = js.batch()
    with pytest.raises(jss.BatchPublishNotEnabledError, match="allow_atomic=True") as err:
        batch.add(f"{subj}.a", b"1")
    assert err.value.err_code == 10174 and isinstance(err.value, jss.APIError) and batch.closed
    with pytest.raises(jss.BatchPublishNotEnabledError):
        js.publish_batch([(f"{subj}.a", b"1"), (f"{subj}.b", b"2")])
    assert stream.info().state.messages == 0


def test_a_batch_to_a_subject_no_stream_captures_fails_at_its_first_message(js):
    with pytest.raises(jss.NoRespondersError):
        js.publish_batch([("nowhere.a", b"1"), ("nowhere.b", b"2")])


def test_a_batch_with_a_msg_id_the_stream_has_stores_nothing(js, batches, subj):
    js.publish(f"{subj}.a", b"before", msg_id="order-1")
    with pytest.raises(jss.BatchPublishDuplicateMsgIdError) as err:
        js.publish_batch([{"subject": f"{subj}.a", "data": b"1", "msg_id": "order-2"},
                          {"subject": f"{subj}.b", "data": b"2", "msg_id": "order-1"}])
    assert err.value.err_code == 10201
    assert batches.info().state.messages == 1


def test_a_failed_expectation_of_the_first_message_stores_none_of_the_batch(js, batches, subj):
    js.publish(f"{subj}.a", b"before")
    with pytest.raises(jss.StreamWrongLastSequenceError):
        with js.batch() as batch:
            batch.add(f"{subj}.a", b"1", expected_last_seq=0)
            batch.commit(f"{subj}.b", b"2")
    assert batches.info().state.messages == 1
    ack = js.publish_batch([{"subject": f"{subj}.a", "data": b"1", "expected_last_seq": 1}, (f"{subj}.b", b"2")])
    assert ack.seq == 3


def test_a_header_batches_cannot_carry_is_a_typed_error(js, batches, subj):
    with pytest.raises(jss.BatchPublishUnsupportedHeaderError) as err:
        js.publish_batch([{"subject": f"{subj}.a", "headers": {"Nats-Expected-Last-Msg-Id": "x"}}])
    assert err.value.err_code == 10177 and batches.info().state.messages == 0


def test_server_limits_on_batches_are_typed_errors(name, subj):
    config = "jetstream { limits { batch { max_msgs: 3, max_inflight_per_stream: 1 } } }\n"
    with NatsServer(config_text=config) as server, jss.connect(server.url) as client:
        js = client.jetstream()
        stream = js.create_stream(name=name, subjects=[f"{subj}.*"], storage="memory", allow_atomic=True)
        with pytest.raises(jss.BatchPublishTooLargeError) as large:
            js.publish_batch([(f"{subj}.a", b"x")] * 4)
        assert large.value.err_code == 10199
        open_one = js.batch()
        open_one.add(f"{subj}.a", b"x")
        with pytest.raises(jss.BatchPublishTooManyInflightError) as busy:
            js.publish_batch([(f"{subj}.b", b"x")])
        assert busy.value.err_code == 10210 and busy.value.code == 429
        assert open_one.commit(f"{subj}.a", b"y").count == 2
        assert stream.info().state.messages == 2


def test_a_batch_on_a_server_older_than_2_12_is_refused_naming_the_version(api_spy, js, batches, subj,
                                                                            monkeypatch):
    # A 2.11 server says API level 1 in its INFO: what this client reads it by.
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 1)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.11.9")
    message = (r"atomic batch publish needs nats-server 2.12 or later \(JetStream API level 2\); the server runs "
               r"2\.11\.9")
    assert_sends_nothing(api_spy, js, js.batch, jss.FeatureNotSupportedError, message)
    assert_sends_nothing(api_spy, js, lambda: js.publish_batch([(f"{subj}.a", b"1")]), jss.FeatureNotSupportedError,
                         message)
    assert batches.info().state.messages == 0
