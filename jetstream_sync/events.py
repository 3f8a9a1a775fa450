# JetStream events (docs/events.md): the advisories and metrics nats-server publishes on
# $JS.EVENT.ADVISORY.> and $JS.EVENT.METRIC.>, as frozen attrs classes chosen by the event's "type",
# and EventStream, a blocking iterator over them (a core subscription read by the push engine).
#
# Rule 1: parsing never breaks the stream: an unknown type, or a known one that does not parse,
#         arrives as UnknownEvent with the raw dict.
# Rule 2: times keep their nanoseconds (timestamp_ns, the *_ns durations beside the float seconds).
# Rule 3: field names are the server's (stream, consumer, stream_seq, deliveries, action, ...).
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Mapping

import attrs

from . import errors
from ._time import Timestamp, nanos_to_seconds, parse_time
from .consume import MessageStream
from .push import PushEngine, core_options, core_target

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = [
    "ApiAudit", "ApiLimitReached", "ConsumerAckMetric", "ConsumerAction", "ConsumerGroupPinned",
    "ConsumerGroupUnpinned", "ConsumerPause", "DomainLeaderElected", "Event", "EventStream", "LeaderElected",
    "MaxDeliveriesExceeded", "MessageNaked", "MessageTerminated", "MetaRescue", "QuorumLost", "RestoreCompleted",
    "RestoreCreated", "ServerOutOfSpace", "ServerRemoved", "SnapshotCompleted", "SnapshotCreated",
    "StreamAction", "StreamBatchAbandoned", "UnknownEvent", "event_from", "open_events",
]

_PREFIX = "$JS.EVENT."
_ADVISORY = "io.nats.jetstream.advisory.v1."
_METRIC = "io.nats.jetstream.metric.v1."


