# The JetStream context (ADR-37 "JetStreamContext"): stream and consumer
# management, account info and publishing.
#
# Rule 1: every API request goes through the context's ``_jsapi.JsApi``: one
#         place for the prefix, JSON, timeouts, error envelopes and the retry
#         policy (idempotent requests only).
# Rule 2: no pull state and no worker threads here; handles (Stream,
#         Consumer) are returned for that.
from __future__ import annotations

import math
import numbers
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import attrs

from . import errors
from ._loop import wait_future
from ._publish import Publisher, publish_parts
from ._retry import RetryPolicy
from ._protocol import DEFAULT, Timeout, check_subject
from ._jsapi import JsApi
from .api import ApiPrefix
from .consume import NakDelay
from .consumer import Consumer
from .ordered import OrderedConsumer
from .message import Msg
from .pull import wake_resumed
from .push import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS
from .push_consumer import PushConsumer
from .events import EventStream, open_events
from .kv import KeyValue, KeyValueConfig, KeyValueStatus, check_bucket, stream_config_of
from .atomic_batch import AtomicBatch, publish_batch
from .counter import Counter
from .object_store import ObjectStore, ObjectStoreConfig, ObjectStoreStatus, object_stream_config
from .subscription import Subscription, pull_subscribe, subscribe
from .stream import Stream
from .config import (
    AccountInfo,
    AckPolicy,
    BatchAck,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPauseResponse,
    PubAck,
    config_from,
    format_time,
    StreamConfig,
    StreamInfo,
    check_priority_group,
    validate_consumer_name,
    validate_stream_name,
)

if TYPE_CHECKING:
    import concurrent.futures

__all__ = ["JetStream", "pause_deadline"]


def pause_deadline(until: Any, now: datetime | None = None) -> datetime:
    """The aware time a pause ends, from ``until``: an aware ``datetime``, or seconds from ``now`` (a
    number or a ``timedelta``). Raises TypeError/ValueError naming ``until`` for anything else, a
    naive datetime, or a time that is not after ``now``. No I/O."""
    now = datetime.now(timezone.utc) if now is None else now
    if isinstance(until, datetime):
        if until.tzinfo is None or until.utcoffset() is None:
            raise ValueError(f"until must be a timezone-aware datetime (got naive {until!r}): "
                             f"e.g. datetime.now(timezone.utc) + timedelta(minutes=5)")
        deadline = until
    elif isinstance(until, (timedelta, numbers.Real)) and not isinstance(until, bool):
        if not isinstance(until, timedelta) and not math.isfinite(until):
            raise ValueError(f"until must be a finite number of seconds from now, got {until!r}")
        try:
            deadline = now + (until if isinstance(until, timedelta) else timedelta(seconds=float(until)))
        except OverflowError:
            raise ValueError(f"until is too far ahead to be a time, got {until!r}") from None
    else:
        raise TypeError(f"until must be an aware datetime, or seconds from now (a number or a timedelta), "
                        f"got {type(until).__name__}")
    if deadline <= now:
        raise ValueError(f"until must be in the future (to resume now, use resume()), got {until!r}")
    return deadline


