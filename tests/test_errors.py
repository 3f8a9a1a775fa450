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
