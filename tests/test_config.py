"""Wire types of `jetstream_sync.config`: round trips in strict mode, conversions, validation.

The JSON below is what nats-server 2.15 answers (captured from a real server, then given a
3-node cluster block by hand), so strict mode here doubles as a schema-drift check.
"""

import copy
import json
import pickle
from datetime import datetime, timedelta, timezone

import attrs
import pytest

from jetstream_sync import config as cfgmod
from jetstream_sync._headers import Headers
from jetstream_sync.config import (
    AccountInfo,
    AckPolicy,
    ClusterInfo,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    PubAck,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StoredMsg,
    StreamConfig,
    StreamInfo,
    StreamSource,
    format_time,
    nanos_to_seconds,
    parse_time,
    seconds_to_nanos,
    to_seconds,
    validate_consumer_name,
    validate_stream_name,
)

UTC = timezone.utc

STREAM_INFO = {
    "type": "io.nats.jetstream.api.v1.stream_info_response",
    "total": 1,
    "offset": 0,
    "limit": 100000,
    "config": {
        "name": "ORDERS",
        "subjects": ["ORDERS.*"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 86400000000000,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "file",
        "num_replicas": 3,
        "duplicate_window": 120000000000,
        "sources": [{"name": "LEGACY", "filter_subject": "legacy.>"}],
        "compression": "none",
        "allow_direct": True,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "consumer_limits": {},
        "allow_msg_ttl": False,
        "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1", "team": "etl"},
    },
    "created": "2026-11-22T00:52:35.872090448Z",
    "state": {
        "messages": 3,
        "bytes": 321,
        "first_seq": 1,
        "first_ts": "2026-11-22T00:52:35.873680604Z",
        "last_seq": 3,
        "last_ts": "2026-11-22T00:52:35.874348597Z",
        "num_subjects": 1,
        "subjects": {"ORDERS.new": 3},
        "consumer_count": 1,
    },
    "cluster": {
        "name": "C1",
        "raft_group": "S-R3F-dN3eVRLh",
        "leader": "n1",
        "leader_since": "2026-11-22T00:52:36.011223344Z",
        "replicas": [
            {"name": "n2", "current": True, "active": 412345678, "peer": "yrzKKRBu"},
            {"name": "n3", "current": False, "offline": True, "active": 0, "lag": 7, "peer": "cnrtt3eg"},
        ],
    },
    "sources": [{"name": "LEGACY", "lag": 0, "active": -1, "filter_subject": "legacy.>"}],
    "ts": "2026-11-22T00:52:35.87496909Z",
}

STREAM_CREATE_EMPTY = {
    "type": "io.nats.jetstream.api.v1.stream_create_response",
    "config": {"name": "EMPTY", "subjects": ["e.>"], "retention": "workqueue", "storage": "memory",
               "num_replicas": 1, "consumer_limits": {}},
    "created": "2026-11-22T00:52:35.872090448Z",
    "state": {"messages": 0, "bytes": 0, "first_seq": 0, "first_ts": "0001-01-01T00:00:00Z", "last_seq": 0,
              "last_ts": "0001-01-01T00:00:00Z", "consumer_count": 0},
    "cluster": {"leader": "srv-a"},
    "ts": "2026-11-22T00:52:35.872971372Z",
    "did_create": True,
}

