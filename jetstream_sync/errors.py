# The one exception tree of jetstream_sync.
#
# Rule 1: every error the package raises on purpose is defined here, except
#         ValueError/TypeError for bad arguments (raised before anything is sent)
#         and RuntimeError for a call made where or when it cannot run (on the
#         loop thread, outside a Spark task, on a reader already in use). The
#         Spark module adds JetStreamError subclasses of its own; the embedded
#         server (server.py) stands apart, with NatsServerNotFoundError.
# Rule 2: this module knows nothing of nats-py or asyncio; nats-py exceptions
#         become these classes in one function, ``_nats.translate``, and
#         a blocking call raises the translated error ``from`` the original.
"""Exceptions raised by jetstream_sync.

The tree::

    JetStreamError                      base of everything below
    ├── APIError(code, err_code, description)   the server said no (.stream, .consumer name what)
    │   ├── StreamNotFoundError             10059
    │   │   └── BucketNotFoundError         ... and the stream was a key-value bucket's (.bucket)
    │   ├── StreamNameInUseError            10058
    │   │   └── BucketExistsError           ... a bucket of that name exists with another config
    │   ├── ConsumerNotFoundError           10014, 10149
    │   ├── ConsumerExistsError             10148, 10105
    │   ├── MessageNotFoundError            10037, 10043
    │   ├── JetStreamNotEnabledForAccountError  10039
    │   ├── StreamWrongStreamError          10060  (publish expected_stream failed)
    │   ├── StreamWrongLastSequenceError    10071, 10164  (expected_last_seq / _subject_seq failed)
    │   │   ├── KeyExistsError              kv.create(): the key has a value
    │   │   └── KeyRevisionMismatchError    kv.update(): the key's revision is another
    │   ├── StreamWrongLastMsgIdError       10070  (expected_last_msg_id failed)
    │   ├── MessageTTLInvalidError          10165  (a publish's ttl the server refuses)
    │   ├── MessageTTLDisabledError         10166  (a ttl on a stream without allow_msg_ttl)
    │   ├── CounterDisabledError            10168  (an increment to a stream without allow_msg_counter)
    │   ├── MsgIdInProcessError             10158  (the msg_id's earlier publish is still being stored; retried)
    │   ├── BatchPublishError               10175, 10179, 10200  (an atomic batch refused: none of it stored)
    │   │   ├── BatchPublishNotEnabledError     10174  (a stream without allow_atomic)
    │   │   ├── BatchPublishIncompleteError     10176  (a message lost on the way, or 10 s idle)
    │   │   ├── BatchPublishUnsupportedHeaderError  10177  (expected_last_msg_id in a batch)
    │   │   ├── BatchPublishTooLargeError       10199  (more messages than the server's limit)
    │   │   ├── BatchPublishDuplicateMsgIdError 10201  (a msg_id the stream already has)
    │   │   └── BatchPublishTooManyInflightError  10210  (too many batches open on the stream)
    │   └── PinIdMismatchError              423: a pinned priority group moved its pin (a warning)
    ├── ConsumerDeletedError            the consumer (or its stream) is gone while pulling (terminal)
    ├── ConsumerTypeError               a pull call on a push consumer, or the reverse
    ├── SubscriptionConfigError         subscribe() options contradict each other or the consumer
    ├── DuplicateSubscriptionError      the push consumer already has a subscriber and no deliver group
    ├── NoStreamForSubjectError         no stream (or more than one) captures the subject
    ├── SlowConsumerError               a push buffer was full: messages dropped (a warning)
    ├── MessageGapError                 the consumer sequence jumped (a warning)
    ├── NoHeartbeatError                2 x idle_heartbeat without a word (a warning)
    ├── TimeoutError                    also a builtins.TimeoutError
    ├── NoRespondersError               nobody listens on the subject (.subject names it)
    │   └── JetStreamNotEnabledError    ... and the subject was a JetStream API call
    ├── NotConnectedError               disconnected and the outbound buffer is full
    ├── FeatureNotSupportedError        the server is too old for the call (names the version it needs)
    ├── NoServersError                  connect() reached no server (also a builtins.ConnectionError)
    │   └── AuthorizationError          ... because the server refused the credentials
    ├── PermissionViolationError        the server refused a publish/subscribe (also a builtins.PermissionError)
    ├── ClientClosedError               the client was closed, or used after fork()
    ├── MessageAlreadyAckedError        a second ack/nak/term on one message
    ├── KeyNotFoundError                no value for the key (also a builtins.KeyError)
    ├── InvalidKeyError                 a key-value key the bucket cannot hold (also a ValueError)
    ├── ObjectNotFoundError             no such object in the store (or it was deleted)
    ├── ObjectAlreadyExistsError        renaming or linking onto a live object
    ├── DigestMismatchError             an object read back is not what was stored
    └── CounterNotFoundError            no counter on the subject (.stream, .subject)

``APIError`` subclasses are chosen by the server's ``err_code``; an unknown
code still becomes a plain ``APIError`` carrying the code. Errors about a
stream, consumer, subject or server name it, in the message and as an
attribute (``stream``, ``consumer``, ``subject``). Each class has a
``retriable`` flag: the retry policy (``_retry``) retries only idempotent
requests, and only on errors whose ``retriable`` is true.
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Mapping

__all__ = [
    "APIError",
    "AuthorizationError",
    "BatchPublishDuplicateMsgIdError",
    "BatchPublishError",
    "BatchPublishIncompleteError",
    "BatchPublishNotEnabledError",
    "BatchPublishTooLargeError",
    "BatchPublishTooManyInflightError",
    "BatchPublishUnsupportedHeaderError",
    "BucketExistsError",
    "BucketNotFoundError",
    "ClientClosedError",
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerNotFoundError",
    "ConsumerTypeError",
    "CounterDisabledError",
    "CounterNotFoundError",
    "DigestMismatchError",
    "DuplicateSubscriptionError",
    "FeatureNotSupportedError",
    "InvalidKeyError",
    "JetStreamError",
    "JetStreamNotEnabledError",
    "JetStreamNotEnabledForAccountError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyRevisionMismatchError",
    "MessageAlreadyAckedError",
    "MessageGapError",
    "MessageNotFoundError",
    "MessageTTLDisabledError",
    "MessageTTLInvalidError",
    "MsgIdInProcessError",
    "NoHeartbeatError",
    "NoRespondersError",
    "NoServersError",
    "NoStreamForSubjectError",
    "NotConnectedError",
    "ObjectAlreadyExistsError",
    "ObjectNotFoundError",
    "PermissionViolationError",
    "PinIdMismatchError",
    "SlowConsumerError",
    "StreamNameInUseError",
    "StreamNotFoundError",
    "StreamWrongLastMsgIdError",
    "StreamWrongLastSequenceError",
    "StreamWrongStreamError",
    "SubscriptionConfigError",
    "TimeoutError",
    "api_error_from",
]


class JetStreamError(Exception):
    """Base class of every error jetstream_sync raises on purpose."""

    #: True when trying the same idempotent request again may succeed.
    retriable: ClassVar[bool] = False


class APIError(JetStreamError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status (400, 404, 503...), ``err_code`` the
    server's stable JetStream error number (10059 for "stream not found"),
    ``description`` its text. Match on the subclass or on ``err_code``, never
    on the description.

    What the request was about, where known: ``stream`` and ``consumer`` (the
    names in the request), ``subject`` (a publish's subject) and ``operation``
    (the request in words, ``create consumer 'C' on stream 'ORDERS'``); None
    where unknown. The message names them: ``stream 'ORDERS' not found``,
    ``wrong last sequence: 2 (subject 'ORDERS.new', code=400, err_code=10071)``.
    """

    #: err_codes that select this class (filled for subclasses).
    err_codes: ClassVar[tuple[int, ...]] = ()

    def __init__(self, code: int | None = None, err_code: int | None = None, description: str = "", *,
                 stream: str | None = None, consumer: str | None = None, subject: str | None = None,
                 operation: str | None = None) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        self.stream = stream
        self.consumer = consumer
        self.subject = subject
        self.operation = operation
        what = self._what()
        if what is None:
            what = description or "JetStream API error"
            if operation:
                what = f"{operation}: {what}"
        about = f"subject {subject!r}, " if subject else ""
        super().__init__(f"{what} ({about}code={code}, err_code={err_code})")

    def _what(self) -> str | None:
        """The message of a subclass that says it better than the description (None: the description)."""
        return None

    #: 503 answers that are not temporary: 10077 "stream store failed" is what a
    #: full stream with ``discard="new"`` (max msgs/bytes/msgs per subject) says.
    permanent_503: ClassVar[frozenset[int]] = frozenset({10077})

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        # 503 means "JetStream temporarily unavailable" (leader election, catch-up).
        return self.code == 503 and self.err_code not in self.permanent_503

    def __reduce__(self):
        return (_restore_api_error, (type(self), self.code, self.err_code, self.description, self.stream,
                                     self.consumer, self.subject, self.operation))


