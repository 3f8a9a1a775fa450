# Charter: the pure rules of the pull engine (jetstream_sync.pull), no server:
# fetch_options and consume_options (ADR-37 defaults, limits and refusals, as
# docs/consuming.md states them) and classify_status (ADR-37 "Status handling":
# which pull statuses end quietly, warn, or end a pull for good), and the error a pull that looks lost ends
# with once the server said whether its consumer and stream exist.
from __future__ import annotations

import datetime as dt

import pytest

import jetstream_sync as jss
from jetstream_sync._engine import Target, lost_verdict
from jetstream_sync.pull_options import BYTES_BATCH, consume_options, fetch_options


# --- consume_options (messages() / consume()) -----------------------------------------------


def test_consume_defaults_to_500_messages_30s_expiry_15s_heartbeat_and_half_thresholds():
    opts = consume_options()
    assert opts.max_messages == 500
    assert opts.max_bytes is None
    assert opts.expires == 30.0
    assert opts.idle_heartbeat == 15.0
    assert opts.threshold_messages == 250
    assert opts.threshold_bytes is None


@pytest.mark.parametrize(("expires", "heartbeat"), [(30.0, 2.0), (4.0, 2.0), (3.0, 1.5), (1.0, 0.5)])
def test_an_ordered_consume_defaults_to_a_2s_heartbeat_capped_at_half_of_expires(expires, heartbeat):
    # Its consumer lives on one server, and only the heartbeat alarm (2 x this) notices that server die.
    assert consume_options(expires=expires, ordered=True).idle_heartbeat == heartbeat


def test_an_ordered_consume_keeps_an_explicit_heartbeat_and_its_rules():
    assert consume_options(idle_heartbeat=10.0, ordered=True).idle_heartbeat == 10.0
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(expires=4.0, idle_heartbeat=3.0, ordered=True)
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(idle_heartbeat=0.1, ordered=True)


def test_consume_threshold_messages_defaults_to_half_of_max_messages():
    assert consume_options(max_messages=10).threshold_messages == 5
    assert consume_options(max_messages=7).threshold_messages in (3, 4)


def test_consume_with_max_messages_one_has_a_threshold_that_still_pulls():
    opts = consume_options(max_messages=1)
    assert opts.max_messages == 1
    assert opts.threshold_messages == 0  # credit 0 <= 0: a new pull is due once the one message is taken


def test_consume_with_max_bytes_requests_a_batch_of_a_million_and_half_the_bytes_as_threshold():
    opts = consume_options(max_bytes=4096)
    assert BYTES_BATCH == 1_000_000
    assert opts.max_messages == 1_000_000
    assert opts.max_bytes == 4096
    assert opts.threshold_bytes == 2048


def test_consume_refuses_max_messages_and_max_bytes_together():
    with pytest.raises(ValueError, match="max_messages"):
        consume_options(max_messages=10, max_bytes=1000)


def test_consume_refuses_an_expiry_below_one_second():
    with pytest.raises(ValueError, match="expires"):
        consume_options(expires=0.999)
    with pytest.raises(ValueError, match="expires"):
        consume_options(expires=0.5)
    assert consume_options(expires=1.0).expires == 1.0


@pytest.mark.parametrize("expires", [0, -1, -30.0])
def test_consume_refuses_a_non_positive_expiry(expires):
    with pytest.raises(ValueError, match="expires"):
        consume_options(expires=expires)


def test_consume_accepts_a_timedelta_expiry():
    opts = consume_options(expires=dt.timedelta(seconds=4))
    assert opts.expires == 4.0
    assert opts.idle_heartbeat == 2.0


@pytest.mark.parametrize(("expires", "heartbeat"), [
    (1.0, 0.5),      # half of expires, which is also the 0.5 s minimum
    (1.2, 0.6),
    (10.0, 5.0),
    (60.0, 30.0),    # exactly the cap
    (120.0, 30.0),   # capped at 30 s
    (3600.0, 30.0),
])
def test_consume_heartbeat_defaults_to_half_the_expiry_capped_at_30s(expires, heartbeat):
    assert consume_options(expires=expires).idle_heartbeat == pytest.approx(heartbeat)


def test_consume_heartbeat_is_always_on():
    for expires in (1.0, 5.0, 30.0, 300.0):
        assert consume_options(expires=expires).idle_heartbeat > 0


