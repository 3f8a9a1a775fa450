# What the server reports: stream and consumer infos, PubAck, account info, stored messages, as
# frozen attrs classes read with `from_response()` (unknown keys kept in `extra`).
# Rule 1: pure. No I/O; the views for notebooks (`_repr_html_`) load `_html` when asked.
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import attrs

from ._headers import Headers
from ._codec import (
    _Wire, _any, _bind_names, _conv_dict, _conv_list, _duration, _extra, _field, _from_wire, _nested, _nested_list, _time,
)
from ._configs import ConsumerConfig, ExternalStream, StreamConfig, SubjectTransform

__all__ = [
    "APIStats", "AccountInfo", "AccountLimits", "BatchAck", "ClusterInfo", "ConsumerInfo", "ConsumerPauseResponse",
    "PeerInfo", "PriorityGroupState", "PubAck", "SequenceInfo", "StoredMsg", "StreamInfo", "StreamSourceInfo",
    "StreamState",
]


# ---------------------------------------------------------------------------------------------
# Stream info
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamState(_Wire):
    """Counters of a stream at the time of the info request."""

    messages: int | None = _any()
    "Messages stored."
    bytes: int | None = _any()
    "Bytes stored."
    first_seq: int | None = _any()
    "Sequence of the first stored message."
    first_ts: datetime | None = _time()
    "Time of the first stored message (None when empty)."
    last_seq: int | None = _any()
    "Sequence of the last stored message."
    last_ts: datetime | None = _time()
    "Time of the last stored message (None when never written)."
    consumer_count: int | None = _any()
    "Number of consumers."
    deleted: list[int] | None = _field(_conv_list)
    "Deleted sequences (only when asked for with ``deleted_details``)."
    num_deleted: int | None = _any()
    "Number of deleted messages inside the sequence range."
    num_subjects: int | None = _any()
    "Number of distinct subjects."
    subjects: dict[str, int] | None = _field(_conv_dict)
    "Messages per subject (only when asked for with ``subjects_filter``)."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class PeerInfo(_Wire):
    """One replica of a clustered stream or consumer."""

    name: str | None = _any()
    "Server name."
    current: bool | None = _any()
    "Seen recently and caught up."
    offline: bool | None = _any()
    "Not seen recently."
    active: float | None = _duration(negative_is_none=True)
    "Seconds since last seen."
    lag: int | None = _any()
    "Operations behind the leader."
    peer: str | None = _any()
    "Raft peer id."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class ClusterInfo(_Wire):
    """The Raft group behind a stream or consumer."""

    name: str | None = _any()
    "Cluster name."
    leader: str | None = _any()
    "Server name of the current leader."
    leader_since: datetime | None = _time()
    "When the current leader was elected."
    raft_group: str | None = _any()
    "Raft group name."
    replicas: list[PeerInfo] | None = _nested_list(PeerInfo)
    "The other replicas (not the leader)."
    system_account: bool | None = _any()
    "The group runs in the system account."
    traffic_account: str | None = _any()
    "Account that carries the group's replication traffic."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamSourceInfo(_Wire):
    """Progress of a mirror or a source."""

    name: str | None = _any()
    "Origin stream name."
    lag: int | None = _any()
    "Messages the origin is ahead by."
    active: float | None = _duration(negative_is_none=True)
    "Seconds since the last contact (None: never)."
    external: ExternalStream | None = _nested(ExternalStream)
    "Where the origin lives when external."
    error: dict[str, Any] | None = _field(_conv_dict)
    "Last error as the server reports it: ``{code, err_code, description}``."
    filter_subject: str | None = _any()
    "Subject filter of the source."
    subject_transforms: list[SubjectTransform] | None = _nested_list(SubjectTransform)
    "Filters with subject rewrites."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamInfo(_Wire):
    """Answer to ``$JS.API.STREAM.INFO`` (and to create/update): config plus state."""

    _envelope = frozenset({"type", "total", "offset", "limit", "did_create"})

    config: StreamConfig | None = _nested(StreamConfig)
    "The configuration in effect, server defaults filled in."
    created: datetime | None = _time()
    "When the stream was created."
    state: StreamState | None = _nested(StreamState)
    "Counters."
    cluster: ClusterInfo | None = _nested(ClusterInfo)
    "Raft group, when JetStream runs clustered (a single server reports its name as leader)."
    mirror: StreamSourceInfo | None = _nested(StreamSourceInfo)
    "Mirror progress."
    sources: list[StreamSourceInfo] | None = _nested_list(StreamSourceInfo)
    "Source progress."
    domain: str | None = _any()
    "JetStream domain of the server."
    ts: datetime | None = _time()
    "When this info was gathered."
    extra: dict[str, Any] = _extra()

    def _repr_html_(self) -> str:
        """HTML for Jupyter: name, subjects, storage, counters. Renders this snapshot; no I/O."""
        from . import _html

        return _html.stream_info(self)


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class SequenceInfo(_Wire):
    """A pair of consumer and stream sequences (delivered, or the ack floor)."""

    consumer_seq: int | None = _any()
    "Consumer sequence."
    stream_seq: int | None = _any()
    "Stream sequence."
    last_active: datetime | None = _time()
    "When it last moved."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class PriorityGroupState(_Wire):
    """One priority group of a consumer, as the server reports it (ADR-42)."""

    group: str | None = _any()
    "The group's name."
    pinned_client_id: str | None = _any()
    "``pinned_client``: the pin id of the client the group is pinned to (None: none is)."
    pinned_ts: datetime | None = _time()
    "When the group was pinned to that client (None: not pinned)."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class ConsumerInfo(_Wire):
    """Answer to ``$JS.API.CONSUMER.INFO`` (and to create): config plus progress."""

    _envelope = frozenset({"type"})

    stream_name: str | None = _any()
    "Stream the consumer reads."
    name: str | None = _any()
    "Consumer name."
    created: datetime | None = _time()
    "When the consumer was created."
    config: ConsumerConfig | None = _nested(ConsumerConfig)
    "The configuration in effect, server defaults filled in."
    delivered: SequenceInfo | None = _nested(SequenceInfo)
    "Last delivered sequences."
    ack_floor: SequenceInfo | None = _nested(SequenceInfo)
    "Sequences below which everything is acked."
    num_ack_pending: int | None = _any()
    "Delivered and not yet acked."
    num_redelivered: int | None = _any()
    "Messages redelivered at least once."
    num_waiting: int | None = _any()
    "Pull requests waiting."
    num_pending: int | None = _any()
    "Messages matching the filter not yet delivered."
    cluster: ClusterInfo | None = _nested(ClusterInfo)
    "Raft group of the consumer."
    push_bound: bool | None = _any()
    "A push consumer has an active subscriber."
    paused: bool = _any(default=False)
    "The consumer is paused until ``config.pause_until`` (False when not: the server then leaves it out)."
    pause_remaining: float | None = _duration(negative_is_none=True)
    "Seconds until the pause ends (None when not paused)."
    priority_groups: list[PriorityGroupState] | None = _nested_list(PriorityGroupState)
    "The state of each priority group (which client a ``pinned_client`` group is pinned to)."
    ts: datetime | None = _time()
    "When this info was gathered."
    extra: dict[str, Any] = _extra()

    def _repr_html_(self) -> str:
        """HTML for Jupyter: filter, ack policy, delivery progress. Renders this snapshot; no I/O."""
        from . import _html

        return _html.consumer_info(self)


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class ConsumerPauseResponse(_Wire):
    """Answer to ``$JS.API.CONSUMER.PAUSE`` (``consumer.pause()`` and ``consumer.resume()``)."""

    _envelope = frozenset({"type"})

    paused: bool = _any(default=False)
    "The consumer is paused now (False after a resume)."
    pause_until: datetime | None = _time()
    "When the pause ends (None after a resume)."
    pause_remaining: float | None = _duration(negative_is_none=True)
    "Seconds until the pause ends, as the server counted them (None when not paused)."
    extra: dict[str, Any] = _extra()


