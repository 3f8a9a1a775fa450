# The key-value store (ADR-8), blocking: a bucket ``B`` is the stream ``KV_B`` holding subjects
# ``$KV.B.>``, one subject per key, the last message of a subject its value. ``KeyValueConfig`` and
# the bucket calls the JetStream context exposes (``create_key_value`` ...), ``KeyValue`` (get, put,
# create, update, delete, purge, history, keys, watch, status) and the entry and status types.
#
# Rule 1: a bucket is made exactly as nats.go makes it, so buckets are shared with every other
#         client: history as max msgs per subject, discard new, rollups allowed, deletes denied,
#         direct gets allowed, a duplicate window of 2 minutes (or the TTL when shorter).
# Rule 2: names and keys are checked before anything is sent (``InvalidKeyError``, ValueError).
# Rule 3: writes are publishes through the context (``js.publish``: its window, its retries); reads
#         are direct gets (any replica answers); history and keys read a watcher to its caught-up
#         point (kv_watch.py), so nothing stored before the call is missed.
from __future__ import annotations

import contextlib
import numbers
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import attrs

from . import _html, errors
from ._codec import check_bucket, check_key, optional_limit, optional_seconds
from ._protocol import DEFAULT, Timeout
from ._publish import ttl_header
from ._time import to_seconds
from .config import (
    DiscardPolicy,
    Placement,
    RePublish,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamSource,
    SubjectTransform,
)
from .kv_watch import KV_OPERATION, KeyValueEntry, KeyValueOp, KeyWatcher, entry_from_stored, watch_config

#: Keys asked for per batch direct get of :meth:`KeyValue.get_many` (the server answers for at most 1,024).
_MULTI_LAST = 1024

__all__ = ["KeyValue", "KeyValueConfig", "KeyValueEntry", "KeyValueOp", "KeyValueStatus", "KeyWatcher", "check_bucket",
           "check_key", "stream_config_of"]

ROLLUP = "Nats-Rollup"

#: The most history a bucket keeps per key (the server's limit on max msgs per subject for KV).
MAX_HISTORY = 64
#: The duplicate window of a bucket whose TTL is not shorter (as nats.go).
DUPLICATE_WINDOW = 120.0



