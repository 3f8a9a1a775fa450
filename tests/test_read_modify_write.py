# A config another client wrote with nanosecond times and durations past 2**53 ns goes back to the
# server unchanged through a read-modify-write (real nats-server; the configs are written raw, as
# a Go client or the nats CLI would).
import json

import attrs

BEYOND_FLOAT = 2**53 + 1


def raw_request(client, subject, body=None):
    reply = json.loads(client.request(subject, b"" if body is None else json.dumps(body).encode()).data)
    assert "error" not in reply, reply
    return reply


def without(config, *keys):
    return {k: v for k, v in config.items() if k not in keys}


def test_a_consumer_with_nanosecond_times_updates_and_keeps_every_digit(client, js):
    js.create_stream(name="RMW", subjects=["rmw.>"])
    written = {"durable_name": "C", "deliver_policy": "by_start_time",
               "opt_start_time": "2024-01-02T03:04:05.123456789Z", "ack_policy": "explicit",
               "max_deliver": 5, "backoff": [1_000_000_001, BEYOND_FLOAT], "inactive_threshold": BEYOND_FLOAT,
               "max_expires": BEYOND_FLOAT + 2}
    before = raw_request(client, "$JS.API.CONSUMER.CREATE.RMW.C", {"stream_name": "RMW", "config": written})["config"]

    info = js.consumer_info("RMW", "C")
    assert info.config.opt_start_time.nanosecond == 789
    js.create_or_update_consumer("RMW", attrs.evolve(info.config, description="new"))

    after = raw_request(client, "$JS.API.CONSUMER.INFO.RMW.C")["config"]
    assert after["description"] == "new"
    assert json.dumps(without(after, "description")) == json.dumps(before)


def test_a_stream_source_start_time_and_long_ages_survive_a_description_change(client, js):
    js.create_stream(name="RMW_SRC", subjects=["rmwsrc.>"])
    written = {"name": "RMW", "subjects": ["rmw.>"], "max_age": 31_536_000_000_000_001,
               "duplicate_window": 120_000_000_001,
               "sources": [{"name": "RMW_SRC", "opt_start_time": "2024-01-02T03:04:05.123456789+01:00"}]}
    before = raw_request(client, "$JS.API.STREAM.CREATE.RMW", written)["config"]

    stream = js.stream("RMW")
    js.update_stream(attrs.evolve(stream.cached_info.config, description="new"))

    after = raw_request(client, "$JS.API.STREAM.INFO.RMW")["config"]
    assert after["description"] == "new"
    assert after["sources"] == [{"name": "RMW_SRC", "opt_start_time": "2024-01-02T03:04:05.123456789+01:00"}]
    assert json.dumps(without(after, "description")) == json.dumps(before)


def test_message_metadata_and_stored_time_agree_to_the_nanosecond(js):
    stream = js.create_stream(name="RMW", subjects=["rmw.>"])
    js.publish("rmw.a", b"x")
    msg = stream.create_consumer(durable_name="d").next(timeout=5)
    stored = stream.get_msg(1).time
    assert msg.metadata.timestamp_ns == stored.timestamp_ns() == msg.metadata.timestamp.timestamp_ns()
    assert msg.metadata.timestamp == stored
    msg.ack()
