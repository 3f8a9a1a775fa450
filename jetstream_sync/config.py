# JetStream wire types: configs, infos, acks and enums as frozen attrs classes (ADR-37 names).
# Rule 1: pure. No I/O, no `nats` import, no threads; `api.py` sends what `to_request()` returns
#         and hands server JSON to `from_response()`.
# Rule 2: the Python side speaks float seconds and aware datetimes; the wire speaks integer
#         nanoseconds and RFC 3339. The conversion happens only in the serializer below, which is
#         driven by field metadata ("kind") so each class is a plain list of documented fields.
# Rule 3: never lose what the server sent: unknown keys land in `extra` and go back out; times and
#         durations keep their exact nanoseconds (`_time.Timestamp`, `_time.Seconds`); a value read
#         as None (Go's zero time, -1 for "never") keeps its wire form in `extra` too.
from __future__ import annotations

import base64
import copy
import enum
import functools
import numbers
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from ._headers import Headers, decode_headers, encode_headers
from ._time import Seconds, Timestamp, format_time, nanos_to_seconds, parse_time, seconds_to_nanos, to_seconds

__all__ = [
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "PeerInfo",
    "Placement",
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
    "config_from",
    "format_time",
    "nanos_to_seconds",
    "parse_time",
    "seconds_to_nanos",
    "to_seconds",
    "validate_consumer_name",
    "validate_stream_name",
]

# ---------------------------------------------------------------------------------------------
# Durations and timestamps
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# Enums (str-valued, built from their JSON value)
# ---------------------------------------------------------------------------------------------


class _WireEnum(str, enum.Enum):
    # str() and f-strings give the JSON value on every Python version (3.11 changed format()).
    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> Any:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"{value!r} is not a valid {cls.__name__}; allowed: {allowed}")


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


class StoreCompression(_WireEnum):
    """On-disk compression of a file-backed stream."""

    NONE = "none"
    S2 = "s2"


# ---------------------------------------------------------------------------------------------
# Name rules (shared with callers that look streams and consumers up by name)
# ---------------------------------------------------------------------------------------------

_BAD_NAME_CHARS = frozenset(".*>/\\")


