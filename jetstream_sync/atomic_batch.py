# Atomic batch publish (ADR-50; nats-server 2.12, the stream needs ``allow_atomic``): ``AtomicBatch``,
# what ``js.batch()`` returns, and ``publish_batch``, a list of messages sent as one batch. The server
# stages the messages of a batch and stores every one of them when the commit arrives, or none.
#
# Rule 1: a message of a batch is a publish carrying Nats-Batch-Id, Nats-Batch-Sequence (and
#         Nats-Batch-Commit on the last), built by ``_publish.publish_parts`` as every publish is.
# Rule 2: one round trip to begin, none in between, one to commit. The first message is a request:
#         the server answers it with an empty ack, or with why it refuses the batch (a stream without
#         allow_atomic, no stream at all), before anything more is sent. The messages in between
#         carry no reply subject, so the server answers nothing and the caller never waits: they go
#         out in order on the one connection, and one lost on the way is a gap in the sequence the
#         server finds at the commit, which then fails (nothing stored). The commit waits for the
#         PubAck that carries the batch's id and size.
# Rule 3: every check (1000 messages at most, expectations on the first message only, the
#         arguments) runs before anything of that message is sent. A batch left without a commit
#         sends nothing more: the server drops what it staged after 10 s without traffic.
from __future__ import annotations

import threading
import uuid
from typing import Any, Iterable, Mapping

from . import errors
from ._protocol import DEFAULT, Timeout
from ._publish import publish_parts
from .config import BatchAck

__all__ = ["AtomicBatch", "MAX_MESSAGES", "publish_batch"]

#: The most messages one atomic batch holds, its commit included (the server's default limit).
MAX_MESSAGES = 1000

#: What a message may say besides its subject, data and headers: ``add``'s keyword arguments.
_OPTIONS = ("msg_id", "ttl", "expected_stream", "expected_last_seq", "expected_last_subject_seq")
_EXPECTATIONS = ("expected_stream", "expected_last_seq", "expected_last_subject_seq")
_EXPECTATION_HEADER = "nats-expected-"

_OPEN, _COMMITTED, _DISCARDED, _FAILED = "open", "committed", "discarded", "failed"