def _restore_api_error(cls: type, code: int | None, err_code: int | None, description: str, stream: str | None,
                       consumer: str | None, subject: str | None, operation: str | None) -> APIError:
    return cls(code, err_code, description, stream=stream, consumer=consumer, subject=subject, operation=operation)


class StreamNotFoundError(APIError):
    """The stream does not exist: ``stream 'ORDERS' not found``; ``stream`` names it."""

    err_codes = (10059,)

    def _what(self) -> str | None:
        return f"stream {self.stream!r} not found" if self.stream else None


class StreamNameInUseError(APIError):
    """A stream with this name exists with a different configuration."""

    err_codes = (10058,)


class ConsumerNotFoundError(APIError):
    """The consumer does not exist (10014; 10149 when an update found none): ``consumer 'billing' of
    stream 'ORDERS' not found``; ``consumer`` and ``stream`` name it."""

    err_codes = (10014, 10149)

    def _what(self) -> str | None:
        if not self.consumer:
            return None
        return f"consumer {self.consumer!r} of stream {self.stream!r} not found" if self.stream else \
            f"consumer {self.consumer!r} not found"


class ConsumerExistsError(APIError):
    """A consumer with this name exists with a different configuration."""

    err_codes = (10148, 10105)


class MessageNotFoundError(APIError):
    """No message at that sequence, or none on that subject (10043: sequence not found on delete)."""

    err_codes = (10037, 10043)