class JetStream:
    """A JetStream context: manage streams and consumers, publish. Thread-safe.

    Get one with ``client.jetstream()``. Every call blocks the calling thread
    (except ``publish_async``, which blocks only while the window is full) for
    at most ``timeout`` seconds (default: the context's), waking every 0.25 s
    so Ctrl-C lands. Idempotent requests (info, lookups, listing, get_msg,
    ``publish`` and ``publish_async`` with ``msg_id``) are retried per ``retry``.
    """

    def __init__(self, client: Any, *, domain: str | None = None, api_prefix: str | None = None,
                 timeout: float | None = None, retry: RetryPolicy | None = None, max_pending: int = 4000) -> None:
        self._client = client
        self._conn = conn = client._conn
        self._api = ApiPrefix(domain, api_prefix)
        self._timeout = conn.default_timeout if timeout is None else conn.timeout_or_default(timeout)
        self._jsapi = JsApi(conn, self._api, self._timeout, RetryPolicy(), Publisher.for_requests(conn).request)
        self.retry = retry if retry is not None else RetryPolicy()
        self._publisher = Publisher.shared(conn, max_pending)

    @property
    def client(self) -> Any:
        """The :class:`Client` this context belongs to (a layer above it: not imported here). No I/O."""
        return self._client

    @property
    def retry(self) -> RetryPolicy:
        """The :class:`RetryPolicy` of this context's idempotent requests (assignable). No I/O."""
        return self._jsapi.retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        if not isinstance(policy, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, got {type(policy).__name__}")
        self._jsapi.retry = policy

    @property
    def domain(self) -> str | None:
        return self._api.domain

    @property
    def timeout(self) -> float:
        """The default timeout of this context's calls, in seconds."""
        return self._timeout

    def _resolve_timeout(self, timeout: Timeout) -> float | None:
        """:data:`DEFAULT` (not given) means this context's default; None means no limit."""
        return self._jsapi.resolve_timeout(timeout)

    # -- account ---------------------------------------------------------------

    def account_info(self, *, timeout: Timeout = DEFAULT) -> AccountInfo:
        """Return this account's JetStream usage and limits (one request, retried)."""
        return AccountInfo.from_response(self._jsapi.request(self._api.account_info(), None, timeout, idempotent=True))

    # -- streams ---------------------------------------------------------------

    def create_stream(self, config: StreamConfig | Mapping[str, Any] | None = None, *,
                      timeout: Timeout = DEFAULT, **fields: Any) -> "Stream":
        """Create a stream from a ``StreamConfig`` and/or keyword fields; return its handle.

        Raises ``StreamNameInUseError`` if a stream of that name exists with a
        different configuration; ValueError/TypeError for a bad config (nothing sent).
        """
        cfg = config_from(StreamConfig, config, fields)
        resp = self._jsapi.request(self._api.stream_create(cfg.name), cfg.to_request(), timeout, idempotent=False)
        return self._stream_handle(StreamInfo.from_response(resp))

    def update_stream(self, config: StreamConfig | Mapping[str, Any] | None = None, *,
                      timeout: Timeout = DEFAULT, **fields: Any) -> "Stream":
        """Update an existing stream's configuration; return its handle.

        Raises ``StreamNotFoundError`` when it does not exist, ``APIError`` for a
        change the server refuses.
        """
        cfg = config_from(StreamConfig, config, fields)
        resp = self._jsapi.request(self._api.stream_update(cfg.name), cfg.to_request(), timeout, idempotent=False)
        return self._stream_handle(StreamInfo.from_response(resp))

    def create_or_update_stream(self, config: StreamConfig | Mapping[str, Any] | None = None, *,
                                timeout: Timeout = DEFAULT, **fields: Any) -> "Stream":
        """Update the stream if it exists, else create it; return its handle."""
        cfg = config_from(StreamConfig, config, fields)
        try:
            return self.update_stream(cfg, timeout=timeout)
        except errors.StreamNotFoundError:
            return self.create_stream(cfg, timeout=timeout)

    def stream(self, name: str, *, timeout: Timeout = DEFAULT) -> "Stream":
        """Look a stream up (one STREAM.INFO request) and return its handle.

        Raises ``StreamNotFoundError``.
        """
        return self._stream_handle(self.stream_info(name, timeout=timeout))

    def stream_info(self, name: str, *, timeout: Timeout = DEFAULT) -> StreamInfo:
        """Return a stream's info (one request, retried). Raises ``StreamNotFoundError``."""
        validate_stream_name(name, "name")
        return StreamInfo.from_response(self._jsapi.request(self._api.stream_info(name), None, timeout, idempotent=True))

    def delete_stream(self, name: str, *, timeout: Timeout = DEFAULT) -> None:
        """Delete a stream and all its messages and consumers. Raises ``StreamNotFoundError``."""
        validate_stream_name(name, "name")
        self._jsapi.request(self._api.stream_delete(name), None, timeout, idempotent=False)

    def streams(self, subject: str | None = None, *, timeout: Timeout = DEFAULT) -> Iterator[StreamInfo]:
        """Iterate over every stream's info (optionally those capturing ``subject``), page by page.

        Each page is one blocking request, made as iteration reaches it.
        """
        if subject is not None:
            check_subject(subject)
        return self._jsapi.paged(self._api.stream_list(), "streams", subject, timeout, StreamInfo.from_response)

    def stream_names(self, subject: str | None = None, *, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """Iterate over every stream name (optionally those capturing ``subject``), page by page."""
        if subject is not None:
            check_subject(subject)
        return self._jsapi.paged(self._api.stream_names(), "streams", subject, timeout, str)

    def _stream_handle(self, info: StreamInfo) -> "Stream":
        return Stream(self, info)

    # -- consumers -----------------------------------------------------------

    def _upsert_consumer(self, stream: str, config: Any, fields: Mapping[str, Any], action: str | None,
                         timeout: Any, push: bool = False) -> ConsumerInfo:
        validate_stream_name(stream, "stream")
        cfg = config_from(ConsumerConfig, config, fields)
        if push and not cfg.deliver_subject:
            raise ValueError("deliver_subject: a push consumer needs the subject the server delivers to "
                             "(for a pull consumer use create_consumer)")
        if not push and cfg.deliver_subject:
            raise ValueError(f"deliver_subject={cfg.deliver_subject!r} makes a push consumer: use "
                             f"create_push_consumer (or leave deliver_subject out for a pull consumer)")
        if cfg.ack_policy is None:
            # As nats.go's jetstream package: explicit acks unless asked otherwise
            # (the server alone would default to none, making ack() a no-op).
            cfg = attrs.evolve(cfg, ack_policy=AckPolicy.EXPLICIT)
        name = cfg.name or cfg.durable_name
        if action == "update" and not name:
            raise ValueError(f"name: {'update_push_consumer' if push else 'update_consumer'} needs the "
                             f"consumer's name (or durable_name)")
        filter_subject = cfg.filter_subject if not cfg.filter_subjects else None
        payload: dict[str, Any] = {"stream_name": stream, "config": cfg.to_request()}
        if action:
            payload["action"] = action
        resp = self._jsapi.request(self._api.consumer_create(stream, name, filter_subject), payload, timeout,
                                   idempotent=False)
        return ConsumerInfo.from_response(resp)

    def create_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                        timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """Create a consumer on ``stream``; return its handle.

        Durable with ``durable_name``; without it the server removes the
        consumer after ``inactive_threshold`` (a server-chosen name when
        ``name`` is unset too). ``ack_policy`` defaults to explicit, as in nats.go.

        Raises ``ConsumerExistsError`` when one of that name exists with another
        configuration, ``StreamNotFoundError``.
        """
        return self._consumer_handle(self._upsert_consumer(stream, config, fields, "create", timeout))

    def update_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                        timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """Update an existing consumer; return its handle. Raises ``ConsumerNotFoundError``."""
        return self._consumer_handle(self._upsert_consumer(stream, config, fields, "update", timeout))

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                                  timeout: Timeout = DEFAULT, **fields: Any) -> "Consumer":
        """Create the consumer, or update it if it exists; return its handle."""
        return self._consumer_handle(self._upsert_consumer(stream, config, fields, None, timeout))

    def consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> "Consumer":
        """Look a consumer up (one CONSUMER.INFO request) and return its handle.

        Raises ``ConsumerTypeError`` when it is a push consumer, ``ConsumerNotFoundError``,
        ``StreamNotFoundError``.
        """
        return self._consumer_handle(self.consumer_info(stream, name, timeout=timeout))

    def create_push_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                             timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """Create a push consumer on ``stream`` (``deliver_subject`` required); return its handle.

        ``deliver_group`` makes its readers a queue group; ``flow_control`` (needs ``idle_heartbeat``)
        lets a slow reader pause the server. ``ack_policy`` defaults to explicit. One request, not
        retried. Raises ValueError naming ``deliver_subject`` when it is missing (nothing sent),
        ``ConsumerExistsError``, ``StreamNotFoundError``, ``APIError`` for a config the server refuses.
        """
        return self._push_handle(self._upsert_consumer(stream, config, fields, "create", timeout, push=True))

    def update_push_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                             timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """Update an existing push consumer; return its handle. Raises ``ConsumerNotFoundError``."""
        return self._push_handle(self._upsert_consumer(stream, config, fields, "update", timeout, push=True))

    def create_or_update_push_consumer(self, stream: str,
                                       config: ConsumerConfig | Mapping[str, Any] | None = None, *,
                                       timeout: Timeout = DEFAULT, **fields: Any) -> "PushConsumer":
        """Create the push consumer, or update it if it exists; return its handle."""
        return self._push_handle(self._upsert_consumer(stream, config, fields, None, timeout, push=True))

    def push_consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> "PushConsumer":
        """Look a push consumer up (one CONSUMER.INFO request, retried) and return its handle.

        Raises ``ConsumerTypeError`` when it is a pull consumer, ``ConsumerNotFoundError``,
        ``StreamNotFoundError``.
        """
        return self._push_handle(self.consumer_info(stream, name, timeout=timeout))

    def _push_handle(self, info: ConsumerInfo) -> "PushConsumer":
        if info.config is None or not info.config.deliver_subject:
            raise errors.ConsumerTypeError(f"consumer {info.name!r} of stream {info.stream_name!r} is a pull "
                                           f"consumer (no deliver_subject): use consumer()")
        return PushConsumer(self, info)

    def consumer_info(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> ConsumerInfo:
        """Return a consumer's info (one request, retried)."""
        validate_stream_name(stream, "stream")
        validate_consumer_name(name, "name")
        return ConsumerInfo.from_response(
            self._jsapi.request(self._api.consumer_info(stream, name), None, timeout, idempotent=True))

    def delete_consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> None:
        """Delete a consumer. Raises ``ConsumerNotFoundError``."""
        validate_stream_name(stream, "stream")
        validate_consumer_name(name, "name")
        self._jsapi.request(self._api.consumer_delete(stream, name), None, timeout, idempotent=False)

    def unpin_consumer(self, stream: str, name: str, group: str, *, timeout: Timeout = DEFAULT) -> None:
        """Unpin the client the ``pinned_client`` priority group ``group`` of consumer ``name`` is pinned to
        (ADR-42): the server pins the next client that pulls in the group, and the old one's next pull
        gets a 423. One request, not retried; blocks at most ``timeout``. Raises ValueError/TypeError
        for a bad name or group, ``FeatureNotSupportedError`` on a server before 2.11 (nothing sent);
        ``ConsumerNotFoundError``, ``StreamNotFoundError``, ``APIError`` (a group the consumer does not
        have)."""
        validate_stream_name(stream, "stream")
        validate_consumer_name(name, "name")
        check_priority_group(group, "group")
        self._jsapi.require("unpinning a priority group", 1, "2.11")
        self._jsapi.request(self._api.consumer_unpin(stream, name), {"group": group}, timeout, idempotent=False)

    def consumers(self, stream: str, *, timeout: Timeout = DEFAULT) -> Iterator[ConsumerInfo]:
        """Iterate over every consumer's info on ``stream``, page by page."""
        validate_stream_name(stream, "stream")
        return self._jsapi.paged(self._api.consumer_list(stream), "consumers", None, timeout, ConsumerInfo.from_response)

    def consumer_names(self, stream: str, *, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """Iterate over every consumer name on ``stream``, page by page."""
        validate_stream_name(stream, "stream")
        return self._jsapi.paged(self._api.consumer_names(stream), "consumers", None, timeout, str)

    def pause_consumer(self, stream: str, name: str, until: datetime | float | timedelta, *,
                       timeout: Timeout = DEFAULT) -> ConsumerPauseResponse:
        """Pause consumer ``name`` of ``stream``: the server delivers nothing from it until ``until`` (an
        aware ``datetime``, or seconds from now as a number or a ``timedelta``), then goes on by itself.
        Pull requests are kept meanwhile, and acks of what was delivered before still count. Needs
        nats-server 2.11.

        One request (retried: pausing until a given time is idempotent), blocking at most ``timeout`` per
        attempt. Raises ValueError/TypeError naming ``until`` for a naive datetime, a time not in the
        future or what is no time at all, ``FeatureNotSupportedError`` on an older server (nothing sent
        in either case), ``ConsumerNotFoundError``, ``StreamNotFoundError``, ``TimeoutError``.
        """
        validate_stream_name(stream, "stream")
        validate_consumer_name(name, "name")
        deadline = pause_deadline(until)
        self._jsapi.require("pausing a consumer", 1, "2.11")
        resp = self._jsapi.request(self._api.consumer_pause(stream, name), {"pause_until": format_time(deadline)},
                                   timeout, idempotent=True)
        return ConsumerPauseResponse.from_response(resp)

    def resume_consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> ConsumerPauseResponse:
        """Resume a paused consumer now (a consumer that is not paused stays as it is). Needs
        nats-server 2.11.

        The server does not go back to the pull requests that waited during the pause until a message
        or another request arrives, so the ``messages()`` and ``consume()`` of this client reading the
        consumer pull again on their own at once (on the loop thread, after this returns). A ``fetch()``
        or ``next()`` waiting meanwhile ends at its expiry as usual; a push consumer delivers again with
        the next message stored, or at its next idle heartbeat.

        One request (retried), blocking at most ``timeout`` per attempt. Raises
        ``FeatureNotSupportedError`` on an older server (nothing sent), ``ConsumerNotFoundError``,
        ``StreamNotFoundError``, ``TimeoutError``.
        """
        validate_stream_name(stream, "stream")
        validate_consumer_name(name, "name")
        self._jsapi.require("resuming a consumer", 1, "2.11")
        resp = self._jsapi.request(self._api.consumer_pause(stream, name), {}, timeout, idempotent=True)
        wake_resumed(self._conn, self._api.msg_next(stream, name))
        return ConsumerPauseResponse.from_response(resp)

    def _consumer_handle(self, info: ConsumerInfo) -> "Consumer":
        if info.config is not None and info.config.deliver_subject:
            raise errors.ConsumerTypeError(
                f"consumer {info.name!r} of stream {info.stream_name!r} is a push consumer (deliver_subject "
                f"{info.config.deliver_subject!r}): use push_consumer()")
        return Consumer(self, info)

    def ordered_consumer(self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None,
                         **fields: Any) -> "OrderedConsumer":
        """Return an :class:`OrderedConsumer` on ``stream`` (no I/O until it is read).

        Fields may narrow what it reads (``filter_subject(s)``,
        ``deliver_policy``, ``opt_start_seq``/``opt_start_time``,
        ``headers_only``, ``replay_policy``, ``inactive_threshold``); anything
        that contradicts an ordered consumer (a name, acks, replicas) is a ValueError.
        """
        return OrderedConsumer(self, stream, config, fields)

    # -- key-value buckets (ADR-8) -----------------------------------------------

    def create_key_value(self, bucket: str | None = None, *, config: KeyValueConfig | Mapping[str, Any] | None = None,
                         timeout: Timeout = DEFAULT, **fields: Any) -> KeyValue:
        """Create the key-value bucket ``bucket`` (the stream ``KV_<bucket>``, made exactly as nats.go makes
        it) and return it. ``fields`` are :class:`KeyValueConfig`'s (``history``, ``ttl``,
        ``max_value_size``, ``max_bytes``, ``storage``, ``replicas``, ``compression``, ``description``,
        ``metadata``, ``placement``, ``republish``, ``limit_marker_ttl``, ``mirror``, ``sources``).

        Blocks for one request (at most ``timeout``). The same config again succeeds; raises
        ``BucketExistsError`` when the bucket exists with another config, ValueError/TypeError for a bad
        name or field (nothing sent).
        """
        cfg = stream_config_of(config, bucket, fields)
        try:
            resp = self._jsapi.request(self._api.stream_create(cfg.name), cfg.to_request(), timeout, idempotent=False)
        except errors.StreamNameInUseError as exc:
            raise errors.BucketExistsError(exc.code, exc.err_code, exc.description, stream=cfg.name,
                                           operation=f"create key-value bucket {cfg.name[3:]!r}") from None
        return KeyValue(self, StreamInfo.from_response(resp))

    def update_key_value(self, bucket: str | None = None, *, config: KeyValueConfig | Mapping[str, Any] | None = None,
                         timeout: Timeout = DEFAULT, **fields: Any) -> KeyValue:
        """Change an existing bucket's configuration (as :meth:`create_key_value` takes it); return it.

        Raises ``BucketNotFoundError``, ``APIError`` for a change the server refuses (history of a
        bucket with data may change; storage may not).
        """
        cfg = stream_config_of(config, bucket, fields)
        try:
            resp = self._jsapi.request(self._api.stream_update(cfg.name), cfg.to_request(), timeout, idempotent=False)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=cfg.name,
                                             operation=exc.operation) from None
        return KeyValue(self, StreamInfo.from_response(resp))

    def create_or_update_key_value(self, bucket: str | None = None, *,
                                   config: KeyValueConfig | Mapping[str, Any] | None = None,
                                   timeout: Timeout = DEFAULT, **fields: Any) -> KeyValue:
        """Update the bucket if it exists, else create it; return it (one or two requests)."""
        stream_config_of(config, bucket, fields)  # every check before the first request
        try:
            return self.update_key_value(bucket, config=config, timeout=timeout, **fields)
        except errors.BucketNotFoundError:
            return self.create_key_value(bucket, config=config, timeout=timeout, **fields)

    def key_value(self, bucket: str, *, timeout: Timeout = DEFAULT) -> KeyValue:
        """Bind to the existing bucket ``bucket`` (one STREAM.INFO request, retried).

        Raises ``BucketNotFoundError``, ValueError for a bad name (nothing sent).
        """
        name = f"KV_{check_bucket(bucket)}"
        try:
            info = self.stream_info(name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=name,
                                             operation=f"look up key-value bucket {bucket!r}") from None
        return KeyValue(self, info)

    def delete_key_value(self, bucket: str, *, timeout: Timeout = DEFAULT) -> None:
        """Delete the bucket and every key in it (one request). Raises ``BucketNotFoundError``."""
        name = f"KV_{check_bucket(bucket)}"
        try:
            self.delete_stream(name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=name,
                                             operation=f"delete key-value bucket {bucket!r}") from None

    def key_value_names(self, *, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """The names of the account's buckets, one listing request per page as iteration reaches it."""
        for name in self.stream_names("$KV.*.>", timeout=timeout):
            if name.startswith("KV_"):
                yield name[3:]

    def key_values(self, *, timeout: Timeout = DEFAULT) -> Iterator[KeyValueStatus]:
        """The :class:`KeyValueStatus` of every bucket of the account, one request per page."""
        for info in self.streams("$KV.*.>", timeout=timeout):
            if info.config is not None and info.config.name.startswith("KV_"):
                yield KeyValueStatus.from_stream_info(info)

    # -- object stores (ADR-20) -------------------------------------------------------

    def create_object_store(self, bucket: str | None = None, *,
                            config: ObjectStoreConfig | Mapping[str, Any] | None = None,
                            timeout: Timeout = DEFAULT, **fields: Any) -> ObjectStore:
        """Create the object store ``bucket`` (the stream ``OBJ_<bucket>``, made exactly as nats.go makes
        it) and return it. ``fields`` are :class:`ObjectStoreConfig`'s (``description``, ``ttl``,
        ``max_bytes``, ``storage``, ``replicas``, ``compression``, ``metadata``, ``placement``).

        Blocks for one request. The same config again succeeds; raises ``BucketExistsError`` when the
        store exists with another config, ValueError/TypeError for a bad name or field (nothing sent).
        """
        cfg = object_stream_config(config, bucket, fields)
        try:
            resp = self._jsapi.request(self._api.stream_create(cfg.name), cfg.to_request(), timeout, idempotent=False)
        except errors.StreamNameInUseError as exc:
            raise errors.BucketExistsError(exc.code, exc.err_code, exc.description, stream=cfg.name,
                                           operation=f"create object store {cfg.name[4:]!r}") from None
        return ObjectStore(self, StreamInfo.from_response(resp))

    def update_object_store(self, bucket: str | None = None, *,
                            config: ObjectStoreConfig | Mapping[str, Any] | None = None,
                            timeout: Timeout = DEFAULT, **fields: Any) -> ObjectStore:
        """Change an existing store's configuration (as :meth:`create_object_store` takes it); return it.
        Raises ``BucketNotFoundError``, ``APIError`` for a change the server refuses."""
        cfg = object_stream_config(config, bucket, fields)
        try:
            resp = self._jsapi.request(self._api.stream_update(cfg.name), cfg.to_request(), timeout, idempotent=False)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=cfg.name,
                                             operation=exc.operation) from None
        return ObjectStore(self, StreamInfo.from_response(resp))

    def object_store(self, bucket: str, *, timeout: Timeout = DEFAULT) -> ObjectStore:
        """Bind to the existing object store ``bucket`` (one STREAM.INFO request, retried).
        Raises ``BucketNotFoundError``, ValueError for a bad name (nothing sent)."""
        name = f"OBJ_{check_bucket(bucket)}"
        try:
            info = self.stream_info(name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=name,
                                             operation=f"look up object store {bucket!r}") from None
        return ObjectStore(self, info)

    def delete_object_store(self, bucket: str, *, timeout: Timeout = DEFAULT) -> None:
        """Delete the store and every object in it (one request). Raises ``BucketNotFoundError``."""
        name = f"OBJ_{check_bucket(bucket)}"
        try:
            self.delete_stream(name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=name,
                                             operation=f"delete object store {bucket!r}") from None

    def object_store_names(self, *, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """The names of the account's object stores, one listing request per page."""
        for name in self.stream_names("$O.*.M.>", timeout=timeout):
            if name.startswith("OBJ_"):
                yield name[4:]

    def object_stores(self, *, timeout: Timeout = DEFAULT) -> Iterator[ObjectStoreStatus]:
        """The :class:`ObjectStoreStatus` of every object store of the account, one request per page."""
        for info in self.streams("$O.*.M.>", timeout=timeout):
            if info.config is not None and info.config.name.startswith("OBJ_"):
                yield ObjectStoreStatus.from_stream_info(info)

    # -- counters (ADR-49) --------------------------------------------------------------

    def counter(self, stream: str, *, timeout: Timeout = DEFAULT) -> Counter:
        """The counters of ``stream``, a stream made with ``allow_msg_counter=True``: every subject of it
        is a counter (``add``, ``get``, ``get_many``).

        Blocks for one STREAM.INFO request (retried). Raises ``CounterDisabledError`` naming
        ``allow_msg_counter`` when the stream does not count, ``StreamNotFoundError``,
        ``FeatureNotSupportedError`` (a server before 2.12, before anything is sent), ValueError for a
        bad name.
        """
        validate_stream_name(stream, "stream")
        self._jsapi.require("counters", 2, "2.12")
        return Counter(self, self.stream_info(stream, timeout=timeout))

    # -- events ------------------------------------------------------------------

    def events(self, subject_filter: str = ">", *, types: Any = None) -> EventStream:
        """Subscribe to JetStream advisories and metrics and return a blocking :class:`EventStream`.

        ``subject_filter`` is matched against the subject after ``$JS.EVENT.`` (``">"``: all;
        ``"ADVISORY.CONSUMER.>"``: consumer advisories; ``"METRIC.>"``: ack samples). ``types`` keeps
        only those event classes or type strings. Each event is a frozen class chosen by its ``type``
        (``MaxDeliveriesExceeded``, ``ConsumerAckMetric``, ...; unknown ones as ``UnknownEvent``).
        Blocks only to subscribe (nothing published after this call is missed). Raises ValueError for
        a bad filter, TypeError for a bad ``types`` entry (nothing sent).
        """
        return open_events(self._conn, subject_filter, types)

    # -- the subscribe workflow (ADR-15) ------------------------------------------

    def subscribe(self, subject: str, queue: str | None = None, handler: Callable[[Msg], Any] | None = None, *,
                  durable: str | None = None, stream: str | None = None,
                  config: ConsumerConfig | Mapping[str, Any] | None = None, manual_ack: bool = False,
                  ordered_consumer: bool = False, idle_heartbeat: float | None = None, flow_control: bool = False,
                  pending_msgs_limit: int = DEFAULT_PENDING_MSGS, pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
                  deliver_policy: Any = None, headers_only: bool | None = None,
                  inactive_threshold: float | None = None, workers: int = 1,
                  error_handler: Callable[[BaseException], Any] | None = None,
                  nak_delay: NakDelay = None) -> Subscription:
        """Subscribe to ``subject`` through a push consumer, as nats-py's ``js.subscribe`` (blocking).

        Follows ADR-15: the stream is the one capturing ``subject`` (or ``stream``); ``queue`` is the
        durable name when none is given; an existing consumer is bound after the push_bound,
        deliver_group, filter, pull-vs-push and config checks, else one is created (subscribed first).
        With ``handler``, ``workers`` threads run it and each message is acked after it returns unless
        ``manual_ack`` or it was acked (a handler that raises: NAK after ``nak_delay``, as in
        ``consume()``, the error to ``error_handler`` or shown once on stderr); without one, read with
        ``sub.next_msg()`` or ``for msg in sub`` and ack yourself. An ephemeral consumer this call
        created is deleted by ``unsubscribe()`` and after ``drain()``; a named durable (``durable=``)
        and a queue group's consumer stay until deleted on purpose
        (``sub.unsubscribe(delete_consumer=True)`` or ``js.delete_consumer``).

        Blocks for the lookups, the create and the subscribe (each at most the context's timeout).
        Raises ``SubscriptionConfigError`` (queue with ``idle_heartbeat``/``flow_control``, checked
        first and before anything is sent; a mismatch with the existing consumer, naming the field and
        both values), ``DuplicateSubscriptionError``, ``ConsumerTypeError`` (a pull consumer),
        ``NoStreamForSubjectError``, ValueError/TypeError for bad arguments (nothing sent).
        """
        return subscribe(self, subject, queue, handler, durable=durable, stream=stream, config=config,
                         manual_ack=manual_ack, ordered_consumer=ordered_consumer, idle_heartbeat=idle_heartbeat,
                         flow_control=flow_control, pending_msgs_limit=pending_msgs_limit,
                         pending_bytes_limit=pending_bytes_limit, deliver_policy=deliver_policy,
                         headers_only=headers_only, inactive_threshold=inactive_threshold, workers=workers,
                         error_handler=error_handler, nak_delay=nak_delay)

    def pull_subscribe(self, subject: str, durable: str | None = None, stream: str | None = None,
                       config: ConsumerConfig | Mapping[str, Any] | None = None) -> "Consumer":
        """Bind to or create a pull consumer for ``subject`` with the ADR-15 checks; return the ADR-37
        :class:`Consumer` (``fetch``, ``next``, ``messages``, ``consume``).

        Blocks for the lookups and the create. Raises ``ConsumerTypeError`` (a push consumer),
        ``SubscriptionConfigError`` (filter or config mismatch, ``ack_policy=none``),
        ``NoStreamForSubjectError``, ValueError/TypeError (nothing sent).
        """
        return pull_subscribe(self, subject, durable, stream, config)

    # -- publishing ------------------------------------------------------------

    def publish(self, subject: str, data: bytes | str = b"", *, headers: Mapping[str, Any] | None = None,
                msg_id: str | None = None, expected_stream: str | None = None,
                expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
                expected_last_msg_id: str | None = None, ttl: Any = None,
                timeout: Timeout = DEFAULT) -> PubAck:
        """Publish to a stream and block until the server stores it; return the ``PubAck``.

        Blocks on the PubAck for at most ``timeout``, waking every 0.25 s so
        Ctrl-C lands; a publish given up (interrupted, timed out) leaves no
        slot of the window taken, though the server may still store it. With
        ``msg_id`` the server deduplicates within the stream's duplicate
        window, so the call is retried per ``retry`` on timeouts, no responders and the other
        retriable errors (``MsgIdInProcessError``: an earlier attempt with the id is still being
        stored). ``ttl`` (seconds, a timedelta or "never"; at least 1 s) removes the message after
        that long (the stream needs ``allow_msg_ttl``, else ``MessageTTLDisabledError``; nats-server
        2.11 or later, else ``FeatureNotSupportedError`` before anything is sent).

        Raises ``NoRespondersError`` when no stream captures ``subject`` (at once
        without ``msg_id``; after the retries with it),
        ``StreamWrong*Error`` when an ``expected_*`` check fails, ``TimeoutError``,
        ``MsgIdInProcessError`` (when the retries ran out),
        ``ClientClosedError``, ValueError/TypeError for bad arguments (nothing sent).
        """
        t = self._resolve_timeout(timeout)
        head, tail = publish_parts(subject, data, self._conn.max_payload, headers, msg_id, expected_stream,
                                   expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl)
        if ttl is not None:
            self._jsapi.require("a per-message TTL", 1, "2.11")
        limit = t if t is not None else 3600.0

        if msg_id is None:
            return self._publisher.call(head, tail, limit, t, subject)
        return self.retry.call(lambda: self._publisher.call(head, tail, limit, t, subject))

    def publish_async(self, subject: str, data: bytes | str = b"", *, headers: Mapping[str, Any] | None = None,
                      msg_id: str | None = None, expected_stream: str | None = None,
                      expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
                      expected_last_msg_id: str | None = None, ttl: Any = None,
                      timeout: Timeout = DEFAULT) -> "concurrent.futures.Future[PubAck]":
        """Publish without waiting for the PubAck; return a ``concurrent.futures.Future[PubAck]``.

        At most ``max_pending`` publishes are in flight: when the window is
        full this blocks until a slot frees (at most ``timeout``, then
        ``TimeoutError``). The future ends with the PubAck or the error
        ``publish`` would raise; its callbacks run on the loop thread, so keep
        them short and never block in them. With ``msg_id`` the publish is
        retried as ``publish`` is (per ``retry``, on the loop thread, keeping its
        window slot through the backoff; each attempt waits at most ``timeout``),
        and the future ends with the last attempt's error; without it, never.
        """
        t = self._timeout if timeout is DEFAULT else self._resolve_timeout(timeout)
        head, tail = publish_parts(subject, data, self._conn.max_payload, headers, msg_id, expected_stream,
                                   expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl)
        if ttl is not None:
            self._jsapi.require("a per-message TTL", 1, "2.11")
        return self._publisher.submit(head, tail, t if t is not None else 3600.0, t, subject,
                                      None if msg_id is None else self.retry)

    def batch(self) -> AtomicBatch:
        """Begin an atomic batch: its messages are stored all together when committed, or none of them.

        ::

            with js.batch() as batch:
                batch.add("orders.1", b"...")
                ack = batch.commit("orders.2", b"...")

        No I/O until the first ``add``. Leaving the ``with`` block without ``commit()`` (or by an
        exception) discards the batch: nothing of it is stored. Needs nats-server 2.12 or later
        (``FeatureNotSupportedError`` here otherwise) and a stream with ``allow_atomic=True``.
        """
        return AtomicBatch(self)

    def publish_batch(self, messages: Iterable[Any], *, timeout: Timeout = DEFAULT) -> BatchAck:
        """Publish ``messages`` as one atomic batch (all stored, or none); return the :class:`BatchAck`.

        Each message is a ``(subject, data)`` tuple, or a mapping with ``subject``, ``data`` and
        optional ``headers`` (and :meth:`AtomicBatch.add`'s options: ``msg_id``, ``ttl``, the
        ``expected_*`` checks on the first message only); the last one commits the batch. Every message
        is checked before the first is sent. Blocks for the first message's ack and the commit's PubAck,
        each at most ``timeout``; the messages between are sent without waiting.

        Raises ValueError/TypeError before anything is sent (no messages, more than 1000, a bad
        message, an expectation after the first), ``FeatureNotSupportedError`` (a server before 2.12),
        what :meth:`AtomicBatch.commit` raises (a ``BatchPublishError`` subclass, an expectation error:
        then nothing is stored).
        """
        return publish_batch(self, messages, timeout)

    def publish_async_pending(self) -> int:
        """How many ``publish_async`` futures are still unresolved. No I/O."""
        return self._publisher.in_flight()

    def publish_async_complete(self, timeout: Timeout = DEFAULT) -> None:
        """Block until every outstanding ``publish_async`` future has resolved (ok or failed).

        Raises ``TimeoutError`` if some are still unresolved after ``timeout``.
        """
        t = self._resolve_timeout(timeout)
        self._conn.loop_thread.check_usable()
        deadline = None if t is None else time.monotonic() + t
        for fut in self._publisher.outstanding():
            try:
                wait_future(fut, deadline, lambda: errors.TimeoutError.after(
                    "publish_async_complete", t, f"{self._publisher.in_flight()} publishes still unacknowledged"))
            except errors.TimeoutError:
                if not fut.done():
                    raise
            except Exception:
                pass  # the failure is on that future; the caller inspects it
