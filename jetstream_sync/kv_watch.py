# The key-value watcher: an ordered push consumer on a bucket's stream (ordered_push.py: gaps,
# heartbeats and reconnects heal it) read as entries. "Caught up" is a state, never an item: the
# watcher is caught up when an entry arrives with nothing pending after it, or at once when its
# consumer was created with nothing to deliver (a ``Mark`` the engine's owner puts in the stream).
#
# Rule 1: the caught-up point is the server's: a delivery's pending count (the ack subject's last
#         number) or the consumer's ``num_pending`` when it was made, so an initial read stops
#         neither early (nothing stored before the call is missed) nor late.
# Rule 2: leaving a watcher never waits for unread entries: the engine stops, what is buffered is
#         dropped, and the server's consumer is deleted without waiting (its inactive threshold
#         is the backstop).
# Rule 3: handlers of ``consume()`` run on the watcher's own threads, never on the loop.
from __future__ import annotations

import enum
import logging
import queue
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import attrs

from . import errors
from ._engine import Mark, Target
from ._handle import target_of
from ._loop import WAKE_INTERVAL
from ._time import Timestamp
from .config import AckPolicy, ConsumerConfig, DeliverPolicy, StoredMsg
from .consume import MessageStream, _logging_configured, check_handlers
from .message import Msg
from .ordered_push import OrderedPush
from .push import push_options

__all__ = ["KV_OPERATION", "KeyValueEntry", "KeyValueOp", "KeyWatcher", "entry_from_stored", "operation_of",
           "watch_config"]

log = logging.getLogger(__name__)

#: The idle heartbeat of a watcher's consumer (as nats.go's ordered consumers).
WATCH_HEARTBEAT = 5.0
#: The server removes a watcher's consumer this long after its client went away without a word.
WATCH_INACTIVE = 300.0

#: The header that says what a KV message is (absent: a put).
KV_OPERATION = "KV-Operation"
#: The header of a message the server left when it removed a subject (ADR-48): MaxAge, Purge, Remove.
MARKER_REASON = "Nats-Marker-Reason"


class KeyValueOp(str, enum.Enum):
    """What a key-value entry is: a value, a delete marker or a purge marker (the wire's words)."""

    PUT = "PUT"
    DELETE = "DEL"
    PURGE = "PURGE"

    def __str__(self) -> str:
        return self.value


_MARKER_OPS = {"MaxAge": KeyValueOp.PURGE, "Purge": KeyValueOp.PURGE, "Remove": KeyValueOp.DELETE}


@attrs.frozen
class KeyValueEntry:
    """One stored revision of a key: a value, or a delete or purge marker (``operation``). Frozen."""

    bucket: str
    key: str
    #: The value (empty for a marker).
    value: bytes
    #: The stream sequence of this revision (what ``update(..., last=)`` takes).
    revision: int
    #: When the server stored it (aware UTC, nanoseconds kept: a ``Timestamp``).
    created: Timestamp
    #: The exact server time in integer nanoseconds since the epoch.
    created_ns: int
    #: Entries still to come after this one when a watcher read it (0 for a ``get``).
    delta: int = 0
    operation: KeyValueOp = KeyValueOp.PUT

    def __repr__(self) -> str:
        shown = self.value if len(self.value) <= 60 else self.value[:57] + b"..."
        return (f"KeyValueEntry(bucket={self.bucket!r}, key={self.key!r}, value={shown!r}, revision={self.revision}, "
                f"operation={self.operation.name})")


def operation_of(headers: Mapping[str, Any] | None) -> KeyValueOp:
    """What a KV message is by its headers: ``KV-Operation``, else a server marker's reason. Pure."""
    if not headers:
        return KeyValueOp.PUT
    op = headers.get(KV_OPERATION)
    if op == "DEL":
        return KeyValueOp.DELETE
    if op == "PURGE":
        return KeyValueOp.PURGE
    reason = headers.get(MARKER_REASON)
    if reason:
        return _MARKER_OPS.get(reason, KeyValueOp.PURGE)
    return KeyValueOp.PUT