class JetStreamNotEnabledForAccountError(APIError):
    """JetStream is enabled on the server but not for this account."""

    err_codes = (10039,)


class StreamWrongStreamError(APIError):
    """A publish with ``expected_stream`` landed on another stream."""

    err_codes = (10060,)


class StreamWrongLastSequenceError(APIError):
    """A publish with ``expected_last_seq``/``expected_last_subject_seq`` found another sequence
    (10071; 10164 on a replicated stream, whose answer names no sequence)."""

    err_codes = (10071, 10164)


def _bucket_of(stream: str | None) -> tuple[str, str | None]:
    """(what it is, its name) of a bucket's stream: ``KV_<bucket>`` or ``OBJ_<store>``."""
    if stream and stream.startswith("KV_"):
        return "key-value bucket", stream[3:]
    if stream and stream.startswith("OBJ_"):
        return "object store", stream[4:]
    return "bucket", stream


def _kv_key(subject: str | None) -> tuple[str | None, str | None]:
    """(bucket, key) of a key-value subject ``$KV.<bucket>.<key>``."""
    if subject and subject.startswith("$KV."):
        parts = subject.split(".", 2)
        if len(parts) == 3:
            return parts[1], parts[2]
    return None, subject


class BucketNotFoundError(StreamNotFoundError):
    """The key-value bucket or object store does not exist (its stream ``KV_<bucket>`` or ``OBJ_<store>``
    was not found); ``bucket`` names it."""

    @property
    def bucket(self) -> str | None:
        return _bucket_of(self.stream)[1]

    def _what(self) -> str:
        kind, name = _bucket_of(self.stream)
        return f"{kind} {name!r} not found"


