# JetStream wire types, where users and the CLI import them from: configs, infos, acks and enums as
# frozen attrs classes (ADR-37 names), and the time and name helpers that go with them.
# Rule 1: a facade. The codec and field building blocks are `_codec`, the configs and enums users
#         write are `_configs`, what the server reports is `_infos`, exact times are `_time`; this
#         module only re-exports them, so `jetstream_sync.config.StreamConfig` keeps working.
# Rule 2: pure, as all of those are: no I/O, no `nats` import, no threads.
from __future__ import annotations

from ._codec import check_priority_group, validate_consumer_name, validate_stream_name
from ._configs import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    ExternalStream,
    Placement,
    PriorityPolicy,
    RePublish,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamConsumerLimits,
    StreamSource,
    SubjectTransform,
    config_from,
)
from ._infos import (
    APIStats,
    AccountInfo,
    AccountLimits,
    BatchAck,
    ClusterInfo,
    ConsumerInfo,
    ConsumerPauseResponse,
    PeerInfo,
    PriorityGroupState,
    PubAck,
    SequenceInfo,
    StoredMsg,
    StreamInfo,
    StreamSourceInfo,
    StreamState,
)
from ._time import Seconds, Timestamp, format_time, nanos_to_seconds, parse_time, seconds_to_nanos, to_seconds

# Pickles and reprs name the classes where users import them from, so a pickle written by this
# version loads in one that still has the single config module (a Spark driver and its executors).
for _cls in (AckPolicy, ConsumerConfig, DeliverPolicy, DiscardPolicy, ExternalStream, Placement, RePublish,
             ReplayPolicy, RetentionPolicy, StorageType, StoreCompression, StreamConfig, StreamConsumerLimits,
             StreamSource, SubjectTransform, APIStats, AccountInfo, AccountLimits, ClusterInfo, ConsumerInfo,
             ConsumerPauseResponse, PeerInfo, PubAck, SequenceInfo, StoredMsg, StreamInfo, StreamSourceInfo,
             StreamState, BatchAck, PriorityPolicy, PriorityGroupState):
    _cls.__module__ = __name__
del _cls

__all__ = [
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "BatchAck",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPauseResponse",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "PeerInfo",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "Seconds",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamInfo",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
    "Timestamp",
    "check_priority_group",
    "config_from",
    "format_time",
    "nanos_to_seconds",
    "parse_time",
    "seconds_to_nanos",
    "to_seconds",
    "validate_consumer_name",
    "validate_stream_name",
]
