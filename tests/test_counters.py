# Charter: counters (ADR-49; servers 2.12+) against a real nats-server: add sends ``Nats-Incr`` and
# returns the total the PubAck carries; the stored message is ``{"val":"<decimal>"}``; Python ints of
# any size (2**70, negatives) round-trip; get and get_many read the last message (direct when the
# stream allows it); a subject never added to is CounterNotFoundError; a stream without
# allow_msg_counter is a typed error naming it; bad arguments and an old server are refused before
# anything is sent.
# Code under test: counter.py, jetstream.py (counter), errors.py.
from __future__ import annotations

import json

import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def counters(js, name, subj):
    """A memory stream on ``<subj>.>`` whose subjects are counters, read by direct gets."""
    return js.create_stream(name=name, subjects=[f"{subj}.>"], storage="memory", allow_msg_counter=True,
                            allow_direct=True)


def test_add_sends_the_increment_and_returns_the_total_the_server_stored(client, js, counters, subj):
    counter = js.counter(counters.name)
    with client.subscribe(f"{subj}.>") as wire:
        assert counter.add(f"{subj}.hits", 5) == 5
        assert counter.add(f"{subj}.hits", -8) == -3
        sent = [wire.next(timeout=10), wire.next(timeout=10)]
    assert [(m.headers["Nats-Incr"], m.data) for m in sent] == [("+5", b""), ("-8", b"")]
    last = counters.get_last_msg(f"{subj}.hits")
    assert last.data == b'{"val":"-3"}' and last.headers["Nats-Incr"] == "-8"
    assert counter.get(f"{subj}.hits") == -3


@pytest.mark.parametrize("amounts", [[2**70, 2**70, -(2**72)], [-(10**40), 10**40 + 1], [0], [2**63 - 1, 1]])
def test_ints_of_any_size_round_trip_through_a_counter(js, counters, subj, amounts):
    counter = js.counter(counters.name)
    total = 0
    for n in amounts:
        total += n
        assert counter.add(f"{subj}.big", n) == total
    assert counter.get(f"{subj}.big") == total
    assert json.loads(counters.get_last_msg(f"{subj}.big").data) == {"val": str(total)}


def test_two_to_the_seventieth_round_trips(js, counters, subj):
    counter = js.counter(counters.name)
    assert counter.add(f"{subj}.x", 2**70) == 2**70
    assert counter.get(f"{subj}.x") == 2**70 == 1180591620717411303424
    assert counters.get_last_msg(f"{subj}.x").data == b'{"val":"1180591620717411303424"}'


def test_get_many_returns_the_values_of_the_subjects_that_have_one_in_the_order_given(js, counters, subj):
    counter = js.counter(counters.name)
    counter.add(f"{subj}.b", 2)
    counter.add(f"{subj}.a", -1)
    many = counter.get_many([f"{subj}.a", f"{subj}.never", f"{subj}.b"])
    assert many == {f"{subj}.a": -1, f"{subj}.b": 2} and list(many) == [f"{subj}.a", f"{subj}.b"]
    assert counter.get_many(iter([])) == {}


def test_a_subject_never_added_to_is_counter_not_found(js, counters, subj):
    counter = js.counter(counters.name)
    with pytest.raises(jss.CounterNotFoundError) as err:
        counter.get(f"{subj}.nothing")
    assert (err.value.stream, err.value.subject) == (counters.name, f"{subj}.nothing")
    assert isinstance(err.value, jss.JetStreamError) and not isinstance(err.value, jss.APIError)
    assert str(err.value) == f"no counter on subject '{subj}.nothing' in stream '{counters.name}'"


def test_reads_are_direct_gets_when_the_stream_allows_them_else_through_its_leader(api_spy, js, name, subj):
    direct = js.create_stream(name=name, subjects=[f"{subj}.d.>"], storage="memory", allow_msg_counter=True,
                              allow_direct=True)
    leader = js.create_stream(name=f"{name}L", subjects=[f"{subj}.l.>"], storage="memory", allow_msg_counter=True)
    for stream, prefix, api in ((direct, "d", "DIRECT.GET"), (leader, "l", "STREAM.MSG.GET")):
        counter = js.counter(stream.name)
        counter.add(f"{subj}.{prefix}.n", 7)
        mark = api_spy.mark(js)
        assert counter.get(f"{subj}.{prefix}.n") == 7
        assert counter.get_many([f"{subj}.{prefix}.n"]) == {f"{subj}.{prefix}.n": 7}
        api_spy.sync(js)
        assert [s for s in api_spy.since(mark) if "GET" in s] == [f"$JS.API.{api}.{stream.name}"] * 2


def test_a_stream_without_allow_msg_counter_is_a_typed_error_naming_it(js, stream, subj):
    with pytest.raises(jss.CounterDisabledError, match="allow_msg_counter=True") as err:
        js.counter(stream.name)
    assert err.value.stream == stream.name and err.value.err_code == 10168
    # The server's own answer to an increment there is the same error.
    with pytest.raises(jss.CounterDisabledError, match="allow_msg_counter=True") as served:
        js.publish(f"{subj}.x", b"", headers={"Nats-Incr": "+1"})
    assert served.value.err_code == 10168 and isinstance(served.value, jss.APIError)
    assert stream.info().state.messages == 0


def test_a_counter_of_a_missing_stream_is_stream_not_found(js):
    with pytest.raises(jss.StreamNotFoundError):
        js.counter("NO_SUCH_STREAM")


def test_the_config_fields_round_trip(js, counters, name):
    assert counters.cached_info.config.allow_msg_counter is True
    assert js.stream_info(name).config.allow_msg_counter is True


@pytest.mark.parametrize("call, error, match", [
    (lambda c, s: c.add(f"{s}.x", 1.0), TypeError, "n must be an int, got float"),
    (lambda c, s: c.add(f"{s}.x", True), TypeError, "n must be an int, got bool"),
    (lambda c, s: c.add(f"{s}.x", "1"), TypeError, "n must be an int, got str"),
    (lambda c, s: c.add("bad subject", 1), ValueError, "subject"),
    (lambda c, s: c.get(f"{s}.*"), ValueError, "subject must be one counter's subject, without wildcards"),
    (lambda c, s: c.get_many([f"{s}.a", f"{s}.>"]), ValueError, r"subjects\[1\] must be one counter's subject"),
    (lambda c, s: c.get_many(f"{s}.a"), TypeError, "subjects must be a list"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(client, api_spy, js, counters, subj, call, error, match):
    counter = js.counter(counters.name)
    with client.subscribe(f"{subj}.>") as wire:
        client.flush()
        assert_sends_nothing(api_spy, js, lambda: call(counter, subj), error, match)
        client.publish(f"{subj}.sentinel", b"")       # the first thing on the wire: nothing before it
        assert wire.next(timeout=10).subject == f"{subj}.sentinel"


def test_counters_on_a_server_older_than_2_12_are_refused_naming_the_version(api_spy, js, counters, monkeypatch):
    # A 2.11 server says API level 1 in its INFO: what this client reads it by.
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 1)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.11.9")
    assert_sends_nothing(api_spy, js, lambda: js.counter(counters.name), jss.FeatureNotSupportedError,
                         r"counters needs nats-server 2.12 or later \(JetStream API level 2\); the server runs "
                         r"2\.11\.9")
