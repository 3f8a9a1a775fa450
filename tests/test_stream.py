# Charter: the Stream handle against a real nats-server: info/cached_info,
# purge (all, by subject, by sequence, keep), reading messages back (plain
# and direct get, headers included; the request path's get by next subject),
# deleting messages, the consumer calls scoped to one stream, and argument
# checks made before anything is sent.
from __future__ import annotations

import pytest

import jetstream_sync as jss

from conftest import assert_sends_nothing


@pytest.fixture
def stream(js):
    return js.create_stream(name="ST", subjects=["st.>"], storage="memory")


def publish(js, n, subject="st.a", prefix="m"):
    return [js.publish(subject, f"{prefix}{i}".encode()).seq for i in range(n)]


# --- info -----------------------------------------------------------------------------


def test_cached_info_is_the_last_round_trip_and_info_makes_a_new_one(js, stream, api_spy):
    assert stream.cached_info.state.messages == 0
    publish(js, 3)
    mark = api_spy.mark(js)
    assert stream.cached_info.state.messages == 0  # no I/O: still what create_stream said
    sentinel = api_spy.sync(js)
    assert api_spy.since(mark) == [sentinel]
    info = stream.info()
    assert isinstance(info, jss.StreamInfo)
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (3, 1, 3)
    assert stream.cached_info is info
    assert info.config.name == stream.name == "ST"


def test_info_of_a_deleted_stream_raises_stream_not_found(js, stream):
    js.delete_stream("ST")
    with pytest.raises(jss.StreamNotFoundError):
        stream.info()


# --- purge ---------------------------------------------------------------------------


def test_purge_removes_every_message_and_returns_the_count(js, stream):
    publish(js, 5)
    assert stream.purge() == 5
    state = stream.info().state
    assert (state.messages, state.first_seq) == (0, 6)
    assert stream.purge() == 0


def test_purge_by_subject_removes_only_that_subject(js, stream):
    publish(js, 3, "st.a")
    publish(js, 2, "st.b")
    assert stream.purge(subject="st.a") == 3
    assert stream.info().state.messages == 2
    assert stream.get_last_msg("st.b").data == b"m1"
    with pytest.raises(jss.MessageNotFoundError):
        stream.get_last_msg("st.a")


def test_purge_up_to_a_sequence_removes_the_messages_below_it(js, stream):
    publish(js, 10)
    assert stream.purge(sequence=4) == 3
    state = stream.info().state
    assert (state.messages, state.first_seq) == (7, 4)


def test_purge_keep_leaves_the_last_messages(js, stream):
    publish(js, 10)
    assert stream.purge(keep=3) == 7
    state = stream.info().state
    assert (state.messages, state.first_seq, state.last_seq) == (3, 8, 10)


def test_purge_by_subject_with_keep_keeps_the_last_of_that_subject(js, stream):
    publish(js, 4, "st.a")
    publish(js, 2, "st.b")
    assert stream.purge(subject="st.a", keep=1) == 3
    assert stream.info().state.messages == 3


def test_purge_with_sequence_and_keep_is_a_value_error_before_anything_is_sent(js, stream, api_spy):
    publish(js, 3)
    assert_sends_nothing(api_spy, js, lambda: stream.purge(sequence=2, keep=1), ValueError, "sequence and keep")
    assert_sends_nothing(api_spy, js, lambda: stream.purge(sequence=0), ValueError, "sequence")
    assert_sends_nothing(api_spy, js, lambda: stream.purge(keep=-1), ValueError, "keep")
    assert_sends_nothing(api_spy, js, lambda: stream.purge(sequence="2"), TypeError, "sequence")
    assert_sends_nothing(api_spy, js, lambda: stream.purge(subject="bad subject"), ValueError, "subject")
    assert stream.info().state.messages == 3


# --- reading messages back -------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["stream-msg-get", "direct-get"])
def readable(js, request):
    """A stream read back through STREAM.MSG.GET, or through DIRECT.GET (allow_direct)."""
    return js.create_stream(name="RD", subjects=["rd.>"], storage="memory", allow_direct=request.param)


