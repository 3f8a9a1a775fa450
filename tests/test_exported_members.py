# The public surface is pinned: every name in __all__ exists, __all__ is
# sorted, and every public class/function of the top level is listed.
import inspect

import jetstream_sync as jss


def test_all_is_sorted_and_complete():
    assert jss.__all__ == sorted(jss.__all__)
    # dir(), not vars(): most names are loaded on first use (the package's __getattr__)
    public = {n for n in dir(jss) if not n.startswith("_") and not inspect.ismodule(getattr(jss, n))}
    assert public == set(jss.__all__) - {"__version__"}


def test_names_the_contract_promises_are_importable_from_the_top_level():
    for name in ("StreamConfig", "ConsumerConfig", "StreamInfo", "ConsumerInfo", "PubAck", "AccountInfo",
                 "StoredMsg", "MsgMetadata", "RetentionPolicy", "StorageType", "DiscardPolicy", "AckPolicy",
                 "DeliverPolicy", "ReplayPolicy", "JetStreamError", "APIError", "StreamNotFoundError",
                 "ConsumerNotFoundError", "MessageNotFoundError", "StreamNameInUseError", "ConsumerExistsError",
                 "ConsumerDeletedError", "NoHeartbeatError", "TimeoutError", "NoRespondersError",
                 "JetStreamNotEnabledError", "ClientClosedError", "MessageAlreadyAckedError", "connect", "Client"):
        assert name in jss.__all__, name


def test_enums_are_built_from_their_json_value():
    assert jss.StorageType("memory") is jss.StorageType.MEMORY
    assert jss.AckPolicy("explicit") == "explicit"


#: The public members of the classes users hold (class attributes, methods and properties; names
#: set per instance, such as ``stream.name``, are the attrs and docs' business). A new public member
#: is a decision: add it here. Internal calls (``call``, ``request``, the engine hooks) stay private.
PUBLIC_MEMBERS = {
    jss.Client: ["close", "connected_url", "drain", "flush", "is_closed", "is_connected", "jetstream", "max_payload",
                 "publish", "request", "subscribe"],
    jss.JetStream: ["account_info", "batch", "client", "consumer", "consumer_info", "consumer_names", "consumers",
                    "counter", "create_consumer", "create_key_value", "create_object_store",
                    "create_or_update_consumer",
                    "create_or_update_key_value", "create_or_update_push_consumer", "create_or_update_stream",
                    "create_push_consumer", "create_stream", "delete_consumer", "delete_key_value",
                    "delete_object_store", "delete_stream", "domain", "events", "key_value", "key_value_names",
                    "key_values", "object_store", "object_store_names", "object_stores", "ordered_consumer",
                    "pause_consumer", "publish", "publish_async", "publish_async_complete", "publish_async_pending",
                    "publish_batch", "pull_subscribe", "push_consumer", "resume_consumer", "retry", "stream",
                    "stream_info", "stream_names", "streams", "subscribe", "timeout", "unpin_consumer",
                    "update_consumer", "update_key_value", "update_object_store", "update_push_consumer",
                    "update_stream"],
    jss.Stream: ["cached_info", "consumer", "consumer_names", "consumers", "create_consumer",
                 "create_or_update_consumer", "create_or_update_push_consumer", "create_push_consumer",
                 "delete_consumer", "delete_msg", "events", "get_batch", "get_last_for", "get_last_msg", "get_msg", "info",
                 "iter_batches", "ordered_consumer",
                 "purge",
                 "push_consumer", "to_arrow", "to_pandas", "unpin_consumer", "update_consumer", "update_push_consumer"],
    jss.Consumer: ["cached_info", "client", "consume", "delete", "events", "fetch", "fetch_no_wait", "info", "js",
                   "messages", "next", "pause", "resume", "unpin"],
    jss.PushConsumer: ["cached_info", "client", "consume", "delete", "deliver_subject", "events", "info", "js",
                       "messages", "pause", "resume"],
    jss.Subscription: ["closed", "consumer_info", "consumer_name", "delivered", "drain", "dropped", "error",
                       "next_msg", "pending", "stream_name", "unsubscribe", "wait"],
    jss.EventStream: ["next", "stop"],
    jss.OrderedConsumer: ["client", "close", "consume", "fetch", "fetch_no_wait", "js", "messages", "next"],
    jss.MessageBatch: ["stop", "unread"],
    jss.MessageStream: ["drain", "next", "stop"],
    jss.ConsumeHandle: ["closed", "drain", "stats", "stop", "wait"],
    jss.KeyValue: ["create", "delete", "get", "get_many", "history", "keys", "purge", "purge_deletes", "put", "status",
                   "update", "watch"],
    jss.KeyWatcher: ["consume", "initial", "initial_done", "next", "stop", "stopped", "wait"],
    jss.ObjectStore: ["add_bucket_link", "add_link", "delete", "get", "get_bytes", "get_file", "info", "list", "put",
                      "seal", "status", "update_meta", "watch"],
    jss.ObjectWatcher: ["consume", "initial", "initial_done", "next", "stop", "stopped", "wait"],
    jss.AtomicBatch: ["add", "closed", "commit", "count", "discard", "id"],
    jss.Counter: ["add", "get", "get_many"],
    jss.Msg: ["ack", "acked", "data", "double_ack", "headers", "in_progress", "metadata", "metadata_numbers", "nak",
              "reply", "size", "subject", "term"],
}


def test_the_public_members_of_each_handle_are_pinned():
    for cls, members in PUBLIC_MEMBERS.items():
        assert sorted(n for n in dir(cls) if not n.startswith("_")) == members, cls.__name__


def test_every_timeout_defaults_to_the_typed_sentinel_not_an_ellipsis():
    assert repr(jss.DEFAULT) == "jetstream_sync.DEFAULT"
    for cls in PUBLIC_MEMBERS:
        for name, member in inspect.getmembers(cls, inspect.isfunction):
            param = inspect.signature(member).parameters.get("timeout")
            if param is not None and param.default is not inspect.Parameter.empty:
                assert param.default is not Ellipsis, f"{cls.__name__}.{name}"