def _ns(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@attrs.frozen(kw_only=True)
class Event:
    """What every event has: the server's ``type`` string, ``id``, ``timestamp`` (with its
    nanoseconds; ``timestamp_ns`` is the exact value sent) and ``raw``, the dict as received."""

    #: The ``type`` strings this class stands for.
    TYPES: ClassVar[tuple[str, ...]] = ()

    type: str
    id: str | None = None
    timestamp: Timestamp | None = None
    timestamp_ns: int | None = None
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    @classmethod
    def _fields_from(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The subclass's own fields from the server's dict, by the same names: an ``int`` field takes
        an int, any other a str (a value of another kind is left out). Subclasses add what differs."""
        out: dict[str, Any] = {}
        for f in attrs.fields(cls):
            if f.name in _BASE or f.name.endswith("_ns") or f.name not in doc:
                continue
            value = _typed(str(f.type), doc[f.name])
            if value is not None:
                out[f.name] = value
        return out

    def _rows(self) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [("type", self.type), ("time", self.timestamp)]
        for f in attrs.fields(type(self)):
            if f.name not in ("type", "id", "timestamp", "timestamp_ns", "raw") and not f.name.endswith("_ns"):
                rows.append((f.name, getattr(self, f.name)))
        return rows

    def _repr_html_(self) -> str:
        """HTML for Jupyter: the type, stream, consumer and main fields as a small table. No I/O."""
        from . import _html

        return _html.kv_table(type(self).__name__, getattr(self, "stream", None), self._rows())


def _typed(annotation: str, value: Any) -> Any:
    """``value`` if it has the kind the field's annotation names (None otherwise): bool, times (RFC
    3339 text), int, dicts, replica lists (their names), else str."""
    if "bool" in annotation:
        return value if isinstance(value, bool) else None
    if "Timestamp" in annotation:
        try:
            return parse_time(value) if isinstance(value, str) else None
        except ValueError:
            return None
    if "int" in annotation:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if "Mapping" in annotation:
        return dict(value) if isinstance(value, Mapping) else None
    if "tuple" in annotation:
        return tuple(r.get("name", "") for r in value if isinstance(r, Mapping)) if isinstance(value, list) else None
    return value if isinstance(value, str) else None


#: The fields every event has, filled by event_from itself.
_BASE = frozenset({"type", "id", "timestamp", "timestamp_ns", "raw"})


def _str(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) else None


@attrs.frozen(kw_only=True)
class ConsumerAckMetric(Event):
    """An ack sample of a consumer with ``sample_freq``: how long the ack took after the delivery."""

    TYPES = (_METRIC + "consumer_ack",)
    stream: str | None = None
    consumer: str | None = None
    consumer_seq: int | None = None
    stream_seq: int | None = None
    #: Seconds from delivery to ack (``ack_time_ns``: the exact nanoseconds sent).
    ack_time: float | None = None
    ack_time_ns: int | None = None
    deliveries: int | None = None
    domain: str | None = None

    @classmethod
    def _fields_from(cls, doc: Mapping[str, Any]) -> dict[str, Any]:
        ns = _ns(doc.get("ack_time"))  # the server sends nanoseconds
        return {**super()._fields_from({k: v for k, v in doc.items() if k != "ack_time"}),
                "ack_time": None if ns is None else float(nanos_to_seconds(ns)), "ack_time_ns": ns}


@attrs.frozen(kw_only=True)
class MaxDeliveriesExceeded(Event):
    """A message reached the consumer's ``max_deliver``: it will not be delivered again."""

    TYPES = (_ADVISORY + "max_deliver",)
    stream: str | None = None
    consumer: str | None = None
    stream_seq: int | None = None
    deliveries: int | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class MessageTerminated(Event):
    """A message was terminated with ``msg.term(reason)``."""

    TYPES = (_ADVISORY + "terminated",)
    stream: str | None = None
    consumer: str | None = None
    consumer_seq: int | None = None
    stream_seq: int | None = None
    deliveries: int | None = None
    reason: str | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class MessageNaked(Event):
    """A message was NAKed (``msg.nak()``)."""

    TYPES = (_ADVISORY + "nak",)
    stream: str | None = None
    consumer: str | None = None
    consumer_seq: int | None = None
    stream_seq: int | None = None
    deliveries: int | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class ConsumerAction(Event):
    """A consumer was created, deleted or modified (``action``: ``create``, ``delete``, ``modify``)."""

    TYPES = (_ADVISORY + "consumer_action",)
    stream: str | None = None
    consumer: str | None = None
    action: str | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class StreamAction(Event):
    """A stream was created, deleted or modified (``action``: ``create``, ``delete``, ``modify``)."""

    TYPES = (_ADVISORY + "stream_action",)
    stream: str | None = None
    action: str | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class LeaderElected(Event):
    """A stream's or a consumer's Raft group elected a leader (``consumer`` is None for a stream's).
    ``account`` names the stream's account in the copy the system account receives (None in the
    account's own); so for QuorumLost and StreamBatchAbandoned. A group's pin events always name it."""

    TYPES = (_ADVISORY + "stream_leader_elected", _ADVISORY + "consumer_leader_elected")
    account: str | None = None
    stream: str | None = None
    consumer: str | None = None
    leader: str | None = None
    replicas: tuple[str, ...] = ()
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ApiAudit(Event):
    """A JetStream API request and the server's answer (``subject``, ``request``, ``response`` as sent),
    the ``server`` (its id) that answered and the ``client`` that asked (the server's client info as
    sent: ``name``, ``acc``, ``user``, ``host``, ``lang``, ``ver``, ...)."""

    TYPES = (_ADVISORY + "api_audit",)
    server: str | None = None
    client: Mapping[str, Any] | None = None
    subject: str | None = None
    request: str | None = None
    response: str | None = None
    domain: str | None = None



@attrs.frozen(kw_only=True)
class ConsumerPause(Event):
    """A consumer was paused (until ``pause_until``) or resumed (``paused`` false)."""

    TYPES = (_ADVISORY + "consumer_pause",)
    stream: str | None = None
    consumer: str | None = None
    paused: bool | None = None
    pause_until: Timestamp | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ConsumerGroupPinned(Event):
    """A priority group of a consumer pinned a new client (``pinned_id``)."""

    TYPES = (_ADVISORY + "consumer_group_pinned",)
    account: str | None = None
    stream: str | None = None
    consumer: str | None = None
    group: str | None = None
    pinned_id: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ConsumerGroupUnpinned(Event):
    """A priority group lost its pinned client (``reason``: ``admin`` or ``timeout``)."""

    TYPES = (_ADVISORY + "consumer_group_unpinned",)
    account: str | None = None
    stream: str | None = None
    consumer: str | None = None
    group: str | None = None
    reason: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class QuorumLost(Event):
    """A clustered stream (``consumer`` None) or consumer lost quorum and is stalled."""

    TYPES = (_ADVISORY + "stream_quorum_lost", _ADVISORY + "consumer_quorum_lost")
    account: str | None = None
    stream: str | None = None
    consumer: str | None = None
    replicas: tuple[str, ...] = ()
    domain: str | None = None


@attrs.frozen(kw_only=True)
class DomainLeaderElected(Event):
    """The JetStream meta group (the domain) elected a leader."""

    TYPES = (_ADVISORY + "domain_leader_elected",)
    leader: str | None = None
    replicas: tuple[str, ...] = ()
    cluster: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class SnapshotCreated(Event):
    """A stream snapshot started (``state``: the stream's state as sent; ``client``: who asked, the
    server's client info as sent)."""

    TYPES = (_ADVISORY + "snapshot_create",)
    stream: str | None = None
    state: Mapping[str, Any] | None = None
    client: Mapping[str, Any] | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class SnapshotCompleted(Event):
    """A stream snapshot ended (``error`` when it failed; ``client``: who asked)."""

    TYPES = (_ADVISORY + "snapshot_complete",)
    stream: str | None = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    error: str | None = None
    client: Mapping[str, Any] | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class RestoreCreated(Event):
    """A stream restore started (``client``: who asked)."""

    TYPES = (_ADVISORY + "restore_create",)
    stream: str | None = None
    client: Mapping[str, Any] | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class RestoreCompleted(Event):
    """A stream restore ended, ``bytes`` restored (``client``: who asked)."""

    TYPES = (_ADVISORY + "restore_complete",)
    stream: str | None = None
    start: Timestamp | None = None
    end: Timestamp | None = None
    bytes: int | None = None
    client: Mapping[str, Any] | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class StreamBatchAbandoned(Event):
    """An atomic publish batch was abandoned (``reason``: timeout, large, incomplete, unsupported)."""

    TYPES = (_ADVISORY + "stream_batch_abandoned",)
    account: str | None = None
    stream: str | None = None
    batch: str | None = None
    reason: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ServerOutOfSpace(Event):
    """A server ran out of storage (for ``stream``, when one is named)."""

    TYPES = (_ADVISORY + "server_out_of_space",)
    server: str | None = None
    server_id: str | None = None
    stream: str | None = None
    cluster: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ServerRemoved(Event):
    """A server was removed from the JetStream cluster."""

    TYPES = (_ADVISORY + "server_removed",)
    server: str | None = None
    server_id: str | None = None
    cluster: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class MetaRescue(Event):
    """A server lowered the meta group's quorum for disaster recovery (unsafe by design)."""

    TYPES = (_ADVISORY + "meta_rescue",)
    server: str | None = None
    server_id: str | None = None
    prev_quorum: int | None = None
    new_quorum: int | None = None
    cluster: str | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class ApiLimitReached(Event):
    """The JetStream API request queue was full: ``dropped`` requests were dropped."""

    TYPES = (_ADVISORY + "api_limit_reached",)
    server: str | None = None
    dropped: int | None = None
    domain: str | None = None


@attrs.frozen(kw_only=True)
class UnknownEvent(Event):
    """An event of a type this version does not know (or one that did not parse): ``raw`` has it all."""


_BY_TYPE: dict[str, type[Event]] = {
    t: cls for cls in (ConsumerAckMetric, MaxDeliveriesExceeded, MessageTerminated, MessageNaked, ConsumerAction,
                       StreamAction, LeaderElected, ApiAudit, ConsumerPause, ConsumerGroupPinned,
                       ConsumerGroupUnpinned, QuorumLost, DomainLeaderElected, SnapshotCreated, SnapshotCompleted,
                       RestoreCreated, RestoreCompleted, StreamBatchAbandoned, ServerOutOfSpace, ServerRemoved,
                       MetaRescue, ApiLimitReached)
    for t in cls.TYPES
}


def event_from(data: bytes | str | Mapping[str, Any]) -> Event:
    """The typed event for one advisory or metric payload. Never raises for bad input: anything that
    does not parse is an :class:`UnknownEvent` (``raw`` holds what could be read)."""
    try:
        doc = data if isinstance(data, Mapping) else json.loads(data)
    except ValueError:
        return UnknownEvent(type="", raw={"data": data.decode("utf-8", "replace") if isinstance(data, bytes) else data})
    if not isinstance(doc, Mapping):
        return UnknownEvent(type="", raw={"data": doc})
    kind = doc.get("type") if isinstance(doc.get("type"), str) else ""
    try:
        ts = parse_time(doc.get("timestamp")) if isinstance(doc.get("timestamp"), str) else None
    except ValueError:
        ts = None
    base = dict(type=kind, id=_str(doc, "id"), timestamp=ts, timestamp_ns=None if ts is None else ts.timestamp_ns(),
                raw=dict(doc))
    cls = _BY_TYPE.get(kind, UnknownEvent)
    try:
        return cls(**base, **cls._fields_from(doc))
    except (TypeError, ValueError, AttributeError):
        return UnknownEvent(**base)


def _wanted(types: Iterable[type[Event] | str] | None) -> Callable[[Event], bool] | None:
    if types is None:
        return None
    names: set[str] = set()
    classes: list[type] = []
    for t in types:
        if isinstance(t, str):
            names.add(t)
        elif isinstance(t, type) and issubclass(t, Event):
            classes.append(t)
        else:
            raise TypeError(f"types must be Event classes or type strings, got {t!r}")
    return lambda ev: ev.type in names or isinstance(ev, tuple(classes))


class EventStream:
    """A blocking iterator over JetStream events, subscribed when made (nothing published after the
    call is missed). Iterate or call :meth:`next`; :meth:`stop` ends it. Waits wake every 0.25 s, so
    Ctrl-C interrupts them (and stops the stream). Use from one thread."""

    def __init__(self, conn: "Connection", subject: str, keep: Callable[[Event], bool] | None) -> None:
        self._keep = keep
        self.subject = subject
        self._msgs = MessageStream(core_target(conn, subject, None), core_options(subject, None), engine=PushEngine)

    def next(self, timeout: float | None = None) -> Event:
        """The next event, waiting at most ``timeout`` seconds (None: until one comes).

        Raises ``jetstream_sync.TimeoutError`` when none comes in time, ``StopIteration`` once stopped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                msg = self._msgs.next(left)
            except errors.TimeoutError:
                raise errors.TimeoutError.after(f"events().next() on {self.subject!r}", timeout, "no event") from None
            event = event_from(msg.data)
            if self._keep is None or self._keep(event):
                return event

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.next(None)

    def stop(self) -> None:
        """Unsubscribe; events not yet read are dropped and iteration ends. Idempotent."""
        self._msgs.stop()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def open_events(conn: "Connection", subject_filter: str, types: Iterable[type[Event] | str] | None = None,
                stream: str | None = None, consumer: str | None = None) -> EventStream:
    """(used by ``JetStream.events``, ``Stream.events``, ``Consumer.events``) Subscribe to
    ``$JS.EVENT.<subject_filter>``, keeping the events of ``types`` (classes or type strings) and,
    when given, of one stream or one consumer."""
    if not isinstance(subject_filter, str) or not subject_filter or " " in subject_filter:
        raise ValueError(f"subject_filter must be a subject after $JS.EVENT., e.g. '>' or 'ADVISORY.CONSUMER.>', "
                         f"got {subject_filter!r}")
    wanted = _wanted(types)

    def keep(event: Event) -> bool:
        if stream is not None and getattr(event, "stream", None) != stream:
            return False
        if consumer is not None and getattr(event, "consumer", None) != consumer:
            return False
        return wanted is None or wanted(event)

    plain = wanted is None and stream is None and consumer is None
    return EventStream(conn, _PREFIX + subject_filter, None if plain else keep)