def test_get_msg_returns_the_stored_message_with_its_headers(js, readable, api_spy):
    js.publish("rd.a", b"first")
    js.publish("rd.b", b"second", headers={"One": "1", "Many": ["x", "y"]})
    mark = api_spy.mark(js)
    msg = readable.get_msg(2)
    api_spy.sync(js)
    assert isinstance(msg, jss.StoredMsg)
    assert (msg.seq, msg.subject, msg.data) == (2, "rd.b", b"second")
    assert msg.headers["One"] == "1"
    assert msg.headers.get_all("Many") == ["x", "y"]
    assert set(msg.headers) == {"One", "Many"}  # direct get's Nats-* headers are fields, not headers
    assert msg.time is not None and msg.time.tzinfo is not None
    plain = readable.get_msg(1)
    assert (plain.data, plain.headers) == (b"first", None)
    expected = "$JS.API.DIRECT.GET.RD" if readable.cached_info.config.allow_direct else "$JS.API.STREAM.MSG.GET.RD"
    assert expected in api_spy.since(mark)


def test_get_last_msg_returns_the_last_message_on_a_subject(js, readable):
    js.publish("rd.a", b"a1")
    js.publish("rd.b", b"b1")
    js.publish("rd.a", b"a2", headers={"H": "v"})
    last = readable.get_last_msg("rd.a")
    assert (last.seq, last.subject, last.data, last.headers["H"]) == (3, "rd.a", b"a2", "v")
    assert readable.get_last_msg("rd.>").seq == 3


def test_get_msg_and_get_last_msg_raise_message_not_found(js, readable):
    js.publish("rd.a", b"a")
    with pytest.raises(jss.MessageNotFoundError):
        readable.get_msg(2)
    with pytest.raises(jss.MessageNotFoundError) as info:
        readable.get_last_msg("rd.none")
    assert info.value.err_code == 10037 and isinstance(info.value, jss.APIError)


def test_the_api_gets_the_first_message_on_a_subject_from_a_sequence_on(js, readable):
    # The request path's own get (what key-value reads and object chunks build on): next_by_subj.
    js.publish("rd.a", b"a1")
    js.publish("rd.b", b"b1")
    js.publish("rd.a", b"a2")
    get = js._jsapi.direct_get if readable.cached_info.config.allow_direct else js._jsapi.msg_get
    assert (get("RD", seq=2, next_by_subj="rd.a").seq, get("RD", seq=1, next_by_subj="rd.a").data) == (3, b"a1")
    assert get("RD", next_by_subj="rd.b").data == b"b1"
    with pytest.raises(jss.MessageNotFoundError):
        get("RD", seq=3, next_by_subj="rd.b")


@pytest.mark.parametrize("by", [{}, {"seq": 1, "last_by_subj": "rd.a"}, {"next_by_subj": "rd.a", "last_by_subj": "x"}],
                         ids=["nothing", "seq-and-last", "next-and-last"])
def test_an_api_get_with_no_or_contradicting_selectors_is_refused_before_anything_is_sent(js, readable, api_spy, by):
    get = js._jsapi.direct_get if readable.cached_info.config.allow_direct else js._jsapi.msg_get
    assert_sends_nothing(api_spy, js, lambda: get("RD", **by), ValueError, "seq|last_by_subj")


def test_a_deleted_message_is_not_found(js, readable):
    publish(js, 3, "rd.a")
    readable.delete_msg(2)
    with pytest.raises(jss.MessageNotFoundError):
        readable.get_msg(2)
    assert readable.get_msg(3).data == b"m2"


# --- deleting messages ---------------------------------------------------------------------


@pytest.mark.parametrize("erase", [False, True])
def test_delete_msg_removes_one_message(js, stream, erase):
    publish(js, 4)
    assert stream.delete_msg(2, erase=erase) is None
    state = stream.info().state
    assert (state.messages, state.num_deleted) == (3, 1)
    with pytest.raises(jss.MessageNotFoundError):
        stream.get_msg(2)
    assert [stream.get_msg(s).data for s in (1, 3, 4)] == [b"m0", b"m2", b"m3"]