class AtomicBatch:
    """An atomic batch of messages (``js.batch()``): stored all together when committed, or not at all.
    Thread-safe: calls from several threads take turns, each message numbered as it is sent.

    ``add()`` sends one message of the batch, ``commit()`` the last one and stores them all. Use it as
    a context manager: leaving the ``with`` block without ``commit()``, or by an exception, discards the
    batch, and nothing of it is stored. The server needs 2.12 or later and the stream ``allow_atomic``.
    """

    def __init__(self, js: Any) -> None:  # js: its JetStream context, a layer above
        js._jsapi.require("atomic batch publish", 2, "2.12")
        self._js = js
        self._conn = js._conn
        self._publisher = js._publisher
        self._id = uuid.uuid4().hex
        self._count = 0
        self._state = _OPEN
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        """The batch's id, sent as the ``Nats-Batch-Id`` header of each message (32 hex digits). No I/O."""
        return self._id

    @property
    def count(self) -> int:
        """Messages sent in this batch so far (after ``commit()``, the commit message included). No I/O."""
        return self._count

    @property
    def closed(self) -> bool:
        """True once the batch was committed, discarded, or failed: it takes no more messages. No I/O."""
        return self._state != _OPEN

    def __enter__(self) -> "AtomicBatch":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.discard()

    def __repr__(self) -> str:
        return f"<AtomicBatch {self._id} {self._state}, {self._count} messages>"

    def add(self, subject: str, data: bytes | str = b"", *, headers: Mapping[str, Any] | None = None,
            msg_id: str | None = None, ttl: Any = None, expected_stream: str | None = None,
            expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
            timeout: Timeout = DEFAULT) -> None:
        """Send the next message of the batch; the server stages it until ``commit()``.

        The first message waits for the server's ack (at most ``timeout``), so a stream that refuses
        batches says so before more is sent; the others are sent without waiting (nothing blocks
        but a full outbound buffer). ``msg_id`` deduplicates as in ``publish`` (a message the stream
        already has fails the whole batch at the commit); ``ttl`` is ``publish``'s. Only the first
        message may carry expectations (``expected_*``, also as ``Nats-Expected-*`` headers): the
        server checks them against the stream as it was before the batch.

        Raises ValueError/TypeError before anything is sent: a bad argument, an expectation on a
        later message, a message that would be the 1000th (the commit needs that place: commit it
        instead). ``BatchPublishNotEnabledError`` (the stream lacks ``allow_atomic``),
        ``NoRespondersError`` (no stream captures ``subject``) and ``TimeoutError`` come from the
        first message; ``ClientClosedError``. RuntimeError once the batch is closed. A failed first
        message closes the batch.
        """
        with self._lock:
            n = self._check_open()
            if n + 1 >= MAX_MESSAGES:
                raise ValueError(f"a batch holds at most {MAX_MESSAGES} messages, the commit included: this add "
                                 f"would be message {n + 1} and leave no room for the commit; commit it instead")
            head, tail = self._parts(n, subject, data, headers, msg_id, ttl, expected_stream, expected_last_seq,
                                     expected_last_subject_seq, False, "")
            self._send(head, tail, subject, n, False, timeout)

    def commit(self, subject: str, data: bytes | str = b"", *, headers: Mapping[str, Any] | None = None,
               msg_id: str | None = None, ttl: Any = None, expected_stream: str | None = None,
               expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
               timeout: Timeout = DEFAULT) -> BatchAck:
        """Send the last message of the batch and store the batch; return the :class:`BatchAck`.

        Blocks on the server's answer for at most ``timeout``. The arguments are :meth:`add`'s (a
        batch of one message is a commit alone, and may carry expectations). Afterwards the batch is
        closed, whatever the outcome.

        Raises what ``publish`` raises, and then nothing of the batch is stored: a
        ``BatchPublishError`` subclass (``BatchPublishIncompleteError`` when a message was lost on the
        way or the batch waited more than 10 s between two messages; ``BatchPublishDuplicateMsgIdError``;
        ``BatchPublishNotEnabledError``), ``StreamWrongLastSequenceError`` and the other expectation
        errors. After ``TimeoutError`` or ``ClientClosedError`` the batch may have been stored.
        ValueError/TypeError before sending (the 1001st message, an expectation on a later message),
        RuntimeError once the batch is closed.
        """
        with self._lock:
            n = self._check_open()
            if n + 1 > MAX_MESSAGES:
                raise ValueError(f"a batch holds at most {MAX_MESSAGES} messages, the commit included: this "
                                 f"commit would be message {n + 1}")
            head, tail = self._parts(n, subject, data, headers, msg_id, ttl, expected_stream, expected_last_seq,
                                     expected_last_subject_seq, True, "")
            return self._send(head, tail, subject, n, True, timeout)

    def discard(self) -> None:
        """Give the batch up: nothing of it is stored. Sends nothing; the server drops the messages it
        staged once the batch had no message for 10 s (until then the batch counts against the stream's
        50 open batches). Does nothing on a closed batch. No I/O."""
        with self._lock:
            if self._state == _OPEN:
                self._state = _DISCARDED

    # -- internals -------------------------------------------------------------------

    def _check_open(self) -> int:
        if self._state != _OPEN:
            raise RuntimeError(f"atomic batch {self._id} was {self._state}: it takes no more messages; begin "
                               f"another with js.batch()")
        return self._count

    def _parts(self, n: int, subject: str, data: Any, headers: Mapping[str, Any] | None, msg_id: str | None,
               ttl: Any, expected_stream: str | None, expected_last_seq: int | None,
               expected_last_subject_seq: int | None, commit: bool, where: str) -> tuple[bytes, bytes]:
        """Check message ``n + 1`` of the batch; its PUB command before and after the reply subject.
        ``where`` prefixes the messages of errors (``messages[3]: ``). No I/O."""
        if n:
            for name, value in zip(_EXPECTATIONS, (expected_stream, expected_last_seq, expected_last_subject_seq)):
                if value is not None:
                    raise ValueError(f"{where}{name}: only the first message of a batch may carry expectations "
                                     f"(the server checks them against the stream before the batch); this is "
                                     f"message {n + 1}")
            if isinstance(headers, Mapping):
                for key in headers:
                    if isinstance(key, str) and key.lower().startswith(_EXPECTATION_HEADER):
                        raise ValueError(f"{where}headers: {key!r} is an expectation, and only the first message "
                                         f"of a batch may carry expectations; this is message {n + 1}")
        return publish_parts(subject, data, self._conn.max_payload, headers, msg_id, expected_stream,
                             expected_last_seq, expected_last_subject_seq, None, ttl, self._id, n + 1, commit)

    def _send(self, head: bytes, tail: bytes, subject: str, n: int, commit: bool, timeout: Timeout) -> Any:
        """Send message ``n + 1`` (lock held): wait for its ack when it begins or commits the batch."""
        if n and not commit:
            self._conn.loop_thread.check_usable()
            # No reply subject: the server answers nothing. head ends and tail begins with a space.
            self._conn.write(head + tail[1:])
            self._count = n + 1
            return None
        t = self._js._resolve_timeout(timeout)
        try:
            ack = self._publisher.call(head, tail, t if t is not None else 3600.0, t, subject, empty_ok=not commit)
        except BaseException:
            self._state = _FAILED
            raise
        self._count = n + 1
        if not commit:
            return None
        self._state = _COMMITTED
        assert ack is not None
        batch, count = ack.extra.get("batch"), ack.extra.get("count")
        if batch != self._id or count != self._count:
            raise errors.JetStreamError(
                f"the answer to the commit of atomic batch {self._id} is not its BatchAck (batch {batch!r}, "
                f"count {count!r}, expected {self._count}): is {ack.stream!r} a stream of nats-server 2.12 or later?")
        return BatchAck(stream=ack.stream, seq=ack.seq, batch=batch, count=count, domain=ack.domain)


