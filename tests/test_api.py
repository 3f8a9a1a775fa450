# API subjects honour the domain or prefix; responses decode to dicts or
# raise the matching APIError.
import pytest

import jetstream_sync as jss
from jetstream_sync.api import ApiPrefix, decode


def test_default_prefix_builds_js_api_subjects():
    api = ApiPrefix()
    assert api.stream_info("ORDERS") == "$JS.API.STREAM.INFO.ORDERS"
    assert api.msg_next("ORDERS", "c") == "$JS.API.CONSUMER.MSG.NEXT.ORDERS.c"
    assert api.consumer_create("ORDERS", "c", "ORDERS.new") == "$JS.API.CONSUMER.CREATE.ORDERS.c.ORDERS.new"
    assert api.consumer_create("ORDERS", None) == "$JS.API.CONSUMER.CREATE.ORDERS"


def test_a_domain_is_part_of_every_subject_direct_get_included():
    api = ApiPrefix(domain="hub")
    assert api.direct_get("S") == "$JS.hub.API.DIRECT.GET.S"
    assert api.account_info() == "$JS.hub.API.INFO"


def test_a_custom_prefix_replaces_the_default():
    assert ApiPrefix(api_prefix="$JS.leaf.API.").stream_names() == "$JS.leaf.API.STREAM.NAMES"


@pytest.mark.parametrize("kwargs, field", [({"domain": "a.b"}, "domain"), ({"domain": ""}, "domain"),
                                           ({"api_prefix": ""}, "api_prefix"),
                                           ({"domain": "a", "api_prefix": "$JS.API"}, "exclusive")])
def test_bad_domain_or_prefix_is_refused(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ApiPrefix(**kwargs)


def test_an_error_envelope_raises_the_matching_api_error():
    with pytest.raises(jss.StreamNotFoundError):
        decode(b'{"type":"x","error":{"code":404,"err_code":10059,"description":"stream not found"}}')
    assert decode(b'{"total":0}') == {"total": 0}


def test_a_response_that_is_not_json_is_a_clear_value_error():
    with pytest.raises(ValueError, match="not JSON"):
        decode(b"garbage")
