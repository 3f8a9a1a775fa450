# jetstream_sync: a blocking, thread-safe NATS JetStream client (ADR-37) on
# top of nats-py, for scripts, notebooks and Spark.
#
# This module only re-exports the public names, most of them loaded on first use (so importing
# the package costs little); ``__all__`` is pinned by tests/test_exported_members.py.
"""A blocking, thread-safe NATS JetStream client (ADR-37) built on nats-py.

    import jetstream_sync as jss

    with jss.connect("nats://127.0.0.1:4222") as client:
        js = client.jetstream()
        js.create_stream(name="ORDERS", subjects=["ORDERS.*"])
        js.publish("ORDERS.new", b"hello")
        consumer = js.create_consumer("ORDERS", durable_name="worker")
        for msg in consumer.fetch(max_messages=10):
            msg.ack()
"""

import importlib
import logging
import typing

# The exceptions are loaded with the package (they need nothing but the standard library), so an
# ``except jss.TimeoutError`` never pays for an import. Everything else is loaded on first use (PEP 562,
# ``__getattr__`` below): ``import jetstream_sync`` stays cheap (no nats-py, asyncio, attrs or tenacity)
# for a command line or a script that only needs part of it; ``jss.connect`` loads the client.
from .errors import (
    APIError,
    AuthorizationError,
    BatchPublishDuplicateMsgIdError,
    BatchPublishError,
    BatchPublishIncompleteError,
    BatchPublishNotEnabledError,
    BatchPublishTooLargeError,
    BatchPublishTooManyInflightError,
    BatchPublishUnsupportedHeaderError,
    BucketExistsError,
    BucketNotFoundError,
    ClientClosedError,
    ConsumerDeletedError,
    ConsumerExistsError,
    ConsumerNotFoundError,
    ConsumerTypeError,
    CounterDisabledError,
    CounterNotFoundError,
    DigestMismatchError,
    DuplicateSubscriptionError,
    FeatureNotSupportedError,
    InvalidKeyError,
    JetStreamError,
    JetStreamNotEnabledError,
    JetStreamNotEnabledForAccountError,
    KeyExistsError,
    KeyNotFoundError,
    KeyRevisionMismatchError,
    MessageAlreadyAckedError,
    MessageGapError,
    MessageNotFoundError,
    MessageTTLDisabledError,
    MessageTTLInvalidError,
    MsgIdInProcessError,
    NoHeartbeatError,
    NoRespondersError,
    NoServersError,
    NoStreamForSubjectError,
    NotConnectedError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PermissionViolationError,
    PinIdMismatchError,
    SlowConsumerError,
    StreamNameInUseError,
    StreamNotFoundError,
    StreamWrongLastMsgIdError,
    StreamWrongLastSequenceError,
    StreamWrongStreamError,
    SubscriptionConfigError,
    TimeoutError,
)

if typing.TYPE_CHECKING:  # what the names below are, for type checkers and editors
    from ._headers import Headers
    from ._protocol import DEFAULT
    from ._retry import RetryPolicy
    from .atomic_batch import AtomicBatch
    from .client import (
        Client,
        connect,
    )
    from .config import (
        AccountInfo,
        AckPolicy,
        BatchAck,
        ConsumerConfig,
        ConsumerInfo,
        ConsumerPauseResponse,
        DeliverPolicy,
        DiscardPolicy,
        PriorityPolicy,
        PubAck,
        ReplayPolicy,
        RetentionPolicy,
        Seconds,
        StorageType,
        StoredMsg,
        StoreCompression,
        StreamConfig,
        StreamInfo,
        Timestamp,
    )
    from .consume import (
        DEFAULT_NAK_DELAYS,
        ConsumeHandle,
        ConsumeStats,
        MessageStream,
    )
    from .consumer import Consumer
    from .counter import Counter
    from .events import (
        ApiAudit,
        ApiLimitReached,
        ConsumerAckMetric,
        ConsumerAction,
        ConsumerGroupPinned,
        ConsumerGroupUnpinned,
        ConsumerPause,
        DomainLeaderElected,
        Event,
        EventStream,
        LeaderElected,
        MaxDeliveriesExceeded,
        MessageNaked,
        MessageTerminated,
        MetaRescue,
        QuorumLost,
        RestoreCompleted,
        RestoreCreated,
        ServerOutOfSpace,
        ServerRemoved,
        SnapshotCompleted,
        SnapshotCreated,
        StreamAction,
        StreamBatchAbandoned,
        UnknownEvent,
    )
    from .jetstream import JetStream
    from .message import (
        Msg,
        MsgMetadata,
        SequencePair,
    )
    from .ordered import OrderedConsumer
    from .fetch import MessageBatch
    from .push_consumer import PushConsumer
    from .subscription import Subscription
    from .stream import Stream

__version__ = "0.1.0"

# Quiet by default: the application configures logging, the library only emits records (all under the
# "jetstream_sync" logger). Without a handler here, Python's lastResort would print WARNING and above.
logging.getLogger(__name__).addHandler(logging.NullHandler())