def entry_from_stored(bucket: str, prefix: str, msg: StoredMsg) -> KeyValueEntry:
    """The entry of a message read back from the bucket's stream (``prefix``: ``$KV.<bucket>.``). Pure."""
    created = msg.time if isinstance(msg.time, Timestamp) else Timestamp.from_ns(0)
    return KeyValueEntry(bucket, msg.subject[len(prefix):], msg.data, msg.seq, created, created.timestamp_ns(), 0,
                         operation_of(msg.headers))




def watch_config(subjects: list[str], *, include_history: bool = False, updates_only: bool = False,
                 meta_only: bool = False, resume_from_revision: int | None = None) -> ConsumerConfig:
    """The ordered push consumer a watch of ``subjects`` creates (pure; raises before anything is sent)."""
    if include_history and updates_only:
        raise ValueError("include_history and updates_only contradict each other: history is what was stored "
                         "before, updates_only what comes after")
    for name, flag in (("include_history", include_history), ("updates_only", updates_only),
                       ("meta_only", meta_only)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {flag!r}")
    policy = DeliverPolicy.LAST_PER_SUBJECT
    start = None
    if include_history:
        policy = DeliverPolicy.ALL
    if updates_only:
        policy = DeliverPolicy.NEW
    if resume_from_revision is not None:
        if isinstance(resume_from_revision, bool) or not isinstance(resume_from_revision, int) \
                or resume_from_revision < 1:
            raise ValueError(f"resume_from_revision must be an int revision >= 1, got {resume_from_revision!r}")
        if updates_only:
            raise ValueError("resume_from_revision and updates_only contradict each other")
        policy, start = DeliverPolicy.BY_START_SEQUENCE, resume_from_revision
    one = len(subjects) == 1
    return ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=policy, opt_start_seq=start,
                          headers_only=meta_only or None, filter_subject=subjects[0] if one else None,
                          filter_subjects=None if one else subjects, flow_control=True,
                          idle_heartbeat=WATCH_HEARTBEAT, mem_storage=True, num_replicas=1, max_deliver=1,
                          inactive_threshold=WATCH_INACTIVE)


class _CaughtUp(Mark):
    """The watcher's consumer was created with nothing to deliver: caught up at once."""

    __slots__ = ()


