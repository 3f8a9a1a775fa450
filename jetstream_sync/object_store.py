# The object store (ADR-20), blocking and streaming: a store ``B`` is the stream ``OBJ_B`` holding each
# object's chunks on ``$O.B.C.<nuid>`` and its meta (an ``ObjectInfo`` as JSON) on ``$O.B.M.<name>``.
# ``ObjectStoreConfig``, ``ObjectStore`` (put, get, info, list, watch, delete, update_meta, links,
# seal, status), ``ObjectStoreStatus`` and ``ObjectWatcher``.
#
# Rule 1: a store and its objects are made exactly as nats.go makes them, so every client shares them.
# Rule 2: memory is bounded by windows, never by the object: a put keeps at most PUT_WINDOW_BYTES of
#         chunks unacknowledged, a get buffers at most the reader's byte budget (object_reader.py).
# Rule 3: a put replaces an object only once its new meta is stored; then the old chunks are purged.
#         A put that fails purges the chunks it wrote; a delete stores its meta first, then purges.
from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import io
import os
import pathlib
import stat
import time
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

from . import _html, errors
from ._codec import check_bucket, optional_limit, optional_seconds
from ._headers import Headers
from ._protocol import DEFAULT, Timeout
from ._time import Timestamp
from .config import DiscardPolicy, Placement, StorageType, StoreCompression, StreamConfig, StreamInfo
from .kv_watch import KeyWatcher, watch_config
from .message import Msg
from .object_meta import ObjectInfo, ObjectLink, chunk_subject, digest_of, meta_subject, new_nuid
from .object_reader import REPLICA_SETTLE, ObjectReader

__all__ = ["DEFAULT_CHUNK_SIZE", "ObjectInfo", "ObjectLink", "ObjectStore", "ObjectStoreConfig", "ObjectStoreStatus",
           "ObjectWatcher", "object_stream_config"]

#: The chunk size of a put unless told (as nats.go).
DEFAULT_CHUNK_SIZE = 128 * 1024
#: A put keeps at most this many bytes of chunks published and not yet acknowledged.
PUT_WINDOW_BYTES = 8 * 1024 * 1024
#: How much longer than a chunk's publish timeout a put waits for the publish's own answer.
_ANSWER_GRACE = 1.0
_ROLLUP = {"Nats-Rollup": "sub"}


@attrs.frozen(kw_only=True)
class ObjectStoreConfig:
    """An object store's configuration as users write it; ``stream_config()`` is the stream it makes.

    Checked when built (nothing sent yet). Frozen: derive a changed copy with ``attrs.evolve``.
    """

    bucket: str = attrs.field(validator=lambda _i, _a, v: check_bucket(v))
    description: str | None = None
    #: Seconds an object lives (None: for ever); the stream's max_age.
    ttl: float | None = attrs.field(default=None, converter=lambda v: optional_seconds(v, "ttl"))
    #: Largest store in bytes (None: unlimited).
    max_bytes: int | None = attrs.field(default=None, converter=lambda v: optional_limit(v, "max_bytes"))
    storage: StorageType = attrs.field(default=StorageType.FILE,
                                       converter=lambda v: StorageType.FILE if v is None else StorageType(v))
    replicas: int = attrs.field(default=1, validator=attrs.validators.and_(attrs.validators.instance_of(int),
                                                                         attrs.validators.in_(range(1, 6))))
    compression: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    metadata: dict[str, str] | None = None
    placement: Placement | None = None

    def stream_config(self) -> StreamConfig:
        """The stream this store is, exactly as nats.go makes it. Pure."""
        b = self.bucket
        return StreamConfig(
            name=f"OBJ_{b}", description=self.description, subjects=[f"$O.{b}.C.>", f"$O.{b}.M.>"],
            max_age=self.ttl or 0.0, max_bytes=self.max_bytes if self.max_bytes is not None else -1,
            storage=self.storage, num_replicas=self.replicas, placement=self.placement,
            discard=DiscardPolicy.NEW, allow_rollup_hdrs=True, allow_direct=True,
            compression=StoreCompression.S2 if self.compression else StoreCompression.NONE, metadata=self.metadata)