CONSUMER_INFO = {
    "type": "io.nats.jetstream.api.v1.consumer_info_response",
    "stream_name": "ORDERS",
    "name": "proc",
    "created": "2026-11-22T00:52:35.875519204Z",
    "config": {
        "durable_name": "proc",
        "name": "proc",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": 1000000000,
        "max_deliver": 5,
        "backoff": [1000000000, 5000000000],
        "filter_subject": "ORDERS.new",
        "replay_policy": "instant",
        "max_waiting": 512,
        "max_ack_pending": 1000,
        "num_replicas": 0,
        "metadata": {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1", "a": "b"},
    },
    "delivered": {"consumer_seq": 7, "stream_seq": 4, "last_active": "2026-11-22T00:52:36.020618799Z"},
    "ack_floor": {"consumer_seq": 5, "stream_seq": 3, "last_active": "2026-11-22T00:52:36.0205Z"},
    "num_ack_pending": 2,
    "num_redelivered": 1,
    "num_waiting": 0,
    "num_pending": 3,
    "cluster": {"name": "C1", "leader": "n2", "replicas": [{"name": "n1", "current": True, "active": 1500000}]},
    "ts": "2026-11-22T00:52:35.876611662Z",
}

ACCOUNT_INFO = {
    "type": "io.nats.jetstream.api.v1.account_info_response",
    "memory": 0,
    "storage": 321,
    "reserved_memory": 0,
    "reserved_storage": 0,
    "streams": 1,
    "consumers": 1,
    "limits": {
        "max_memory": -1,
        "max_storage": -1,
        "max_streams": -1,
        "max_consumers": -1,
        "max_ack_pending": -1,
        "memory_max_stream_bytes": -1,
        "storage_max_stream_bytes": -1,
        "max_bytes_required": False,
    },
    "domain": "hub",
    "api": {"level": 5, "total": 4, "errors": 0},
}

MSG_GET = {
    "type": "io.nats.jetstream.api.v1.stream_msg_get_response",
    "message": {
        "subject": "ORDERS.new",
        "seq": 1,
        "hdrs": "TkFUUy8xLjANCk5hdHMtTXNnLUlkOiBpZDANClgtTXVsdGk6IGENCmxvd2VyLWtleTogc3ANCg0K",
        "data": "aGVsbG8w",
        "time": "2026-11-22T00:52:35.873680604Z",
    },
}


def with_future_fields(info):
    """The same info as a newer server would send it, with fields this client does not know."""
    info = copy.deepcopy(info)
    info["config"]["allow_msg_schedules"] = True
    info["config"]["persist_mode"] = "async"
    info["config"]["consumer_limits"]["future_limit"] = 9
    info["alternates"] = [{"name": "ORDERS", "cluster": "C1"}]
    return info


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------


class TestStreamInfoRoundTrip:
    def test_realistic_stream_info_parses_in_strict_mode(self):
        info = StreamInfo.from_response(STREAM_INFO, strict=True)
        assert info.config.name == "ORDERS"
        assert info.config.subjects == ["ORDERS.*"]
        assert info.config.retention is RetentionPolicy.LIMITS
        assert info.config.storage is StorageType.FILE
        assert info.config.discard is DiscardPolicy.OLD
        assert info.config.compression is StoreCompression.NONE
        assert info.config.max_age == 86400.0
        assert info.config.duplicate_window == 120.0
        assert info.config.max_msgs == -1
        assert info.config.sources == [StreamSource(name="LEGACY", filter_subject="legacy.>")]
        assert info.state.messages == 3
        assert info.state.subjects == {"ORDERS.new": 3}
        assert info.state.consumer_count == 1
        assert info.extra == {}

    def test_nanosecond_timestamps_become_aware_datetimes_that_keep_every_digit(self):
        info = StreamInfo.from_response(STREAM_INFO, strict=True)
        assert info.created.replace(tzinfo=UTC) == datetime(2026, 11, 22, 0, 52, 35, 872090, tzinfo=UTC)
        assert (info.created.microsecond, info.created.nanosecond) == (872090, 448)
        assert info.state.first_ts.timestamp_ns() % 1_000_000_000 == 873680604
        assert (info.ts.microsecond, info.ts.nanosecond) == (874969, 90)  # 8 fraction digits
        assert info.created.tzinfo is not None and info.created.utcoffset() == timedelta(0)

    def test_cluster_info_nests_as_attributes(self):
        cluster = StreamInfo.from_response(STREAM_INFO, strict=True).cluster
        assert isinstance(cluster, ClusterInfo)
        assert (cluster.name, cluster.leader, cluster.raft_group) == ("C1", "n1", "S-R3F-dN3eVRLh")
        assert cluster.leader_since.timestamp_ns() % 1_000_000_000 == 11223344
        n2, n3 = cluster.replicas
        assert (n2.name, n2.current, n2.active, n2.peer) == ("n2", True, 0.412345678, "yrzKKRBu")
        assert (n3.offline, n3.lag, n3.active) == (True, 7, 0.0)

    def test_source_never_active_reports_none(self):
        (src,) = StreamInfo.from_response(STREAM_INFO, strict=True).sources
        assert src.name == "LEGACY" and src.lag == 0 and src.active is None

    def test_zero_go_time_means_unset(self):
        info = StreamInfo.from_response(STREAM_CREATE_EMPTY, strict=True)
        assert info.state.first_ts is None and info.state.last_ts is None
        assert info.cluster.leader == "srv-a"

    def test_envelope_keys_are_not_kept_as_data(self):
        info = StreamInfo.from_response(STREAM_CREATE_EMPTY)
        assert info.extra == {}

    def test_config_writes_back_exactly_what_the_server_sent(self):
        info = StreamInfo.from_response(STREAM_INFO, strict=True)
        assert info.config.to_request() == STREAM_INFO["config"]

    def test_unknown_future_fields_survive_info_config_evolve_to_request(self):
        raw = with_future_fields(STREAM_INFO)
        info = StreamInfo.from_response(raw)
        assert info.extra == {"alternates": [{"name": "ORDERS", "cluster": "C1"}]}
        assert info.config.extra == {"allow_msg_schedules": True, "persist_mode": "async"}
        assert info.config.consumer_limits.extra == {"future_limit": 9}

        updated = attrs.evolve(info.config, max_msgs=5)
        request = updated.to_request()

        expected = dict(raw["config"], max_msgs=5)
        assert request == expected
        assert json.loads(json.dumps(request)) == expected  # JSON-ready as is

    def test_strict_mode_lists_unknown_keys_at_any_depth(self):
        with pytest.raises(ValueError) as caught:
            StreamInfo.from_response(with_future_fields(STREAM_INFO), strict=True)
        assert str(caught.value) == (
            "StreamInfo.from_response: unknown keys from the server: alternates, config.allow_msg_schedules, "
            "config.consumer_limits.future_limit, config.persist_mode"
        )
        raw = copy.deepcopy(STREAM_INFO)
        raw["cluster"]["replicas"][1]["pending"] = True
        with pytest.raises(ValueError, match=r"cluster\.replicas\[1\]\.pending"):
            StreamInfo.from_response(raw, strict=True)
        with pytest.raises(ValueError, match="StreamInfo.*alternates"):
            StreamInfo.from_response(dict(STREAM_INFO, alternates=[]), strict=True)

    def test_a_value_of_the_wrong_type_is_a_value_error_naming_the_field(self):
        with pytest.raises(ValueError, match=r"^StreamConfig.from_response: field max_age: '1h' is not a valid"):
            StreamConfig.from_response({"name": "X", "max_age": "1h"})
        raw = copy.deepcopy(STREAM_INFO)
        raw["state"]["first_ts"] = "yesterday"
        with pytest.raises(ValueError, match=r"^StreamInfo.from_response: field state: first_ts: not an RFC 3339 timestamp: 'yesterday'"):
            StreamInfo.from_response(raw)

    def test_an_info_turns_back_into_the_json_the_server_sent_with_to_dict(self):
        raw = with_future_fields(STREAM_INFO)
        as_dict = StreamInfo.from_response(raw).to_dict()
        assert as_dict.keys() == {k for k in raw if k not in StreamInfo._envelope}
        assert as_dict["config"] == raw["config"] and as_dict["alternates"] == raw["alternates"]
        assert as_dict["state"]["messages"] == raw["state"]["messages"]
        assert as_dict["created"] == raw["created"] and as_dict["ts"] == raw["ts"]   # every digit
        assert json.loads(json.dumps(as_dict)) == as_dict

    def test_to_request_output_does_not_alias_the_kept_unknown_values(self):
        info = StreamInfo.from_response(with_future_fields(STREAM_INFO))
        info.config.to_request().setdefault("persist_mode", "x")
        req = info.config.to_request()
        req["consumer_limits"]["future_limit"] = 0
        assert info.config.consumer_limits.extra == {"future_limit": 9}


class TestConsumerInfoRoundTrip:
    def test_realistic_consumer_info_parses_in_strict_mode(self):
        info = ConsumerInfo.from_response(CONSUMER_INFO, strict=True)
        assert (info.stream_name, info.name) == ("ORDERS", "proc")
        assert info.num_ack_pending == 2 and info.num_pending == 3 and info.num_redelivered == 1
        assert info.delivered.stream_seq == 4 and info.ack_floor.consumer_seq == 5
        assert info.delivered.last_active == parse_time(CONSUMER_INFO["delivered"]["last_active"])
        assert info.delivered.last_active.replace(tzinfo=UTC) == datetime(2026, 11, 22, 0, 52, 36, 20618, tzinfo=UTC)
        assert info.ack_floor.last_active.replace(tzinfo=UTC) == datetime(2026, 11, 22, 0, 52, 36, 20500, tzinfo=UTC)
        assert info.cluster.replicas[0].active == 0.0015
        c = info.config
        assert c.ack_policy is AckPolicy.EXPLICIT and c.deliver_policy is DeliverPolicy.ALL
        assert c.replay_policy is ReplayPolicy.INSTANT
        assert c.ack_wait == 1.0 and c.backoff == [1.0, 5.0]
        assert c.max_waiting == 512 and c.num_replicas == 0

    def test_consumer_config_writes_back_exactly_what_the_server_sent(self):
        info = ConsumerInfo.from_response(CONSUMER_INFO, strict=True)
        assert info.config.to_request() == CONSUMER_INFO["config"]

    def test_unknown_consumer_fields_survive_evolve(self):
        raw = copy.deepcopy(CONSUMER_INFO)
        raw["config"].update(partition_policy="hashed", partitions=["p1"], partition_timeout=120000000000)
        raw["partitions"] = [{"partition": "p1", "member": "abc"}]
        info = ConsumerInfo.from_response(raw)
        assert info.extra == {"partitions": [{"partition": "p1", "member": "abc"}]}
        request = attrs.evolve(info.config, filter_subject="ORDERS.paid").to_request()
        assert request == dict(raw["config"], filter_subject="ORDERS.paid")


class TestOtherResponses:
    def test_pub_ack(self):
        ack = PubAck.from_response({"stream": "ORDERS", "seq": 3}, strict=True)
        assert (ack.stream, ack.seq, ack.duplicate, ack.domain) == ("ORDERS", 3, False, None)

    def test_pub_ack_duplicate_and_domain(self):
        ack = PubAck.from_response({"stream": "ORDERS", "seq": 1, "duplicate": True, "domain": "hub"}, strict=True)
        assert ack.duplicate is True and ack.domain == "hub"

    def test_pub_ack_keeps_newer_fields(self):
        ack = PubAck.from_response({"stream": "C", "seq": 1, "val": "5"})
        assert ack.extra == {"val": "5"}

    def test_account_info(self):
        info = AccountInfo.from_response(ACCOUNT_INFO, strict=True)
        assert info.storage == 321 and info.streams == 1 and info.domain == "hub"
        assert info.limits.max_streams == -1 and info.limits.max_bytes_required is False
        assert (info.api.level, info.api.total, info.api.errors) == (5, 4, 0)
        assert info.tiers is None

    def test_account_info_keeps_tiers_raw(self):
        tiers = {"R1": {"memory": 0, "storage": 10, "streams": 1, "consumers": 0, "limits": {"max_streams": 5}}}
        assert AccountInfo.from_response(dict(ACCOUNT_INFO, tiers=tiers), strict=True).tiers == tiers

    def test_stored_msg_decodes_base64_data_and_header_block(self):
        msg = StoredMsg.from_response(MSG_GET["message"], strict=True)
        assert (msg.seq, msg.subject, msg.data) == (1, "ORDERS.new", b"hello0")
        assert isinstance(msg.headers, Headers)
        assert msg.headers == {"Nats-Msg-Id": "id0", "X-Multi": "a", "lower-key": "sp"}
        assert msg.time.replace(tzinfo=UTC) == datetime(2026, 11, 22, 0, 52, 35, 873680, tzinfo=UTC)
        assert msg.time.nanosecond == 604

    def test_stored_msg_accepts_the_whole_response_body(self):
        assert StoredMsg.from_response(MSG_GET, strict=True) == StoredMsg.from_response(MSG_GET["message"])

    def test_stored_msg_without_headers_or_data(self):
        msg = StoredMsg.from_response({"subject": "a", "seq": 2, "time": "2026-01-01T00:00:00Z"}, strict=True)
        assert msg.headers is None and msg.data == b""

    def test_stored_msg_keeps_repeated_headers(self):
        import base64

        hdrs = base64.b64encode(b"NATS/1.0\r\nX: 1\r\nX: 2\r\n\r\n").decode()
        msg = StoredMsg.from_response({"subject": "a", "seq": 2, "hdrs": hdrs, "data": ""})
        assert msg.headers.get_all("X") == ["1", "2"]


# ---------------------------------------------------------------------------------------------
# Durations and times
# ---------------------------------------------------------------------------------------------


class TestDurations:
    @pytest.mark.parametrize("value", [timedelta(seconds=1.5), 1.5])
    def test_timedelta_and_float_seconds_go_out_as_nanoseconds(self, value):
        cfg = StreamConfig(name="S", max_age=value)
        assert cfg.max_age == 1.5
        assert cfg.to_request()["max_age"] == 1_500_000_000

    def test_int_is_seconds_not_nanoseconds(self):
        assert ConsumerConfig(ack_wait=30).to_request()["ack_wait"] == 30_000_000_000

    def test_every_duration_field_converts(self):
        c = ConsumerConfig(ack_wait=timedelta(milliseconds=250), max_expires=60, inactive_threshold=0.5,
                           idle_heartbeat=timedelta(seconds=5), backoff=[1, timedelta(seconds=2), 0.5])
        assert c.to_request() == {
            "ack_wait": 250_000_000,
            "backoff": [1_000_000_000, 2_000_000_000, 500_000_000],
            "max_expires": 60_000_000_000,
            "inactive_threshold": 500_000_000,
            "idle_heartbeat": 5_000_000_000,
        }

    def test_sub_second_precision_survives(self):
        assert StreamConfig(name="S", duplicate_window=0.1).to_request()["duplicate_window"] == 100_000_000

    def test_wire_nanoseconds_come_back_exactly(self):
        for ns in (1, 999, 123456789123, 120_000_000_000, 30 * 86400 * 10**9):
            assert seconds_to_nanos(nanos_to_seconds(ns)) == ns

    def test_negative_duration_is_a_value_error_naming_the_field(self):
        with pytest.raises(ValueError, match="max_age"):
            StreamConfig(name="S", max_age=-1)
        with pytest.raises(ValueError, match="ack_wait"):
            ConsumerConfig(ack_wait=timedelta(seconds=-1))

    def test_negative_backoff_entry_names_its_index(self):
        with pytest.raises(ValueError, match=r"backoff\[1\]"):
            ConsumerConfig(backoff=[1, -2])

    def test_bool_duration_is_a_type_error(self):
        with pytest.raises(TypeError, match="duplicate_window"):
            StreamConfig(name="S", duplicate_window=True)

    @pytest.mark.parametrize("value", ["30s", b"1", [1]])
    def test_non_numeric_duration_is_a_type_error(self, value):
        with pytest.raises(TypeError, match="max_expires"):
            ConsumerConfig(max_expires=value)

    def test_nan_and_infinity_are_rejected(self):
        with pytest.raises(ValueError, match="idle_heartbeat"):
            ConsumerConfig(idle_heartbeat=float("nan"))
        with pytest.raises(ValueError, match="max_age"):
            StreamConfig(name="S", max_age=float("inf"))

    def test_backoff_must_be_a_list(self):
        with pytest.raises(TypeError, match="backoff"):
            ConsumerConfig(backoff=5)

    def test_helpers(self):
        assert to_seconds(None, "x") is None
        assert to_seconds(timedelta(minutes=2), "x") == 120.0
        assert to_seconds(3, "x") == 3.0 and isinstance(to_seconds(3, "x"), float)
        assert seconds_to_nanos(2.5) == 2_500_000_000
        assert nanos_to_seconds(2_500_000_000) == 2.5
        with pytest.raises(ValueError, match="my_field"):
            to_seconds(-0.1, "my_field")
        with pytest.raises(TypeError, match="my_field"):
            to_seconds(False, "my_field")


class TestTimes:
    def test_parse_nanoseconds_keeps_them_beside_the_microseconds(self):
        t = parse_time("2024-01-02T03:04:05.123456789Z")
        assert t.replace(tzinfo=UTC) == datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
        assert t.nanosecond == 789

    def test_parse_short_fraction_and_no_fraction(self):
        assert parse_time("2024-01-02T03:04:05.5Z").microsecond == 500000
        assert parse_time("2024-01-02T03:04:05Z") == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)

    def test_parse_offset_is_converted_to_utc(self):
        dt = parse_time("2024-01-02T03:04:05.000000001+02:00")
        assert dt.replace(tzinfo=UTC) == datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC) and dt.utcoffset() == timedelta(0)
        assert dt.nanosecond == 1

    def test_go_zero_time_and_none_are_unset(self):
        assert parse_time("0001-01-01T00:00:00Z") is None
        assert parse_time(None) is None

    @pytest.mark.parametrize("text", ["yesterday", "2024-01-02", "2024-01-02T03:04:05", "2024-13-02T03:04:05Z"])
    def test_parse_rejects_what_is_not_rfc3339(self, text):
        with pytest.raises(ValueError):
            parse_time(text)

    def test_format_writes_utc_with_z(self):
        assert format_time(datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)) == "2024-01-02T03:04:05.123456Z"
        assert format_time(datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)) == "2024-01-02T03:04:05.5Z"
        plus_two = timezone(timedelta(hours=2))
        assert format_time(datetime(2024, 1, 2, 5, 4, 5, tzinfo=plus_two)) == "2024-01-02T03:04:05Z"

    def test_format_rejects_naive_datetimes(self):
        with pytest.raises(ValueError, match="naive"):
            format_time(datetime(2024, 1, 2))

    def test_time_fields_accept_datetime_or_string_and_write_rfc3339(self):
        start = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
        a = ConsumerConfig(deliver_policy="by_start_time", opt_start_time=start)
        b = ConsumerConfig(deliver_policy="by_start_time", opt_start_time="2024-01-02T03:04:05.123456Z")
        assert a == b
        assert a.to_request() == {"deliver_policy": "by_start_time", "opt_start_time": "2024-01-02T03:04:05.123456Z"}
        nanos = ConsumerConfig(deliver_policy="by_start_time", opt_start_time="2024-01-02T03:04:05.123456789Z")
        assert nanos != a  # a different instant, 789 ns later
        assert nanos.to_request()["opt_start_time"] == "2024-01-02T03:04:05.123456789Z"

    def test_naive_datetime_in_a_field_is_rejected_naming_it(self):
        with pytest.raises(ValueError, match="pause_until"):
            ConsumerConfig(pause_until=datetime(2030, 1, 1))

    def test_bad_time_string_in_a_field_names_it(self):
        with pytest.raises(ValueError, match="pause_until"):
            ConsumerConfig(pause_until="tomorrow")