class BucketExistsError(StreamNameInUseError):
    """A key-value bucket or object store of that name exists with another configuration; ``bucket``
    names it."""

    @property
    def bucket(self) -> str | None:
        return _bucket_of(self.stream)[1]

    def _what(self) -> str:
        kind, name = _bucket_of(self.stream)
        return f"{kind} {name!r} exists with another configuration"


class _OnAKey:
    """``bucket`` and ``key`` of an error about a write to a key-value subject (``$KV.<bucket>.<key>``)."""

    subject: str | None

    @property
    def bucket(self) -> str | None:
        return _kv_key(self.subject)[0]

    @property
    def key(self) -> str | None:
        return _kv_key(self.subject)[1]


class KeyExistsError(_OnAKey, StreamWrongLastSequenceError):
    """``kv.create()`` found a value for the key (not a delete or purge marker). ``bucket`` and ``key``
    name it; ``code`` and ``err_code`` are the server's (10071, or 10164 on a replicated bucket)."""

    def _what(self) -> str:
        return f"key {self.key!r} already exists in bucket {self.bucket!r}"


class KeyRevisionMismatchError(_OnAKey, StreamWrongLastSequenceError):
    """``kv.update()`` (or a ``delete``/``purge`` with ``last=``) found another last revision of the key.
    ``bucket`` and ``key`` name it; ``code`` and ``err_code`` are the server's."""

    def _what(self) -> str:
        return f"key {self.key!r} of bucket {self.bucket!r} is not at the revision given: {self.description}"


class StreamWrongLastMsgIdError(APIError):
    """A publish with ``expected_last_msg_id`` found another last message id."""

    err_codes = (10070,)


class MessageTTLInvalidError(APIError):
    """The server refused a publish's ``ttl`` (``Nats-TTL``)."""

    err_codes = (10165,)


class MessageTTLDisabledError(APIError):
    """A publish with ``ttl`` to a stream that does not allow per-message TTLs: create or update the
    stream with ``allow_msg_ttl=True``."""

    err_codes = (10166,)

    def _what(self) -> str:
        if self.subject and self.subject.startswith("$KV."):
            return (f"key-value bucket {_kv_key(self.subject)[0]!r} does not allow per-key TTLs: create it with "
                    f"limit_marker_ttl")
        where = f"stream {self.stream!r}" if self.stream else "the stream"
        return f"{where} does not allow per-message TTLs: set allow_msg_ttl=True on it"


def _stream_of(exc: APIError) -> str:
    """The stream an error of a publish is about, in words."""
    if exc.stream:
        return f"stream {exc.stream!r}"
    return f"the stream capturing subject {exc.subject!r}" if exc.subject else "the stream"


class CounterDisabledError(APIError):
    """An increment (``counter.add``, a ``Nats-Incr`` header) to a stream whose subjects are not counters, or
    ``js.counter()`` of one: the stream needs ``allow_msg_counter=True``, which only a new stream can have."""

    err_codes = (10168,)

    def _what(self) -> str:
        return f"{_stream_of(self)} does not allow counters: create it with allow_msg_counter=True"


class MsgIdInProcessError(APIError):
    """A publish with a ``msg_id`` reached the stream while an earlier publish with the same id was still
    being stored (proposed to the replicas, not yet committed): the server cannot tell yet whether this one
    is a duplicate. Typically a retry right after a timeout, a leader election or a frozen leader.
    Retriable: the same publish again gets the earlier one's PubAck (``duplicate=True``), or is stored if
    the earlier one was dropped; either way the message is stored once. ``publish`` and ``publish_async``
    with a ``msg_id`` retry it per the context's retry policy. ``code`` is 409."""

    err_codes = (10158,)

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return True


class BatchPublishError(APIError):
    """The server refused an atomic batch (``js.batch()``, ``publish_batch``): none of its messages was
    stored. The subclasses say why; this class itself is a batch the server found malformed (10175 a
    message without ``Nats-Batch-Sequence``, 10179 an id longer than 64 characters, 10200 a commit header
    other than ``1``), which this client does not send."""

    err_codes = (10175, 10179, 10200)