def object_stream_config(config: ObjectStoreConfig | Mapping[str, Any] | None, bucket: str | None,
                         fields: Mapping[str, Any]) -> StreamConfig:
    """The stream config of a ``create_object_store(...)`` call's arguments (pure; raises before any request)."""
    if config is not None and not isinstance(config, (ObjectStoreConfig, Mapping)):
        raise TypeError(f"config must be an ObjectStoreConfig or a mapping, got {type(config).__name__}")
    base: dict[str, Any] = {}
    if isinstance(config, ObjectStoreConfig):
        base = attrs.asdict(config, recurse=False)
    elif config is not None:
        base = dict(config)
    if bucket is not None:
        base["bucket"] = bucket
    base.update(fields)
    if "bucket" not in base:
        raise TypeError("bucket is required: create_object_store('NAME', ...) or config=ObjectStoreConfig(bucket=...)")
    return ObjectStoreConfig(**base).stream_config()


@attrs.frozen
class ObjectStoreStatus:
    """What a store is and holds, from its stream's info (one request). Frozen."""

    bucket: str
    description: str | None
    #: Seconds an object lives (0: for ever).
    ttl: float
    storage: StorageType | None
    replicas: int
    sealed: bool
    #: Bytes stored (chunks and metas).
    size: int
    is_compressed: bool
    metadata: dict[str, str]
    stream_info: StreamInfo = attrs.field(repr=False)
    backing_store: str = "JetStream"

    @classmethod
    def from_stream_info(cls, info: StreamInfo) -> "ObjectStoreStatus":
        cfg = info.config
        assert cfg is not None
        return cls(cfg.name[4:] if cfg.name.startswith("OBJ_") else cfg.name, cfg.description, cfg.max_age or 0.0,
                   cfg.storage, cfg.num_replicas or 1, bool(cfg.sealed),
                   info.state.bytes if info.state is not None else 0, cfg.compression is StoreCompression.S2,
                   dict(cfg.metadata or {}), info)

    def _repr_html_(self) -> str:
        return _html.kv_table("Object store", self.bucket, [
            ("size", _html.size(self.size)), ("ttl", self.ttl or None), ("storage", self.storage),
            ("replicas", self.replicas), ("sealed", self.sealed), ("compressed", self.is_compressed)])


class ObjectWatcher(KeyWatcher):
    """Changes to a store's objects as :class:`ObjectInfo` items (``store.watch()``): the same caught-up
    state (``initial()``, ``initial_done``), iteration, ``next(timeout=)``, ``consume()`` and prompt
    exit as :class:`~jetstream_sync.KeyWatcher`. Deleted objects come as infos with ``deleted`` set
    unless ``ignore_deletes``."""

    _kind = "object store"
    _threads_named = "jetstream-sync-obj-watch"

    def _convert(self, msg: Msg, seq: int, pending: int, ts: int) -> ObjectInfo | None:  # type: ignore[override]
        if not msg.data:  # a purged meta subject (a rename's old name): nothing to say
            return None
        try:
            info = ObjectInfo.from_json(msg.data, Timestamp.from_ns(ts))
        except ValueError:
            return None
        if info.deleted and self._ignore_deletes:
            return None
        return info


def _check_name(name: Any, what: str = "name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} must not be empty")
    return name


def _chunks(source: Any, size: int) -> tuple[Iterator[bytes], int | None, Callable[[], None]]:
    """(the chunks of ``source``, its length when known, what closes it) for a put. Raises TypeError."""
    if isinstance(source, str):
        source = source.encode()
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source).cast("B")
        return (bytes(view[i:i + size]) for i in range(0, view.nbytes, size)), view.nbytes, lambda: None
    if isinstance(source, pathlib.PurePath):
        f = open(source, "rb")  # noqa: SIM115 - closed by the put
        st = os.fstat(f.fileno())
        return _read_chunks(f, size), st.st_size if stat.S_ISREG(st.st_mode) else None, f.close
    if hasattr(source, "read"):
        if isinstance(source, io.TextIOBase):
            raise TypeError("source is a text file: open it in binary mode ('rb')")
        return _read_chunks(source, size), _remaining(source), lambda: None
    if isinstance(source, Iterable):
        return _rechunk(source, size), None, lambda: None
    raise TypeError(f"source must be bytes, str, a binary file, a pathlib.Path or an iterable of bytes, "
                    f"got {type(source).__name__}")