def test_consume_refuses_a_heartbeat_above_half_the_expiry():
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(expires=10.0, idle_heartbeat=5.01)
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(expires=1.0, idle_heartbeat=0.6)
    assert consume_options(expires=10.0, idle_heartbeat=5.0).idle_heartbeat == 5.0


def test_consume_refuses_a_heartbeat_below_half_a_second():
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(expires=10.0, idle_heartbeat=0.4)
    assert consume_options(expires=10.0, idle_heartbeat=0.5).idle_heartbeat == 0.5


def test_consume_refuses_a_heartbeat_above_30s():
    with pytest.raises(ValueError, match="idle_heartbeat"):
        consume_options(expires=120.0, idle_heartbeat=31.0)
    assert consume_options(expires=120.0, idle_heartbeat=30.0).idle_heartbeat == 30.0


def test_consume_keeps_a_custom_threshold_up_to_its_limit():
    assert consume_options(max_messages=100, threshold_messages=100).threshold_messages == 100
    assert consume_options(max_messages=100, threshold_messages=10).threshold_messages == 10
    assert consume_options(max_bytes=1000, threshold_bytes=1000).threshold_bytes == 1000


def test_consume_refuses_a_message_threshold_above_max_messages():
    with pytest.raises(ValueError, match="threshold_messages"):
        consume_options(max_messages=100, threshold_messages=101)
    with pytest.raises(ValueError, match="threshold_messages"):
        consume_options(threshold_messages=501)  # above the default 500


def test_consume_refuses_a_byte_threshold_above_max_bytes():
    with pytest.raises(ValueError, match="threshold_bytes"):
        consume_options(max_bytes=1000, threshold_bytes=1001)


def test_consume_refuses_a_threshold_for_the_other_limit():
    with pytest.raises(ValueError, match="threshold_messages"):
        consume_options(max_bytes=1000, threshold_messages=10)
    with pytest.raises(ValueError, match="threshold_bytes"):
        consume_options(max_messages=10, threshold_bytes=10)


@pytest.mark.parametrize("field", ["max_messages", "max_bytes"])
@pytest.mark.parametrize("value", [0, -1])
def test_consume_refuses_non_positive_limits(field, value):
    with pytest.raises(ValueError, match=field):
        consume_options(**{field: value})


@pytest.mark.parametrize("field", ["max_messages", "max_bytes", "threshold_messages"])
@pytest.mark.parametrize("value", [1.5, "10", True])
def test_consume_refuses_limits_that_are_not_ints(field, value):
    with pytest.raises(TypeError, match=field):
        consume_options(**{field: value})


def test_consume_refuses_an_expiry_that_is_not_a_number():
    with pytest.raises(TypeError, match="expires"):
        consume_options(expires="30")


# --- fetch_options (fetch() / next()) --------------------------------------------------------


def test_fetch_needs_exactly_one_of_max_messages_and_max_bytes():
    with pytest.raises(ValueError, match="max_messages"):
        fetch_options()
    with pytest.raises(ValueError, match="exclusive"):
        fetch_options(max_messages=10, max_bytes=100)


def test_fetch_with_max_messages_requests_that_batch_with_a_30s_expiry():
    opts = fetch_options(max_messages=10)
    assert (opts.batch, opts.max_bytes, opts.expires) == (10, None, 30.0)
    req = opts.request()
    assert req["batch"] == 10
    assert req["expires"] == 30_000_000_000
    assert "max_bytes" not in req


def test_fetch_with_max_bytes_requests_a_batch_of_a_million():
    opts = fetch_options(max_bytes=2048, expires=2.0)
    assert (opts.batch, opts.max_bytes) == (1_000_000, 2048)
    assert opts.request() == {"batch": 1_000_000, "max_bytes": 2048, "expires": 2_000_000_000}


@pytest.mark.parametrize("expires", [0.001, 0.1, 0.5, 0.999])
def test_fetch_accepts_any_positive_expiry_even_below_a_second(expires):
    opts = fetch_options(max_messages=1, expires=expires)
    assert opts.expires == expires
    assert opts.request()["expires"] == int(expires * 1e9)


@pytest.mark.parametrize("expires", [0, -0.5, -30])
def test_fetch_refuses_a_non_positive_expiry(expires):
    with pytest.raises(ValueError, match="expires"):
        fetch_options(max_messages=1, expires=expires)


def test_fetch_has_no_heartbeat_for_short_expiries():
    for expires in (0.5, 1.0, 5.0, 9.9):
        opts = fetch_options(max_messages=1, expires=expires)
        assert opts.idle_heartbeat is None
        assert "idle_heartbeat" not in opts.request()


