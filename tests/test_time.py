# Times and durations keep the server's exact value: Timestamp and Seconds (pure, no server).
import copy
import pickle
from datetime import datetime, timedelta, timezone

import attrs
import pytest

import jetstream_sync as jss
from jetstream_sync.config import (
    ConsumerConfig,
    StreamConfig,
    StreamInfo,
    format_time,
    parse_time,
    seconds_to_nanos,
    to_seconds,
)

UTC = timezone.utc
NANO_TEXT = "2024-01-02T03:04:05.123456789Z"
BEYOND_FLOAT = 2**53 + 1  # ns: the nearest float of seconds is off by one


class TestTimestamp:
    def test_a_parsed_time_keeps_its_nanoseconds_and_is_a_datetime(self):
        t = parse_time(NANO_TEXT)
        assert isinstance(t, datetime) and isinstance(t, jss.Timestamp)
        assert (t.microsecond, t.nanosecond) == (123456, 789)
        assert t.timestamp_ns() == 1704164645_123456789
        assert format_time(t) == NANO_TEXT

    def test_an_unchanged_time_is_written_back_in_the_servers_own_spelling(self):
        for text in ("2024-01-02T03:04:05.123456789+01:00", "2024-01-02T03:04:05.10Z", "2024-01-02T03:04:05Z"):
            assert format_time(parse_time(text)) == text

    def test_from_ns_and_timestamp_ns_are_exact_both_ways(self):
        for ns in (0, 1, 1_700_000_000_123_456_789, 1_700_000_000_999_999_999):
            t = jss.Timestamp.from_ns(ns)
            assert t.timestamp_ns() == ns and t.utcoffset() == timedelta(0)
            assert parse_time(format_time(t)).timestamp_ns() == ns

    def test_nanoseconds_decide_equality_and_order(self):
        t = parse_time(NANO_TEXT)
        plain = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
        assert t != plain and t > plain and plain < t
        assert parse_time("2024-01-02T03:04:05.123456Z") == plain
        assert hash(parse_time("2024-01-02T03:04:05.123456Z")) == hash(plain)
        assert t == jss.Timestamp.from_ns(t.timestamp_ns()) and hash(t) == hash(jss.Timestamp.from_ns(t.timestamp_ns()))
        assert parse_time("2024-01-02T04:04:05.123456789+01:00") == t

    def test_adding_a_timedelta_keeps_the_nanoseconds_and_writes_the_new_time(self):
        later = parse_time(NANO_TEXT) + timedelta(seconds=1)
        assert isinstance(later, jss.Timestamp) and later.nanosecond == 789
        assert format_time(later) == "2024-01-02T03:04:06.123456789Z"
        assert format_time(parse_time(NANO_TEXT) - timedelta(seconds=1)) == "2024-01-02T03:04:04.123456789Z"

    def test_replace_gives_a_new_time_written_as_such(self):
        t = parse_time("2024-01-02T03:04:05.123456789+01:00").replace(year=2025)
        assert format_time(t) == "2025-01-02T02:04:05.123456Z"

    def test_pickle_and_copy_keep_everything(self):
        t = parse_time("2024-01-02T03:04:05.123456789+01:00")
        for clone in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
            assert clone == t and clone.nanosecond == 789 and format_time(clone) == format_time(t)

    def test_repr_shows_the_nanoseconds(self):
        assert "nanosecond=789" in repr(parse_time(NANO_TEXT))
        assert "nanosecond" not in repr(parse_time("2024-01-02T03:04:05Z"))


class TestSeconds:
    def test_a_duration_from_the_server_is_a_float_that_keeps_its_nanoseconds(self):
        d = StreamConfig.from_response({"name": "S", "max_age": BEYOND_FLOAT}).max_age
        assert isinstance(d, float) and isinstance(d, jss.Seconds)
        assert d.nanos == BEYOND_FLOAT
        assert round(float(d) * 1e9) != BEYOND_FLOAT  # what a plain float would have sent
        assert seconds_to_nanos(d) == BEYOND_FLOAT

    def test_arithmetic_gives_a_plain_float(self):
        d = jss.Seconds(BEYOND_FLOAT)
        assert type(d * 2) is float and type(d + 1) is float
        assert repr(jss.Seconds(1_500_000_000)) == "1.5"

    def test_pickle_keeps_the_nanoseconds(self):
        d = pickle.loads(pickle.dumps(jss.Seconds(BEYOND_FLOAT)))
        assert d.nanos == BEYOND_FLOAT and to_seconds(d, "x") is d

    def test_a_negative_seconds_value_is_refused_by_name(self):
        with pytest.raises(ValueError, match="ack_wait"):
            ConsumerConfig(ack_wait=jss.Seconds(-1))

    def test_bad_nanoseconds_are_a_type_error(self):
        with pytest.raises(TypeError, match="integer nanoseconds"):
            jss.Seconds(1.5)


class TestReadModifyWrite:
    def test_every_time_and_duration_of_a_config_goes_back_exactly(self):
        raw = {"durable_name": "C", "deliver_policy": "by_start_time", "opt_start_time": NANO_TEXT,
               "ack_wait": 1_000_000_001, "backoff": [1_000_000_001, BEYOND_FLOAT], "max_deliver": 5,
               "inactive_threshold": BEYOND_FLOAT, "max_expires": BEYOND_FLOAT + 2,
               "pause_until": "2030-01-02T03:04:05.000000001-07:00"}
        cfg = ConsumerConfig.from_response(raw, strict=True)
        assert attrs.evolve(cfg, description="new").to_request() == {**raw, "description": "new"}

    def test_a_stream_source_start_time_goes_back_exactly(self):
        raw = {"name": "S", "max_age": 31_536_000_000_000_001, "duplicate_window": 120_000_000_001,
               "sources": [{"name": "SRC", "opt_start_time": "2024-01-02T03:04:05.123456789+01:00"}]}
        cfg = StreamConfig.from_response(raw, strict=True)
        assert attrs.evolve(cfg, description="new").to_request() == {**raw, "description": "new"}

    def test_values_read_as_unset_go_back_as_the_server_wrote_them(self):
        raw = {"config": {"name": "S"}, "created": NANO_TEXT,
               "state": {"messages": 0, "first_ts": "0001-01-01T00:00:00Z", "last_ts": "0001-01-01T00:00:00Z"},
               "sources": [{"name": "SRC", "lag": 0, "active": -1}]}
        info = StreamInfo.from_response(raw, strict=True)
        assert info.state.first_ts is None and info.sources[0].active is None
        assert info.to_dict() == raw

    def test_a_value_set_by_the_user_wins_over_the_kept_wire_value(self):
        info = StreamInfo.from_response({"config": {"name": "S"}, "state": {"first_ts": "0001-01-01T00:00:00Z"}})
        state = attrs.evolve(info.state, first_ts=datetime(2024, 1, 1, tzinfo=UTC))
        assert state.to_dict()["first_ts"] == "2024-01-01T00:00:00Z"