# ---------------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------------


class TestEnums:
    @pytest.mark.parametrize(
        ("enum_cls", "values"),
        [
            (RetentionPolicy, ["limits", "interest", "workqueue"]),
            (StorageType, ["file", "memory"]),
            (DiscardPolicy, ["old", "new"]),
            (AckPolicy, ["none", "all", "explicit"]),
            (DeliverPolicy, ["all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"]),
            (ReplayPolicy, ["instant", "original"]),
            (StoreCompression, ["none", "s2"]),
        ],
    )
    def test_built_from_their_json_value(self, enum_cls, values):
        assert [m.value for m in enum_cls] == values
        for v in values:
            member = enum_cls(v)
            assert member == v and isinstance(member, str) and str(member) == v and f"{member}" == v

    def test_bad_value_message_lists_the_allowed_values(self):
        with pytest.raises(ValueError, match="'memory'"):
            StorageType("disk")

    def test_fields_accept_the_enum_or_its_string(self):
        assert StreamConfig(name="S", storage="memory") == StreamConfig(name="S", storage=StorageType.MEMORY)
        assert StreamConfig(name="S", storage="memory").storage is StorageType.MEMORY

    def test_bad_string_in_a_field_names_the_field_and_the_allowed_values(self):
        with pytest.raises(ValueError, match=r"retention must be one of 'limits', 'interest', 'workqueue'"):
            StreamConfig(name="S", retention="forever")
        with pytest.raises(ValueError, match="ack_policy.*'explicit'"):
            ConsumerConfig(ack_policy="manual")

    def test_requests_carry_plain_json_values(self):
        req = StreamConfig(name="S", storage=StorageType.MEMORY, retention="interest").to_request()
        assert json.dumps(req) == '{"name": "S", "retention": "interest", "storage": "memory"}'
        assert type(req["storage"]) is str