# ---------------------------------------------------------------------------------------------
# Publish acks, account info, stored messages
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class PubAck(_Wire):
    """The server's acknowledgement of a JetStream publish."""

    stream: str = _any(default=attrs.NOTHING)
    "Stream that stored the message."
    seq: int = _any(default=attrs.NOTHING)
    "Its stream sequence."
    duplicate: bool = _any(default=False)
    "True when a message with the same ``Nats-Msg-Id`` was already stored (this one was not)."
    domain: str | None = _any()
    "JetStream domain, when set."
    extra: dict[str, Any] = _extra()

    def _repr_html_(self) -> str:
        """HTML for Jupyter: stream, sequence, duplicate flag. No I/O."""
        from . import _html

        return _html.pub_ack(self)


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class BatchAck(_Wire):
    """The server's acknowledgement of a committed atomic batch: every message of it is stored, at the
    ``count`` stream sequences ending at ``seq``, in the order they were added."""

    stream: str = _any(default=attrs.NOTHING)
    "Stream that stored the batch."
    seq: int = _any(default=attrs.NOTHING)
    "Stream sequence of the commit message, the batch's last."
    batch: str = _any(default=attrs.NOTHING)
    "The batch's id (its ``Nats-Batch-Id`` header)."
    count: int = _any(default=attrs.NOTHING)
    "Messages stored, the commit message included."
    domain: str | None = _any()
    "JetStream domain, when set."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class AccountLimits(_Wire):
    """JetStream limits of the account (-1 unlimited)."""

    max_memory: int | None = _any()
    "Max memory storage in bytes."
    max_storage: int | None = _any()
    "Max file storage in bytes."
    max_streams: int | None = _any()
    "Max number of streams."
    max_consumers: int | None = _any()
    "Max number of consumers."
    max_ack_pending: int | None = _any()
    "Max ack pending per consumer."
    memory_max_stream_bytes: int | None = _any()
    "Max bytes of one memory stream."
    storage_max_stream_bytes: int | None = _any()
    "Max bytes of one file stream."
    max_bytes_required: bool | None = _any()
    "Streams must set ``max_bytes``."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class APIStats(_Wire):
    """JetStream API usage of the account."""

    total: int | None = _any()
    "API requests served."
    errors: int | None = _any()
    "API requests that failed."
    level: int | None = _any()
    "API level the server supports."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class AccountInfo(_Wire):
    """Answer to ``$JS.API.INFO``: usage and limits of the account."""

    _envelope = frozenset({"type"})

    memory: int | None = _any()
    "Bytes in memory streams."
    storage: int | None = _any()
    "Bytes in file streams."
    reserved_memory: int | None = _any()
    "Memory reserved by streams with ``max_bytes``."
    reserved_storage: int | None = _any()
    "Storage reserved by streams with ``max_bytes``."
    streams: int | None = _any()
    "Number of streams."
    consumers: int | None = _any()
    "Number of consumers."
    limits: AccountLimits | None = _nested(AccountLimits)
    "Account limits."
    domain: str | None = _any()
    "JetStream domain."
    api: APIStats | None = _nested(APIStats)
    "API usage."
    tiers: dict[str, Any] | None = _field(_conv_dict)
    "Per-tier usage and limits, raw as the server sends them (e.g. ``{'R1': {...}}``)."
    extra: dict[str, Any] = _extra()