class BatchPublishNotEnabledError(BatchPublishError):
    """An atomic batch to a stream that does not take them: set ``allow_atomic=True`` on it."""

    err_codes = (10174,)

    def _what(self) -> str:
        return f"{_stream_of(self)} does not allow atomic batches: set allow_atomic=True on it"


class BatchPublishIncompleteError(BatchPublishError):
    """The server abandoned the batch before its commit: a message of it was lost on the way (the
    connection dropped, the server's inbound queue was full), the batch had no message for 10 s, or its
    stream's leader changed. Nothing of it was stored; publish it again as a new batch."""

    err_codes = (10176,)


class BatchPublishUnsupportedHeaderError(BatchPublishError):
    """A message of the batch carries a header batches cannot have (``Nats-Expected-Last-Msg-Id``)."""

    err_codes = (10177,)


class BatchPublishTooLargeError(BatchPublishError):
    """The batch has more messages than the server takes in one batch (1000 unless its
    ``max_batch_size`` limit says otherwise)."""

    err_codes = (10199,)


class BatchPublishDuplicateMsgIdError(BatchPublishError):
    """A message of the batch has a ``msg_id`` the stream already stored within its duplicate window."""

    err_codes = (10201,)


class BatchPublishTooManyInflightError(BatchPublishError):
    """Too many batches are open: the stream (50) or the server (1000) has that many begun and neither
    committed nor abandoned yet (a discarded batch stays open on the server until 10 s without traffic)."""

    err_codes = (10210,)
class PinIdMismatchError(APIError):
    """A pull of a ``pinned_client`` priority group sent a pin id the server no longer holds (status 423): the
    group was unpinned, or pinned to another client. The client forgets its pin id and pulls on as a standby;
    ``messages()``/``consume()`` report it as a warning. ``code`` is 423, ``err_code`` None."""

    def _what(self) -> str:
        who = f"consumer {self.consumer!r} of stream {self.stream!r}" if self.consumer else "the consumer"
        return f"{who} no longer has this client pinned: {self.description or 'pin id mismatch'}"


_REGISTRY: dict[int, type[APIError]] = {
    code: cls
    for cls in (
        StreamNotFoundError,
        StreamNameInUseError,
        ConsumerNotFoundError,
        ConsumerExistsError,
        MessageNotFoundError,
        JetStreamNotEnabledForAccountError,
        StreamWrongStreamError,
        StreamWrongLastSequenceError,
        StreamWrongLastMsgIdError,
        MessageTTLInvalidError,
        MessageTTLDisabledError,
        CounterDisabledError,
        MsgIdInProcessError,
        BatchPublishError,
        BatchPublishNotEnabledError,
        BatchPublishIncompleteError,
        BatchPublishUnsupportedHeaderError,
        BatchPublishTooLargeError,
        BatchPublishDuplicateMsgIdError,
        BatchPublishTooManyInflightError,
    )
    for code in cls.err_codes
}


def api_error_from(error: Mapping[str, Any], **about: str | None) -> APIError:
    """Build the most specific ``APIError`` for a server ``{"code", "err_code", "description"}``;
    ``about`` names what the request was about (``stream``, ``consumer``, ``subject``, ``operation``)."""
    err_code = error.get("err_code")
    cls = _REGISTRY.get(err_code, APIError) if isinstance(err_code, int) else APIError
    return cls(error.get("code"), err_code, error.get("description") or "", **about)


class ConsumerDeletedError(JetStreamError):
    """The consumer was deleted while it was being read (409 Consumer Deleted), or a pull found it gone
    (with its stream, or on its own). Terminal. ``consumer`` and ``stream`` name it, and the message says
    which went: ``consumer 'billing' of stream 'ORDERS' is gone: stream 'ORDERS' was deleted``."""

    def __init__(self, message: str, stream: str | None = None, consumer: str | None = None) -> None:
        super().__init__(message)
        self.stream = stream
        self.consumer = consumer

    def __reduce__(self):
        return (type(self), (str(self), self.stream, self.consumer))


class ConsumerTypeError(JetStreamError):
    """A pull call on a push consumer (one with a ``deliver_subject``), or a push call on a pull consumer.

    The message names the consumer and what it is.
    """


