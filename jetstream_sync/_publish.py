# The JetStream publish: the headers of one publish, and the window (one reply inbox, a token per
# message, counters). The same routing serves blocking requests whose reply is a message (the
# direct get): a router of their own per client, replies handed back uninterpreted.
#
# Rule 1: a publish costs the caller one dict slot, one light Future (a blocking
#         publish: its thread's reusable Waiter) and one Outbox append (the PUB
#         bytes are built on the calling thread); the loop thread only writes
#         batches and routes PubAcks. No task, no loop round trip and no asyncio
#         future per message; a PubAck is parsed only when someone asks for it.
# Rule 2: at most ``max_pending`` publishes are in flight (the dict of
#         pending tokens is the window); a caller blocks (in 0.25 s slices)
#         when it is full and is woken once a quarter of it is free.
# Rule 3: every future (and every blocked publish) ends: with a PubAck, an APIError,
#         NoRespondersError, TimeoutError (swept every 0.25 s) or ClientClosedError.
# Rule 4: what the server does with a publish beyond storing it (deduplication, the expected_*
#         checks, a TTL, membership of an atomic batch) is a header of that one publish, built by
#         ``publish_headers`` and nowhere else.
# Rule 5: a ``publish_async`` given a retry policy (one with a msg_id: the server drops a repeat) is
#         sent again, the same bytes under a new token, when an attempt ends with a retriable error;
#         it keeps its window slot through the backoff, and its future ends only with the last attempt.
#         Those written before the connection dropped are sent again as soon as it is back (their
#         PubAck may have died with the old connection or its node), and those overtaken by the
#         answer to a later publish to their subject (lost with a stream leader that died) at the
#         next sweep (within 0.25 s): neither waits out its timeout.
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import json
import logging
import threading
import time
import weakref
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import TYPE_CHECKING, Any, Mapping

from . import errors
from ._headers import Headers, decode_headers
from ._loop import BRIDGE_GRACE, Waiter
from ._protocol import SMALL_PAYLOAD, VALID_SUBJECTS, check_int, prepare_pub, pub_command_parts
from ._retry import RetryPolicy, log_retry, wait_before_retry
from ._time import seconds_to_nanos, to_seconds
from .config import PubAck, validate_stream_name

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["Publisher", "publish_headers", "publish_parts", "ttl_header"]

log = logging.getLogger(__name__)

#: The headers of the publish options: deduplication, and the checks the server makes before storing.
MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
#: The header of a per-message TTL (ADR-43; the stream needs ``allow_msg_ttl``).
TTL = "Nats-TTL"
#: The headers of a message of an atomic batch (ADR-50; the stream needs ``allow_atomic``): the batch's id,
#: the message's place in it (from 1), and on the last message the commit (``1``: store it and the rest).
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQ = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
#: The longest batch id the server takes.
MAX_BATCH_ID = 64

_SWEEP_INTERVAL = 0.25
#: Seconds by which a publish answered must have been sent after an unanswered one to the same subject
#: for that one to count as lost (answers to one stream come in order; a healthy reordering is far shorter).
_OVERTAKEN = 1.0
_LAZY = object()
#: The states a future never leaves.
_ENDED = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})
# Guards the lazy creation of a future's Condition against a result arriving
# at the same moment; held for a few bytecodes only.
_CONDITION_LOCK = threading.Lock()