def _check_name(name: object, field: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{field} must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{field} must be a non-empty name")
    bad = sorted({c for c in name if c in _BAD_NAME_CHARS or c.isspace()})
    if bad:
        raise ValueError(
            f"{field} {name!r} is invalid: names must not contain whitespace or any of "
            f"'.', '*', '>', '/', '\\' (found {', '.join(map(repr, bad))})"
        )
    return name


def _check_subject_field(subject: object, field: str) -> None:
    """Raise ValueError naming ``field`` unless ``subject`` is a valid NATS subject (wildcards allowed)."""
    if not isinstance(subject, str):
        raise TypeError(f"{field} must be a str, got {type(subject).__name__}")
    tokens = subject.split(".")
    if (not subject or any(c in subject for c in " \t\r\n") or "" in tokens
            or any(">" in t and (t != ">" or i != len(tokens) - 1) for i, t in enumerate(tokens))
            or any("*" in t and t != "*" for t in tokens)):
        raise ValueError(f"{field}: {subject!r} is not a valid subject (no spaces or empty tokens; '*' and '>' "
                         f"only as whole tokens, '>' only last)")


def validate_stream_name(name: object, field: str = "stream") -> str:
    """Check a stream name as nats-server does; return it. ``TypeError``/``ValueError`` name ``field``."""
    return _check_name(name, field)


def validate_consumer_name(name: object, field: str = "name") -> str:
    """Check a consumer (or durable) name as nats-server does; return it."""
    return _check_name(name, field)


# ---------------------------------------------------------------------------------------------
# Field building blocks: converters normalise, validators enforce invariants (STYLE rule 8).
# Converters need the field's name for their messages, but attrs.field() does not know it yet,
# so each one sits in metadata["convert"] and `_bind_names` (a field_transformer, attrs >= 20.3)
# binds it with the name when the class is built.
# ---------------------------------------------------------------------------------------------

_Conv = Callable[..., Any]


def _bind_names(cls: type, fields: list[attrs.Attribute]) -> list[attrs.Attribute]:
    out = []
    for f in fields:
        conv = f.metadata.get("convert")
        out.append(f.evolve(converter=functools.partial(conv, field=f.name)) if conv else f)
    return out


def _field(convert: _Conv | None = None, *, kind: str | None = None, cls: type | None = None,
           validator: Any = None, default: Any = None, wire: str | None = None,
           negative_is_none: bool = False, **kw: Any) -> Any:
    metadata: dict[str, Any] = {"kind": kind, "cls": cls, "negative_is_none": negative_is_none}
    if wire:
        metadata["wire"] = wire
    if convert:
        metadata["convert"] = convert
    if "factory" not in kw:
        kw["default"] = default
    return attrs.field(validator=validator, metadata=metadata, **kw)


def _as_int(value: Any, *, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int, got {type(value).__name__}")
    return int(value)


def _int_range(lo: int | None = None, hi: int | None = None, note: str = "") -> Callable[..., None]:
    def check(_inst: Any, attr: attrs.Attribute, value: int | None) -> None:
        if value is None:
            return
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if hi is None:
                allowed = f">= {lo}"
            elif lo is None:
                allowed = f"<= {hi}"
            else:
                allowed = f"between {lo} and {hi}"
            raise ValueError(f"{attr.name} must be {allowed}{note}, got {value}")

    return check


def _int(lo: int | None = None, hi: int | None = None, note: str = "", **kw: Any) -> Any:
    return _field(_as_int, validator=_int_range(lo, hi, note), **kw)


_UNLIMITED = " (-1 means unlimited)"


def _limit() -> Any:
    """An int limit where -1 means unlimited, as the server spells it."""
    return _int(-1, note=_UNLIMITED)


def _typed(*types: type) -> Callable[..., None]:
    names = " or ".join(t.__name__ for t in types)

    def check(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if value is not None and not isinstance(value, types):
            raise TypeError(f"{attr.name} must be a {names}, got {type(value).__name__}")

    return check


def _require_str(value: Any, field: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")


def _str(**kw: Any) -> Any:
    return _field(validator=_typed(str), **kw)


def _bool(**kw: Any) -> Any:
    return _field(validator=_typed(bool), **kw)


def _any(**kw: Any) -> Any:
    """A plain value taken as the server sent it (info counters and the like)."""
    return _field(**kw)


def _conv_duration(value: Any, *, field: str) -> float | None:
    return to_seconds(value, field)


def _duration(*, negative_is_none: bool = False) -> Any:
    return _field(_conv_duration, kind="duration", negative_is_none=negative_is_none)


def _conv_durations(value: Any, *, field: str) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list of durations (seconds or timedelta), got {type(value).__name__}")
    return [to_seconds(v, f"{field}[{i}]") for i, v in enumerate(value)]  # type: ignore[misc]


def _conv_time(value: Any, *, field: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{field} must be a timezone-aware datetime (got naive {value!r})")
        if isinstance(value, Timestamp):
            if value.utcoffset() == timedelta(0):
                return value  # keeps its nanoseconds and the server's text
            return Timestamp._make(value.astimezone(timezone.utc), value.nanosecond)
        return value.astimezone(timezone.utc)
    raise TypeError(f"{field} must be a datetime or an RFC 3339 str, got {type(value).__name__}")


def _time() -> Any:
    return _field(_conv_time, kind="time")


def _enum(enum_cls: type[_WireEnum], **kw: Any) -> Any:
    def convert(value: Any, *, field: str) -> Any:
        if value is None or isinstance(value, enum_cls):
            return value
        try:
            return enum_cls(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in enum_cls)
            raise ValueError(f"{field} must be one of {allowed} (a {enum_cls.__name__}), got {value!r}") from None

    return _field(convert, kind="enum", **kw)


def _strs(**kw: Any) -> Any:
    def convert(value: Any, *, field: str) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            raise TypeError(f"{field} must be a list of str, not a bare str: did you mean {field}=[{value!r}]?")
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{field} must be a list of str, got {type(value).__name__}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise TypeError(f"{field}[{i}] must be a str, got {type(item).__name__}")
            if not item:
                raise ValueError(f"{field}[{i}] must not be empty")
        return list(value)

    return _field(convert, **kw)


def _conv_str_map(value: Any, *, field: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict of str to str, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{field} must be a dict of str to str, got {k!r}: {v!r}")
    return dict(value)


def _str_map() -> Any:
    return _field(_conv_str_map)


def _conv_dict(value: Any, *, field: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a dict, got {type(value).__name__}")
    return dict(value)


def _conv_list(value: Any, *, field: str) -> list | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list, got {type(value).__name__}")
    return list(value)


def _nested(target: type, **kw: Any) -> Any:
    """A nested wire type; a plain dict of its field names is accepted and converted."""

    def convert(value: Any, *, field: str) -> Any:
        if value is None or isinstance(value, target):
            return value
        if isinstance(value, Mapping):
            try:
                return target(**value)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{field}: {exc}") from exc
        raise TypeError(f"{field} must be a {target.__name__} (or a dict of its fields), got {type(value).__name__}")

    return _field(convert, kind="nested", cls=target, **kw)


def _nested_list(target: type, **kw: Any) -> Any:
    item = _nested(target).metadata["convert"]

    def convert(value: Any, *, field: str) -> list | None:
        if value is None:
            return None
        if isinstance(value, (str, bytes, Mapping, target)) or not isinstance(value, Sequence):
            raise TypeError(f"{field} must be a list of {target.__name__}, got {type(value).__name__}")
        return [item(v, field=f"{field}[{i}]") for i, v in enumerate(value)]

    return _field(convert, kind="nested_list", cls=target, **kw)


def _extra() -> Any:
    """Keys this client does not know, and values it reads as None (Go's zero time, -1 for "never"),
    exactly as the server sent them (written back out)."""
    return _field(_conv_dict, kind="extra", factory=dict, repr=False)


# ---------------------------------------------------------------------------------------------
# The serializer: one walk over attrs fields, steered by metadata["kind"].
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class _Slot:
    name: str
    wire: str
    kind: str | None
    cls: Any
    negative_is_none: bool


@functools.cache
def _slots(cls: type) -> dict[str, _Slot]:
    """Wire name -> slot for every serialised field of ``cls`` (everything but ``extra``)."""
    out = {}
    for a in attrs.fields(cls):
        md = a.metadata
        if md.get("kind") == "extra":
            continue
        wire = md.get("wire", a.name)
        out[wire] = _Slot(a.name, wire, md.get("kind"), md.get("cls"), md.get("negative_is_none", False))
    return out


class _UnknownKeys(ValueError):
    """Strict mode: the server sent keys no field maps to (``paths`` are dotted, from ``cls``)."""

    def __init__(self, cls: type, paths: list[str]):
        self.paths = paths
        super().__init__(f"{cls.__name__}.from_response: unknown keys from the server: {', '.join(paths)}")


def _decode(slot: _Slot, value: Any, strict: bool) -> Any:
    # Only what the converters cannot tell apart from user input is decoded here: an int is
    # seconds for a user but nanoseconds on the wire. Times and enums go to the converters as is.
    if value is None:
        return None
    kind = slot.kind
    if kind == "duration":
        if slot.negative_is_none and value < 0:
            return None  # the server reports "never" as -1 ns (e.g. a source never active)
        return nanos_to_seconds(value)
    if kind == "durations":
        return [nanos_to_seconds(v) for v in value]
    if kind == "nested":
        try:
            return slot.cls.from_response(value, strict=strict)
        except _UnknownKeys as exc:
            raise _UnknownKeys(slot.cls, [f".{p}" for p in exc.paths]) from None
    if kind == "nested_list":
        items, unknown = [], []
        for i, v in enumerate(value):
            try:
                items.append(slot.cls.from_response(v, strict=strict))
            except _UnknownKeys as exc:
                unknown += [f"[{i}].{p}" for p in exc.paths]
        if unknown:
            raise _UnknownKeys(slot.cls, unknown)
        return items
    if kind == "b64":
        return base64.b64decode(value)
    if kind == "headers":
        return decode_headers(base64.b64decode(value))
    return value


def _encode(kind: str | None, value: Any) -> Any:
    if kind == "duration":
        return seconds_to_nanos(value)
    if kind == "durations":
        return [seconds_to_nanos(v) for v in value]
    if kind == "time":
        return format_time(value)
    if kind == "enum":
        return value.value
    if kind == "nested":
        return _to_wire(value)
    if kind == "nested_list":
        return [_to_wire(v) for v in value]
    if kind == "b64":
        return base64.b64encode(value).decode("ascii")
    if kind == "headers":
        return base64.b64encode(encode_headers(value)).decode("ascii")
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


class _BadField(ValueError):
    """A field whose value cannot be converted; ``path`` is dotted from the top object."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


_GO_ZERO_TIME = "0001-01-01T00:00:00Z"  # how the server writes an unset time.Time


def _from_wire(cls: type, data: Mapping[str, Any], strict: bool) -> Any:
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}.from_response expects a dict, got {type(data).__name__}")
    slots = _slots(cls)
    envelope = cls._envelope  # type: ignore[attr-defined]
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nested_unknown: list[str] = []
    kept: dict[str, Any] = {}  # wire values read as None, written back as they came
    for key, value in data.items():
        slot = slots.get(key)
        if slot is not None:
            try:
                decoded = kwargs[slot.name] = _decode(slot, value, strict)
                if decoded is None and value is not None:
                    kept[key] = value
                elif slot.kind == "time" and value == _GO_ZERO_TIME:
                    kept[key] = value
            except _UnknownKeys as exc:  # strict: keep going, report every unknown key at once
                nested_unknown += [f"{key}{p}" for p in exc.paths]
            except _BadField as exc:
                raise _BadField(f"{key}.{exc.path}", exc.reason) from None
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                # A nested object's own check already names its field; a plain value is shown.
                reason = str(exc) if isinstance(value, (Mapping, list)) else f"{value!r} is not a valid value ({exc})"
                raise _BadField(key, reason) from None
        elif key not in envelope:
            extra[key] = value
    if strict and (extra or nested_unknown):
        raise _UnknownKeys(cls, sorted([*extra, *nested_unknown]))
    extra.update(kept)
    if extra:
        kwargs["extra"] = extra
    return cls(**kwargs)


def _to_wire(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for slot in _slots(type(obj)).values():
        value = getattr(obj, slot.name)
        if value is not None:  # None = unset: leave it out so the server default applies
            out[slot.wire] = _encode(slot.kind, value)
    for key, value in obj.extra.items():
        out.setdefault(key, copy.deepcopy(value))
    return out


class _Wire:
    """Base of every wire type: ``from_response`` and a repr that skips unset fields."""

    __slots__ = ()
    _envelope: frozenset[str] = frozenset()  # response envelope keys that are not data

    @classmethod
    def from_response(cls, data: Mapping[str, Any], *, strict: bool = False) -> Any:
        """Build from server JSON (already ``json.loads``-ed); nested types convert too.

        Unknown keys are kept in ``extra``; with ``strict=True`` they raise ``ValueError``
        listing them instead (tests use this to catch schema drift).
        """
        try:
            return _from_wire(cls, data, strict)
        except _BadField as exc:
            raise ValueError(f"{cls.__name__}.from_response: field {exc.path}: {exc.reason}") from None

    def to_dict(self) -> dict[str, Any]:
        """The server's JSON for this object (no I/O): durations in nanoseconds, times RFC 3339,
        unset fields left out, unknown server fields (``extra``) kept. ``json.dumps`` takes it as is."""
        return _to_wire(self)

    def __repr__(self) -> str:
        parts = [
            f"{a.name}={getattr(self, a.name)!r}"
            for a in attrs.fields(type(self))
            if a.repr and getattr(self, a.name) is not None
        ]
        return f"{type(self).__name__}({', '.join(parts)})"


class _Config(_Wire):
    """A wire type that is also sent to the server."""

    __slots__ = ()

    def to_request(self) -> dict[str, Any]:
        """The JSON-ready dict for the server: unset (None) fields left out, ``extra`` kept."""
        return _to_wire(self)


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


# ---------------------------------------------------------------------------------------------
# Consumers
# ---------------------------------------------------------------------------------------------


def _consumer_name_field() -> Any:
    def check(_inst: Any, attr: attrs.Attribute, value: Any) -> None:
        if value is not None:
            validate_consumer_name(value, attr.name)

    return _field(validator=check)


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
    sample_freq: str | None = _str()
    "Percentage of acks to sample for observability, e.g. ``'100%'``."
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


def _val(policy: _WireEnum | None) -> str | None:
    return None if policy is None else policy.value


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
    paused: bool | None = _any()
    "The consumer is paused (see ``config.pause_until``)."
    pause_remaining: float | None = _duration(negative_is_none=True)
    "Seconds until the pause ends."
    ts: datetime | None = _time()
    "When this info was gathered."
    extra: dict[str, Any] = _extra()

    def _repr_html_(self) -> str:
        """HTML for Jupyter: filter, ack policy, delivery progress. Renders this snapshot; no I/O."""
        from . import _html

        return _html.consumer_info(self)


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
