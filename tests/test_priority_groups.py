# Charter: priority groups of pull consumers (ADR-42) against a real nats-server: the config fields and
# the group state the server reports; a pinned group (one client gets everything, another takes over
# within priority_timeout of the first stopping, the pin kept while idle, a 423 that never ends a read);
# overflow thresholds; prioritized pulls; unpinning; every bad argument refused before anything is sent;
# a server too old for it. What the server holds is read with raw CONSUMER.INFO requests.
from __future__ import annotations

import json
import threading
import time

import attrs
import pytest

import jetstream_sync as jss
from jetstream_sync._protocol import pin_id_of, pull_request
from jetstream_sync.config import ConsumerConfig, ConsumerInfo, PriorityGroupState
from jetstream_sync.pull_options import Pin, PriorityOptions, consume_options, fetch_options, priority_options

from conftest import assert_sends_nothing, publish_n, wait_for

#: Seconds a pinned group keeps its pin without a new pull, in the pinned tests.
PIN_TIMEOUT = 2.0


def raw_info(client: jss.Client, stream: str, consumer: str) -> dict:
    """The consumer info as the server sends it, read on a plain request."""
    return json.loads(client.request(f"$JS.API.CONSUMER.INFO.{stream}.{consumer}", b"", timeout=10).data)


def pinned_id(client: jss.Client, stream: str, consumer: str) -> str | None:
    groups = raw_info(client, stream, consumer).get("priority_groups") or [{}]
    return groups[0].get("pinned_client_id") or None