class KeyWatcher:
    """Changes to a bucket's keys as :class:`~jetstream_sync.KeyValueEntry` items (``kv.watch()``).

    A blocking iterator and a context manager. It yields the values stored when it started first
    (:meth:`initial` stops there; :attr:`initial_done` says whether that point was reached), then
    every change as it is stored. Gaps, missed heartbeats and reconnects are healed (a new consumer
    starts after the last revision received). Use from one thread, or :meth:`consume` to have
    handlers run on worker threads. Leaving the ``with`` block (or :meth:`stop`) returns within a
    second whatever is unread, and the server's consumer is deleted.
    """

    #: How errors name what is watched, and what its ``consume()`` threads are named after.
    _kind = "bucket"
    _threads_named = "jetstream-sync-kv-watch"

    def __init__(self, js: Any, bucket: str, stream: str, prefix: str, config: ConsumerConfig, *,
                 ignore_deletes: bool = False, updates_only: bool = False, timeout: float | None = None) -> None:
        if not isinstance(ignore_deletes, bool):
            raise TypeError(f"ignore_deletes must be a bool, got {ignore_deletes!r}")
        self.bucket = bucket
        self._prefix = prefix
        self._cut = len(prefix)
        self._ignore_deletes = ignore_deletes
        self._timeout = timeout
        self._initial_done = updates_only
        self._stopped = False
        self._threads: list[threading.Thread] = []
        #: The first error a ``consume()`` handler raised without an ``error_handler``, or the one that
        #: ended the watch.
        self.error: BaseException | None = None
        #: How many times a ``consume()`` handler raised without an ``error_handler``.
        self.handler_errors = 0
        self._shown: set[tuple] = set()
        first = attrs.evolve(config, name="jss_watch", deliver_subject="_")
        opts = attrs.evolve(push_options(first), gap_check=False)  # the ordered core resets instead
        label = f"the watcher of {self._kind} {bucket!r}"
        target = target_of(js, stream, first.name, label, opts.deliver_subject)
        if timeout is not None:
            target = attrs.evolve(target, timeout=timeout)

        def engine(target: Target, opts: Any, sink: Callable[[Any], None]) -> OrderedPush:
            def created(resp: dict) -> None:  # loop thread: each new consumer's create answer
                if resp.get("num_pending") == 0:
                    sink(_CaughtUp())
            return OrderedPush(config, target, opts, sink, created=created)

        self._stream = MessageStream(target, opts, engine=engine)
        self._stream._what = f"next() on {label}"
        self._stream_name = stream
        if self._stream._engine.halted.is_set():  # refused at once (no such bucket): say so here
            try:
                self._stream.next(1.0)
            except errors.StreamNotFoundError as exc:
                raise self._gone(exc) from None

    def _gone(self, exc: errors.APIError) -> errors.BucketNotFoundError:
        return errors.BucketNotFoundError(exc.code, exc.err_code, exc.description, stream=self._stream_name,
                                          operation=exc.operation)

    # -- reading ---------------------------------------------------------------

    @property
    def initial_done(self) -> bool:
        """True once every value stored when the watcher started was yielded (at once on an empty
        bucket or with ``updates_only``). No I/O."""
        return self._initial_done

    def _read(self, timeout: float | None, initial: bool) -> KeyValueEntry | None:
        """The next entry (None: caught up while ``initial``). Raises TimeoutError, StopIteration."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if initial and self._initial_done:
                return None
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self._stream.next(left)
            except errors.StreamNotFoundError as exc:
                raise self._gone(exc) from None
            if type(item) is not Msg:  # the mark: caught up with nothing delivered
                self._initial_done = True
                continue
            entry = self._entry(item)
            if entry is None:
                continue
            return entry

    def _entry(self, msg: Msg) -> Any:
        """The item of a delivery (None: one left out); a delivery with nothing pending after it is the
        caught-up point."""
        seq, _, pending, ts = msg.metadata_numbers()
        if not pending:
            self._initial_done = True
        return self._convert(msg, seq, pending, ts)

    def _convert(self, msg: Msg, seq: int, pending: int, ts: int) -> KeyValueEntry | None:
        """A delivery as the entry it is (None: a marker left out by ``ignore_deletes``)."""
        op = operation_of(msg.headers) if msg._raw_headers else KeyValueOp.PUT
        if op is not KeyValueOp.PUT and self._ignore_deletes:
            return None
        return KeyValueEntry(self.bucket, msg.subject[self._cut:], msg.data, seq, Timestamp.from_ns(ts), ts, pending, op)

    def next(self, timeout: float | None = None) -> KeyValueEntry:
        """The next entry, blocking at most ``timeout`` seconds (None: until one comes).

        Raises ``TimeoutError`` when none comes in time, ``StopIteration`` once stopped, and the
        error that ended the watch (the bucket was deleted, the client closed). Ctrl-C stops it.
        """
        return self._read(timeout, False)  # type: ignore[return-value]

    def __iter__(self) -> Iterator[KeyValueEntry]:
        return self

    def __next__(self) -> KeyValueEntry:
        return self._read(None, False)  # type: ignore[return-value]

    def initial(self) -> Iterator[KeyValueEntry]:
        """The values stored when the watcher started (every revision with ``include_history``), then
        the iterator stops: the watcher is caught up. Nothing with ``updates_only``, nothing on an empty
        bucket. Each wait is at most the watch's ``timeout`` (``TimeoutError`` past it)."""
        while not self._initial_done:
            entry = self._read(self._timeout, True)
            if entry is None:
                return
            yield entry

    # -- handlers on threads -------------------------------------------------------

    def consume(self, handler: Callable[[KeyValueEntry], Any], *, workers: int = 1,
                error_handler: Callable[[BaseException], Any] | None = None) -> "KeyWatcher":
        """Run ``handler(entry)`` for every entry on ``workers`` threads of this watcher (in order with one
        worker), until :meth:`stop`. Returns at once. A handler's exception goes to ``error_handler``
        (on the same worker), else it is kept in :attr:`error` and shown once per error (an ERROR
        record with its traceback when the application configured logging, else on stderr as an
        uncaught thread exception is); the watch goes on. Raises TypeError/ValueError for bad arguments, RuntimeError when already consuming.
        """
        check_handlers(handler, error_handler, workers)
        if self._threads:
            raise RuntimeError("this watcher is already consuming")
        work: queue.Queue = queue.Queue(maxsize=2 * workers)
        name = f"{self._threads_named}-{self.bucket}"

        def run() -> None:
            while True:
                entry = work.get()
                if entry is None:
                    return
                try:
                    handler(entry)
                except Exception as exc:
                    if error_handler is not None:
                        try:
                            error_handler(exc)
                        except Exception:
                            log.exception("jetstream_sync: error_handler of %s raised", name)
                    else:
                        if self.error is None:
                            self.error = exc
                        self._show(exc, entry, name)

        def feed() -> None:
            try:
                while not self._stopped:
                    try:
                        entry = self._read(WAKE_INTERVAL, False)
                    except errors.TimeoutError:
                        continue
                    except StopIteration:
                        return
                    except errors.JetStreamError as exc:
                        if error_handler is not None:
                            error_handler(exc)
                        else:
                            self.error = exc
                            log.error("jetstream_sync: %s ended: %s", name, exc)
                        return
                    while not self._stopped:
                        try:
                            work.put(entry, timeout=WAKE_INTERVAL)
                            break
                        except queue.Full:
                            continue
            finally:
                for _ in range(workers):
                    while True:  # the end marker of each worker, even past a full queue
                        try:
                            work.put(None, timeout=WAKE_INTERVAL)
                            break
                        except queue.Full:
                            if self._stopped:
                                _empty(work)

        self._threads = [threading.Thread(target=feed, name=f"{name}-feed", daemon=True)]
        self._threads += [threading.Thread(target=run, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for t in self._threads:
            t.start()
        return self

    def _show(self, exc: BaseException, entry: Any, name: str) -> None:
        """No error_handler: a handler's exception is shown once per error type and text (later ones
        alike only counted): an ERROR record with its traceback when the application configured
        logging, else as an uncaught thread exception (``threading.excepthook``) on stderr."""
        key = (type(exc), str(exc))
        self.handler_errors += 1
        if key in self._shown:
            return
        if len(self._shown) < 100:
            self._shown.add(key)
        note = (f"jetstream_sync: raised by the handler of {name} on {entry!r}; the watch goes on. Shown once "
                f"per error; pass error_handler= to handle errors yourself.")
        if _logging_configured(log):
            log.error("%s", note, exc_info=exc)
            return
        exc.add_note(note)
        try:
            threading.excepthook(threading.ExceptHookArgs(  # type: ignore[call-arg]
                (type(exc), exc, exc.__traceback__, threading.current_thread())))
        except Exception:
            log.exception("jetstream_sync: threading.excepthook raised")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the watch ended (stopped, or ended by an error) and its threads are done, at most
        ``timeout`` seconds; True if it did. Without ``consume()`` this returns at once."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            while t.is_alive():
                left = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
                if left <= 0:
                    return False
                t.join(left)
        return True

    # -- the end -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop watching: what is unread is dropped, the server's consumer deleted without waiting.

        Returns within about a second whatever is buffered; joins ``consume()`` threads (each finishes
        the handler it runs; from a handler it returns at once). Idempotent.
        """
        self._stopped = True
        self._stream.stop()
        me = threading.current_thread()
        if me not in self._threads:
            self.wait()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called. No I/O."""
        return self._stopped

    def __enter__(self) -> "KeyWatcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("live" if self._initial_done else "reading initial values")
        return f"<{type(self).__name__} {self._kind}={self.bucket!r} {state}>"


def _empty(q: queue.Queue) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return