#: The public names loaded on first use, by the module they come from.
_LAZY_BY_MODULE: dict[str, tuple[str, ...]] = {
    "._headers": ("Headers",),
    "._protocol": ("DEFAULT",),
    "._retry": ("RetryPolicy",),
    ".atomic_batch": ("AtomicBatch",),
    ".client": ("Client", "connect"),
    ".config": (
        "AccountInfo", "AckPolicy", "BatchAck", "ConsumerConfig", "ConsumerInfo", "ConsumerPauseResponse",
        "DeliverPolicy", "DiscardPolicy", "PriorityPolicy", "PubAck", "ReplayPolicy", "RetentionPolicy", "Seconds",
        "StorageType", "StoredMsg", "StoreCompression", "StreamConfig", "StreamInfo", "Timestamp"
    ),
    ".consume": ("DEFAULT_NAK_DELAYS", "ConsumeHandle", "ConsumeStats", "MessageStream"),
    ".consumer": ("Consumer",),
    ".counter": ("Counter",),
    ".events": (
        "ApiAudit", "ApiLimitReached", "ConsumerAckMetric", "ConsumerAction", "ConsumerGroupPinned",
        "ConsumerGroupUnpinned", "ConsumerPause", "DomainLeaderElected", "Event", "EventStream", "LeaderElected",
        "MaxDeliveriesExceeded", "MessageNaked", "MessageTerminated", "MetaRescue", "QuorumLost", "RestoreCompleted",
        "RestoreCreated", "ServerOutOfSpace", "ServerRemoved", "SnapshotCompleted", "SnapshotCreated", "StreamAction",
        "StreamBatchAbandoned", "UnknownEvent"
    ),
    ".jetstream": ("JetStream",),
    ".kv": ("KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus"),
    ".kv_watch": ("KeyWatcher",),
    ".message": ("Msg", "MsgMetadata", "SequencePair"),
    ".object_store": ("ObjectInfo", "ObjectLink", "ObjectStore", "ObjectStoreConfig", "ObjectStoreStatus",
                      "ObjectWatcher"),
    ".object_reader": ("ObjectReader",),
    ".ordered": ("OrderedConsumer",),
    ".fetch": ("MessageBatch",),
    ".push_consumer": ("PushConsumer",),
    ".subscription": ("Subscription",),
    ".stream": ("Stream",),
}
_LAZY = {name: module for module, names in _LAZY_BY_MODULE.items() for name in names}


def __getattr__(name: str) -> typing.Any:
    """A public name's first use imports its module (``jss.spark`` too: pyspark is optional)."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # the next use is a plain attribute lookup
        return value
    if name == "spark":
        return importlib.import_module(".spark", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "APIError",
    "AccountInfo",
    "AckPolicy",
    "ApiAudit",
    "ApiLimitReached",
    "AtomicBatch",
    "AuthorizationError",
    "BatchAck",
    "BatchPublishDuplicateMsgIdError",
    "BatchPublishError",
    "BatchPublishIncompleteError",
    "BatchPublishNotEnabledError",
    "BatchPublishTooLargeError",
    "BatchPublishTooManyInflightError",
    "BatchPublishUnsupportedHeaderError",
    "BucketExistsError",
    "BucketNotFoundError",
    "Client",
    "ClientClosedError",
    "ConsumeHandle",
    "ConsumeStats",
    "Consumer",
    "ConsumerAckMetric",
    "ConsumerAction",
    "ConsumerConfig",
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerGroupPinned",
    "ConsumerGroupUnpinned",
    "ConsumerInfo",
    "ConsumerNotFoundError",
    "ConsumerPause",
    "ConsumerPauseResponse",
    "ConsumerTypeError",
    "Counter",
    "CounterDisabledError",
    "CounterNotFoundError",
    "DEFAULT",
    "DEFAULT_NAK_DELAYS",
    "DeliverPolicy",
    "DigestMismatchError",
    "DiscardPolicy",
    "DomainLeaderElected",
    "DuplicateSubscriptionError",
    "Event",
    "EventStream",
    "FeatureNotSupportedError",
    "Headers",
    "InvalidKeyError",
    "JetStream",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "JetStreamNotEnabledForAccountError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyRevisionMismatchError",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueEntry",
    "KeyValueOp",
    "KeyValueStatus",
    "KeyWatcher",
    "LeaderElected",
    "MaxDeliveriesExceeded",
    "MessageAlreadyAckedError",
    "MessageBatch",
    "MessageGapError",
    "MessageNaked",
    "MessageNotFoundError",
    "MessageStream",
    "MessageTTLDisabledError",
    "MessageTTLInvalidError",
    "MessageTerminated",
    "MetaRescue",
    "Msg",
    "MsgIdInProcessError",
    "MsgMetadata",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamForSubjectError",
    "NotConnectedError",
    "ObjectAlreadyExistsError",
    "ObjectInfo",
    "ObjectLink",
    "ObjectNotFoundError",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "OrderedConsumer",
    "PermissionViolationError",
    "PinIdMismatchError",
    "PriorityPolicy",
    "PubAck",
    "PushConsumer",
    "QuorumLost",
    "ReplayPolicy",
    "RestoreCompleted",
    "RestoreCreated",
    "RetentionPolicy",
    "RetryPolicy",
    "Seconds",
    "SequencePair",
    "ServerOutOfSpace",
    "ServerRemoved",
    "SlowConsumerError",
    "SnapshotCompleted",
    "SnapshotCreated",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "Stream",
    "StreamAction",
    "StreamBatchAbandoned",
    "StreamConfig",
    "StreamInfo",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "StreamWrongLastMsgIdError",
    "StreamWrongLastSequenceError",
    "StreamWrongStreamError",
    "Subscription",
    "SubscriptionConfigError",
    "TimeoutError",
    "Timestamp",
    "UnknownEvent",
    "__version__",
    "connect",
]