def _history(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"history must be an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_HISTORY:
        raise ValueError(f"history must be 1..{MAX_HISTORY} values kept per key, got {value}")
    return int(value)


def _source_of(value: Any, name: str) -> StreamSource | None:
    if value is None or isinstance(value, StreamSource):
        return value
    if isinstance(value, str):
        return StreamSource(name=value)
    if isinstance(value, Mapping):
        return StreamSource.from_response(value) if "name" in value else StreamSource(**value)
    raise TypeError(f"{name} must be a bucket name, a StreamSource or a mapping, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class KeyValueConfig:
    """A bucket's configuration as users write it; ``stream_config()`` is the stream it makes.

    Checked when built (nothing sent yet): ``bucket`` name, ``history`` 1..64, durations (seconds or
    ``timedelta``) and limits. Frozen: derive a changed copy with ``attrs.evolve``.
    """

    bucket: str = attrs.field(validator=lambda _i, _a, v: check_bucket(v))
    description: str | None = None
    #: Values kept per key (1..64).
    history: int = attrs.field(default=1, converter=_history)
    #: Seconds a value lives (None: for ever); the stream's max_age.
    ttl: float | None = attrs.field(default=None, converter=lambda v: optional_seconds(v, "ttl"))
    #: Largest value in bytes (None: the server's limit).
    max_value_size: int | None = attrs.field(default=None, converter=lambda v: optional_limit(v, "max_value_size"))
    #: Largest bucket in bytes (None: unlimited).
    max_bytes: int | None = attrs.field(default=None, converter=lambda v: optional_limit(v, "max_bytes"))
    storage: StorageType = attrs.field(default=StorageType.FILE,
                                       converter=lambda v: StorageType.FILE if v is None else StorageType(v))
    replicas: int = attrs.field(default=1, validator=attrs.validators.and_(attrs.validators.instance_of(int),
                                                                         attrs.validators.in_(range(1, 6))))
    compression: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    metadata: dict[str, str] | None = None
    placement: Placement | None = None
    republish: RePublish | None = None
    #: Seconds a marker left by a per-key TTL or by ``ttl`` is kept (ADR-48; >= 1 s; servers 2.11+).
    limit_marker_ttl: float | None = attrs.field(default=None,
                                                 converter=lambda v: optional_seconds(v, "limit_marker_ttl", 1.0))
    #: Another bucket this one mirrors (read-only): a bucket name or a StreamSource of ``KV_<name>``.
    mirror: StreamSource | None = attrs.field(default=None, converter=lambda v: _source_of(v, "mirror"))
    #: Buckets this one sources from.
    sources: list[StreamSource] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else [_source_of(s, "sources") for s in v])

    def __attrs_post_init__(self) -> None:
        if self.mirror is not None and self.sources:
            raise ValueError("mirror and sources cannot be combined: a bucket either mirrors one bucket or sources")

    def stream_config(self) -> StreamConfig:
        """The stream this bucket is, exactly as nats.go makes it. Pure."""
        ttl = self.ttl
        duplicates = min(ttl, DUPLICATE_WINDOW) if ttl else DUPLICATE_WINDOW
        fields: dict[str, Any] = dict(
            name=f"KV_{self.bucket}", description=self.description, max_msgs_per_subject=self.history,
            max_bytes=self.max_bytes if self.max_bytes is not None else -1, max_age=ttl or 0.0,
            max_msg_size=self.max_value_size if self.max_value_size is not None else -1,
            storage=self.storage, num_replicas=self.replicas, placement=self.placement,
            allow_rollup_hdrs=True, deny_delete=True, duplicate_window=duplicates, max_msgs=-1, max_consumers=-1,
            allow_direct=True, republish=self.republish, discard=DiscardPolicy.NEW,
            compression=StoreCompression.S2 if self.compression else StoreCompression.NONE, metadata=self.metadata)
        if self.limit_marker_ttl:
            fields.update(allow_msg_ttl=True, subject_delete_marker_ttl=self.limit_marker_ttl)
        if self.mirror is not None:
            fields.update(mirror=_kv_source(self.mirror), mirror_direct=True)
        elif self.sources:
            fields.update(sources=[_kv_source(s, into=self.bucket) for s in self.sources])
        else:
            fields.update(subjects=[f"$KV.{self.bucket}.>"])
        return StreamConfig(**fields)

    @classmethod
    def from_stream_config(cls, cfg: StreamConfig) -> "KeyValueConfig":
        """The bucket configuration a bucket's stream config says (inverse of :meth:`stream_config`). Pure."""
        name = cfg.name[3:] if cfg.name.startswith("KV_") else cfg.name

        def limit(v: int | None) -> int | None:
            return None if v is None or v < 0 else v

        return cls(bucket=name, description=cfg.description, history=cfg.max_msgs_per_subject or 1,
                   ttl=cfg.max_age or None, max_value_size=limit(cfg.max_msg_size), max_bytes=limit(cfg.max_bytes),
                   storage=cfg.storage, replicas=cfg.num_replicas or 1,
                   compression=cfg.compression is StoreCompression.S2, metadata=cfg.metadata or None,
                   placement=cfg.placement, republish=cfg.republish,
                   limit_marker_ttl=cfg.subject_delete_marker_ttl or None,
                   mirror=_bucket_source(cfg.mirror) if cfg.mirror is not None else None,
                   sources=[_bucket_source(s) for s in cfg.sources] if cfg.sources else None)


def _kv_source(src: StreamSource, into: str | None = None) -> StreamSource:
    """A bucket source as its stream source: ``KV_`` prefixed and (sources) its keys moved into bucket
    ``into``, unless it is an external source of the same name (as nats.go)."""
    name = src.name if src.name.startswith("KV_") else f"KV_{src.name}"
    if into is None or src.subject_transforms:
        return attrs.evolve(src, name=name)
    origin = name[3:]
    if src.external is not None and origin == into:
        return attrs.evolve(src, name=name)
    return attrs.evolve(src, name=name, subject_transforms=[
        SubjectTransform(src=f"$KV.{origin}.>", dest=f"$KV.{into}.>")])


def _bucket_source(src: StreamSource) -> StreamSource:
    return attrs.evolve(src, name=src.name[3:]) if src.name.startswith("KV_") else src


def stream_config_of(config: KeyValueConfig | Mapping[str, Any] | None, bucket: str | None,
                     fields: Mapping[str, Any]) -> StreamConfig:
    """The stream config of a ``create_key_value(...)`` call's arguments (pure; raises before any request)."""
    if config is not None:
        if fields or bucket is not None:
            if not isinstance(config, (KeyValueConfig, Mapping)):
                raise TypeError(f"config must be a KeyValueConfig or a mapping, got {type(config).__name__}")
            base = attrs.asdict(config, recurse=False) if isinstance(config, KeyValueConfig) else dict(config)
            config = {**base, **({"bucket": bucket} if bucket is not None else {}), **fields}
        if isinstance(config, Mapping):
            config = KeyValueConfig(**config)
        if not isinstance(config, KeyValueConfig):
            raise TypeError(f"config must be a KeyValueConfig or a mapping, got {type(config).__name__}")
        return config.stream_config()
    if bucket is None:
        raise TypeError("bucket is required: create_key_value('NAME', ...) or config=KeyValueConfig(bucket=...)")
    return KeyValueConfig(bucket=bucket, **fields).stream_config()


@attrs.frozen
class KeyValueStatus:
    """What a bucket is and holds, from its stream's info (one request). Frozen."""

    bucket: str
    #: Messages stored (every revision and marker of every key).
    values: int
    history: int
    #: Seconds a value lives (0: for ever).
    ttl: float
    limit_marker_ttl: float | None
    #: Bytes stored.
    bytes: int
    is_compressed: bool
    metadata: dict[str, str]
    stream_info: StreamInfo = attrs.field(repr=False)
    backing_store: str = "JetStream"

    @classmethod
    def from_stream_info(cls, info: StreamInfo) -> "KeyValueStatus":
        cfg = info.config
        assert cfg is not None
        state = info.state
        return cls(cfg.name[3:] if cfg.name.startswith("KV_") else cfg.name,
                   state.messages if state is not None else 0, cfg.max_msgs_per_subject or 1, cfg.max_age or 0.0,
                   cfg.subject_delete_marker_ttl or None, state.bytes if state is not None else 0,
                   cfg.compression is StoreCompression.S2, dict(cfg.metadata or {}), info)

    def _repr_html_(self) -> str:
        return _html.kv_table("Key-value bucket", self.bucket, [
            ("values", self.values), ("history", self.history), ("ttl", self.ttl or None),
            ("limit marker ttl", self.limit_marker_ttl), ("bytes", _html.size(self.bytes)),
            ("compressed", self.is_compressed), ("backing store", self.backing_store)])


def _value(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"value must be bytes or str, got {type(value).__name__}")


class KeyValue:
    """A key-value bucket (get one with ``js.create_key_value()`` or ``js.key_value()``). Thread-safe.

    Every call blocks the calling thread for at most ``timeout`` seconds (default: the context's),
    waking every 0.25 s so Ctrl-C lands; reads are idempotent and retried per the context's
    ``retry``. Keys are letters, digits and ``-/_=.`` (``InvalidKeyError`` before anything is sent);
    values are bytes or str (UTF-8).
    """

    def __init__(self, js: Any, info: StreamInfo) -> None:  # js: its JetStream context, a layer above
        cfg = info.config
        assert cfg is not None
        self._js = js
        self._jsapi = js._jsapi
        self._api = js._api
        self._info = info
        self.bucket: str = cfg.name[3:]
        self.stream_name: str = cfg.name
        origin = self.bucket
        if cfg.mirror is not None and cfg.mirror.name.startswith("KV_"):
            origin = cfg.mirror.name[3:]  # a mirror's keys are its origin's subjects
        #: ``$KV.<bucket>.``: a key's subject is this and the key.
        self._prefix = f"$KV.{origin}."
        self._direct = bool(cfg.allow_direct or cfg.mirror_direct)

    # -- reads -----------------------------------------------------------------

    def get(self, key: str, *, revision: int | None = None, timeout: Timeout = DEFAULT) -> KeyValueEntry:
        """The key's current value, or the revision ``revision`` of it (one direct get, retried).

        Blocks at most ``timeout`` per attempt. Raises ``KeyNotFoundError`` (also a ``KeyError``) when
        the key has no value (never written, deleted, purged) or ``revision`` is another key's,
        ``InvalidKeyError``, ``TimeoutError``.
        """
        entry = self._entry(check_key(key), revision, timeout)
        if entry is None or entry.operation is not KeyValueOp.PUT:
            raise errors.KeyNotFoundError(self.bucket, key, self._not_found(key, revision, entry))
        return entry

    def get_many(self, keys: Iterable[str], *, timeout: Timeout = DEFAULT) -> dict[str, KeyValueEntry]:
        """The current entries of ``keys``, by key, in the order given; a key without a value (never
        written, deleted, purged) is left out, as is a repeated one after its first.

        Batch direct gets (``multi_last``: one request per 1,024 keys, answered as a stream of
        messages) when the server has them (2.11) and the bucket allows direct gets; else one get
        per key, as :meth:`get` makes it. Blocks the calling thread, at most ``timeout`` per wait
        for the server. Raises ``TypeError``/``InvalidKeyError`` for a bad key (wildcards
        included), before anything is sent; ``BucketNotFoundError``, ``TimeoutError``.
        """
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise TypeError(f"keys must be a list of keys, got {type(keys).__name__}")
        wanted = list(dict.fromkeys(check_key(k, name=f"keys[{i}]") for i, k in enumerate(keys)))
        self._jsapi.resolve_timeout(timeout)  # a bad timeout is refused here, before anything is sent
        entries: dict[str, KeyValueEntry] = {}
        if self._direct and self._jsapi.supports(1):
            for lo in range(0, len(wanted), _MULTI_LAST):
                first = {"multi_last": [self._prefix + k for k in wanted[lo:lo + _MULTI_LAST]]}
                try:
                    batch = self._jsapi.direct_batch(self.stream_name, first, multi=True, total=None,
                                                     max_bytes=None, timeout=timeout)
                    with contextlib.closing(batch):
                        for msg in batch:
                            entry = entry_from_stored(self.bucket, self._prefix, msg)
                            if entry.operation is KeyValueOp.PUT:
                                entries[entry.key] = entry
                except errors.StreamNotFoundError as exc:
                    raise self._missing(exc) from None
        else:
            for key in wanted:
                entry = self._entry(key, None, timeout)
                if entry is not None and entry.operation is KeyValueOp.PUT:
                    entries[key] = entry
        return {k: entries[k] for k in wanted if k in entries}

    def _not_found(self, key: str, revision: int | None, entry: KeyValueEntry | None) -> str:
        at = f" at revision {revision}" if revision is not None else ""
        if entry is not None:
            return f"key {key!r} of bucket {self.bucket!r} was {'deleted' if entry.operation is KeyValueOp.DELETE else 'purged'}{at}"
        return f"key {key!r} not found in bucket {self.bucket!r}{at}"

    def _entry(self, key: str, revision: int | None, timeout: Timeout) -> KeyValueEntry | None:
        """The last entry of ``key`` (or its revision ``revision``), markers included; None if none."""
        subject = self._prefix + key
        if revision is not None:
            if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
                raise ValueError(f"revision must be an int >= 1, got {revision!r}")
        get = self._jsapi.direct_get if self._direct else self._jsapi.msg_get
        try:
            if revision is None:
                msg = get(self.stream_name, last_by_subj=subject, timeout=timeout)
            else:
                msg = get(self.stream_name, seq=revision, timeout=timeout)
        except errors.MessageNotFoundError:
            return None
        except errors.StreamNotFoundError as exc:
            raise self._missing(exc) from None
        except errors.NoRespondersError:
            # A direct get nobody answers: the bucket is gone (or JetStream is): the stream's info says which.
            self.status(timeout=timeout)
            raise
        if msg.subject != subject:
            return None
        return entry_from_stored(self.bucket, self._prefix, msg)

    def _missing(self, exc: errors.APIError) -> errors.BucketNotFoundError:
        return errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=self.stream_name,
                                          operation=exc.operation)

    def __getitem__(self, key: str) -> bytes:
        """``kv[key]``: the value of ``get(key)`` (KeyError when it has none)."""
        return self.get(key).value

    def __setitem__(self, key: str, value: bytes | str) -> None:
        """``kv[key] = value``: ``put(key, value)``."""
        self.put(key, value)

    def __delitem__(self, key: str) -> None:
        """``del kv[key]``: ``delete(key)``."""
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        """``key in kv``: the key has a value (one direct get)."""
        return isinstance(key, str) and (entry := self._entry(check_key(key), None, DEFAULT)) is not None \
            and entry.operation is KeyValueOp.PUT

    # -- writes ----------------------------------------------------------------

    def _publish(self, key: str, value: bytes, headers: Mapping[str, Any] | None, last: int | None,
                 timeout: Timeout, mismatch: type[errors.APIError], ttl: Any = None) -> int:
        subject = self._prefix + key
        try:
            ack = self._js.publish(subject, value, headers=headers, expected_last_subject_seq=last, ttl=ttl,
                                   timeout=timeout)
        except errors.StreamWrongLastSequenceError as exc:
            raise mismatch(exc.code, exc.err_code, exc.description, stream=self.stream_name, subject=subject,
                           operation=exc.operation) from None
        except errors.NoRespondersError as exc:
            # Nobody took the write: the bucket is gone (its stream info says so), or it exists and its
            # stream has no leader for now (a replicated bucket's election): then a retriable error.
            try:
                self.status(timeout=timeout)
            except errors.BucketNotFoundError:
                raise
            except errors.JetStreamError:
                pass  # the stream info failed too: the bucket may well exist, so no claim that it is gone
            raise errors.NoRespondersError(
                f"no server took the write to key {key!r}: bucket {self.bucket!r} exists but its stream "
                f"{self.stream_name!r} has no leader for now (an election?); try again", subject) from exc
        return ack.seq

    def put(self, key: str, value: bytes | str, *, timeout: Timeout = DEFAULT) -> int:
        """Store ``value`` as the key's new value; return its revision (the stream sequence).

        Blocks until the server stored it (at most ``timeout``). Raises ``InvalidKeyError``,
        ``BucketNotFoundError``, ``NoRespondersError`` (retriable; nothing stored) when the bucket exists but
        nobody took the write, as while a replicated bucket elects a leader (every write does),
        ``TimeoutError``, TypeError for a value that is not bytes or str.
        """
        return self._publish(check_key(key), _value(value), None, None, timeout, errors.KeyRevisionMismatchError)

    def create(self, key: str, value: bytes | str, *, ttl: Any = None, timeout: Timeout = DEFAULT) -> int:
        """Store ``value`` only if the key has no value (never written, or its last entry is a delete or
        purge marker); return the revision. ``ttl`` (seconds, timedelta or "never"; needs a bucket with
        ``limit_marker_ttl``) removes the key after that long, leaving a marker watchers see as PURGE.

        Blocks for one or three round trips. Raises ``KeyExistsError`` (a ``StreamWrongLastSequenceError``
        with the server's ``err_code``) when it has a value, ``InvalidKeyError``, ``TimeoutError``.
        """
        check_key(key)
        data = _value(value)
        if ttl is not None:
            ttl_header(ttl)  # checked before anything is sent
        try:
            return self._publish(key, data, None, 0, timeout, errors.KeyExistsError, ttl)
        except errors.KeyExistsError as exc:
            entry = self._entry(key, None, timeout)
            if entry is None or entry.operation is KeyValueOp.PUT:
                raise
            first = exc
        try:  # the last entry is a marker: the key is free, as long as nobody wrote it meanwhile
            return self._publish(key, data, None, entry.revision, timeout, errors.KeyExistsError, ttl)
        except errors.KeyExistsError:
            raise first from None

    def update(self, key: str, value: bytes | str, last: int, *, timeout: Timeout = DEFAULT) -> int:
        """Store ``value`` only if the key's last revision is ``last`` (compare and set); return the new one.

        Raises ``KeyRevisionMismatchError`` (a ``StreamWrongLastSequenceError``) when another write came
        first, ``InvalidKeyError``, ValueError for a bad ``last``, ``TimeoutError``.
        """
        check_key(key)
        if isinstance(last, bool) or not isinstance(last, int) or last < 0:
            raise ValueError(f"last must be the int revision the key is at (0: it never had one), got {last!r}")
        return self._publish(key, _value(value), None, last, timeout, errors.KeyRevisionMismatchError)

    def delete(self, key: str, *, last: int | None = None, ttl: Any = None, timeout: Timeout = DEFAULT) -> int:
        """Delete the key: a DEL marker is its new last entry (history kept); return the marker's revision.

        ``last``: only if the key is at that revision (``KeyRevisionMismatchError``). A TTL is for
        ``purge``, not ``delete`` (ValueError). Blocks until stored.
        """
        check_key(key)
        if ttl is not None:
            raise ValueError("ttl applies to purge(), not delete(): a delete marker stays until purged")
        return self._publish(key, b"", {KV_OPERATION: "DEL"}, self._last(last), timeout,
                             errors.KeyRevisionMismatchError)

    def purge(self, key: str, *, last: int | None = None, ttl: Any = None, timeout: Timeout = DEFAULT) -> int:
        """Purge the key: a PURGE marker replaces every revision of it (``Nats-Rollup: sub``); return the
        marker's revision. ``ttl`` (bucket with ``limit_marker_ttl``) removes the marker itself after
        that long. ``last``: only if the key is at that revision. Blocks until stored.
        """
        check_key(key)
        if ttl is not None:
            ttl_header(ttl)  # checked before anything is sent
        return self._publish(key, b"", {KV_OPERATION: "PURGE", ROLLUP: "sub"}, self._last(last), timeout,
                             errors.KeyRevisionMismatchError, ttl)

    @staticmethod
    def _last(last: Any) -> int | None:
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 0):
            raise ValueError(f"last must be an int revision >= 0 or None, got {last!r}")
        return last

    def purge_deletes(self, *, older_than: Any = 1800.0, timeout: Timeout = DEFAULT) -> int:
        """Remove the delete and purge markers older than ``older_than`` (seconds or timedelta; 0: every
        marker) with everything before them; a younger marker keeps only itself. Return how many keys
        were cleaned. Blocks for a watch to the caught-up point and one purge request per marker.
        """
        age = to_seconds(older_than, "older_than")
        if age is None or age < 0:
            raise ValueError(f"older_than must be seconds >= 0 or a timedelta, got {older_than!r}")
        markers = [e for e in self._snapshot(">", meta_only=True, timeout=timeout)
                   if e.operation is not KeyValueOp.PUT]
        now = time.time_ns()
        for entry in markers:
            young = age > 0 and now - entry.created_ns < age * 1e9
            payload = {"filter": self._prefix + entry.key}
            if young:
                payload["keep"] = 1
            self._jsapi.request(self._api.stream_purge(self.stream_name), payload, timeout, idempotent=False)
        return len(markers)

    # -- many keys ---------------------------------------------------------------

    def history(self, key: str, *, timeout: Timeout = DEFAULT) -> list[KeyValueEntry]:
        """Every revision the bucket keeps of ``key``, oldest first, markers included.

        Reads a watcher to its caught-up point: nothing stored before the call is missed. Blocks at
        most ``timeout`` for the watcher to start and for each entry. Raises ``KeyNotFoundError`` when
        the bucket holds nothing for it, ``InvalidKeyError``.
        """
        entries = self._snapshot(check_key(key), include_history=True, timeout=timeout)
        if not entries:
            raise errors.KeyNotFoundError(self.bucket, key)
        return entries

    def keys(self, *filters: str, timeout: Timeout = DEFAULT) -> Iterator[str]:
        """The keys that have a value, each once, matching ``filters`` (default every key; ``*`` and a
        trailing ``>`` allowed) — filtered by the server, not here. An empty bucket yields nothing.

        A generator over a headers-only watcher, started by the first ``next()`` and read to its
        caught-up point (nothing stored before the call is missed); the watcher and its server-side
        consumer end when the generator does (or is closed). Raises ``InvalidKeyError`` at the call,
        before anything is sent.
        """
        keys = list(filters) or [">"]
        for key in keys:
            check_key(key, wildcards=True, name="filters")
        return _keys_of(lambda: self.watch(keys, ignore_deletes=True, meta_only=True, timeout=timeout))

    def _snapshot(self, keys: Any, *, timeout: Timeout, **options: Any) -> list[KeyValueEntry]:
        with self.watch(keys, timeout=timeout, **options) as watcher:
            return list(watcher.initial())

    def watch(self, keys: str | Sequence[str] = ">", *, include_history: bool = False, ignore_deletes: bool = False,
              meta_only: bool = False, updates_only: bool = False, resume_from_revision: int | None = None,
              timeout: Timeout = DEFAULT) -> KeyWatcher:
        """Watch ``keys`` (a key, a filter with ``*``/``>``, or a list of them): a :class:`KeyWatcher` that
        yields the current values first (``initial()``), then every change as it is stored.

        ``include_history``: every revision kept, not just the last; ``ignore_deletes``: no DEL or PURGE
        entries; ``meta_only``: entries without values; ``updates_only``: only changes after this call;
        ``resume_from_revision``: everything from that revision on. Blocks until the watcher's consumer
        exists (at most ``timeout``). Raises ``InvalidKeyError``, ValueError for ``include_history`` with
        ``updates_only``.
        """
        filters = [keys] if isinstance(keys, str) else list(keys)
        if not filters:
            raise ValueError("keys must name at least one key or filter")
        subjects = [self._prefix + check_key(k, wildcards=True, name="keys") for k in filters]
        cfg = watch_config(subjects, include_history=include_history, updates_only=updates_only,
                           meta_only=meta_only, resume_from_revision=resume_from_revision)
        return KeyWatcher(self._js, self.bucket, self.stream_name, self._prefix, cfg, ignore_deletes=ignore_deletes,
                          updates_only=updates_only, timeout=self._js._resolve_timeout(timeout))

    # -- the bucket ----------------------------------------------------------------

    def status(self, *, timeout: Timeout = DEFAULT) -> KeyValueStatus:
        """The bucket's :class:`KeyValueStatus` (one stream info request, retried)."""
        try:
            info = self._js.stream_info(self.stream_name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise self._missing(exc) from None
        self._info = info
        return KeyValueStatus.from_stream_info(info)

    def _repr_html_(self) -> str:
        """A notebook view: the bucket's status and up to 20 of its keys (reads the server)."""
        status = self.status()
        rows: list[tuple[str, Any]] = [("values", status.values), ("history", status.history),
                                       ("ttl", status.ttl or None), ("bytes", _html.size(status.bytes))]
        shown = 0
        for key in self.keys():
            if shown == 20:
                rows.append(("\u2026", "more keys"))
                break
            try:
                value = self.get(key).value
            except errors.KeyNotFoundError:
                continue
            text = value[:80].decode("utf-8", "replace") + ("\u2026" if len(value) > 80 else "")
            rows.append((key, text))
            shown += 1
        return _html.kv_table("Key-value bucket", self.bucket, rows)

    def __repr__(self) -> str:
        return f"<KeyValue {self.bucket!r}>"


def _keys_of(open_watcher: Callable[[], KeyWatcher]) -> Iterator[str]:
    """The keys a watcher opened at the first ``next()`` reads to its caught-up point, each once."""
    seen: set[str] = set()
    with open_watcher() as watcher:
        for entry in watcher.initial():
            if entry.key not in seen:
                seen.add(entry.key)
                yield entry.key
