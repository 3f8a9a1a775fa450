# Charter: per-message TTLs on publish and publish_async (servers 2.11+): the ``Nats-TTL`` header as
# the server wants it, refused values before anything is sent, the typed error of a stream that does
# not allow TTLs, and the message gone once its TTL ran out.
from __future__ import annotations

from datetime import timedelta

import pytest

import jetstream_sync as jss
from jetstream_sync._publish import ttl_header

from conftest import assert_sends_nothing, wait_for


@pytest.mark.parametrize("ttl, header", [
    (2, "2"), (2.0, "2"), (timedelta(minutes=1), "60"), (1.5, "1.5s"), (timedelta(seconds=1, microseconds=1), "1.000001s"),
    ("never", "never"),
])
def test_a_ttl_is_whole_seconds_or_a_go_duration(ttl, header):
    assert ttl_header(ttl) == header


@pytest.mark.parametrize("ttl", [0, 0.5, -1, timedelta(milliseconds=999), float("nan"), "1h", float("inf")])
def test_a_ttl_below_one_second_or_not_a_duration_is_refused(ttl):
    with pytest.raises(ValueError, match="ttl"):
        ttl_header(ttl)


def test_a_bad_ttl_is_refused_before_anything_is_sent(api_spy, js, stream, subj):
    subj = f"{subj}.x"
    assert_sends_nothing(api_spy, js, lambda: js.publish(subj, b"x", ttl=0.5), ValueError, "ttl must be at least 1")
    with pytest.raises(TypeError, match="ttl"):
        js.publish_async(subj, b"x", ttl=[1])


@pytest.fixture
def ttl_stream(js, name, subj):
    return js.create_stream(name=name, subjects=[subj], storage="memory", allow_msg_ttl=True)


def test_publish_and_publish_async_send_the_ttl_header_the_server_keeps(js, ttl_stream, subj):
    seq1 = js.publish(subj, b"a", ttl=1.5).seq
    seq2 = js.publish_async(subj, b"b", ttl=timedelta(hours=1)).result(10).seq
    seq3 = js.publish(subj, b"c", ttl="never").seq
    assert ttl_stream.get_msg(seq1).headers["Nats-TTL"] == "1.5s"
    assert ttl_stream.get_msg(seq2).headers["Nats-TTL"] == "3600"
    assert ttl_stream.get_msg(seq3).headers["Nats-TTL"] == "never"


@pytest.mark.timeout(30)
def test_a_message_with_a_ttl_is_removed_when_it_runs_out(js, ttl_stream, subj):
    js.publish(subj, b"stays")
    js.publish(subj, b"goes", ttl=1)
    assert ttl_stream.info().state.messages == 2
    wait_for(lambda: ttl_stream.info().state.messages == 1, 15, interval=0.1, what="the message to expire")
    assert ttl_stream.get_msg(1).data == b"stays"


def test_a_ttl_on_a_stream_without_allow_msg_ttl_is_a_typed_error(js, stream, subj):
    subj = f"{subj}.x"
    with pytest.raises(jss.MessageTTLDisabledError, match="allow_msg_ttl") as err:
        js.publish(subj, b"x", ttl=5)
    assert isinstance(err.value, jss.APIError) and err.value.err_code == 10166
    with pytest.raises(jss.MessageTTLDisabledError):
        js.publish_async(subj, b"x", ttl=5).result(10)


def test_a_ttl_to_a_server_older_than_2_11_is_refused_naming_the_version(api_spy, js, stream, subj, monkeypatch):
    # A server before 2.11 says no api_lvl in its INFO: what this client reads it by.
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 0)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.10.24")
    assert_sends_nothing(api_spy, js, lambda: js.publish(f"{subj}.x", b"x", ttl=5), jss.FeatureNotSupportedError,
                         r"a per-message TTL needs nats-server 2.11 or later \(JetStream API level 1\); the server "
                         r"runs 2.10.24")
    with pytest.raises(jss.FeatureNotSupportedError):
        js.publish_async(f"{subj}.x", b"x", ttl=5)
    assert js.publish(f"{subj}.x", b"no ttl").seq == 1