class SubscriptionConfigError(JetStreamError):
    """``subscribe()``/``pull_subscribe()`` options contradict each other (a queue with heartbeats or flow
    control) or the existing consumer (filter, deliver group, a differing field). Raised before anything is
    sent where the options alone decide; the message names the field and both values."""


class DuplicateSubscriptionError(JetStreamError):
    """The push consumer already has an active subscriber and no deliver group to share it with."""


class NoStreamForSubjectError(JetStreamError):
    """No stream captures the subject, or more than one does (give ``stream=``). ``subject`` names it."""

    def __init__(self, message: str, subject: str | None = None) -> None:
        super().__init__(message)
        self.subject = subject

    def __reduce__(self):
        return (type(self), (str(self), self.subject))


class SlowConsumerError(JetStreamError):
    """A push subscription's buffer was full, so messages were dropped (counted in ``dropped``). A warning:
    with explicit acks the server redelivers them after ``ack_wait``."""


class MessageGapError(JetStreamError):
    """The consumer sequence of a push delivery jumped: messages in between were lost on the way. A warning
    with the two sequences as ``last`` and ``received``."""

    def __init__(self, message: str, last: int = 0, received: int = 0) -> None:
        super().__init__(message)
        self.last = last
        self.received = received

    def __reduce__(self):
        return (type(self), (str(self), self.last, self.received))


class NoHeartbeatError(JetStreamError):
    """No message, status or heartbeat arrived for 2 x idle_heartbeat.

    A warning: ``consume()``/``messages()`` report it and re-issue the pull.
    """


class TimeoutError(JetStreamError, builtins.TimeoutError):  # noqa: A001 - deliberate, documented
    """An operation did not finish in time. Also a ``builtins.TimeoutError``.

    The message names the operation, its target and the time waited, e.g. ``create consumer 'C'
    on stream 'ORDERS' ($JS.API.CONSUMER.CREATE.ORDERS.C) timed out after 5.0 s``. The same
    facts are attributes: ``operation`` (what and on what) and ``timeout`` (seconds waited, per
    attempt when the call was retried), None where unknown.
    """

    retriable = True
    operation: str | None = None
    timeout: float | None = None

    @classmethod
    def after(cls, operation: str, timeout: float | None, detail: str = "") -> "TimeoutError":
        """``<operation> timed out after <timeout> s[: <detail>]``, with the attributes set."""
        waited = "" if timeout is None else f" after {float(round(timeout, 3))} s"
        exc = cls(f"{operation} timed out{waited}{': ' + detail if detail else ''}")
        exc.operation, exc.timeout = operation, timeout
        return exc

    def __reduce__(self) -> Any:
        return (_restore_timeout, (type(self), self.args, self.operation, self.timeout))


def _restore_timeout(cls: type, args: tuple, operation: str | None, timeout: float | None) -> TimeoutError:
    exc = cls(*args)
    exc.operation, exc.timeout = operation, timeout
    return exc


class NoRespondersError(JetStreamError):
    """Nobody is subscribed to the subject (for a publish: no stream captures it). ``subject`` names it
    (None where unknown)."""

    retriable = True

    def __init__(self, message: str = "", subject: str | None = None) -> None:
        super().__init__(message)
        self.subject = subject

    def __reduce__(self):
        return (type(self), (str(self), self.subject))


class JetStreamNotEnabledError(NoRespondersError):
    """A JetStream API request had no responders: JetStream is off, or the domain/prefix is wrong."""


class NotConnectedError(JetStreamError):
    """The client is reconnecting and its outbound buffer is full."""

    retriable = True


class NoServersError(JetStreamError, builtins.ConnectionError):
    """``connect()`` could not reach any of the servers."""


class AuthorizationError(NoServersError):
    """The server refused the connection's credentials (user/password, token, nkey, JWT).

    Raised by ``connect()`` at once, never retried; the message never contains
    the credentials.
    """