def test_fetch_turns_heartbeats_on_for_long_expiries():
    for expires in (30.01, 60.0, 300.0):
        hb = fetch_options(max_messages=1, expires=expires).idle_heartbeat
        assert hb is not None and 0 < hb <= min(30.0, expires / 2)


def test_fetch_keeps_an_explicit_heartbeat_up_to_half_the_expiry():
    opts = fetch_options(max_messages=1, expires=2.0, idle_heartbeat=1.0)
    assert opts.idle_heartbeat == 1.0
    assert opts.request()["idle_heartbeat"] == 1_000_000_000


def test_fetch_refuses_a_heartbeat_above_half_the_expiry():
    with pytest.raises(ValueError, match="idle_heartbeat"):
        fetch_options(max_messages=1, expires=2.0, idle_heartbeat=1.01)


def test_fetch_client_deadline_is_always_longer_than_expires():
    for expires in (0.001, 0.5, 1.0, 30.0, 600.0):
        assert fetch_options(max_messages=1, expires=expires).client_deadline > expires


@pytest.mark.parametrize("timeout", [0.05, 1.0, 4.0, 29.0])
def test_a_fetch_timeout_cuts_the_server_side_expiry_to_end_before_it(timeout):
    opts = fetch_options(max_messages=10, expires=30.0, timeout=timeout)
    assert opts.expires < timeout and opts.expires >= timeout / 2
    assert opts.client_deadline <= timeout
    assert opts.request()["expires"] == int(opts.expires * 1e9)


def test_a_fetch_timeout_longer_than_expires_changes_nothing():
    assert fetch_options(max_messages=1, expires=2.0, timeout=60.0).expires == 2.0


def test_a_fetch_timeout_drops_a_heartbeat_that_no_longer_fits_and_keeps_one_that_does():
    assert fetch_options(max_messages=1, expires=30.0, idle_heartbeat=5.0, timeout=4.0).idle_heartbeat is None
    assert fetch_options(max_messages=1, expires=30.0, idle_heartbeat=1.0, timeout=4.0).idle_heartbeat == 1.0
    assert fetch_options(max_messages=1, expires=30.0, timeout=4.0).idle_heartbeat is None  # no default below 10 s


def test_fetch_no_wait_sends_no_wait_instead_of_an_expiry_and_no_heartbeat():
    opts = fetch_options(max_messages=5, expires=60.0, no_wait=True)
    assert opts.request() == {"batch": 5, "no_wait": True}


@pytest.mark.parametrize("field", ["max_messages", "max_bytes"])
def test_fetch_refuses_non_positive_and_non_int_limits(field):
    with pytest.raises(ValueError, match=field):
        fetch_options(**{field: 0})
    with pytest.raises(TypeError, match=field):
        fetch_options(**{field: 2.5})


# --- what a pull that looks lost ends with (after its one consumer info request) --------------


_TARGET = Target(conn=None, label="consumer 'billing' of stream 'ORDERS'", timeout=5.0, name="billing",
                 stream="ORDERS", consumer="billing")


@pytest.mark.parametrize(("failure", "text"), [
    (jss.StreamNotFoundError(404, 10059, "stream not found", stream="ORDERS"),
     "consumer 'billing' of stream 'ORDERS' is gone: stream 'ORDERS' was deleted"),
    (jss.ConsumerNotFoundError(404, 10014, "consumer not found", stream="ORDERS", consumer="billing"),
     "consumer 'billing' of stream 'ORDERS' was deleted"),
])
def test_a_pull_whose_consumer_or_stream_is_gone_ends_with_consumer_deleted_naming_both(failure, text):
    seen = jss.NoRespondersError("no responders for the pull request (503)")
    err = lost_verdict(_TARGET, seen, failure)
    assert type(err) is jss.ConsumerDeletedError and str(err) == text
    assert (err.stream, err.consumer) == ("ORDERS", "billing") and err.__cause__ is failure


@pytest.mark.parametrize("failure", [None, jss.TimeoutError("no answer"), jss.JetStreamNotEnabledError("off")])
def test_a_pull_whose_consumer_is_there_or_unknown_ends_with_what_the_server_said(failure):
    seen = jss.NoHeartbeatError("no heartbeat for 10s")
    assert lost_verdict(_TARGET, seen, failure) is seen
