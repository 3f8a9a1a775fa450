# _protocol: the pure wire rules. classify_status (ADR-37 "Status handling", and the push side's
# flow-control requests), the PUB/HPUB and ack commands (byte for byte what nats-py writes), the
# argument checks every public call runs before sending. No server.
from __future__ import annotations

import datetime as dt

import pytest
from nats.protocol.command import hpub_cmd, pub_cmd

import jetstream_sync as jss
from jetstream_sync._protocol import (
    Status, ack_command, check_count, check_int, check_seconds, check_timeout, classify_status, prepare_pub,
    pub_command, pub_command_parts, pull_request, status_of,
)


# --- classify_status ------------------------------------------------------------------------


def test_status_100_is_a_heartbeat():
    assert classify_status("100", "Idle Heartbeat") == (Status.HEARTBEAT, None)


@pytest.mark.parametrize("description", ["FlowControl Request", "flowcontrol request", "Flow Control Request"])
def test_status_100_flow_control_request_is_not_a_heartbeat(description):
    assert classify_status("100", description) == (Status.FLOW_CONTROL, None)


def test_a_status_is_recognised_only_without_a_payload():
    code, hdrs = status_of(b"NATS/1.0 100 FlowControl Request\r\n\r\n", b"")
    assert (code, hdrs["Description"]) == ("100", "FlowControl Request")
    assert status_of(b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", b"data") is None
    assert status_of(b"NATS/1.0\r\nA: b\r\n\r\n", b"") is None


@pytest.mark.parametrize(("code", "description"), [
    ("404", "No Messages"),
    ("408", "Request Timeout"),
    ("409", "Message Size Exceeds MaxBytes"),
    ("409", "Batch Completed"),
])
def test_statuses_that_end_a_pull_quietly(code, description):
    assert classify_status(code, description) == (Status.END, None)


def test_409_consumer_deleted_is_terminal_with_consumer_deleted_error():
    kind, err = classify_status("409", "Consumer Deleted")
    assert kind is Status.TERMINAL
    assert isinstance(err, jss.ConsumerDeletedError)


def test_409_consumer_is_push_based_is_terminal_with_an_api_error():
    kind, err = classify_status("409", "Consumer is push based")
    assert kind is Status.TERMINAL
    assert isinstance(err, jss.APIError)
    assert err.code == 409
    assert "push based" in str(err)


@pytest.mark.parametrize("description", [
    "Exceeded MaxWaiting",
    "Exceeded MaxRequestBatch of 100",
    "Exceeded MaxRequestExpires of 1s",
    "Exceeded MaxRequestMaxBytes of 1024",
])
def test_409_exceeded_limits_are_warnings_carrying_the_description(description):
    kind, err = classify_status("409", description)
    assert kind is Status.WARNING
    assert isinstance(err, jss.APIError)
    assert not isinstance(err, jss.ConsumerDeletedError)
    assert err.code == 409
    assert description in str(err)


def test_400_bad_request_is_terminal_with_an_api_error():
    kind, err = classify_status("400", "Bad Request")
    assert kind is Status.TERMINAL
    assert isinstance(err, jss.APIError)
    assert err.code == 400
    assert "Bad Request" in str(err)


def test_503_is_terminal_no_responders():
    kind, err = classify_status("503", "")
    assert kind is Status.TERMINAL
    assert isinstance(err, jss.NoRespondersError)


def test_status_descriptions_are_matched_without_regard_to_case():
    assert classify_status("409", "consumer deleted")[0] is Status.TERMINAL
    assert classify_status("409", "BATCH COMPLETED") == (Status.END, None)


# --- commands -------------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "hdr"), [("", b""), ("_INBOX.x", b""), ("", b"NATS/1.0\r\nA: b\r\n\r\n"),
                                            ("_INBOX.x", b"NATS/1.0\r\nA: b\r\n\r\n")])
def test_pub_command_is_what_nats_py_writes(reply, hdr):
    want = hpub_cmd("orders.new", reply, hdr, b"payload") if hdr else pub_cmd("orders.new", reply, b"payload")
    assert pub_command("orders.new", reply, b"payload", hdr) == want


@pytest.mark.parametrize("hdr", [b"", b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"])
def test_a_command_in_two_parts_joined_around_the_reply_is_the_whole_command(hdr):
    head, tail = pub_command_parts("orders.new", b"payload", hdr)
    assert head + b"_INBOX.r" + tail == pub_command("orders.new", "_INBOX.r", b"payload", hdr)


def test_an_ack_is_a_pub_of_its_payload_to_the_reply_subject():
    assert ack_command(b"$JS.ACK.S.c.1.2.3.4.0", b"+ACK") == b"PUB $JS.ACK.S.c.1.2.3.4.0 4\r\n+ACK\r\n"


# --- argument checks ------------------------------------------------------------------------


def test_prepare_pub_refuses_more_than_max_payload_naming_data_and_the_limit():
    with pytest.raises(ValueError, match=r"data: 11 bytes exceed the server's max_payload of 10"):
        prepare_pub("s", b"x" * 11, None, 10)
    assert prepare_pub("s", "é", {"A": "b"}, 100) == ("s", "é".encode(), b"NATS/1.0\r\nA: b\r\n\r\n")


@pytest.mark.parametrize(("value", "error"), [(True, TypeError), (1.5, TypeError), ("3", TypeError), (0, ValueError)])
def test_counts_are_ints_of_at_least_one_and_the_error_names_the_argument(value, error):
    with pytest.raises(error, match="max_messages"):
        check_count(value, "max_messages")
    assert check_count(None, "max_messages") is None and check_count(3, "max_messages") == 3
    assert check_int(0, "expected_last_seq", 0) == 0


def test_durations_are_positive_seconds_or_timedeltas():
    assert check_seconds(dt.timedelta(milliseconds=1500), "expires") == 1.5
    assert check_seconds(None, "expires") is None
    for bad, error in ((0, ValueError), (-1, ValueError), ("1s", TypeError), (False, TypeError)):
        with pytest.raises(error, match="expires"):
            check_seconds(bad, "expires")


def test_a_timeout_may_be_none_only_where_allowed():
    assert check_timeout(None) is None and check_timeout(2) == 2.0
    with pytest.raises(TypeError, match="timeout must be a number of seconds, got None"):
        check_timeout(None, allow_none=False)
    with pytest.raises(ValueError, match="flush_timeout must be > 0"):
        check_timeout(0, "flush_timeout")


def test_a_pull_request_carries_durations_in_nanoseconds_and_no_wait_instead_of_an_expiry():
    assert pull_request(10, expires=30.0, idle_heartbeat=15.0) == {
        "batch": 10, "expires": 30_000_000_000, "idle_heartbeat": 15_000_000_000}
    assert pull_request(1_000_000, max_bytes=4096, expires=1.5) == {
        "batch": 1_000_000, "max_bytes": 4096, "expires": 1_500_000_000}
    assert pull_request(5, expires=30.0, no_wait=True) == {"batch": 5, "no_wait": True}