class Recorder:
    """What a consume handler saw (thread-safe): payloads and the pin ids they came with."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pins: list[str | None] = []
        self.errors: list[BaseException] = []

    def handler(self, msg: jss.Msg) -> None:
        with self.lock:
            self.pins.append((msg.headers or {}).get("Nats-Pin-Id"))
        msg.ack()

    def on_error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)

    def count(self) -> int:
        with self.lock:
            return len(self.pins)


@pytest.fixture
def pinned(stream):
    return stream.create_consumer(durable_name="P", ack_policy="explicit", priority_policy="pinned_client",
                                  priority_groups=["jobs"], priority_timeout=PIN_TIMEOUT)


@pytest.fixture
def overflow(stream):
    return stream.create_consumer(durable_name="O", ack_policy="explicit", priority_policy="overflow",
                                  priority_groups=["jobs"])


@pytest.fixture
def plain(stream):
    return stream.create_consumer(durable_name="C", ack_policy="explicit")


# --- config and state --------------------------------------------------------------------------


def test_the_priority_fields_reach_the_server_and_read_back(client, stream, name, pinned):
    config = raw_info(client, name, "P")["config"]
    assert (config["priority_policy"], config["priority_groups"], config["priority_timeout"]) == (
        "pinned_client", ["jobs"], 2_000_000_000)
    cfg = pinned.cached_info.config
    assert cfg.priority_policy is jss.PriorityPolicy.PINNED_CLIENT
    assert (cfg.priority_groups, cfg.priority_timeout) == (["jobs"], PIN_TIMEOUT)
    [state] = pinned.cached_info.priority_groups
    assert isinstance(state, PriorityGroupState)
    assert (state.group, state.pinned_client_id, state.pinned_ts) == ("jobs", None, None)  # nobody pulled yet


@pytest.mark.parametrize("fields, match", [
    ({"priority_groups": ["jobs"]}, "priority_groups need a priority_policy"),
    ({"priority_policy": "overflow"}, "needs priority_groups"),
    ({"priority_policy": "pinned_client", "priority_groups": []}, "needs priority_groups"),
    ({"priority_policy": "overflow", "priority_groups": ["a.b"]}, r"priority_groups\[0\] 'a.b' is not a valid"),
    ({"priority_policy": "overflow", "priority_groups": ["x" * 17]}, r"priority_groups\[0\]"),
    ({"priority_timeout": 5}, "priority_timeout needs a priority_policy"),
    ({"priority_policy": "pinned_client", "priority_groups": ["jobs"], "deliver_subject": "d"}, "pull consumers"),
    ({"priority_policy": "first_come", "priority_groups": ["jobs"]}, "priority_policy must be one of"),
])
def test_a_priority_config_the_server_would_refuse_is_refused_when_built(fields, match):
    with pytest.raises(ValueError, match=match):
        ConsumerConfig(durable_name="P", **fields)


def test_every_character_the_server_allows_in_a_group_name_is_allowed():
    cfg = ConsumerConfig(priority_policy="prioritized", priority_groups=["A-z_0/9=", "x" * 16])
    assert cfg.to_request()["priority_groups"] == ["A-z_0/9=", "x" * 16]


def test_the_priority_group_state_reads_the_pin_and_an_unpinned_group_reads_as_none():
    raw = {"stream_name": "S", "name": "P", "ts": "2026-01-02T03:04:05Z", "priority_groups": [
        {"group": "jobs", "pinned_client_id": "abc", "pinned_ts": "2026-01-02T03:04:05.123456789Z"},
        {"group": "idle", "pinned_ts": "0001-01-01T00:00:00Z"}]}
    info = ConsumerInfo.from_response(raw, strict=True)
    jobs, idle = info.priority_groups
    assert (jobs.group, jobs.pinned_client_id, jobs.pinned_ts.nanosecond) == ("jobs", "abc", 789)
    assert (idle.group, idle.pinned_client_id, idle.pinned_ts) == ("idle", None, None)


# --- the rules of a priority pull (no server) ----------------------------------------------------

PINNED = ConsumerConfig(priority_policy="pinned_client", priority_groups=["jobs"], priority_timeout=10)
OVERFLOW = ConsumerConfig(priority_policy="overflow", priority_groups=["jobs"])
PRIORITIZED = ConsumerConfig(priority_policy="prioritized", priority_groups=["jobs"])
NONE = ConsumerConfig(durable_name="C")


@pytest.mark.parametrize("config, args, error, match", [
    (PINNED, {}, ValueError, r"group= is required: consumer 'P' has priority groups \['jobs'\]"),
    (PINNED, {"group": "other"}, ValueError, r"group='other' is not a priority group of consumer 'P'"),
    (PINNED, {"group": "a b"}, ValueError, "group 'a b' is not a valid priority group name"),
    (PINNED, {"group": 5}, TypeError, "group must be a str"),
    (NONE, {"group": "jobs"}, ValueError, "group='jobs': consumer 'P' has no priority groups"),
    (NONE, {"min_pending": 5}, ValueError, "min_pending=5: consumer 'P' has no priority groups"),
    (PRIORITIZED, {"group": "jobs", "priority": 10}, ValueError, "priority must be between 0 and 9"),
    (PRIORITIZED, {"group": "jobs", "priority": -1}, ValueError, "priority must be >= 0"),
    (PRIORITIZED, {"group": "jobs", "priority": "1"}, TypeError, "priority must be an int"),
    (PINNED, {"group": "jobs", "priority": 1}, ValueError, "priority is for priority_policy 'prioritized'"),
    (PINNED, {"group": "jobs", "min_pending": 1}, ValueError, "min_pending is for priority_policy 'overflow'"),
    (PRIORITIZED, {"group": "jobs", "min_ack_pending": 1}, ValueError, "min_ack_pending is for priority_policy"),
    (OVERFLOW, {"group": "jobs", "min_pending": 0}, ValueError, "min_pending must be >= 1"),
])
def test_a_priority_pull_is_checked_against_the_consumer(config, args, error, match):
    args = {"group": None, "min_pending": None, "min_ack_pending": None, "priority": None, **args}
    with pytest.raises(error, match=match):
        priority_options(args["group"], args["min_pending"], args["min_ack_pending"], args["priority"], config,
                         "consumer 'P'")


def test_the_pull_request_carries_the_group_fields_and_the_pin_id():
    overflow = priority_options("jobs", 10, 3, None, OVERFLOW, "c")
    assert fetch_options(5, expires=2.0, priority=overflow).request() == {
        "batch": 5, "expires": 2_000_000_000, "group": "jobs", "min_pending": 10, "min_ack_pending": 3}
    prio = priority_options("jobs", None, None, 0, PRIORITIZED, "c")
    assert fetch_options(1, no_wait=True, priority=prio).request() == {
        "batch": 1, "no_wait": True, "group": "jobs", "priority": 0}
    pins: dict[str, Pin] = {}
    pinned = priority_options("jobs", None, None, None, PINNED, "c", pins)
    opts = consume_options(priority=pinned)
    assert opts.request(500, None) == {"batch": 500, "expires": 5_000_000_000, "idle_heartbeat": 2_500_000_000,
                                       "group": "jobs"}
    pins["jobs"].seen(b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n")
    assert opts.request(10, None)["id"] == "abc"
    assert priority_options("jobs", None, None, None, PINNED, "c", pins).pin is pins["jobs"]  # one per handle
    assert pull_request(3) == {"batch": 3}  # no group: not a field more


def test_a_pinned_pull_expires_within_half_the_priority_timeout_and_heartbeats_fit():
    pin = PriorityOptions(group="jobs", fields={"group": "jobs"}, pin=Pin(), timeout=1.0)
    opts = consume_options(priority=pin)
    assert (opts.expires, opts.idle_heartbeat) == (0.5, 0.25)
    opts = consume_options(expires=2.0, idle_heartbeat=1.0, priority=attrs.evolve(pin, timeout=120.0))
    assert (opts.expires, opts.idle_heartbeat) == (2.0, 1.0)  # already well within: untouched
    default = priority_options("jobs", None, None, None, ConsumerConfig(priority_policy="pinned_client",
                                                                        priority_groups=["jobs"]), "c")
    assert consume_options(priority=default).expires == 30.0  # the server's default timeout is 120 s


def test_the_pin_id_is_read_from_the_raw_headers_and_a_late_423_does_not_clear_a_newer_pin():
    assert pin_id_of(b"NATS/1.0\r\nA: b\r\nNats-Pin-Id: xyz\r\n\r\n") == "xyz"
    assert pin_id_of(b"NATS/1.0\r\nA: b\r\n\r\n") is None
    pin = Pin()
    assert pin.refused() is False and pin.for_request() is None
    pin.seen(b"NATS/1.0\r\nNats-Pin-Id: one\r\n\r\n")
    assert pin.for_request() == "one"
    pin.seen(b"NATS/1.0\r\nNats-Pin-Id: two\r\n\r\n")  # a new pin before the 423 about "one" came
    assert pin.refused() is False and pin.id == "two"
    assert pin.for_request() == "two" and pin.refused() is True and pin.id is None


# --- pinned_client -------------------------------------------------------------------------------


def wait_waiting(client, name, consumer, n, what):
    wait_for(lambda: raw_info(client, name, consumer)["num_waiting"] >= n, 20, interval=0.05, what=what)


@pytest.mark.timeout(90)
def test_of_two_consumes_on_a_pinned_group_one_gets_everything_and_the_other_takes_over_when_it_stops(
        js, client, stream, name, subj, pinned):
    first, second = js.consumer(name, "P"), stream.consumer("P")  # two handles: two clients
    rec1, rec2 = Recorder(), Recorder()
    h1 = first.consume(rec1.handler, group="jobs", error_handler=rec1.on_error)
    h2 = None
    try:
        publish_n(js, f"{subj}.a", 10)
        wait_for(lambda: rec1.count() == 10, 20, what="the first consume to get the first 10")
        h2 = second.consume(rec2.handler, group="jobs", error_handler=rec2.on_error)
        wait_waiting(client, name, "P", 2, "both consumes to wait on the server")
        publish_n(js, f"{subj}.a", 20)
        wait_for(lambda: rec1.count() == 30, 20, what="the pinned consume to get every message")
        assert rec2.count() == 0
        pin1 = pinned_id(client, name, "P")
        assert pin1 is not None and set(rec1.pins) == {pin1}

        stopped = time.monotonic()
        h1.stop()
        # The stopped consume's pull request is dropped with its inbox; wait until the server let it go.
        wait_for(lambda: raw_info(client, name, "P")["num_waiting"] <= 1, 20, interval=0.05,
                 what="the stopped consume's pull to leave the server")
        publish_n(js, f"{subj}.a", 20)
        wait_for(lambda: rec2.count() == 20, PIN_TIMEOUT + 20, interval=0.02, what="the second consume to take over")
        took = time.monotonic() - stopped
        assert took < PIN_TIMEOUT + 15  # the pin moved when the timeout ran out, not later (generous under load)
        pin2 = pinned_id(client, name, "P")
        assert pin2 not in (None, pin1) and set(rec2.pins) == {pin2}
        assert rec1.count() == 30 and rec1.errors == [] and rec2.errors == []
        assert h2.error is None and not h2.closed
        info = raw_info(client, name, "P")
        assert (info["num_pending"], info["num_ack_pending"]) == (0, 0)
    finally:
        h1.stop()
        if h2 is not None:
            h2.stop()


@pytest.mark.timeout(90)
def test_an_idle_pinned_messages_keeps_its_pin_by_pulling_within_the_priority_timeout(
        js, client, stream, name, subj, pinned):
    first, second = js.consumer(name, "P"), stream.consumer("P")
    rec2 = Recorder()
    with first.messages(group="jobs") as msgs:  # expires 30 s asked for: cut to PIN_TIMEOUT / 2
        js.publish(f"{subj}.a", b"0")
        msgs.next(timeout=10).ack()
        pin = pinned_id(client, name, "P")
        assert pin is not None
        h2 = second.consume(rec2.handler, group="jobs", error_handler=rec2.on_error)
        try:
            # Three pin timeouts without a message: the server would move an unrefreshed pin.
            watch_until = time.monotonic() + 3 * PIN_TIMEOUT
            while time.monotonic() < watch_until:
                assert pinned_id(client, name, "P") == pin
                time.sleep(0.2)
            publish_n(js, f"{subj}.a", 5)
            got = [msgs.next(timeout=10) for _ in range(5)]
            for msg in got:
                msg.ack()
            assert {msg.headers["Nats-Pin-Id"] for msg in got} == {pin}
            assert rec2.count() == 0 and msgs.warnings == []
        finally:
            h2.stop()


@pytest.mark.timeout(60)
def test_a_consume_whose_group_is_unpinned_gets_a_423_and_goes_on_with_a_new_pin(js, client, stream, name, subj,
                                                                                   pinned):
    rec = Recorder()
    handle = pinned.consume(rec.handler, group="jobs", error_handler=rec.on_error)
    try:
        publish_n(js, f"{subj}.a", 5)
        wait_for(lambda: rec.count() == 5, 20, what="the first 5")
        pin1 = pinned_id(client, name, "P")
        stream.unpin_consumer("P", "jobs")
        publish_n(js, f"{subj}.a", 5)
        wait_for(lambda: rec.count() == 10, 20, what="5 more after the unpin")
        pin2 = pinned_id(client, name, "P")
        assert pin2 not in (None, pin1)
        assert rec.pins == [pin1] * 5 + [pin2] * 5
        assert handle.error is None and not handle.closed
        assert len(rec.errors) == 1 and isinstance(rec.errors[0], jss.PinIdMismatchError)
        assert rec.errors[0].code == 423 and "consumer 'P'" in str(rec.errors[0])
        assert handle.stats.warnings == 1
    finally:
        handle.stop()


@pytest.mark.timeout(60)
def test_a_fetch_and_a_next_after_an_unpin_pull_again_without_the_old_pin_and_are_pinned_anew(
        js, client, stream, name, subj, pinned):
    publish_n(js, f"{subj}.a", 10)
    first = list(pinned.fetch(2, group="jobs", expires=5))
    pin1 = first[0].headers["Nats-Pin-Id"]
    assert pinned_id(client, name, "P") == pin1
    stream.unpin_consumer("P", "jobs")
    batch = pinned.fetch(2, group="jobs", expires=10)  # sends pin1, gets 423, pulls again without it
    again = list(batch)
    assert batch.error is None and len(again) == 2
    pin2 = again[0].headers["Nats-Pin-Id"]
    assert pin2 != pin1 and pinned_id(client, name, "P") == pin2
    pinned.unpin("jobs")
    msg = pinned.next(timeout=10, group="jobs")
    assert msg.headers["Nats-Pin-Id"] not in (pin1, pin2, None)
    for m in first + again + [msg]:
        m.ack()


@pytest.mark.timeout(60)
def test_a_fetch_whose_pin_went_to_another_client_ends_quietly_and_leaves_the_pin_there(js, client, stream, name,
                                                                                         subj, pinned):
    other = stream.consumer("P")
    publish_n(js, f"{subj}.a", 10)
    assert len(list(pinned.fetch(2, group="jobs", expires=5))) == 2
    stream.unpin_consumer("P", "jobs")
    theirs = list(other.fetch(2, group="jobs", expires=5))
    pin2 = theirs[0].headers["Nats-Pin-Id"]
    batch = pinned.fetch(2, group="jobs", expires=1)  # its old pin: 423 at once, then it stands by
    assert list(batch) == [] and batch.error is None
    assert pinned_id(client, name, "P") == pin2
    assert [m.headers["Nats-Pin-Id"] for m in other.fetch(2, group="jobs", expires=5)] == [pin2, pin2]


# --- overflow and prioritized ---------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_an_overflow_consume_delivers_nothing_below_min_pending(js, client, stream, name, subj, overflow):
    publish_n(js, f"{subj}.a", 5)
    rec = Recorder()
    handle = overflow.consume(rec.handler, group="jobs", min_pending=10, error_handler=rec.on_error)
    try:
        wait_waiting(client, name, "O", 1, "the overflow pull to wait on the server")
        watch_until = time.monotonic() + 1.5
        while time.monotonic() < watch_until:  # the server holds the pull: 5 pending is below 10
            info = raw_info(client, name, "O")
            assert (info["num_pending"], info["num_ack_pending"], info["delivered"]["stream_seq"]) == (5, 0, 0)
            time.sleep(0.1)
        assert rec.count() == 0
        publish_n(js, f"{subj}.a", 10)  # 15 pending: delivered while at least 10 are
        wait_for(lambda: rec.count() == 6, 20, what="the 6 messages above the threshold")
        wait_for(lambda: raw_info(client, name, "O")["num_ack_pending"] == 0, 10, what="the acks")
        assert raw_info(client, name, "O")["num_pending"] == 9 and rec.count() == 6
        assert rec.errors == [] and handle.error is None
    finally:
        handle.stop()


@pytest.mark.timeout(60)
def test_an_overflow_fetch_waits_for_min_pending_or_min_ack_pending(js, client, name, subj, overflow):
    publish_n(js, f"{subj}.a", 5)
    assert list(overflow.fetch(10, group="jobs", min_pending=6, expires=1)) == []
    assert len(list(overflow.fetch_no_wait(10, group="jobs", min_pending=5))) == 1  # 5 pending, then 4: stops
    assert list(overflow.fetch(10, group="jobs", min_ack_pending=2, expires=1)) == []  # 1 unacked
    unacked = list(overflow.fetch(2, group="jobs", expires=5))
    assert raw_info(client, name, "O")["num_ack_pending"] == 3
    more = list(overflow.fetch(10, group="jobs", min_ack_pending=3, expires=1))
    assert len(more) == 2  # every message left, taken while 3 or more were unacked
    for msg in unacked + more:
        msg.ack()
    js.publish(f"{subj}.a", b"x")
    with pytest.raises(jss.TimeoutError):
        overflow.next(timeout=1, group="jobs", min_pending=2)  # 1 pending
    assert overflow.next(timeout=10, group="jobs", min_pending=1).data == b"x"


@pytest.mark.timeout(60)
def test_a_prioritized_group_serves_the_lower_priority_first(js, client, stream, name, subj):
    stream.create_consumer(durable_name="Z", ack_policy="explicit", priority_policy="prioritized",
                           priority_groups=["jobs"])
    low, high = stream.consumer("Z"), stream.consumer("Z")
    rec0, rec1 = Recorder(), Recorder()
    h1 = high.consume(rec1.handler, group="jobs", priority=1, error_handler=rec1.on_error)
    h0 = low.consume(rec0.handler, group="jobs", priority=0, error_handler=rec0.on_error)
    try:
        wait_waiting(client, name, "Z", 2, "both pulls to wait on the server")
        publish_n(js, f"{subj}.a", 50)
        wait_for(lambda: rec0.count() == 50, 20, what="priority 0 to get every message")
        assert rec1.count() == 0
        h0.stop()
        wait_for(lambda: raw_info(client, name, "Z")["num_waiting"] <= 1, 20, interval=0.05,
                 what="the stopped pull to leave the server")
        publish_n(js, f"{subj}.a", 5)
        wait_for(lambda: rec1.count() == 5, 20, what="priority 1 once priority 0 is gone")
        assert rec0.errors == [] and rec1.errors == []
    finally:
        h0.stop()
        h1.stop()


# --- unpinning -----------------------------------------------------------------------------------


def test_unpin_clears_the_pin_the_server_holds(js, client, stream, name, subj, pinned):
    js.publish(f"{subj}.a", b"x")
    pinned.next(timeout=10, group="jobs").ack()
    assert pinned_id(client, name, "P") is not None
    js.unpin_consumer(name, "P", "jobs")
    assert pinned_id(client, name, "P") is None


def test_unpin_of_a_missing_consumer_or_group_is_the_servers_error(js, stream, name, pinned):
    with pytest.raises(jss.ConsumerNotFoundError):
        stream.unpin_consumer("NOPE", "jobs")
    with pytest.raises(jss.APIError, match="unpin consumer 'P'"):
        stream.unpin_consumer("P", "other")
    with pytest.raises(jss.StreamNotFoundError):
        js.unpin_consumer("NOSTREAM", "P", "jobs")


# --- refused before anything is sent -------------------------------------------------------------


def test_every_bad_priority_argument_is_refused_before_anything_is_sent(api_spy, js, stream, pinned, plain):
    prio = stream.create_consumer(durable_name="Z", priority_policy="prioritized", priority_groups=["jobs"])
    cases = [
        (lambda: pinned.fetch(1), "group= is required"),
        (lambda: pinned.fetch_no_wait(1), "group= is required"),
        (lambda: pinned.next(timeout=1), "group= is required"),
        (lambda: pinned.messages(), "group= is required"),
        (lambda: pinned.consume(print), "group= is required"),
        (lambda: pinned.fetch(1, group="nope"), "not a priority group of consumer 'P'"),
        (lambda: pinned.consume(print, group="nope"), "not a priority group"),
        (lambda: pinned.fetch(1, group="jobs", min_pending=5), "min_pending is for priority_policy 'overflow'"),
        (lambda: pinned.messages(group="jobs", priority=1), "priority is for priority_policy 'prioritized'"),
        (lambda: prio.fetch(1, group="jobs", priority=10), "priority must be between 0 and 9"),
        (lambda: prio.consume(print, group="jobs", priority=-1), "priority must be >= 0"),
        (lambda: plain.fetch(1, group="jobs"), "group='jobs': consumer 'C' of stream .* has no priority groups"),
        (lambda: plain.next(timeout=1, min_ack_pending=1), "min_ack_pending=1: consumer 'C'"),
        (lambda: pinned.unpin("nope"), "group='nope' is not a priority group"),
        (lambda: stream.unpin_consumer("P", "a.b"), "not a valid priority group name"),
        (lambda: js.unpin_consumer(stream.name, "P", ""), "not a valid priority group name"),
    ]
    for call, match in cases:
        assert_sends_nothing(api_spy, js, call, ValueError, match)
    with pytest.raises(TypeError, match="group must be a str"):
        pinned.fetch(1, group=1)


def test_a_priority_pull_on_a_server_before_2_11_is_refused_naming_the_version(api_spy, js, stream, subj, pinned,
                                                                               plain, monkeypatch):
    prio = stream.create_consumer(durable_name="Z", priority_policy="prioritized", priority_groups=["jobs"])
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 0)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.10.24")
    need = r"priority groups needs nats-server 2.11 or later \(JetStream API level 1\); the server runs 2.10.24"
    for call in (lambda: pinned.fetch(1, group="jobs"), lambda: pinned.next(timeout=1, group="jobs"),
                 lambda: pinned.consume(print, group="jobs"), lambda: pinned.messages(group="jobs"),
                 lambda: pinned.fetch_no_wait(1, group="jobs")):
        assert_sends_nothing(api_spy, js, call, jss.FeatureNotSupportedError, need)
    assert_sends_nothing(api_spy, js, lambda: stream.unpin_consumer("P", "jobs"), jss.FeatureNotSupportedError,
                         "unpinning a priority group needs nats-server 2.11")
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 1)
    monkeypatch.setitem(js._conn._nc._server_info, "version", "2.11.0")
    assert_sends_nothing(api_spy, js, lambda: prio.fetch(1, group="jobs", priority=0), jss.FeatureNotSupportedError,
                         "the prioritized priority policy needs nats-server 2.12")
    js.publish(f"{subj}.a", b"x")
    assert len(list(prio.fetch_no_wait(1, group="jobs"))) == 1  # a group without priority= is 2.11's
    monkeypatch.setitem(js._conn._nc._server_info, "api_lvl", 0)
    js.publish(f"{subj}.a", b"y")
    assert plain.next(timeout=10).data == b"x"  # no group: any server