def test_delete_msg_of_a_missing_or_deleted_sequence_raises_message_not_found(js, stream):
    publish(js, 2)
    stream.delete_msg(1)
    with pytest.raises(jss.MessageNotFoundError):
        stream.delete_msg(1)
    with pytest.raises(jss.MessageNotFoundError):
        stream.delete_msg(99)


def test_delete_msg_of_a_purged_sequence_in_a_file_stream_raises_message_not_found(js, name, subj):
    stream = js.create_stream(name=name, subjects=[subj], storage="file")  # its store answers 10057, not 10043
    js.publish(subj, b"x")
    stream.purge()
    with pytest.raises(jss.MessageNotFoundError, match="no message found"):
        stream.delete_msg(1)


@pytest.mark.parametrize("seq, exc", [(0, ValueError), (-1, ValueError), ("1", TypeError), (1.0, TypeError),
                                      (True, TypeError), (None, TypeError)])
def test_a_bad_seq_is_refused_before_anything_is_sent(js, stream, api_spy, seq, exc):
    publish(js, 1)
    assert_sends_nothing(api_spy, js, lambda: stream.get_msg(seq), exc, "seq")
    assert_sends_nothing(api_spy, js, lambda: stream.delete_msg(seq), exc, "seq")
    assert stream.info().state.messages == 1


def test_a_non_bool_erase_is_refused_before_anything_is_sent(js, stream, api_spy):
    publish(js, 1)
    assert_sends_nothing(api_spy, js, lambda: stream.delete_msg(1, erase="yes"), TypeError, "erase")
    assert stream.info().state.messages == 1


def test_a_bad_subject_for_get_last_msg_is_refused_before_anything_is_sent(js, stream, api_spy):
    assert_sends_nothing(api_spy, js, lambda: stream.get_last_msg("has space"), ValueError, "subject")
    assert_sends_nothing(api_spy, js, lambda: stream.get_last_msg(None), TypeError, "subject")


# --- consumers on this stream ------------------------------------------------------------


def test_stream_scoped_consumer_calls_manage_consumers_of_this_stream(js, stream):
    created = stream.create_consumer(durable_name="sc", description="v1")
    assert (created.name, created.stream_name) == ("sc", "ST")
    assert stream.consumer("sc").cached_info.config.description == "v1"
    assert stream.update_consumer(durable_name="sc", description="v2").cached_info.config.description == "v2"
    assert stream.create_or_update_consumer(durable_name="sc", description="v3").cached_info.config.description == "v3"
    assert stream.create_or_update_consumer(durable_name="sc2").name == "sc2"
    ephemeral = stream.create_consumer(filter_subject="st.a")
    assert sorted(stream.consumer_names()) == sorted(["sc", "sc2", ephemeral.name])
    assert sorted(i.name for i in stream.consumers()) == sorted(["sc", "sc2", ephemeral.name])
    assert stream.info().state.consumer_count == 3
    stream.delete_consumer("sc")
    with pytest.raises(jss.ConsumerNotFoundError):
        stream.consumer("sc")
    with pytest.raises(jss.ConsumerNotFoundError):
        stream.update_consumer(durable_name="sc", description="v4")
    with pytest.raises(jss.ConsumerExistsError):
        stream.create_consumer(durable_name="sc2", description="different")
    assert sorted(stream.consumer_names()) == sorted(["sc2", ephemeral.name])


def test_stream_scoped_consumer_calls_do_not_touch_other_streams(js, stream):
    other = js.create_stream(name="OTHER", subjects=["other.>"], storage="memory")
    other.create_consumer(durable_name="shared")
    stream.create_consumer(durable_name="shared", description="mine")
    assert stream.consumer("shared").cached_info.config.description == "mine"
    assert other.consumer("shared").cached_info.config.description is None
    stream.delete_consumer("shared")
    assert list(other.consumer_names()) == ["shared"]
    assert list(stream.consumer_names()) == []