def _remaining(f: Any) -> int | None:
    """The bytes left to read in a seekable file (a regular file, an ``io.BytesIO``); None otherwise."""
    try:
        if f.seekable():
            here = f.tell()
            end = f.seek(0, io.SEEK_END)
            f.seek(here)
            return end - here
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    return None


def _read_chunks(f: Any, size: int) -> Iterator[bytes]:
    while True:
        data = f.read(size)
        if not data:
            return
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"source.read() returned {type(data).__name__}: open the file in binary mode ('rb')")
        while len(data) < size:  # a short read (a pipe, a socket): fill the chunk before sending it
            more = f.read(size - len(data))
            if not more:
                break
            data += more
        yield bytes(data)


def _rechunk(pieces: Iterable[Any], size: int) -> Iterator[bytes]:
    pending = bytearray()
    for piece in pieces:
        if not isinstance(piece, (bytes, bytearray, memoryview)):
            raise TypeError(f"an iterable source must yield bytes, got {type(piece).__name__}")
        pending += piece
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)


class ObjectStore:
    """An object store (get one with ``js.create_object_store()`` or ``js.object_store()``). Thread-safe.

    Every call blocks the calling thread for at most ``timeout`` seconds per request (default: the
    context's), waking every 0.25 s so Ctrl-C lands. Objects are named by any non-empty string.
    """

    def __init__(self, js: Any, info: StreamInfo) -> None:  # js: its JetStream context, a layer above
        cfg = info.config
        assert cfg is not None
        self._js = js
        self._jsapi = js._jsapi
        self._api = js._api
        self.bucket: str = cfg.name[4:]
        self.stream_name: str = cfg.name
        self._direct = bool(cfg.allow_direct)
        #: A replicated store's reader may be served by a replica still storing an object's last chunks.
        self._replicated = (cfg.num_replicas or 1) > 1

    # -- reading ---------------------------------------------------------------------------------

    def info(self, name: str, *, show_deleted: bool = False, timeout: Timeout = DEFAULT) -> ObjectInfo:
        """The :class:`ObjectInfo` of object ``name`` (one direct get, retried). Raises
        ``ObjectNotFoundError`` (also for a deleted object unless ``show_deleted``), ``BucketNotFoundError``."""
        info = self._info(_check_name(name), timeout)
        if info is None or info.deleted and not show_deleted:
            raise errors.ObjectNotFoundError(self.bucket, name)
        return info

    def _info(self, name: str, timeout: Timeout) -> ObjectInfo | None:
        get = self._jsapi.direct_get if self._direct else self._jsapi.msg_get
        try:
            msg = get(self.stream_name, last_by_subj=meta_subject(self.bucket, name), timeout=timeout)
        except errors.MessageNotFoundError:
            return None
        except errors.StreamNotFoundError as exc:
            raise self._missing(exc) from None
        except errors.NoRespondersError:
            self.status(timeout=timeout)  # a direct get nobody answers: BucketNotFoundError if the store is gone
            raise
        if not msg.data:
            return None
        return ObjectInfo.from_json(msg.data, msg.time if isinstance(msg.time, Timestamp) else None)

    def _missing(self, exc: errors.APIError) -> errors.BucketNotFoundError:
        return errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=self.stream_name,
                                          operation=exc.operation)

    def get(self, name: str, *, show_deleted: bool = False, timeout: Timeout = DEFAULT) -> ObjectReader:
        """Open object ``name`` for reading: an :class:`ObjectReader` (a binary file; use it in a ``with``
        block). Links are followed; a link to a whole store cannot be read (ValueError).

        Blocks for the info lookup; each read then blocks for the next chunk (at most ``timeout``).
        Raises ``ObjectNotFoundError``, ``BucketNotFoundError``; the reader raises
        ``DigestMismatchError`` at the end when the bytes are not what was stored.
        """
        info = self.info(name, show_deleted=show_deleted, timeout=timeout)
        store: ObjectStore = self
        if info.link is not None:
            if not info.link.name:
                raise ValueError(f"object {name!r} of store {self.bucket!r} links to the whole store "
                                 f"{info.link.bucket!r}: open that with js.object_store({info.link.bucket!r})")
            store = self if info.link.bucket == self.bucket else self._js.object_store(info.link.bucket)
            info = store.info(info.link.name, timeout=timeout)
            if info.link is not None:
                raise ValueError(f"object {name!r} links to a link ({info.name!r}): links are followed once")
        return ObjectReader(self._js, store.stream_name, info, self._js._resolve_timeout(timeout),
                            lambda: store._info(info.name, timeout),
                            settle=REPLICA_SETTLE if store._replicated else 0.0)

    def get_bytes(self, name: str, *, timeout: Timeout = DEFAULT) -> bytes:
        """The whole object ``name`` as bytes (memory: the object's size). See :meth:`get`."""
        with self.get(name, timeout=timeout) as reader:
            return reader.readall()

    def get_file(self, name: str, path: str | os.PathLike, *, timeout: Timeout = DEFAULT,
                 progress: Callable[[int, int | None], Any] | None = None) -> ObjectInfo:
        """Write object ``name`` to the file ``path`` (memory bounded by the reader's buffer); return its
        info. A regular file is written beside ``path`` and renamed onto it once the digest checked out,
        so a read that fails leaves ``path`` as it was (a pipe or a device is written directly).
        ``progress(done, total)`` runs on the calling thread after each chunk. See :meth:`get`."""
        target = pathlib.Path(path)
        with self.get(name, timeout=timeout) as reader:
            special = target.exists() and not target.is_file()  # a pipe or a device: written as it is
            part = target if special else target.with_name(f".{target.name}.{new_nuid()[:8]}.part")
            try:
                with open(part, "wb") as out:
                    buf = bytearray(max(reader.info.chunk_size, DEFAULT_CHUNK_SIZE))
                    view = memoryview(buf)
                    done = 0
                    while True:
                        n = reader.readinto(view)
                        if not n:
                            break
                        out.write(view[:n])
                        done += n
                        if progress is not None:
                            progress(done, reader.info.size)
                if not special:
                    os.replace(part, target)
            except BaseException:
                if not special:
                    part.unlink(missing_ok=True)
                raise
            return reader.info

    def list(self, *, show_deleted: bool = False, timeout: Timeout = DEFAULT) -> Iterator[ObjectInfo]:
        """Every object of the store (deleted ones too with ``show_deleted``); an empty store yields
        nothing. A generator over a watcher started by the first ``next()`` and read to its caught-up
        point; its consumer ends with it."""
        if not isinstance(show_deleted, bool):
            raise TypeError(f"show_deleted must be a bool, got {show_deleted!r}")
        return _initial_of(lambda: self.watch(ignore_deletes=not show_deleted, timeout=timeout))

    def watch(self, *, include_history: bool = False, ignore_deletes: bool = False, updates_only: bool = False,
              timeout: Timeout = DEFAULT) -> ObjectWatcher:
        """Watch the store's objects: an :class:`ObjectWatcher` yielding the current infos first
        (``initial()``), then each put, meta update and delete as it is stored. Blocks until its consumer
        exists (at most ``timeout``). Raises ValueError for ``include_history`` with ``updates_only``."""
        cfg = watch_config([f"$O.{self.bucket}.M.>"], include_history=include_history, updates_only=updates_only)
        return ObjectWatcher(self._js, self.bucket, self.stream_name, f"$O.{self.bucket}.M.", cfg,
                             ignore_deletes=ignore_deletes, updates_only=updates_only,
                             timeout=self._js._resolve_timeout(timeout))

    # -- writing ---------------------------------------------------------------------------------

    def put(self, name: str, source: Any, *, description: str | None = None,
            headers: Mapping[str, Any] | None = None, metadata: Mapping[str, str] | None = None,
            chunk_size: int = DEFAULT_CHUNK_SIZE, progress: Callable[[int, int | None], Any] | None = None,
            timeout: Timeout = DEFAULT) -> ObjectInfo:
        """Store ``source`` as object ``name`` (replacing it); return the new :class:`ObjectInfo`.

        ``source``: bytes, str (UTF-8), a binary file, a ``pathlib.Path`` or an iterable of bytes. Chunks
        of ``chunk_size`` bytes go out through the async publish window, at most PUT_WINDOW_BYTES
        unacknowledged (memory is bounded by that, not by the object); the SHA-256 digest is computed on
        the way; then the meta is stored and the previous object's chunks purged.
        ``progress(done_bytes, total_or_None)`` runs on the calling thread after each chunk.

        Blocks until the meta is stored (each wait at most ``timeout``; for a chunk's PubAck a second more,
        so the error is the publish's own ``TimeoutError`` naming it). A put that fails (or is
        interrupted) purges the chunks it wrote and raises. Raises ValueError for a ``chunk_size``
        above the server's max payload, TypeError for a source of another type (nothing sent).
        """
        _check_name(name)
        max_payload = self._js.client.max_payload
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an int of bytes >= 1, got {chunk_size!r}")
        if chunk_size > max_payload:
            raise ValueError(f"chunk_size {chunk_size} is above the server's max payload {max_payload}: give at "
                             f"most {max_payload}")
        if headers is not None and not isinstance(headers, Mapping):
            raise TypeError(f"headers must be a mapping, got {type(headers).__name__}")
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable or None, got {progress!r}")
        pieces, total, close = _chunks(source, chunk_size)
        try:
            previous = self._info(name, timeout)
            nuid = new_nuid()
            subject = chunk_subject(self.bucket, nuid)
            in_flight: collections.deque = collections.deque()
            try:
                size, chunks, digest = self._send_chunks(subject, pieces, total, chunk_size, progress, timeout,
                                                         in_flight)
                info = ObjectInfo(name=name, bucket=self.bucket, description=description,
                                  headers=Headers(headers or {}), metadata=dict(metadata or {}), nuid=nuid, size=size,
                                  chunks=chunks, digest=digest, chunk_size=chunk_size)
                ack = self._store_meta(info, timeout)
            except BaseException:
                # Chunks still in flight would be stored after a purge sent now: let them land first.
                _settle(in_flight, self._js._resolve_timeout(timeout))
                self._purge_quietly(subject)
                raise
        finally:
            close()
        if previous is not None and not previous.deleted and previous.nuid and previous.nuid != nuid:
            self._purge(chunk_subject(self.bucket, previous.nuid), timeout)
        return attrs.evolve(info, mtime=ack)

    def _send_chunks(self, subject: str, pieces: Iterator[bytes], total: int | None, chunk_size: int,
                     progress: Callable[[int, int | None], Any] | None, timeout: Timeout,
                     in_flight: collections.deque) -> tuple[int, int, str]:
        js = self._js
        window = max(2, PUT_WINDOW_BYTES // chunk_size)
        # A full window waits for the acks that bring it down to this, PubAcks coming in order: one
        # wake of this thread per quarter window, not one per chunk.
        low_water = window - max(1, window // 4)
        wait = js._resolve_timeout(timeout)
        sha = hashlib.sha256()
        size = chunks = 0
        for piece in pieces:
            sha.update(piece)
            in_flight.append(js.publish_async(subject, piece, timeout=timeout))
            size += len(piece)
            chunks += 1
            if len(in_flight) > window:
                _answered(in_flight[-low_water - 1], wait, subject)
                while len(in_flight) > low_water:
                    _answered(in_flight[0], wait, subject)  # out only once answered: a failed put settles the rest
                    in_flight.popleft()
            if progress is not None:
                progress(size, total)
        if in_flight:
            _answered(in_flight[-1], wait, subject)
        while in_flight:
            _answered(in_flight[0], wait, subject)
            in_flight.popleft()
        return size, chunks, digest_of(sha)

    def _store_meta(self, info: ObjectInfo, timeout: Timeout) -> Timestamp:
        """Store ``info`` as its name's meta (a rollup: only the latest is kept); the time it was stored."""
        self._js.publish(meta_subject(self.bucket, info.name), info.to_json(), headers=_ROLLUP, timeout=timeout)
        return Timestamp.from_ns(time.time_ns())

    def _purge(self, subject: str, timeout: Timeout) -> None:
        self._jsapi.request(self._api.stream_purge(self.stream_name), {"filter": subject}, timeout, idempotent=True)

    def _purge_quietly(self, subject: str) -> None:
        try:
            self._purge(subject, DEFAULT)
        except errors.JetStreamError:
            pass  # the chunks stay until the store's limits remove them; nothing refers to them

    def delete(self, name: str, *, timeout: Timeout = DEFAULT) -> None:
        """Delete object ``name``: its meta says deleted (watchers see it), then its chunks are purged.
        Raises ``ObjectNotFoundError`` (also for one already deleted)."""
        info = self.info(name, timeout=timeout)
        self._store_meta(attrs.evolve(info, deleted=True, size=0, chunks=0, digest="", mtime=None), timeout)
        if info.nuid and info.link is None:
            self._purge(chunk_subject(self.bucket, info.nuid), timeout)

    def update_meta(self, current: str, /, *, name: str | None = None, description: str | None = None,
                    headers: Mapping[str, Any] | None = None, metadata: Mapping[str, str] | None = None,
                    timeout: Timeout = DEFAULT) -> ObjectInfo:
        """Change object ``current``'s name, description, headers or metadata (a keyword left None keeps
        its value); the bytes stay. Returns the new info. Renaming onto a live object raises
        ``ObjectAlreadyExistsError``; a missing or deleted ``current`` ``ObjectNotFoundError``."""
        info = self.info(current, timeout=timeout)
        new_name = current if name is None else _check_name(name)
        if new_name != current:
            there = self._info(new_name, timeout)
            if there is not None and not there.deleted:
                raise errors.ObjectAlreadyExistsError(self.bucket, new_name)
        changed = attrs.evolve(
            info, name=new_name, mtime=None,
            description=info.description if description is None else description,
            headers=info.headers if headers is None else Headers(headers),
            metadata=info.metadata if metadata is None else dict(metadata))
        when = self._store_meta(changed, timeout)
        if new_name != current:
            self._purge(meta_subject(self.bucket, current), timeout)
        return attrs.evolve(changed, mtime=when)

    def add_link(self, name: str, target: ObjectInfo, *, timeout: Timeout = DEFAULT) -> ObjectInfo:
        """Store a link ``name`` to the object ``target`` (an :class:`ObjectInfo`, of this store or
        another); reading ``name`` reads the target. A link cannot point to a link or a deleted object
        (ValueError), nor replace a live object (``ObjectAlreadyExistsError``)."""
        _check_name(name)
        if not isinstance(target, ObjectInfo):
            raise TypeError(f"target must be the ObjectInfo of the object to link to, got {type(target).__name__}")
        if target.link is not None:
            raise ValueError(f"{target.name!r} is itself a link: link to what it points to")
        if target.deleted:
            raise ValueError(f"{target.name!r} is deleted: a link to it could not be read")
        return self._link(name, ObjectLink(target.bucket, target.name), timeout)

    def add_bucket_link(self, name: str, store: "ObjectStore", *, timeout: Timeout = DEFAULT) -> ObjectInfo:
        """Store a link ``name`` to the whole object store ``store``. ``ObjectAlreadyExistsError`` when
        ``name`` is a live object."""
        _check_name(name)
        if not isinstance(store, ObjectStore):
            raise TypeError(f"store must be an ObjectStore, got {type(store).__name__}")
        return self._link(name, ObjectLink(store.bucket, None), timeout)

    def _link(self, name: str, link: ObjectLink, timeout: Timeout) -> ObjectInfo:
        there = self._info(name, timeout)
        if there is not None and not there.deleted and there.link is None:
            raise errors.ObjectAlreadyExistsError(self.bucket, name, f"object {name!r} of store {self.bucket!r} "
                                                  f"holds data: a link cannot replace it")
        info = ObjectInfo(name=name, bucket=self.bucket, nuid=new_nuid(), link=link)
        return attrs.evolve(info, mtime=self._store_meta(info, timeout))

    # -- the store ---------------------------------------------------------------------------------

    def seal(self, *, timeout: Timeout = DEFAULT) -> ObjectStoreStatus:
        """Seal the store: nothing can be put, changed or deleted any more (one info and one update)."""
        try:
            info = self._js.stream_info(self.stream_name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise self._missing(exc) from None
        assert info.config is not None
        stream = self._js.update_stream(attrs.evolve(info.config, sealed=True), timeout=timeout)
        return ObjectStoreStatus.from_stream_info(stream.cached_info)

    def status(self, *, timeout: Timeout = DEFAULT) -> ObjectStoreStatus:
        """The store's :class:`ObjectStoreStatus` (one stream info request, retried)."""
        try:
            info = self._js.stream_info(self.stream_name, timeout=timeout)
        except errors.StreamNotFoundError as exc:
            raise self._missing(exc) from None
        return ObjectStoreStatus.from_stream_info(info)

    def _repr_html_(self) -> str:
        """A notebook view: the store's status and up to 20 of its objects (reads the server)."""
        status = self.status()
        rows: list[tuple[str, Any]] = [("size", _html.size(status.size)), ("sealed", status.sealed)]
        for i, info in enumerate(self.list()):
            if i == 20:
                rows.append(("\u2026", "more objects"))
                break
            rows.append((info.name, _html.size(info.size) if info.link is None else f"link to {info.link.bucket}"))
        return _html.kv_table("Object store", self.bucket, rows)

    def __repr__(self) -> str:
        return f"<ObjectStore {self.bucket!r}>"


def _answered(fut: "concurrent.futures.Future", wait: float | None, subject: str) -> None:
    """Block until one chunk's publish is answered; raise its error. The publisher ends a publish left
    unanswered with a TimeoutError naming it at its first sweep after the deadline (``wait`` from when it
    was sent), so this waits a little longer than that: a bare wait running out first would raise
    ``concurrent.futures``' TimeoutError, which says nothing. Should even that pass, ours is raised. A
    chunk answered already costs a look at its state (no lock, no wait, the PubAck not parsed)."""
    if wait is not None and not fut.done():
        concurrent.futures.wait([fut], timeout=wait + _ANSWER_GRACE)
        if not fut.done():
            raise errors.TimeoutError.after(f"publish to {subject!r}", wait, "no PubAck from the server")
    exc = fut.exception()
    if exc is not None:
        raise exc


def _settle(in_flight: collections.deque, limit: float | None) -> None:
    """Wait (at most ``limit`` seconds in all, in wakeful slices) until every publish in flight has an
    answer, whatever it is: what a failed put purges must be all it wrote."""
    deadline = time.monotonic() + (limit if limit is not None else 30.0)
    for fut in in_flight:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        concurrent.futures.wait([fut], timeout=left)


def _initial_of(open_watcher: Callable[[], ObjectWatcher]) -> Iterator[ObjectInfo]:
    """The infos a watcher opened at the first ``next()`` reads to its caught-up point, the last per name."""
    with open_watcher() as watcher:
        seen: dict[str, ObjectInfo] = {}
        for info in watcher.initial():
            seen[info.name] = info
        yield from seen.values()