def _conv_bytes(value: Any, *, field: str) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{field} must be bytes, got {type(value).__name__}")


def _conv_headers(value: Any, *, field: str) -> Headers | None:
    if value is None or isinstance(value, Headers):
        return value
    if isinstance(value, Mapping):
        return Headers(value)
    raise TypeError(f"{field} must be a Headers or a dict, got {type(value).__name__}")


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StoredMsg(_Wire):
    """A message read back from a stream (``$JS.API.STREAM.MSG.GET``)."""

    _envelope = frozenset({"type"})

    seq: int = _any(default=attrs.NOTHING)
    "Stream sequence."
    subject: str = _any(default=attrs.NOTHING)
    "Subject it was published to."
    data: bytes = _field(_conv_bytes, kind="b64", default=b"")
    "Payload (base64 on the wire)."
    headers: Headers | None = _field(_conv_headers, kind="headers", wire="hdrs")
    "Headers (a base64 NATS header block on the wire, ``hdrs``); None when it had none."
    time: datetime | None = _time()
    "When it was stored."
    extra: dict[str, Any] = _extra()

    @classmethod
    def from_response(cls, data: Mapping[str, Any], *, strict: bool = False) -> StoredMsg:
        """Build from the response's ``"message"`` object (the whole response body works too)."""
        if isinstance(data, Mapping) and isinstance(data.get("message"), Mapping):
            data = data["message"]
        return _from_wire(cls, data, strict)

    @classmethod
    def _of(cls, seq: int, subject: str, data: bytes, headers: Headers | None, time: datetime | None) -> StoredMsg:
        """Build from values that already have the field types, without the converters: the hot path of
        batch direct gets, which read many thousands of messages a second."""
        self = object.__new__(cls)
        set_seq, set_subject, set_data, set_headers, set_time, set_extra = _STORED_SLOTS
        set_seq(self, seq)
        set_subject(self, subject)
        set_data(self, data)
        set_headers(self, headers)
        set_time(self, time)
        set_extra(self, {})
        return self

    @classmethod
    def _many(cls, seqs: Iterable[int], subjects: Iterable[str], datas: Iterable[bytes],
              times: Iterable[datetime | None]) -> list[StoredMsg]:
        """:meth:`_of` for a run of messages stored without headers, in one loop."""
        new = object.__new__
        set_seq, set_subject, set_data, set_headers, set_time, set_extra = _STORED_SLOTS
        out: list[StoredMsg] = []
        append = out.append
        for seq, subject, data, time in zip(seqs, subjects, datas, times):
            self = new(cls)
            set_seq(self, seq)
            set_subject(self, subject)
            set_data(self, data)
            set_headers(self, None)
            set_time(self, time)
            set_extra(self, {})
            append(self)
        return out


# The slots of StoredMsg's fields, every one in order, set directly by StoredMsg._of (a frozen class
# refuses setattr).
_STORED_SLOTS = tuple(StoredMsg.__dict__[name].__set__
                      for name in ("seq", "subject", "data", "headers", "time", "extra"))