class PermissionViolationError(JetStreamError, builtins.PermissionError):
    """The server refused to let this connection publish to (or subscribe on) a subject.

    ``subject`` is the subject refused (as the caller spelled it, when known).
    Not retriable: the same request would be refused again.
    """

    def __init__(self, message: str, subject: str | None = None) -> None:
        super().__init__(message)
        self.subject = subject

    def __reduce__(self):
        return (type(self), (str(self), self.subject))

    def spelled(self, subject: str) -> "PermissionViolationError":
        """The same error naming ``subject`` as the caller spelled it (the server's text is lower-cased)."""
        text = str(self)
        if self.subject:
            text = text.replace(repr(self.subject), repr(subject)).replace(self.subject, subject)
        return type(self)(text, subject)


class ClientClosedError(JetStreamError):
    """The client is closed, closing, or was created in another process (fork)."""


class MessageAlreadyAckedError(JetStreamError):
    """ack/nak/term was called on a message that already had a terminal acknowledgement."""


class KeyNotFoundError(JetStreamError, builtins.KeyError):
    """No value for ``key`` in ``bucket`` (never written, deleted or purged; or the revision asked for
    is another key's). Also a ``KeyError``, so ``except KeyError`` works as with a dict."""

    def __init__(self, bucket: str, key: str, message: str | None = None) -> None:
        self.bucket = bucket
        self.key = key
        super().__init__(message or f"key {key!r} not found in bucket {bucket!r}")

    def __str__(self) -> str:  # KeyError would show the repr of its argument
        return str(self.args[0])

    def __reduce__(self):
        return (type(self), (self.bucket, self.key, str(self)))


class InvalidKeyError(JetStreamError, builtins.ValueError):
    """A key (or key filter) a bucket cannot hold; raised before anything is sent. The message names
    the key and the rule: letters, digits and ``-/_=.``, no leading or trailing ``.``, no ``..``."""


class ObjectNotFoundError(JetStreamError):
    """No object ``name`` in object store ``bucket`` (never put, or deleted)."""

    def __init__(self, bucket: str, name: str, message: str | None = None) -> None:
        self.bucket = bucket
        self.name = name
        super().__init__(message or f"object {name!r} not found in object store {bucket!r}")

    def __reduce__(self):
        return (type(self), (self.bucket, self.name, str(self)))


class ObjectAlreadyExistsError(JetStreamError):
    """A rename (``update_meta``) or a link would replace the live object ``name`` of store ``bucket``."""

    def __init__(self, bucket: str, name: str, message: str | None = None) -> None:
        self.bucket = bucket
        self.name = name
        super().__init__(message or f"object {name!r} already exists in object store {bucket!r}")

    def __reduce__(self):
        return (type(self), (self.bucket, self.name, str(self)))


class DigestMismatchError(JetStreamError):
    """An object read back does not hash (or size) to what its meta says: ``expected`` and ``actual``
    are the two digests (``SHA-256=...``). Raised before the reader hands out the last chunk."""

    def __init__(self, message: str, expected: str | None = None, actual: str | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual

    def __reduce__(self):
        return (type(self), (str(self), self.expected, self.actual))


class FeatureNotSupportedError(JetStreamError):
    """The server connected to is too old for the call: ``feature`` needs nats-server ``needs`` or later
    (JetStream API level ``level``); ``server`` is the version it runs. Raised before anything is sent."""

    def __init__(self, feature: str, needs: str, level: int = 0, server: str = "") -> None:
        self.feature = feature
        self.needs = needs
        self.level = level
        self.server = server
        running = f"the server runs {server}" if server else "the server is older"
        super().__init__(f"{feature} needs nats-server {needs} or later (JetStream API level {level}); {running}")

    def __reduce__(self):
        return (type(self), (self.feature, self.needs, self.level, self.server))


class CounterNotFoundError(JetStreamError):
    """No counter on ``subject`` in stream ``stream``: nothing was ever added to it (or it was purged)."""

    def __init__(self, stream: str, subject: str, message: str | None = None) -> None:
        self.stream = stream
        self.subject = subject
        super().__init__(message or f"no counter on subject {subject!r} in stream {stream!r}")

    def __reduce__(self):
        return (type(self), (self.stream, self.subject, str(self)))
