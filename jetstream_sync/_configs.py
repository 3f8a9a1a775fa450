# The JetStream configs and enums users write: StreamConfig, ConsumerConfig and their parts, as frozen
# attrs classes (ADR-37 names), each a plain list of documented fields built from _codec's blocks.
# Rule 1: pure. No I/O; `to_request()` gives the JSON the API takes, `from_response()` reads it back.
# Rule 2: invariants are checked at construction (a bad field raises naming it), never at send time.
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from ._codec import (
    _Config, _WireEnum, _bind_names, _bool, _check_subject_field, _conv_durations, _duration, _enum, _extra, _field, _int, _limit, _nested, _nested_list, _require_str, _str, _str_map, _strs, _time, check_priority_group, validate_consumer_name, validate_stream_name,
)

__all__ = [
    "AckPolicy", "ConsumerConfig", "DeliverPolicy", "DiscardPolicy", "ExternalStream", "Placement", "PriorityPolicy",
    "RePublish", "ReplayPolicy", "RetentionPolicy", "StorageType", "StoreCompression", "StreamConfig",
    "StreamConsumerLimits", "StreamSource", "SubjectTransform", "config_from",
]


class RetentionPolicy(_WireEnum):
    """When a stream may delete messages besides its limits."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


class StorageType(_WireEnum):
    """Where a stream keeps its messages."""

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(_WireEnum):
    """What a full stream does with a new message: drop the oldest, or refuse the new one."""

    OLD = "old"
    NEW = "new"


class AckPolicy(_WireEnum):
    """How a consumer expects messages to be acknowledged."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"