# ---------------------------------------------------------------------------------------------
# StreamConfig validation
# ---------------------------------------------------------------------------------------------


class TestStreamConfigValidation:
    @pytest.mark.parametrize("name", ["", "a.b", "a*", "a>", "a/b", "a\\b", "a b", "tab\t", "nl\n"])
    def test_bad_names_are_value_errors_naming_name(self, name):
        with pytest.raises(ValueError, match="name"):
            StreamConfig(name=name)

    def test_name_rule_is_in_the_message(self):
        with pytest.raises(ValueError, match=r"'\.'"):
            StreamConfig(name="a.b")

    def test_non_str_name_is_a_type_error(self):
        with pytest.raises(TypeError, match="name"):
            StreamConfig(name=5)

    def test_name_is_required(self):
        with pytest.raises(TypeError, match="name"):
            StreamConfig()

    def test_bare_subject_string_is_a_type_error_with_a_hint(self):
        with pytest.raises(TypeError, match=r"subjects.*\['ORDERS\.\*'\]"):
            StreamConfig(name="S", subjects="ORDERS.*")

    def test_subjects_must_be_non_empty_strings(self):
        with pytest.raises(ValueError, match=r"subjects\[1\]"):
            StreamConfig(name="S", subjects=["a", ""])
        with pytest.raises(TypeError, match=r"subjects\[0\]"):
            StreamConfig(name="S", subjects=[1])

    def test_subjects_tuple_is_stored_as_list(self):
        assert StreamConfig(name="S", subjects=("a", "b")).subjects == ["a", "b"]

    @pytest.mark.parametrize("field", ["max_consumers", "max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"])
    def test_limits_below_minus_one_are_value_errors(self, field):
        with pytest.raises(ValueError, match=f"{field} must be >= -1"):
            StreamConfig(name="S", **{field: -2})

    @pytest.mark.parametrize("field", ["max_consumers", "max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"])
    @pytest.mark.parametrize("value", [1.5, "10", True])
    def test_limits_must_be_ints(self, field, value):
        with pytest.raises(TypeError, match=field):
            StreamConfig(name="S", **{field: value})

    def test_minus_one_means_unlimited_and_is_sent(self):
        assert StreamConfig(name="S", max_msgs=-1).to_request() == {"name": "S", "max_msgs": -1}

    @pytest.mark.parametrize("replicas", [0, 6, -1])
    def test_num_replicas_between_1_and_5(self, replicas):
        with pytest.raises(ValueError, match="num_replicas"):
            StreamConfig(name="S", num_replicas=replicas)

    def test_first_seq_at_least_one(self):
        with pytest.raises(ValueError, match="first_seq"):
            StreamConfig(name="S", first_seq=0)

    def test_mirror_with_subjects_names_both(self):
        with pytest.raises(ValueError, match="mirror and subjects"):
            StreamConfig(name="M", mirror=StreamSource(name="ORDERS"), subjects=["x"])

    def test_mirror_with_sources_names_both(self):
        with pytest.raises(ValueError, match="mirror and sources"):
            StreamConfig(name="M", mirror=StreamSource(name="A"), sources=[StreamSource(name="B")])

    def test_discard_new_per_subject_needs_discard_new(self):
        with pytest.raises(ValueError, match="discard_new_per_subject.*discard"):
            StreamConfig(name="S", discard_new_per_subject=True, max_msgs_per_subject=1)

    def test_discard_new_per_subject_needs_a_per_subject_limit(self):
        with pytest.raises(ValueError, match="discard_new_per_subject.*max_msgs_per_subject"):
            StreamConfig(name="S", discard_new_per_subject=True, discard="new")

    def test_discard_new_per_subject_valid_combination(self):
        StreamConfig(name="S", discard_new_per_subject=True, discard="new", max_msgs_per_subject=1)

    def test_duplicate_window_longer_than_max_age_names_both(self):
        with pytest.raises(ValueError, match="duplicate_window.*max_age"):
            StreamConfig(name="S", max_age=60, duplicate_window=120)

    def test_duplicate_window_is_free_when_max_age_is_unlimited(self):
        StreamConfig(name="S", max_age=0, duplicate_window=120)

    def test_nested_configs_accept_dicts_and_report_their_path(self):
        cfg = StreamConfig(name="M", mirror={"name": "ORDERS", "opt_start_seq": 10})
        assert cfg.mirror == StreamSource(name="ORDERS", opt_start_seq=10)
        assert cfg.to_request() == {"name": "M", "mirror": {"name": "ORDERS", "opt_start_seq": 10}}
        with pytest.raises(ValueError, match=r"sources\[0\]: name"):
            StreamConfig(name="S", sources=[{"name": ""}])
        with pytest.raises(TypeError, match="sources must be a list"):
            StreamConfig(name="S", sources={"name": "A"})

    def test_evolve_revalidates(self):
        cfg = StreamConfig(name="S", subjects=["a"])
        with pytest.raises(ValueError, match="mirror and subjects"):
            attrs.evolve(cfg, mirror=StreamSource(name="X"))

    def test_frozen(self):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            StreamConfig(name="S").name = "T"