def _message(item: Any, i: int) -> dict[str, Any]:
    """One message of ``publish_batch`` as ``add``'s arguments; TypeError/ValueError naming it."""
    if isinstance(item, tuple):
        if len(item) != 2:
            raise ValueError(f"messages[{i}] must be a (subject, data) tuple, got a tuple of {len(item)}")
        return {"subject": item[0], "data": item[1]}
    if isinstance(item, Mapping):
        unknown = sorted(str(k) for k in item if k not in ("subject", "data", "headers") + _OPTIONS)
        if unknown:
            raise ValueError(f"messages[{i}] has keys a message does not take: {unknown}; allowed: subject, data, "
                             f"headers, {', '.join(_OPTIONS)}")
        if "subject" not in item:
            raise ValueError(f"messages[{i}] has no 'subject'")
        return dict(item)
    raise TypeError(f"messages[{i}] must be a (subject, data) tuple or a mapping with subject, data and optional "
                    f"headers, got {type(item).__name__}")


def publish_batch(js: Any, messages: Iterable[Any], timeout: Timeout = DEFAULT) -> BatchAck:
    """Send ``messages`` as one atomic batch, the last one its commit; the :class:`BatchAck`.

    Every message is checked before the first is sent. Blocks for the first message's ack and the
    commit's. Raises what :meth:`AtomicBatch.add` and :meth:`AtomicBatch.commit` raise; ValueError for
    no messages or more than 1000.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise TypeError(f"messages must be a list of (subject, data) tuples or of mappings with subject, data and "
                        f"optional headers, got {type(messages).__name__}")
    items = list(messages)
    if not items:
        raise ValueError("messages: an atomic batch needs at least one message")
    if len(items) > MAX_MESSAGES:
        raise ValueError(f"messages: an atomic batch holds at most {MAX_MESSAGES} messages, got {len(items)}")
    batch = AtomicBatch(js)
    last = len(items) - 1
    parts = []
    for i, item in enumerate(items):
        m = _message(item, i)
        try:
            head_tail = batch._parts(i, m["subject"], m.get("data", b""), m.get("headers"), m.get("msg_id"),
                                     m.get("ttl"), m.get("expected_stream"), m.get("expected_last_seq"),
                                     m.get("expected_last_subject_seq"), i == last, f"messages[{i}]: ")
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(f"messages[{i}]"):
                raise
            raise type(exc)(f"messages[{i}]: {exc}") from None
        parts.append((head_tail, m["subject"]))
    with batch._lock:
        for i, ((head, tail), subject) in enumerate(parts):
            ack = batch._send(head, tail, subject, i, i == last, timeout)
    return ack