class DeliverPolicy(_WireEnum):
    """Where in the stream a new consumer starts."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class ReplayPolicy(_WireEnum):
    """Deliver as fast as possible, or at the pace the messages were stored."""

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(_WireEnum):
    """How a pull consumer with priority groups shares its messages among the clients pulling (ADR-42)."""

    NONE = "none"                    # no priority groups (the server's default)
    OVERFLOW = "overflow"            # a pull may ask for messages only above min_pending / min_ack_pending
    PINNED_CLIENT = "pinned_client"  # one client gets every message; the others stand by
    PRIORITIZED = "prioritized"      # pulls with a lower priority (0-9) are served first


class StoreCompression(_WireEnum):
    """On-disk compression of a file-backed stream."""

    NONE = "none"
    S2 = "s2"


# ---------------------------------------------------------------------------------------------
# Stream configuration
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class Placement(_Config):
    """Where the stream's replicas go (cluster and server tags)."""

    cluster: str | None = _str()
    "Cluster name to place the stream in."
    tags: list[str] | None = _strs()
    "Server tags every replica's server must have."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class ExternalStream(_Config):
    """A stream in another JetStream domain or account, reached through API/deliver prefixes."""

    api: str | None = _str()
    "API prefix of the other domain/account, e.g. ``$JS.hub.API``."
    deliver: str | None = _str()
    "Subject prefix the messages are delivered on."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class SubjectTransform(_Config):
    """Rewrite subjects matching ``src`` to ``dest`` (mapping syntax)."""

    src: str | None = _str()
    "Subject filter to match."
    dest: str | None = _str()
    "Destination subject template."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class RePublish(_Config):
    """Re-publish stored messages matching ``src`` to ``dest`` (core NATS, after storing)."""

    src: str | None = _str()
    "Subject filter of the messages to republish (all when unset)."
    dest: str | None = _str()
    "Destination subject template."
    headers_only: bool | None = _bool()
    "Republish headers only, without the payload."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamSource(_Config):
    """A stream to mirror or source messages from."""

    name: str = _field(default=attrs.NOTHING, validator=lambda _i, a, v: _require_str(v, a.name))
    "Name of the origin stream (required)."
    opt_start_seq: int | None = _int(1)
    "Start at this sequence of the origin stream."
    opt_start_time: datetime | None = _time()
    "Start at the first message stored at or after this time."
    filter_subject: str | None = _str()
    "Only take messages matching this subject."
    external: ExternalStream | None = _nested(ExternalStream)
    "Where to reach the origin when it lives in another domain or account."
    subject_transforms: list[SubjectTransform] | None = _nested_list(SubjectTransform)
    "Filters with subject rewrites (instead of ``filter_subject``)."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamConsumerLimits(_Config):
    """Defaults (and ceilings) the stream imposes on its consumers."""

    inactive_threshold: float | None = _duration()
    "Seconds of inactivity after which a consumer without its own threshold is removed."
    max_ack_pending: int | None = _limit()
    "Max outstanding acks for consumers of this stream."
    extra: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class StreamConfig(_Config):
    """A stream's configuration, as sent to ``$JS.API.STREAM.CREATE``/``UPDATE``.

    Only ``name`` is required; unset (None) fields are left out of the request so the server
    defaults apply. Invariants are checked here, before anything is sent. Frozen: derive
    variants with ``attrs.evolve(cfg, max_msgs=5)``. Don't subclass.
    """

    name: str = _field(default=attrs.NOTHING, validator=lambda _i, a, v: validate_stream_name(v, a.name))
    "Stream name: no whitespace, '.', '*', '>', '/', '\\'."
    description: str | None = _str()
    "Free-form description."
    subjects: list[str] | None = _strs()
    "Subjects the stream stores (wildcards allowed). Not with ``mirror``."
    retention: RetentionPolicy | None = _enum(RetentionPolicy)
    "Retention policy (server default: limits)."
    max_consumers: int | None = _limit()
    "Max number of consumers; -1 unlimited."
    max_msgs: int | None = _limit()
    "Max number of messages; -1 unlimited."
    max_bytes: int | None = _limit()
    "Max total size in bytes; -1 unlimited."
    max_age: float | None = _duration()
    "Max message age in seconds; 0 unlimited."
    max_msgs_per_subject: int | None = _limit()
    "Max messages kept per subject; -1 unlimited."
    max_msg_size: int | None = _limit()
    "Max size of one message in bytes; -1 unlimited."
    discard: DiscardPolicy | None = _enum(DiscardPolicy)
    "What to discard when a limit is hit (server default: old)."
    storage: StorageType | None = _enum(StorageType)
    "File or memory (server default: file)."
    num_replicas: int | None = _int(1, 5)
    "Number of replicas, 1 to 5."
    no_ack: bool | None = _bool()
    "Do not acknowledge publishes."
    duplicate_window: float | None = _duration()
    "Seconds during which ``Nats-Msg-Id`` duplicates are detected."
    placement: Placement | None = _nested(Placement)
    "Placement of the replicas."
    mirror: StreamSource | None = _nested(StreamSource)
    "Make this stream a mirror of another one. Not with ``subjects`` or ``sources``."
    sources: list[StreamSource] | None = _nested_list(StreamSource)
    "Streams to source messages from."
    sealed: bool | None = _bool()
    "Sealed streams accept no new messages and no deletes (cannot be undone)."
    deny_delete: bool | None = _bool()
    "Forbid deleting messages through the API."
    deny_purge: bool | None = _bool()
    "Forbid purging through the API."
    allow_rollup_hdrs: bool | None = _bool()
    "Allow the ``Nats-Rollup`` header to purge on publish."
    allow_direct: bool | None = _bool()
    "Allow direct get (any replica answers ``$JS.API.DIRECT.GET``)."
    mirror_direct: bool | None = _bool()
    "Let this mirror answer direct gets for its origin."
    republish: RePublish | None = _nested(RePublish)
    "Republish stored messages."
    discard_new_per_subject: bool | None = _bool()
    "Refuse new messages per subject; needs ``discard='new'`` and ``max_msgs_per_subject > 0``."
    metadata: dict[str, str] | None = _str_map()
    "User metadata (the server adds ``_nats.*`` keys)."
    compression: StoreCompression | None = _enum(StoreCompression)
    "On-disk compression."
    first_seq: int | None = _int(1)
    "Sequence number of the first message (>= 1)."
    subject_transform: SubjectTransform | None = _nested(SubjectTransform)
    "Rewrite subjects of incoming messages before storing."
    consumer_limits: StreamConsumerLimits | None = _nested(StreamConsumerLimits)
    "Defaults for consumers of this stream (the server always reports it)."
    allow_msg_ttl: bool | None = _bool()
    "Honour per-message TTLs (``Nats-TTL`` header)."
    subject_delete_marker_ttl: float | None = _duration()
    "Seconds to keep the marker left when max age removes a subject's last message."
    allow_atomic: bool | None = _bool()
    "Accept atomic batches (``js.batch()``, ``js.publish_batch()``); nats-server 2.12 or later."
    allow_msg_counter: bool | None = _bool()
    "Make every subject a counter (``js.counter()``); set only when creating the stream; nats-server 2.12+."
    extra: dict[str, Any] = _extra()

    def __attrs_post_init__(self) -> None:
        for subject in self.subjects or ():
            _check_subject_field(subject, "subjects")
        if self.mirror is not None and self.subjects:
            raise ValueError("mirror and subjects cannot be combined: a mirror only stores what its origin has")
        if self.mirror is not None and self.sources:
            raise ValueError("mirror and sources cannot be combined: a stream either mirrors one stream or sources")
        if self.discard_new_per_subject and (
            self.discard is not DiscardPolicy.NEW or (self.max_msgs_per_subject or 0) <= 0
        ):
            raise ValueError(
                "discard_new_per_subject=True requires discard='new' and max_msgs_per_subject > 0 "
                f"(got discard={self.discard and self.discard.value!r}, "
                f"max_msgs_per_subject={self.max_msgs_per_subject!r})"
            )
        if self.duplicate_window is not None and self.max_age and self.duplicate_window > self.max_age:
            raise ValueError(
                f"duplicate_window ({self.duplicate_window:g} s) must not exceed max_age ({self.max_age:g} s)"
            )


