# The exception tree: server errors are chosen by err_code, unknown codes
# still become APIError, and the retriable flags drive retries.
import builtins
import pickle

import pytest

import jetstream_sync as jss
from jetstream_sync import errors


@pytest.mark.parametrize(
    "err_code, cls",
    [
        (10059, jss.StreamNotFoundError),
        (10014, jss.ConsumerNotFoundError),
        (10149, jss.ConsumerNotFoundError),
        (10037, jss.MessageNotFoundError),
        (10058, jss.StreamNameInUseError),
        (10148, jss.ConsumerExistsError),
        (10105, jss.ConsumerExistsError),
        (10060, jss.StreamWrongStreamError),
        (10071, jss.StreamWrongLastSequenceError),
        (10070, jss.StreamWrongLastMsgIdError),
    ],
)
def test_server_errors_map_to_classes_by_err_code(err_code, cls):
    exc = errors.api_error_from({"code": 400, "err_code": err_code, "description": "boom"})
    assert type(exc) is cls
    assert isinstance(exc, jss.APIError) and isinstance(exc, jss.JetStreamError)
    assert (exc.code, exc.err_code, exc.description) == (400, err_code, "boom")


def test_an_unknown_err_code_still_becomes_an_api_error_carrying_the_code():
    exc = errors.api_error_from({"code": 400, "err_code": 99999, "description": "from the future"})
    assert type(exc) is jss.APIError
    assert exc.err_code == 99999 and "from the future" in str(exc)


def test_a_503_api_error_is_retriable_and_a_400_is_not():
    assert errors.api_error_from({"code": 503, "err_code": 10008, "description": "x"}).retriable
    assert not errors.api_error_from({"code": 400, "err_code": 10059, "description": "x"}).retriable


def test_duplicate_message_id_in_process_is_a_retriable_409_of_its_own():
    # The server's answer to a msg_id whose earlier publish is still being stored: the same publish again
    # is safe (the server deduplicates) and is what resolves it, so it is retriable although a 409.
    exc = errors.api_error_from({"code": 409, "err_code": 10158, "description": "duplicate message id is in process"},
                                subject="orders.new")
    assert type(exc) is jss.MsgIdInProcessError and isinstance(exc, jss.APIError)
    assert (exc.code, exc.err_code, exc.retriable) == (409, 10158, True)
    assert str(exc) == "duplicate message id is in process (subject 'orders.new', code=409, err_code=10158)"
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is jss.MsgIdInProcessError and back.retriable and str(back) == str(exc)
    # Other 409s stay final: a batch's duplicate msg_id, a pull's "Leadership Change" (no err_code).
    assert not errors.api_error_from({"code": 400, "err_code": 10201, "description": "x"}).retriable
    assert not errors.APIError(409, None, "Leadership Change").retriable


def test_a_full_stream_refusing_a_message_is_a_503_that_is_not_retried():
    full = errors.api_error_from({"code": 503, "err_code": 10077, "description": "maximum messages exceeded"})
    assert type(full) is errors.APIError and not full.retriable


def test_timeout_error_is_also_the_builtin_timeout_error():
    assert issubclass(jss.TimeoutError, builtins.TimeoutError)
    assert issubclass(jss.TimeoutError, jss.JetStreamError)
    assert jss.TimeoutError.retriable


def test_no_servers_error_is_also_a_builtin_connection_error():
    assert issubclass(jss.NoServersError, builtins.ConnectionError)


def test_jetstream_not_enabled_is_a_kind_of_no_responders():
    assert issubclass(jss.JetStreamNotEnabledError, jss.NoRespondersError)


def test_api_errors_survive_pickling_for_spark_tasks():
    exc = errors.api_error_from({"code": 404, "err_code": 10059, "description": "stream not found"})
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is jss.StreamNotFoundError and back.err_code == 10059


def test_the_tree_in_the_module_docstring_names_every_exception():
    names = [n for n in errors.__all__ if n[0].isupper()]
    for name in names:
        assert name in errors.__doc__, name


def test_api_errors_keep_the_names_they_carry_through_pickling():
    exc = errors.api_error_from({"code": 404, "err_code": 10014, "description": "consumer not found"},
                                stream="ORDERS", consumer="billing", operation="consumer info of 'billing'")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is jss.ConsumerNotFoundError and str(back) == str(exc)
    assert (back.stream, back.consumer, back.operation) == ("ORDERS", "billing", "consumer info of 'billing'")
    gone = pickle.loads(pickle.dumps(jss.ConsumerDeletedError("gone", "ORDERS", "billing")))
    assert (str(gone), gone.stream, gone.consumer) == ("gone", "ORDERS", "billing")
    nobody = pickle.loads(pickle.dumps(jss.NoRespondersError("nobody", "a.b")))
    assert (str(nobody), nobody.subject) == ("nobody", "a.b")


# -- errors name what they are about (a real server) ------------------------------------------------


def test_a_missing_stream_is_named_in_the_message_and_as_an_attribute(js):
    for call in (lambda: js.stream("NOPE"), lambda: js.stream_info("NOPE"), lambda: js.delete_stream("NOPE"),
                 lambda: js.consumer("NOPE", "billing")):
        with pytest.raises(jss.StreamNotFoundError) as info:
            call()
        assert str(info.value).startswith("stream 'NOPE' not found")
        assert info.value.stream == "NOPE" and info.value.err_code == 10059


def test_a_missing_consumer_is_named_with_its_stream(js, stream):
    for call in (lambda: js.consumer(stream.name, "billing"), lambda: stream.consumer("billing"),
                 lambda: js.delete_consumer(stream.name, "billing")):
        with pytest.raises(jss.ConsumerNotFoundError) as info:
            call()
        assert str(info.value).startswith(f"consumer 'billing' of stream '{stream.name}' not found")
        assert (info.value.consumer, info.value.stream) == ("billing", stream.name)


def test_other_api_errors_say_which_request_on_what_failed(js, stream, subj):
    with pytest.raises(jss.APIError) as info:
        js.create_stream(name="SHADOW", subjects=[f"{subj}.>"])   # overlaps the fixture's stream
    assert str(info.value).startswith("create stream 'SHADOW': ") and info.value.err_code == 10065
    assert info.value.stream == "SHADOW" and info.value.operation == "create stream 'SHADOW'"
    with pytest.raises(jss.MessageNotFoundError) as missing:
        stream.get_msg(99)
    assert missing.value.stream == stream.name and repr(stream.name) in str(missing.value)


def test_a_publish_no_stream_captures_names_the_subject_and_what_to_do(js):
    with pytest.raises(jss.NoRespondersError) as info:
        js.publish("nowhere.x", b"lost")
    assert info.value.subject == "nowhere.x"
    assert str(info.value).startswith("no stream captures subject 'nowhere.x'; create a stream with that subject")
    fut = js.publish_async("nowhere.y", b"lost")
    assert fut.exception(timeout=5).subject == "nowhere.y"


def test_a_refused_publish_expectation_names_the_subject(js, stream, subj):
    js.publish(f"{subj}.a", b"1")
    with pytest.raises(jss.StreamWrongLastSequenceError) as info:
        js.publish(f"{subj}.a", b"2", expected_last_seq=0)
    assert info.value.subject == f"{subj}.a" and f"(subject '{subj}.a', code=400, err_code=10071)" in str(info.value)


def test_a_request_nobody_serves_names_the_subject(client):
    with pytest.raises(jss.NoRespondersError) as info:
        client.request("nobody.home", b"?", timeout=5)
    assert info.value.subject == "nobody.home" and "'nobody.home'" in str(info.value)