# ---------------------------------------------------------------------------------------------
# ConsumerConfig validation
# ---------------------------------------------------------------------------------------------


class TestConsumerConfigValidation:
    @pytest.mark.parametrize("field", ["name", "durable_name"])
    @pytest.mark.parametrize("bad", ["", "a.b", "a*", "a>", "a/b", "a\\b", "a b"])
    def test_names_follow_the_stream_name_rules(self, field, bad):
        with pytest.raises(ValueError, match=field):
            ConsumerConfig(**{field: bad})

    @pytest.mark.parametrize("field", ["name", "durable_name"])
    def test_non_str_names_are_type_errors(self, field):
        with pytest.raises(TypeError, match=field):
            ConsumerConfig(**{field: 1})

    def test_name_and_durable_name_must_match(self):
        with pytest.raises(ValueError, match="name 'a' and durable_name 'b'"):
            ConsumerConfig(name="a", durable_name="b")
        ConsumerConfig(name="a", durable_name="a")

    def test_filter_subject_and_filter_subjects_are_exclusive(self):
        with pytest.raises(ValueError, match="filter_subject and filter_subjects"):
            ConsumerConfig(filter_subject="a", filter_subjects=["b"])

    def test_filter_subjects_bare_string_is_a_type_error(self):
        with pytest.raises(TypeError, match="filter_subjects"):
            ConsumerConfig(filter_subjects="a.>")

    def test_opt_start_seq_requires_by_start_sequence(self):
        with pytest.raises(ValueError, match="opt_start_seq.*deliver_policy"):
            ConsumerConfig(opt_start_seq=5)
        with pytest.raises(ValueError, match="opt_start_seq.*deliver_policy"):
            ConsumerConfig(opt_start_seq=5, deliver_policy="all")

    def test_by_start_sequence_requires_opt_start_seq(self):
        with pytest.raises(ValueError, match="deliver_policy.*opt_start_seq"):
            ConsumerConfig(deliver_policy="by_start_sequence")
        ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=5)

    def test_opt_start_seq_at_least_one(self):
        with pytest.raises(ValueError, match="opt_start_seq"):
            ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=0)

    def test_opt_start_time_requires_by_start_time_and_vice_versa(self):
        with pytest.raises(ValueError, match="opt_start_time.*deliver_policy"):
            ConsumerConfig(opt_start_time=datetime(2024, 1, 1, tzinfo=UTC))
        with pytest.raises(ValueError, match="deliver_policy.*opt_start_time"):
            ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME)

    def test_last_per_subject_requires_a_filter(self):
        with pytest.raises(ValueError, match="last_per_subject.*filter_subject"):
            ConsumerConfig(deliver_policy="last_per_subject")
        ConsumerConfig(deliver_policy="last_per_subject", filter_subjects=["a.*"])

    @pytest.mark.parametrize("value", [0, -2])
    def test_max_deliver_is_minus_one_or_positive(self, value):
        with pytest.raises(ValueError, match="max_deliver"):
            ConsumerConfig(max_deliver=value)

    def test_max_deliver_unlimited_and_positive_are_fine(self):
        assert ConsumerConfig(max_deliver=-1).max_deliver == -1
        assert ConsumerConfig(max_deliver=1).max_deliver == 1

    def test_backoff_longer_than_max_deliver_names_both(self):
        with pytest.raises(ValueError, match="backoff.*max_deliver"):
            ConsumerConfig(max_deliver=2, backoff=[1, 2, 3])

    def test_backoff_within_max_deliver_is_fine(self):
        # nats-server rejects only len(backoff) > max_deliver.
        ConsumerConfig(max_deliver=3, backoff=[1, 2, 3])
        ConsumerConfig(max_deliver=-1, backoff=[1, 2, 3])
        ConsumerConfig(backoff=[1, 2, 3])

    def test_ack_none_with_ack_wait_or_backoff(self):
        with pytest.raises(ValueError, match="ack_wait.*ack_policy"):
            ConsumerConfig(ack_policy="none", ack_wait=5)
        with pytest.raises(ValueError, match="backoff.*ack_policy"):
            ConsumerConfig(ack_policy=AckPolicy.NONE, backoff=[1])

    @pytest.mark.parametrize("replicas", [-1, 6])
    def test_num_replicas_between_0_and_5(self, replicas):
        with pytest.raises(ValueError, match="num_replicas"):
            ConsumerConfig(num_replicas=replicas)

    @pytest.mark.parametrize("field", ["max_ack_pending", "max_waiting", "max_batch", "max_bytes"])
    def test_pull_limits_at_least_minus_one(self, field):
        with pytest.raises(ValueError, match=field):
            ConsumerConfig(**{field: -2})
        with pytest.raises(TypeError, match=field):
            ConsumerConfig(**{field: 1.0})
        assert ConsumerConfig(**{field: -1}).to_request() == {field: -1}

    @pytest.mark.parametrize("value, wire", [(100, "100%"), (0, "0%"), (25, "25%"), ("100%", "100%"), ("50", "50")])
    def test_sample_freq_takes_an_int_percent_as_the_cli_does_and_round_trips(self, value, wire):
        cfg = ConsumerConfig(durable_name="d", sample_freq=value)
        assert cfg.sample_freq == wire and cfg.to_request() == {"durable_name": "d", "sample_freq": wire}
        back = ConsumerConfig.from_response(json.loads(json.dumps(cfg.to_request())), strict=True)
        assert back == cfg and back.to_request() == cfg.to_request()

    @pytest.mark.parametrize("value, exc", [(101, ValueError), (-1, ValueError), ("-5%", ValueError),
                                            ("half", ValueError), ("100 %", ValueError), (0.5, TypeError),
                                            (True, TypeError), ([100], TypeError)])
    def test_a_bad_sample_freq_names_the_field_and_what_is_allowed(self, value, exc):
        with pytest.raises(exc, match=r"sample_freq must be a percentage: an int 0 to 100 or a str such as '100%'"):
            ConsumerConfig(sample_freq=value)

    def test_evolve_makes_variants(self):
        base = ConsumerConfig(durable_name="w", ack_policy="explicit", filter_subject="ORDERS.new")
        other = attrs.evolve(base, filter_subject="ORDERS.paid")
        assert other.filter_subject == "ORDERS.paid" and base.filter_subject == "ORDERS.new"