# ---------------------------------------------------------------------------------------------
# Consumers
# ---------------------------------------------------------------------------------------------


def _consumer_name_field() -> Any:
    def check(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if value is not None:
            validate_consumer_name(value, attr.name)

    return _field(validator=check)


_PERCENT = re.compile(r"[+-]?[0-9]+%?")


def _conv_percent(value: Any, *, field: str) -> str | None:
    """An int 0 to 100 becomes the server's ``'N%'``; a str is kept as written when the server takes
    it (a whole number, with or without ``%``, not negative; ``''`` is off), so what it sends back reads."""
    allowed = f"{field} must be a percentage: an int 0 to 100 or a str such as '100%'"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, str)):
        raise TypeError(f"{allowed}, got {type(value).__name__}")
    if isinstance(value, numbers.Integral):
        if not 0 <= value <= 100:
            raise ValueError(f"{allowed}, got {value!r}")
        return f"{int(value)}%"
    if value and (not _PERCENT.fullmatch(value) or int(value.rstrip("%")) < 0):
        raise ValueError(f"{allowed}, got {value!r}")
    return value


@attrs.frozen(kw_only=True, repr=False, field_transformer=_bind_names)
class ConsumerConfig(_Config):
    """A consumer's configuration, as sent to ``$JS.API.CONSUMER.CREATE``.

    All fields are optional; unset (None) fields are left out so the server defaults apply.
    Set ``durable_name`` for a durable consumer; without it the server removes the consumer
    after ``inactive_threshold``.
    Invariants are checked here, before anything is sent. Frozen: use ``attrs.evolve``.
    """

    name: str | None = _consumer_name_field()
    "Consumer name (same rules as stream names)."
    durable_name: str | None = _consumer_name_field()
    "Durable name; when both are set it must equal ``name``."
    description: str | None = _str()
    "Free-form description."
    deliver_policy: DeliverPolicy | None = _enum(DeliverPolicy)
    "Where to start (server default: all)."
    opt_start_seq: int | None = _int(1)
    "Start sequence; only with ``deliver_policy='by_start_sequence'``."
    opt_start_time: datetime | None = _time()
    "Start time; only with ``deliver_policy='by_start_time'``."
    ack_policy: AckPolicy | None = _enum(AckPolicy)
    "How messages are acknowledged (nats.go default for pull consumers: explicit)."
    ack_wait: float | None = _duration()
    "Seconds to wait for an ack before redelivering."
    max_deliver: int | None = _int()
    "Max delivery attempts: -1 (unlimited) or >= 1."
    backoff: list[float] | None = _field(_conv_durations, kind="durations")
    "Redelivery delays in seconds, one per attempt; at most ``max_deliver`` entries."
    filter_subject: str | None = _str()
    "Only deliver messages matching this subject. Not with ``filter_subjects``."
    filter_subjects: list[str] | None = _strs()
    "Only deliver messages matching any of these subjects."
    replay_policy: ReplayPolicy | None = _enum(ReplayPolicy)
    "Replay instantly or at the original pace."
    rate_limit_bps: int | None = _int(0)
    "Delivery rate limit in bits per second (push consumers)."
    sample_freq: str | None = _field(_conv_percent)
    "Percentage of acks to sample as ack metrics: an int 0 to 100 (``100`` is kept as ``'100%'``) or ``'100%'``."
    max_waiting: int | None = _limit()
    "Max pull requests waiting at once."
    max_ack_pending: int | None = _limit()
    "Max messages delivered and not yet acked; -1 unlimited."
    headers_only: bool | None = _bool()
    "Deliver headers only (with ``Nats-Msg-Size``)."
    max_batch: int | None = _limit()
    "Max ``batch`` a single pull may ask for."
    max_expires: float | None = _duration()
    "Max ``expires`` a single pull may ask for, in seconds."
    max_bytes: int | None = _limit()
    "Max ``max_bytes`` a single pull may ask for."
    inactive_threshold: float | None = _duration()
    "Seconds without activity after which the server deletes the consumer."
    num_replicas: int | None = _int(0, 5)
    "Replicas, 0 (inherit from the stream) to 5."
    mem_storage: bool | None = _bool()
    "Keep consumer state in memory."
    metadata: dict[str, str] | None = _str_map()
    "User metadata (the server adds ``_nats.*`` keys)."
    pause_until: datetime | None = _time()
    "Deliver nothing until this time."
    deliver_subject: str | None = _str()
    "Push consumers: the subject messages are pushed to."
    deliver_group: str | None = _str()
    "Push consumers: queue group of the subscribers."
    flow_control: bool | None = _bool()
    "Push consumers: enable flow control."
    idle_heartbeat: float | None = _duration()
    "Push consumers: heartbeat interval in seconds."
    priority_policy: PriorityPolicy | None = _enum(PriorityPolicy)
    "Pull consumers: how the clients of a priority group share messages; needs ``priority_groups``."
    priority_groups: list[str] | None = _strs()
    "Pull consumers: the priority group names (1 to 16 of ``A-Z a-z 0-9 - _ / =``); every pull names one."
    priority_timeout: float | None = _duration()
    "``pinned_client``: seconds without a new pull after which the pin moves (server default 120)."
    extra: dict[str, Any] = _extra()

    @max_deliver.validator
    def _check_max_deliver(self, attr: attrs.Attribute, value: int | None) -> None:
        if value is not None and value != -1 and value < 1:
            raise ValueError(f"{attr.name} must be -1 (unlimited) or >= 1, got {value}")

    def __attrs_post_init__(self) -> None:
        if self.filter_subject is not None:
            _check_subject_field(self.filter_subject, "filter_subject")
        for subject in self.filter_subjects or ():
            _check_subject_field(subject, "filter_subjects")
        if self.name is not None and self.durable_name is not None and self.name != self.durable_name:
            raise ValueError(
                f"name {self.name!r} and durable_name {self.durable_name!r} must be equal when both are set"
            )
        if self.filter_subject is not None and self.filter_subjects:
            raise ValueError("filter_subject and filter_subjects cannot be combined: put every filter in filter_subjects")
        policy = self.deliver_policy
        by_seq, by_time = DeliverPolicy.BY_START_SEQUENCE, DeliverPolicy.BY_START_TIME
        if self.opt_start_seq is not None and policy is not by_seq:
            raise ValueError(f"opt_start_seq requires deliver_policy='by_start_sequence' (got {_val(policy)!r})")
        if policy is by_seq and self.opt_start_seq is None:
            raise ValueError("deliver_policy='by_start_sequence' requires opt_start_seq")
        if self.opt_start_time is not None and policy is not by_time:
            raise ValueError(f"opt_start_time requires deliver_policy='by_start_time' (got {_val(policy)!r})")
        if policy is by_time and self.opt_start_time is None:
            raise ValueError("deliver_policy='by_start_time' requires opt_start_time")
        if policy is DeliverPolicy.LAST_PER_SUBJECT and not (self.filter_subject or self.filter_subjects):
            raise ValueError("deliver_policy='last_per_subject' requires filter_subject or filter_subjects")
        # nats-server: "len(BackOff) > MaxDeliver" is the error, so equal lengths are allowed.
        if self.backoff and self.max_deliver is not None and self.max_deliver != -1:
            if len(self.backoff) > self.max_deliver:
                raise ValueError(
                    f"backoff has {len(self.backoff)} entries but max_deliver is {self.max_deliver}: "
                    "max_deliver must be at least len(backoff) (or -1)"
                )
        if self.ack_policy is AckPolicy.NONE and (self.ack_wait is not None or self.backoff):
            raise ValueError("ack_wait and backoff need acks: they cannot be set with ack_policy='none'")
        self._check_priority()

    def _check_priority(self) -> None:
        """The ADR-42 rules nats-server applies: a policy needs groups and groups need a policy; pull only."""
        for i, group in enumerate(self.priority_groups or ()):
            check_priority_group(group, f"priority_groups[{i}]")
        if self.priority_policy in (None, PriorityPolicy.NONE):
            if self.priority_groups:
                raise ValueError("priority_groups need a priority_policy ('overflow', 'pinned_client' or "
                                 "'prioritized')")
            if self.priority_timeout:
                raise ValueError("priority_timeout needs a priority_policy (it is for 'pinned_client')")
            return
        if not self.priority_groups:
            raise ValueError(f"priority_policy={self.priority_policy.value!r} needs priority_groups "
                             f"(at least one name)")
        if self.deliver_subject is not None:
            raise ValueError("priority_policy is for pull consumers: it cannot be set with deliver_subject")


def _val(policy: _WireEnum | None) -> str | None:
    return None if policy is None else policy.value


def config_from(cls: type, config: Any, fields: Mapping[str, Any]) -> Any:
    """Build a config object from a config instance, a dict and/or keyword fields (validated)."""
    allowed = attrs.fields_dict(cls)
    for key in fields:
        if key not in allowed:
            raise TypeError(f"{cls.__name__} has no field {key!r}; allowed: {', '.join(sorted(allowed))}")
    if config is None:
        return cls(**fields)
    if isinstance(config, Mapping):
        return config_from(cls, None, {**config, **fields})
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__} or a dict, got {type(config).__name__}")
    return attrs.evolve(config, **fields) if fields else config