def _check_str(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty str, got {value!r}")
    return value


def ttl_header(ttl: Any, name: str = "ttl") -> str:
    """``ttl`` (seconds, a timedelta, or "never") as the ``Nats-TTL`` header's value (pure).

    Whole seconds as an integer (``"2"``), fractional ones as a Go duration (``"1.5s"``: the server
    refuses ``"1.5"``). Raises ValueError naming ``name`` below 1 second, TypeError for another type.
    """
    if ttl == "never":
        return "never"
    if isinstance(ttl, str):
        raise ValueError(f"{name} must be seconds, a timedelta or 'never', got {ttl!r}")
    seconds = to_seconds(ttl, name)
    if seconds is None or not seconds >= 1 or seconds == float("inf"):
        raise ValueError(f"{name} must be at least 1 second (or 'never'), got {ttl!r}")
    ns = seconds_to_nanos(seconds)
    whole, frac = divmod(ns, 1_000_000_000)
    if not frac:
        return str(whole)
    return f"{whole}.{frac:09d}".rstrip("0") + "s"


def publish_headers(headers: Mapping[str, Any] | None, msg_id: str | None = None,
                    expected_stream: str | None = None, expected_last_seq: int | None = None,
                    expected_last_subject_seq: int | None = None,
                    expected_last_msg_id: str | None = None, ttl: Any = None, batch_id: str | None = None,
                    batch_seq: int | None = None, batch_commit: bool = False) -> Mapping[str, Any] | None:
    """The headers of one publish: ``headers`` plus one header per option given (pure, no I/O).

    ``headers`` comes back as it is when no option is given; otherwise a new :class:`Headers` in
    which an option's header replaces one of the same name in ``headers``. ``batch_id`` makes the
    publish message ``batch_seq`` of that atomic batch, its commit with ``batch_commit``. Raises
    TypeError/ValueError naming the argument (``headers`` not a mapping, an empty ``msg_id``, a bad
    stream name, a negative sequence).
    """
    if headers is not None and not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str (or list of str), got {type(headers).__name__}")
    extra: dict[str, str] = {}
    if msg_id is not None:
        extra[MSG_ID] = _check_str(msg_id, "msg_id")
    if expected_stream is not None:
        validate_stream_name(expected_stream, "expected_stream")
        extra[EXPECTED_STREAM] = expected_stream
    if expected_last_seq is not None:
        extra[EXPECTED_LAST_SEQ] = str(check_int(expected_last_seq, "expected_last_seq", 0))
    if expected_last_subject_seq is not None:
        extra[EXPECTED_LAST_SUBJ_SEQ] = str(check_int(expected_last_subject_seq, "expected_last_subject_seq", 0))
    if expected_last_msg_id is not None:
        extra[EXPECTED_LAST_MSG_ID] = _check_str(expected_last_msg_id, "expected_last_msg_id")
    if ttl is not None:
        extra[TTL] = ttl_header(ttl)
    if batch_id is not None:
        if len(_check_str(batch_id, "batch_id")) > MAX_BATCH_ID:
            raise ValueError(f"batch_id must be at most {MAX_BATCH_ID} characters, got {len(batch_id)}")
        extra[BATCH_ID] = batch_id
        extra[BATCH_SEQ] = str(check_int(batch_seq, "batch_seq", 1))
        if batch_commit:
            extra[BATCH_COMMIT] = "1"
    if not extra:
        return headers
    return Headers.from_multi({**(Headers(headers).multi() if headers else {}),
                               **{k: [v] for k, v in extra.items()}})


def publish_parts(subject: str, data: Any, max_payload: int, headers: Mapping[str, Any] | None = None,
                  msg_id: str | None = None, expected_stream: str | None = None,
                  expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
                  expected_last_msg_id: str | None = None, ttl: Any = None, batch_id: str | None = None,
                  batch_seq: int | None = None, batch_commit: bool = False) -> tuple[bytes, bytes]:
    """Check one publish; return the PUB command's bytes before and after the reply subject.

    Runs on the calling thread, no I/O. Raises TypeError/ValueError naming the argument (see
    :func:`publish_headers` and ``_protocol.prepare_pub``), nothing sent.
    """
    if headers is None and msg_id is None and expected_stream is None and expected_last_seq is None \
            and expected_last_subject_seq is None and expected_last_msg_id is None and ttl is None \
            and batch_id is None:
        if type(data) is bytes and type(subject) is str and subject in VALID_SUBJECTS \
                and len(data) <= SMALL_PAYLOAD <= max_payload:
            # The common publish, of a subject already checked: prepare_pub's result, built in place.
            return b"PUB " + subject.encode() + b" ", b" %d\r\n" % len(data) + data + b"\r\n"
        subject, payload, hdr = prepare_pub(subject, data, None, max_payload)
    else:
        subject, payload, hdr = prepare_pub(subject, data, publish_headers(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
            expected_last_msg_id, ttl, batch_id, batch_seq, batch_commit), max_payload)
    return pub_command_parts(subject, payload, hdr)


class PubAckFuture(concurrent.futures.Future):
    """A ``concurrent.futures.Future[PubAck]`` made for millions of publishes. Don't subclass.

    It behaves as any Future (``result``, ``exception``, ``add_done_callback``,
    ``concurrent.futures.wait``), but creates its lock only when someone
    waits on it or adds a callback, and parses the server's reply into a
    :class:`PubAck` only when ``result()`` is first called. ``done()``, and
    ``exception()`` or ``result()`` of a future already finished, take no lock.
    """

    #: A retried publish's (policy, PUB bytes before the reply subject, after it, the attempt under way,
    #: time.monotonic() of the first attempt).
    _retry: tuple[RetryPolicy, bytes, bytes, int, float] | None = None

    def __init__(self) -> None:  # no super().__init__(): the Condition is made on first use
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list = []
        self._done_callbacks: list = []
        self._raw = b""

    def __getattr__(self, name: str) -> Any:
        if name != "_condition":
            raise AttributeError(name)
        with _CONDITION_LOCK:
            cond = self.__dict__.get("_condition")
            if cond is None:
                cond = self.__dict__["_condition"] = threading.Condition()
            return cond

    def done(self) -> bool:
        return self._state in _ENDED  # a final state, read as it is: no Condition made for a look

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:  # final: no Condition made, no wait
            return self._exception
        return super().exception(timeout)

    def result(self, timeout: float | None = None) -> PubAck:
        res = super().result(timeout) if self._state != FINISHED or self._exception is not None else self._result
        if res is _LAZY:
            res = _parse_puback(self._raw)
            self._result = res
        return res

    def _finish_raw(self, raw: bytes) -> None:
        """Resolve with an unparsed PubAck (loop thread)."""
        self._raw = raw
        if self._retry is not None:
            self._retry = None  # the message's bytes: not kept for as long as the caller keeps the future
        if "_condition" not in self.__dict__:
            _CONDITION_LOCK.acquire()  # not a with-block: this runs once per publish
            try:
                if "_condition" not in self.__dict__:
                    # Nobody waits and no callback is registered: both would
                    # have created the Condition first.
                    if self._state == PENDING:
                        self._result = _LAZY
                        self._state = FINISHED
                    return
            finally:
                _CONDITION_LOCK.release()
        try:
            self.set_result(_LAZY)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled by the caller

    def _fail(self, exc: BaseException) -> None:
        self._retry = None
        try:
            self.set_exception(exc)
        except concurrent.futures.InvalidStateError:
            pass


class _BlockingPublish(Waiter):
    """What a blocking ``publish()`` waits on (one per thread, reused): a window entry the loop
    thread fires with the raw PubAck or the error, as it resolves a :class:`PubAckFuture`."""

    __slots__ = ()

    _finish_raw = Waiter.fire
    _fail = Waiter.fire


class _BlockingRequest(Waiter):
    """What a blocking :meth:`Publisher.request` waits on (one per thread, reused): fired with the
    reply's ``(payload, raw header block)`` as it came, or the error."""

    __slots__ = ()

    _fail = Waiter.fire


#: Each thread's idle ``_BlockingPublish`` (attribute ``waiter``) and ``_BlockingRequest`` (``request``).
_WAITERS = threading.local()


def _timed_out(fut: Any, subject: str, timeout: float) -> errors.TimeoutError:
    if type(fut) is _BlockingRequest:
        return errors.TimeoutError.after(f"request to {subject!r}", timeout, "no reply from the server")
    return errors.TimeoutError.after(f"publish to {subject!r}", timeout, "no PubAck from the server")


def _parse_puback(raw: bytes) -> PubAck:
    resp = json.loads(raw)
    if len(resp) == 2 and "stream" in resp and "seq" in resp:
        return PubAck(stream=resp["stream"], seq=resp["seq"])
    return PubAck.from_response(resp)


_SHARED: "weakref.WeakKeyDictionary[Connection, dict[Any, Publisher]]" = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()
#: The key of a client's request router in ``_SHARED`` (publishers are keyed by their window size), and
#: its window: only blocking calls use it, one request per thread at a time.
_REQUESTS = object()
_REQUEST_WINDOW = 1 << 16


class Publisher:
    """Routes PubAcks over one reply inbox. Thread-safe.

    One per (client, window size), shared by every JetStream context made with
    that window: a context is cheap to make, and must not cost a subscription.
    """

    @classmethod
    def shared(cls, client: "Connection", max_pending: int) -> "Publisher":
        with _SHARED_LOCK:
            per_client = _SHARED.setdefault(client, {})
            pub = per_client.get(max_pending)
            if pub is None:
                pub = per_client[max_pending] = cls(client, max_pending)
            return pub

    @classmethod
    def for_requests(cls, client: "Connection") -> "Publisher":
        """The client's router of blocking requests whose reply is a message (:meth:`request`), apart
        from its publishes, so a full publish window never holds a read up. No I/O until first used."""
        with _SHARED_LOCK:
            per_client = _SHARED.setdefault(client, {})
            pub = per_client.get(_REQUESTS)
            if pub is None:
                pub = per_client[_REQUESTS] = cls(client, _REQUEST_WINDOW)
            return pub

    def __init__(self, client: "Connection", max_pending: int) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be an int >= 1, got {max_pending!r}")
        self._client = client
        self.max_pending = max_pending
        # Waiters are woken once this many are pending or fewer (a quarter free).
        self._low_water = max_pending - max(1, max_pending // 4)
        self._lock = threading.Lock()       # callers only: check-and-insert into the window
        self._space = threading.Event()     # set by the loop when the window drains to low water
        self._blocked = 0                   # callers waiting for space (a hint for the loop)
        # token -> (future or blocked caller's waiter, deadline, subject: matched against permission
        # errors, timeout); inserted by callers, popped on the loop thread.
        self._pending: dict[bytes, tuple[PubAckFuture | _BlockingPublish | _BlockingRequest, float, str, float]] = {}
        self._tokens = itertools.count(1)
        self._prefix_b = b""
        self._start_lock = threading.Lock()
        self._sub: Any = None
        self._sweeper: asyncio.Task | None = None
        self._sweeper_asked = False
        self._closed = False
        #: (loop thread) Tokens of retried publishes written before the connection dropped.
        self._unsure: list[bytes] = []
        #: (loop thread) subject -> when the newest retried publish to it answered since the last sweep
        #: was sent: the sweep sends again those to it still waiting that were sent well before.
        self._answered_sent: dict[str, float] = {}

    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._sub is not None:
                return
            prefix = self._client.new_inbox() + "."

            async def start() -> Any:
                return await self._client.subscribe_raw(prefix + "*", self._on_reply)

            self._sub = self._client.call(start(), self._client.default_timeout)
            self._prefix_b = prefix.encode()
            # When nats-py gives up reconnecting, nothing will answer: fail the futures then.
            self._client.add_listener(self)

    def in_flight(self) -> int:
        """Publishes sent and not yet acknowledged. No I/O."""
        return len(self._pending)

    def submit(self, head: bytes, tail: bytes, timeout: float, wait_slot: float | None,
               subject: str = "", retry: RetryPolicy | None = None) -> PubAckFuture:
        """Take a window slot and queue ``head + reply + tail``; return its future.

        Blocks while the window is full, at most ``wait_slot`` seconds (None =
        no bound), waking every 0.25 s. With ``retry`` (only for a publish the
        server deduplicates) an attempt that ends with a retriable error is sent
        again per that policy, each attempt given ``timeout``; the future ends
        with the PubAck or the last attempt's error.

        Raises TimeoutError (the window stayed full), ClientClosedError,
        RuntimeError on the loop thread.
        """
        lt = self._client.loop_thread
        lt.check_usable()
        if self._closed:
            raise errors.ClientClosedError("the connection is closed")
        if self._sub is None:
            self._ensure_started()
        pending = self._pending
        fut = PubAckFuture()
        now = time.monotonic()
        if retry is not None and retry.attempts > 1:
            fut._retry = (retry, head, tail, 1, now)
        token = b"%d" % next(self._tokens)
        deadline = now + timeout
        lock = self._lock
        lock.acquire()  # not a with-block: this runs once per publish
        try:
            if len(pending) < self.max_pending:
                # Registered before the write is queued, so the reply cannot beat it.
                pending[token] = (fut, deadline, subject, timeout)
                token_in = True
            else:
                token_in = False
        finally:
            lock.release()
        if not token_in:
            self._wait_for_space(token, fut, timeout, wait_slot, subject)
        try:
            self._client.write(head + self._prefix_b + token + tail, self, token)
        except BaseException:
            if pending.pop(token, None) is not None:
                self._space.set()
            raise
        if not self._sweeper_asked:
            self._sweeper_asked = True
            lt.call_soon(self._start_sweeper)
        return fut

    def call(self, head: bytes, tail: bytes, timeout: float, wait_slot: float | None,
             subject: str = "", empty_ok: bool = False) -> PubAck | None:
        """Publish ``head + reply + tail`` and block until its PubAck; return it (the blocking publish).
        With ``empty_ok`` an empty reply (the server's ack of a message that begins an atomic batch)
        returns None; otherwise it is a JetStreamError, as any reply that is not a PubAck.

        Blocks while the window is full (at most ``wait_slot``, None = no bound), then on the
        PubAck: the sweeper ends the wait with TimeoutError after ``timeout``; with a bound, the
        caller gives up by itself ``BRIDGE_GRACE`` later (a stalled loop). Wakes every 0.25 s. The
        caller waits on its thread's ``_BlockingPublish``, which the loop thread fires directly
        (no Future, no Condition). A wait that ends early (interrupted, timed out) takes its
        token out of the window, so nothing is left waiting for it.

        Raises what the PubAck says (NoRespondersError, StreamWrong*Error, ...), TimeoutError,
        ClientClosedError, a permission error, RuntimeError on the loop thread.
        """
        # This thread's idle waiter, taken out while in use (a publish from a signal handler
        # during the wait makes its own).
        waiter = getattr(_WAITERS, "waiter", None)
        if waiter is None:
            waiter = _BlockingPublish()
        else:
            _WAITERS.waiter = None
        answer = self._blocking(head, tail, timeout, wait_slot, subject, waiter)
        _WAITERS.waiter = waiter
        if isinstance(answer, BaseException):
            raise answer
        if not answer:
            if empty_ok:
                return None
            raise errors.JetStreamError(f"unexpected reply to a publish to {subject!r} b'': not a PubAck")
        return _parse_puback(answer)

    def request(self, subject: str, body: bytes, timeout: float | None) -> tuple[bytes, bytes]:
        """Send a core request to ``subject`` and block until its reply; return the reply's payload and
        raw header block (b"" when none) as they came: a status (404, 503) is the caller's to read.

        As :meth:`call`: one write and one wake-up, no loop round trip. Blocks at most ``timeout``
        (None: no bound), waking every 0.25 s. Raises TimeoutError, ClientClosedError, a permission
        error naming ``subject``, RuntimeError on the loop thread.
        """
        head, tail = pub_command_parts(subject, body, b"")
        waiter = getattr(_WAITERS, "request", None)
        if waiter is None:
            waiter = _BlockingRequest()
        else:
            _WAITERS.request = None
        answer = self._blocking(head, tail, timeout if timeout is not None else 3600.0, timeout, subject, waiter)
        _WAITERS.request = waiter
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _blocking(self, head: bytes, tail: bytes, timeout: float, wait_slot: float | None, subject: str,
                  waiter: _BlockingPublish | _BlockingRequest) -> Any:
        """Write ``head + reply + tail`` and block on ``waiter`` until the loop thread fires it; return
        what it was fired with (the reply, or the error to raise)."""
        lt = self._client.loop_thread
        lt.check_usable()
        if self._closed:
            raise errors.ClientClosedError("the connection is closed")
        if self._sub is None:
            self._ensure_started()
        if not self._sweeper_asked:
            self._sweeper_asked = True
            lt.call_soon(self._start_sweeper)
        pending = self._pending
        token = b"%d" % next(self._tokens)
        now = time.monotonic()
        with self._lock:
            if len(pending) < self.max_pending:
                pending[token] = (waiter, now + timeout, subject, timeout)
                token_in = True
            else:
                token_in = False
        if not token_in:
            self._wait_for_space(token, waiter, timeout, wait_slot, subject)
            now = time.monotonic()
        deadline = None if wait_slot is None else now + timeout + BRIDGE_GRACE
        try:
            # Everything is ready before the write: after it this thread only blocks, leaving
            # the GIL to the loop thread it wakes.
            self._client.write(head + self._prefix_b + token + tail, self, token)
            return waiter.wait(deadline, lambda: _timed_out(waiter, subject, timeout), self._check_loop)
        except BaseException:
            # Interrupted, timed out, or never written: free the slot now. The waiter is dropped,
            # as the loop thread may still fire it.
            if pending.pop(token, None) is not None and self._blocked:
                self._space.set()
            raise

    def _check_loop(self) -> None:
        lt = self._client.loop_thread
        if lt.closed and not lt.thread.is_alive():  # nobody left to fire the waiter
            raise errors.ClientClosedError("the client was closed before the PubAck arrived")

    def _wait_for_space(self, token: bytes, fut: PubAckFuture | _BlockingPublish | _BlockingRequest,
                        timeout: float, wait_slot: float | None, subject: str) -> None:
        lt = self._client.loop_thread
        pending = self._pending
        give_up = None if wait_slot is None else time.monotonic() + wait_slot
        while True:
            with self._lock:
                if len(pending) < self.max_pending:
                    pending[token] = (fut, time.monotonic() + timeout, subject, timeout)
                    return
                self._blocked += 1
            try:
                self._space.clear()
                if len(pending) >= self.max_pending:  # re-check after clear: no lost wake-up
                    self._space.wait(0.25)
            finally:
                with self._lock:
                    self._blocked -= 1
            lt.check_usable()
            if self._closed:
                raise errors.ClientClosedError("the connection closed while waiting for a publish slot")
            if give_up is not None and time.monotonic() >= give_up:
                raise errors.TimeoutError.after(
                    f"publish to {subject!r}", wait_slot,
                    f"the publish window stayed full ({self.max_pending} publishes unacknowledged)")

    # -- loop thread ------------------------------------------------------

    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        pending = self._pending
        entry = pending.pop(subject[len(self._prefix_b):], None)
        if entry is None:
            return  # timed out already, or a duplicate
        if self._blocked and len(pending) <= self._low_water and not self._space.is_set():
            self._space.set()  # once: a waiter clears it and looks at the window again before it waits
        fut, subject = entry[0], entry[2]
        if type(fut) is _BlockingRequest:
            fut.fire((data, raw_headers or b""))
            return
        if not data and not raw_headers and type(fut) is _BlockingPublish:
            fut._finish_raw(data)  # an empty ack (an atomic batch begun): the caller says what it means
            return
        if raw_headers:
            hdrs = decode_headers(raw_headers)
            status = hdrs.get("Status") if hdrs else None
            if status == "503":
                self._end(entry, errors.NoRespondersError(
                    f"no stream captures subject {subject!r}; create a stream with that subject or check the "
                    f"name (no responders; or JetStream is not enabled)", subject))
                return
            if status and not data:
                self._end(entry, errors.JetStreamError(f"publish to {subject!r} failed with status {status} "
                                                       f"{hdrs.get('Description', '')}".strip()))
                return
        if b'"error"' in data or not data.startswith(b"{"):
            try:
                err = json.loads(data).get("error")
            except Exception as exc:  # a malformed reply must still end the future
                self._end(entry, errors.JetStreamError(
                    f"unexpected reply to a publish to {subject!r} {data[:200]!r}: {exc}"))
                return
            if err:
                self._end(entry, errors.api_error_from(err, subject=subject))
                return
        if type(fut) is PubAckFuture and fut._retry is not None:
            sent = entry[1] - entry[3]  # deadline - timeout
            answered = self._answered_sent
            if sent > answered.get(subject, 0.0):
                answered[subject] = sent
        fut._finish_raw(data)

    def fail(self, token: bytes, exc: BaseException) -> None:
        """End one publish with ``exc`` (its write failed, or it timed out)."""
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        if self._blocked:
            self._space.set()
        self._end(entry, exc)

    def _end(self, entry: tuple, exc: BaseException) -> None:
        """(loop thread) Fail the publish of the window entry ``entry`` (already out of the window) with
        ``exc``; but a ``publish_async`` whose retry policy allows another try on ``exc`` takes a new
        token and slot now and is sent again after the policy's backoff (:meth:`_resend`)."""
        fut = entry[0]
        retry = fut._retry if type(fut) is PubAckFuture else None
        if retry is not None and not self._closed and fut._state == PENDING:
            policy, head, tail, attempt, started = retry
            wait = wait_before_retry(policy, exc, attempt, elapsed=time.monotonic() - started)
            if wait is not None:
                fut._retry = (policy, head, tail, attempt + 1, started)
                token = b"%d" % next(self._tokens)
                timeout = entry[3]
                # Not checked against max_pending (the loop never waits): a caller may have taken the
                # slot just freed, and the window holds one more until something resolves.
                self._pending[token] = (fut, time.monotonic() + wait + timeout, entry[2], timeout)
                log_retry(exc, attempt)
                self._client.loop_thread.loop.call_later(wait, self._resend, token, head, tail)
                return
        fut._fail(exc)

    def _resend(self, token: bytes, head: bytes, tail: bytes) -> None:
        """(loop thread) Send a retried publish again under ``token``, unless it ended during the backoff
        (the client closed) or its caller cancelled the future."""
        entry = self._pending.get(token)
        if entry is None:
            return
        if entry[0]._state != PENDING:  # cancelled: nobody waits for this PubAck
            entry[0]._retry = None
            if self._pending.pop(token, None) is not None and self._blocked:
                self._space.set()
            return
        try:
            self._client.write(head + self._prefix_b + token + tail, self, token)
        except Exception as exc:  # the loop is closing: nothing will write it
            self.fail(token, exc)

    def _start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = self._client.loop_thread.spawn(self._sweep(), name="jetstream-sync-puback-sweeper")

    async def _sweep(self) -> None:
        try:
            while True:
                await asyncio.sleep(_SWEEP_INTERVAL)
                answered, self._answered_sent = self._answered_sent, {}
                if not self._pending:
                    continue
                now = time.monotonic()
                resent: collections.Counter = collections.Counter()
                for token, entry in list(self._pending.items()):
                    fut, deadline, subject, timeout = entry
                    if deadline <= now:
                        self.fail(token, _timed_out(fut, subject, timeout))
                    elif answered and subject in answered and self._resend_if_overtaken(
                            token, entry, answered[subject], now):
                        resent[subject] += 1
                for subject, n in resent.items():
                    log.info("jetstream_sync: %d publishes to %r were overtaken by a later one's PubAck: sent "
                             "again", n, subject)
        finally:
            self.close()

    def _resend_if_overtaken(self, token: bytes, entry: tuple, answered_sent: float, now: float) -> bool:
        """(loop thread) A stream answers the publishes to a subject in the order they were sent: when a
        publish to the same subject sent more than ``_OVERTAKEN`` s after this window entry's was answered
        (``answered_sent``: when it was sent), this one was lost on the way (a stream leader that died with
        it while this connection lived). If the server deduplicates it (a retry policy) and it still
        waits, it is sent again now, under its token, with a fresh timeout (True)."""
        fut, deadline, _, timeout = entry
        if (deadline - timeout < answered_sent - _OVERTAKEN and type(fut) is PubAckFuture
                and fut._retry is not None and fut._state == PENDING):
            self._send_again(token, entry, now)
            return True
        return False

    # connection events (loop thread)
    def on_disconnected(self) -> None:
        # A publish written before the connection dropped may have died with it (or with the node
        # behind it): its PubAck may never come. Those the server deduplicates are sent again as soon
        # as the connection is back, instead of after their timeout. Writes made while disconnected
        # wait in the outbound buffer and go out on reconnect by themselves.
        now = time.monotonic()  # one in a retry backoff is written when the backoff ends, not before
        self._unsure = [token for token, entry in list(self._pending.items())  # callers add entries meanwhile
                        if type(entry[0]) is PubAckFuture and entry[0]._retry is not None
                        and entry[1] - entry[3] <= now]

    def on_reconnected(self) -> None:
        tokens, self._unsure = self._unsure, []
        pending = self._pending
        for token in tokens:
            entry = pending.get(token)
            if entry is None:
                continue  # answered, failed or retried under a new token meanwhile
            fut = entry[0]
            if fut._retry is None or fut._state != PENDING:
                continue
            log.debug("jetstream_sync: publish to %r sent again after a reconnect", entry[2])
            self._send_again(token, entry, time.monotonic())

    def _send_again(self, token: bytes, entry: tuple, now: float) -> None:
        """(loop thread) Write the retried publish of window entry ``entry`` again under ``token`` now,
        the same attempt with a fresh timeout (its first write was lost)."""
        fut, _, subject, timeout = entry
        self._pending[token] = (fut, now + timeout, subject, timeout)
        self._resend(token, fut._retry[1], fut._retry[2])

    def on_closed(self) -> None:
        self.close()

    def on_permission_denied(self, subject: str, error: BaseException) -> None:
        if subject.startswith(self._prefix_b.decode().lower()):
            for token in list(self._pending):  # our PubAck inbox is refused: nothing can be acknowledged
                self.fail(token, error)
            return
        for token, entry in list(self._pending.items()):
            if entry[2].lower() == subject:
                spelled = getattr(error, "spelled", None)
                self.fail(token, spelled(entry[2]) if spelled is not None else error)

    def close(self) -> None:
        """Fail every outstanding future with ClientClosedError, and every later submit (any thread)."""
        self._closed = True
        for token in list(self._pending):
            self.fail(token, errors.ClientClosedError("the client closed before the PubAck arrived"))
        self._space.set()

    def outstanding(self) -> list[concurrent.futures.Future]:
        """The futures of the ``publish_async`` calls not yet resolved (blocking publishes are their callers')."""
        return [entry[0] for entry in list(self._pending.values()) if type(entry[0]) is PubAckFuture]