# ---------------------------------------------------------------------------------------------
# Serialization details and helpers
# ---------------------------------------------------------------------------------------------


class TestSerialization:
    def test_unset_fields_are_left_out_but_explicit_falsy_values_are_sent(self):
        req = StreamConfig(name="S", max_msgs=-1, max_age=0, no_ack=False, subjects=[], description="").to_request()
        assert req == {"name": "S", "description": "", "subjects": [], "max_msgs": -1, "max_age": 0, "no_ack": False}

    def test_empty_consumer_config_sends_nothing(self):
        assert ConsumerConfig().to_request() == {}

    def test_to_request_returns_fresh_containers(self):
        cfg = StreamConfig(name="S", subjects=["a"], metadata={"k": "v"})
        req = cfg.to_request()
        req["subjects"].append("b")
        req["metadata"]["x"] = "y"
        assert cfg.subjects == ["a"] and cfg.metadata == {"k": "v"}

    def test_configs_pickle(self):
        info = StreamInfo.from_response(with_future_fields(STREAM_INFO))
        assert pickle.loads(pickle.dumps(info)) == info
        cc = ConsumerInfo.from_response(CONSUMER_INFO).config
        assert pickle.loads(pickle.dumps(cc)) == cc

    def test_repr_shows_only_what_is_set_and_hides_extra(self):
        cfg = StreamConfig(name="S", subjects=["a"], extra={"future": 1})
        assert repr(cfg) == "StreamConfig(name='S', subjects=['a'])"

    def test_extra_given_by_hand_is_written_but_never_overrides_a_field(self):
        cfg = StreamConfig(name="S", extra={"future": 1, "name": "other"})
        assert cfg.to_request() == {"name": "S", "future": 1}

    def test_from_response_rejects_non_dicts(self):
        with pytest.raises(TypeError, match="StreamInfo"):
            StreamInfo.from_response([1, 2])

    def test_every_public_name_is_exported(self):
        public = {n for n, v in vars(cfgmod).items() if not n.startswith("_")
                  and getattr(v, "__module__", None) in (cfgmod.__name__, "jetstream_sync._time",
                                                         "jetstream_sync._codec", "jetstream_sync._configs",
                                                         "jetstream_sync._infos")}
        assert public == set(cfgmod.__all__)
        assert cfgmod.__all__ == sorted(cfgmod.__all__)


class TestNameHelpers:
    def test_valid_names_are_returned(self):
        assert validate_stream_name("ORDERS") == "ORDERS"
        assert validate_consumer_name("proc-1_x") == "proc-1_x"

    def test_stream_helper_names_its_field(self):
        with pytest.raises(ValueError, match="^stream "):
            validate_stream_name("a.b")
        with pytest.raises(ValueError, match="^source "):
            validate_stream_name("a b", field="source")
        with pytest.raises(TypeError, match="^stream must be a str"):
            validate_stream_name(None)

    def test_consumer_helper_names_its_field(self):
        with pytest.raises(ValueError, match="^name "):
            validate_consumer_name("a>b")
        with pytest.raises(ValueError, match="^durable"):
            validate_consumer_name("", field="durable")


def test_a_consumer_made_with_an_int_sample_freq_is_stored_as_that_percent_on_a_real_server(stream):
    consumer = stream.create_consumer(durable_name="sampled", sample_freq=100)
    assert consumer.info().config.sample_freq == "100%"
