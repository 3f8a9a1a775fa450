# The JetStream API request path (as nats.go's api.go): one place for the JSON, the timeouts, the
# error envelopes, "no responders" meaning JetStream is off, the retry of idempotent requests, the
# stored-message gets (the direct get, whose replies are messages, and STREAM.MSG.GET), the batch
# direct gets (ADR-31: many messages per request, ended by the server's 204 end of batch), and paged
# listings.
#
# Rule 1: every API request of the package goes through JsApi.request (or request_raw / paged /
#         direct_batch).
# Rule 2: only idempotent requests are retried; the caller says which.
# Rule 3: blocking calls for user threads; nothing here runs on the loop thread but the coroutines
#         handed to Connection.call and the loop half of a batch direct get (``_BatchRequest``), which
#         only hands raw replies over to the reader's queue.
from __future__ import annotations

import json
import logging
import queue
import re
import time
from collections import deque
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from . import errors
from ._headers import Headers, decode_headers
from ._loop import WAKE_INTERVAL
from ._protocol import DEFAULT, Timeout, pub_command
from ._retry import RetryPolicy
from ._time import nanos_from_parts, time_from_parts, times_from_parts
from .api import ApiPrefix, decode
from .config import StoredMsg, parse_time

from ._connection import Connection, Listener, translate

__all__ = ["BATCH_PER_REQUEST", "BYTES_PER_REQUEST", "ColumnRun", "DirectBatch", "JsApi"]

log = logging.getLogger(__name__)

# Headers a direct get adds to say where the message came from; StoredMsg
# carries them as fields, so they are removed from its headers.
_DIRECT_HEADERS = ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
                   "Nats-Last-Sequence")


def _not_enabled(subject: str) -> errors.JetStreamNotEnabledError:
    return errors.JetStreamNotEnabledError(
        f"no responders on {subject}: JetStream is not enabled, or the domain/api_prefix is wrong", subject)


def _get_request(seq: int | None, last_by_subj: str | None, next_by_subj: str | None) -> dict[str, Any]:
    """The body of a stored-message get: by sequence, the last on a subject, or the first on a
    subject at or after ``seq``. The values are the caller's to check; the combination is checked here."""
    if last_by_subj is not None and (seq is not None or next_by_subj is not None):
        raise ValueError("last_by_subj: give it alone, without seq or next_by_subj")
    if seq is None and last_by_subj is None and next_by_subj is None:
        raise ValueError("seq, last_by_subj or next_by_subj: give one")
    payload: dict[str, Any] = {}
    if seq is not None:
        payload["seq"] = seq
    if last_by_subj is not None:
        payload["last_by_subj"] = last_by_subj
    if next_by_subj is not None:
        payload["next_by_subj"] = next_by_subj
    return payload


def _body(payload: Mapping[str, Any] | None) -> bytes:
    return b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()


class JsApi:
    """The request path of one JetStream context: its connection, API prefix, default timeout and
    retry policy. Thread-safe; every call blocks the calling thread (see each)."""

    def __init__(self, conn: "Connection", prefix: ApiPrefix, timeout: float, retry: RetryPolicy,
                 message_request: Callable[[str, bytes, float | None], tuple[bytes, bytes]]) -> None:
        self._conn = conn
        #: ``(subject, body, timeout) -> (payload, raw headers)``: a blocking request whose reply is a
        #: message, routed over one shared inbox (the publisher's, a layer beside this one).
        self._message_request = message_request
        self._prefix = prefix
        self._timeout = timeout
        #: The policy of idempotent requests; the context's ``retry`` reads and sets it.
        self.retry = retry

    def require(self, feature: str, level: int, version: str) -> None:
        """Raise ``FeatureNotSupportedError`` (nothing sent) when the server connected to is below
        JetStream API ``level`` (nats-server ``version``, which ``feature`` needs). No I/O."""
        have = self._conn.api_level
        if have < level:
            raise errors.FeatureNotSupportedError(feature, version, level, self._conn.server_version)

    def supports(self, level: int) -> bool:
        """Whether the server connected to is at JetStream API ``level`` or above. No I/O."""
        return self._conn.api_level >= level

    def resolve_timeout(self, timeout: Timeout) -> float | None:
        """:data:`DEFAULT` (not given) means the context's default; None means no limit."""
        return self._timeout if timeout is DEFAULT or timeout is ... else self._conn.timeout_or_default(timeout)

    def request(self, subject: str, payload: Mapping[str, Any] | None, timeout: Timeout = DEFAULT, *,
                idempotent: bool) -> dict[str, Any]:
        """Send one JetStream API request and return the decoded response.

        Blocks for at most ``timeout`` per attempt. Raises the matching
        ``APIError`` (naming the stream and consumer of ``subject``: :meth:`ApiPrefix.about`),
        ``JetStreamNotEnabledError`` (no responders on the API),
        ``TimeoutError``, ``ClientClosedError``.
        """
        t = self.resolve_timeout(timeout)
        body = _body(payload)
        client = self._conn
        attempt = 0

        def once() -> dict[str, Any]:
            nonlocal attempt
            attempt += 1
            try:
                reply = client.call(client.request(subject, body, t), t)
            except (errors.NoRespondersError, errors.TimeoutError) as exc:
                raise self._failed(exc, subject, t, attempt, idempotent) from exc
            return decode(reply.data, self._prefix.about(subject))

        return self.retry.call(once) if idempotent else once()

    async def request_async(self, subject: str, payload: Mapping[str, Any] | None, timeout: Timeout = DEFAULT, *,
                            idempotent: bool) -> dict[str, Any]:
        """(loop thread) :meth:`request` for code already on the loop: the same errors, timeouts and
        retry policy, backing off with ``asyncio.sleep``. Never blocks the loop."""
        t = self.resolve_timeout(timeout)
        body = _body(payload)
        client = self._conn
        attempt = 0

        async def once() -> dict[str, Any]:
            nonlocal attempt
            attempt += 1
            try:
                reply = await client.request(subject, body, t)
            except (errors.NoRespondersError, errors.TimeoutError) as exc:
                raise self._failed(exc, subject, t, attempt, idempotent) from exc
            return decode(reply.data, self._prefix.about(subject))

        return await (self.retry.call_async(once) if idempotent else once())

    def request_soon(self, subject: str, payload: Mapping[str, Any] | None, what: str) -> None:
        """Send an idempotent request without waiting for it (any thread; never blocks). A failure is
        logged at debug level as ``what``: for clean-ups the server also does by itself (an ephemeral
        consumer's inactive threshold)."""

        async def go() -> None:
            try:
                await self.request_async(subject, payload, idempotent=True)
            except Exception as exc:  # noqa: BLE001 - best effort by contract
                log.debug("jetstream_sync: %s failed: %r", what, exc)

        lt = self._conn.loop_thread
        try:
            lt.call_soon(lambda: lt.spawn(go(), name="jetstream-sync-api-soon"))
        except errors.ClientClosedError:
            pass

    def _failed(self, exc: BaseException, subject: str, timeout: float | None, attempt: int,
                retried: bool) -> errors.JetStreamError:
        """What one failed attempt at ``subject`` means: no responders on the API is JetStream being
        off (or a wrong prefix); a timeout says what, on what, how long and which attempt."""
        if isinstance(exc, errors.NoRespondersError):
            return _not_enabled(subject)
        return self.timed_out(subject, timeout, attempt, retried)

    def timed_out(self, subject: str, timeout: float | None, attempt: int, retried: bool) -> errors.TimeoutError:
        """The TimeoutError of one attempt at ``subject``: what, on what, how long (and which attempt)."""
        attempts = self.retry.attempts if retried else 1
        return errors.TimeoutError.after(self._prefix.describe(subject), timeout,
                                         f"attempt {attempt} of {attempts}" if attempts > 1 else "")

    def request_raw(self, subject: str, payload: Mapping[str, Any], timeout: Timeout = DEFAULT, *,
                    after_silence: Callable[[float | None], Any] | None = None) -> Any:
        """An idempotent request whose reply is a message, not JSON (direct get); retried.

        Returns the reply's payload and its headers decoded from the raw header
        block: multi-valued headers survive (nats-py's ``request()`` keeps only
        the last value of a repeated key) and a status line shows up as the
        ``Status``/``Description`` pseudo-headers. With ``after_silence``, an
        attempt after one that got no answer is ``after_silence(timeout)``
        instead, and its result is returned as it is (then the next goes out as
        the first did). Blocks at most ``timeout`` per attempt. Raises
        ``JetStreamNotEnabledError`` (no responders), ``TimeoutError``,
        ``ClientClosedError``.
        """
        t = self.resolve_timeout(timeout)
        body = _body(payload)
        attempt = 0
        silent = False

        def once() -> Any:
            nonlocal attempt, silent
            attempt += 1
            if silent and after_silence is not None:
                silent = False
                return after_silence(t)
            try:
                data, raw = self._message_request(subject, body, t)
            except errors.TimeoutError as exc:
                silent = True
                raise self.timed_out(subject, t, attempt, True) from exc
            hdrs = decode_headers(raw) if raw else None
            if hdrs is not None and hdrs.get("Status") == "503" and not data:
                raise _not_enabled(subject)
            return data, hdrs

        return self.retry.call(once)

    def msg_get(self, stream: str, *, seq: int | None = None, last_by_subj: str | None = None,
                next_by_subj: str | None = None, timeout: Timeout = DEFAULT) -> StoredMsg:
        """The stored message of ``stream`` at ``seq``, the last on ``last_by_subj``, or the first on
        ``next_by_subj`` from ``seq`` on, through ``STREAM.MSG.GET`` (served by the stream leader).

        One idempotent request, retried; blocks at most ``timeout`` per attempt. Raises
        ``MessageNotFoundError``, ``StreamNotFoundError``, the errors of :meth:`request`.
        """
        resp = self.request(self._prefix.msg_get(stream), _get_request(seq, last_by_subj, next_by_subj), timeout,
                            idempotent=True)
        return StoredMsg.from_response(resp["message"])

    def direct_get(self, stream: str, *, seq: int | None = None, last_by_subj: str | None = None,
                   next_by_subj: str | None = None, timeout: Timeout = DEFAULT) -> StoredMsg:
        """:meth:`msg_get` through the direct get API (served by any replica; the stream must allow
        it): the reply is the message itself, its origin in ``Nats-*`` headers that become the
        ``StoredMsg`` fields and are left out of its headers.

        One idempotent request, retried; blocks at most ``timeout`` per attempt. An attempt after one
        that got no answer asks the stream's leader (``STREAM.MSG.GET``) instead: a replica catching up
        drops direct gets unanswered, and the server hands a request to a replica on the client's own
        node first, so every retry could meet the same silent replica for as long as it catches up.
        Raises ``MessageNotFoundError`` (status 404), ``APIError`` (any other status), the errors of
        :meth:`request_raw`.
        """
        request = _get_request(seq, last_by_subj, next_by_subj)

        def from_leader(t: float | None) -> StoredMsg:
            return StoredMsg.from_response(self.request(self._prefix.msg_get(stream), request, t,
                                                        idempotent=False)["message"])

        reply = self.request_raw(self._prefix.direct_get(stream), request, timeout, after_silence=from_leader)
        if isinstance(reply, StoredMsg):
            return reply
        data, hdrs = reply
        hdrs = hdrs if hdrs is not None else Headers()
        status = hdrs.get("Status")
        if status:
            desc = hdrs.get("Description", "")
            about = {"stream": stream, "operation": f"direct get from stream {stream!r}"}
            if status == "404":
                raise errors.MessageNotFoundError(404, 10037, desc or "no message found", **about)
            raise errors.APIError(int(status) if status.isdigit() else None, None,
                                  desc or f"direct get failed with status {status}", **about)
        user = Headers({k: v for k, v in hdrs.multi().items() if k not in _DIRECT_HEADERS})
        return StoredMsg(
            seq=int(hdrs["Nats-Sequence"]),
            subject=hdrs["Nats-Subject"],
            data=data,
            headers=user or None,
            time=parse_time(hdrs.get("Nats-Time-Stamp")),
        )

    def direct_batch(self, stream: str, first: dict[str, Any], *, multi: bool, total: int | None,
                     max_bytes: int | None, timeout: Timeout = DEFAULT) -> "DirectBatch":
        """The stored messages of ``stream`` that batch direct gets read, starting with the request
        ``first`` (``next_by_subj`` and ``seq`` or ``start_time``; or ``multi_last`` and its limits when
        ``multi``), at most ``total`` messages (None: all that match) and ``max_bytes``. No I/O here:
        the first request goes out when iteration starts (see :class:`DirectBatch`, which blocks at
        most ``timeout`` per wait). Not retried: a request is answered by a stream of messages."""
        return DirectBatch(self._conn, stream, self._prefix.direct_get(stream), first, multi=multi, total=total,
                           max_bytes=max_bytes, timeout=self.resolve_timeout(timeout))

    def paged(self, subject: str, key: str, filter_subject: str | None, timeout: Any, convert: Any) -> Iterator[Any]:
        """Every item of a paged listing (``streams``, ``consumers``, ``*_names``), one request per page
        as iteration reaches it; each page retried as an idempotent request."""
        offset = 0
        while True:
            payload: dict[str, Any] = {"offset": offset}
            if filter_subject is not None:
                payload["subject"] = filter_subject
            resp = self.request(subject, payload, timeout, idempotent=True)
            items = resp.get(key) or []
            for item in items:
                yield convert(item)
            offset += len(items)
            total = resp.get("total", 0)
            if not items or offset >= total:
                return


# -- batch direct gets (ADR-31) ------------------------------------------------------------------

#: Messages asked for per batch direct get request.
BATCH_PER_REQUEST = 20000
#: Bytes asked for per request (subjects, stored headers and payloads; the server stops after the
#: message that reaches it), so that large messages are bounded too.
BYTES_PER_REQUEST = 2 * 1024 * 1024
#: The next request goes out at the end of the previous one while at most this many requests' worth
#: of messages wait unread, else as soon as the reader has read enough: with the request in flight,
#: about two requests' replies are held at most. Large requests matter: the server takes a couple of
#: milliseconds to begin each one.
AHEAD = 1

#: The header block the server writes for a message stored without headers: its subject, sequence and
#: time (to the second, and the fraction) in one match. Stored headers would come first, before the
#: server's own; such a block is decoded in full.
_BARE = re.compile(rb"NATS/1\.0\r\nNats-Stream: [^\r]*\r\nNats-Subject: ([^\r]*)\r\nNats-Sequence: (\d+)\r\n"
                   rb"Nats-Time-Stamp: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z\r\n"
                   rb"Nats-Num-Pending: \d+\r\nNats-Last-Sequence: \d+\r\n\r\n")
#: Line ends in that block (every reply's block has at least as many).
_BARE_CRLF = 8
#: The headers the server adds after a message's stored ones, to the end of the block (the same fields
#: as in the bare block): found from the end, so that the stored headers before them are decoded alone.
_ADDED = re.compile(rb"\r\nNats-Stream: [^\r]*\r\nNats-Subject: ([^\r]*)\r\nNats-Sequence: (\d+)\r\n"
                    rb"Nats-Time-Stamp: (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z\r\n"
                    rb"Nats-Num-Pending: \d+\r\nNats-Last-Sequence: \d+\r\n\r\n\Z")
_SUBJECT = b"\r\nNats-Subject: "


class _Done(NamedTuple):
    """The end of a batch read, after every run of replies: nothing more will come (``error``: why
    it stopped early)."""

    error: BaseException | None = None


def _stored(data: bytes, raw: bytes) -> tuple[StoredMsg, int]:
    """A batch direct get reply whose header block is not the bare one as a ``StoredMsg``, and its
    size as the server counts it against ``max_bytes`` (subject, stored header block, payload). The
    ``Nats-*`` headers the server adds after the stored ones become the fields and are left out of
    ``headers``; a stored header of the same name (a message copied from another stream) stays."""
    hdrs = decode_headers(raw) or Headers()
    values = hdrs.multi()
    added: dict[str, str] = {}
    for key in _DIRECT_HEADERS:
        these = values.get(key)
        if these:
            added[key] = these.pop()  # the server appends its own after the stored headers
            if not these:
                del values[key]
    # The stored block ends in an empty line; the server wrote "Key: value\r\n" for each of its own
    # before that line (or, with nothing stored, after a bare "NATS/1.0\r\n").
    stored_len = len(raw) - sum(len(k) + len(v) + 4 for k, v in added.items()) if values else 0
    subject = added.get("Nats-Subject", "")
    msg = StoredMsg._of(int(added.get("Nats-Sequence", "0")), subject, data, Headers(values) if values else None,
                        parse_time(added.get("Nats-Time-Stamp")))
    return msg, len(subject.encode()) + stored_len + len(data)


def _size(data: bytes, raw: bytes) -> int:
    """What a reply counts against ``max_bytes``, as the server counts it (subject, stored header
    block, payload)."""
    if raw.count(b"\r\n") == _BARE_CRLF:  # nothing stored: the subject and the payload
        start = raw.find(_SUBJECT) + len(_SUBJECT)
        return raw.find(b"\r\n", start) - start + len(data)
    return _stored(data, raw)[1]


class ColumnRun(NamedTuple):
    """Messages read together, as columns (in stream order): sequences, subjects, payloads, the times
    they were stored (integer nanoseconds since the Unix epoch) and their stored headers (``headers``
    is None when no message of the run has any). A stored header block is the raw block as received,
    decoded when a column is built from it (None, or a block with no header line, for a message
    without), or a ``Headers`` (None for a message without) where ``decoded`` says the run holds
    decoded ones."""

    seqs: list[int]
    subjects: list[str]
    datas: list[bytes]
    times_ns: list[int]
    headers: list[bytes | Headers | None] | None
    decoded: bool = False


def _columns(datas: list[bytes], raws: list[bytes]) -> ColumnRun:
    """A run of raw batch direct get replies as columns."""
    blocks = b"".join(raws)
    if blocks.count(b"\r\n") == _BARE_CRLF * len(raws):  # no stored headers in the run: one match reads all
        found = _BARE.findall(blocks)
        if found and len(found) == len(raws):
            subjects, seqs, seconds, fractions = zip(*found)
            return ColumnRun(list(map(int, seqs)), list(map(bytes.decode, subjects)), datas,
                             nanos_from_parts(seconds, fractions), None)
    added = [_ADDED.search(raw) for raw in raws]
    if raws and all(added):  # the server's own headers read by one match each, the stored ones kept raw
        subjects, seqs, seconds, fractions = zip(*(m.groups() for m in added))  # type: ignore[union-attr]
        stored: list[bytes | Headers | None] = [raw[:m.start() + 2] for raw, m in zip(raws, added)]  # type: ignore[union-attr]
        return ColumnRun(list(map(int, seqs)), list(map(bytes.decode, subjects)), datas,
                         nanos_from_parts(seconds, fractions), stored)
    out = ColumnRun([], [], datas, [], [], decoded=True)
    for raw, data in zip(raws, datas):
        msg = _stored(data, raw)[0]
        out.seqs.append(msg.seq)
        out.subjects.append(msg.subject)
        out.times_ns.append(msg.time.timestamp_ns() if msg.time is not None else 0)  # type: ignore[attr-defined]
        out.headers.append(msg.headers)  # type: ignore[union-attr]
    return out


class _Request(Listener):
    """One batch direct get request on the loop thread: an inbox of its own, the replies handed to the
    reader's queue as raw bytes in runs (``(payloads, header blocks)``: one wake of the reader per run
    of replies the loop read together), then its end (the server's status, or an error) given to its
    chain. Unsubscribed at its end, or when the chain gives up (``abandon``). Never blocks."""

    def __init__(self, chain: "_Chain", body: bytes) -> None:
        self._chain = chain
        self._conn = chain.conn
        self._body = body
        self._datas: list[bytes] = []  # the run not yet handed over: payloads ...
        self._raws: list[bytes] = []   # ... and header blocks
        self._sized = chain.max_bytes is not None
        self.got = 0                   # replies received
        self.bytes = 0                 # ... and their size (counted when there is a byte limit)
        self._sub: Any = None
        self._inbox = ""
        self._ended = False

    async def start(self) -> None:
        if self._ended:  # abandoned before it began
            return
        conn = self._conn
        self._inbox = inbox = conn.new_inbox()
        conn.add_listener(self)
        try:
            self._sub = await conn.subscribe_raw(inbox, self._on_msg)
            if self._ended:
                self.abandon()
                return
            # The SUB above sits in the same outbound buffer, ahead of this PUB.
            conn.write_now(pub_command(self._chain.subject, inbox, self._body, b""))
        except Exception as exc:  # noqa: BLE001 - the reader raises it
            self._end(b"", translate(exc))

    def _on_msg(self, _subject: bytes, _reply: bytes, data: bytes, raw: bytes) -> None:
        if self._ended:
            return
        if not data and raw[:9] == b"NATS/1.0 ":  # a status line: the end of this request
            self._end(raw, None)
            return
        datas = self._datas
        datas.append(data)
        self._raws.append(raw)
        if self._sized:
            self.bytes += _size(data, raw)
        if len(datas) == 1:
            self._conn.loop_thread.loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        datas = self._datas
        if datas:
            self.got += len(datas)
            self._chain.received += len(datas)
            self._chain.out.put((datas, self._raws))
            self._datas, self._raws = [], []

    def _end(self, status: bytes, error: BaseException | None) -> None:
        if self._ended:
            return
        self._hand_over()
        self.abandon()
        self._chain.ended(self, status, error)

    def abandon(self) -> None:
        """Stop listening (loop thread): what still arrives is dropped. Idempotent."""
        self._ended = True
        self._conn.remove_listener(self)
        sub, self._sub = self._sub, None
        lt = self._conn.loop_thread
        if sub is not None and lt.on_loop_thread():  # else the client closed: nothing to unsubscribe from
            lt.spawn(self._conn.unsubscribe_raw(sub), name="jetstream-sync-unsub")

    # connection events (loop thread)
    def on_closed(self) -> None:
        self._end(b"", errors.ClientClosedError("the client was closed during a batch direct get"))

    def on_permission_denied(self, subject: str, error: errors.PermissionViolationError) -> None:
        watched = {self._chain.subject.lower(): self._chain.subject, self._inbox.lower(): self._inbox}
        if subject in watched:
            spelled = getattr(error, "spelled", None)
            self._end(b"", spelled(watched[subject]) if spelled is not None else error)


class _Chain:
    """The requests of one batch read, on the loop thread: each next one goes out from the end of the
    previous one (the sequence after its last message; the point in time of the first for
    ``multi_last``) until ``total`` messages or ``max_bytes`` are read or nothing more matches. It goes
    out at once while the reader has at most :data:`AHEAD` requests' worth unread, else when the reader
    makes room (``room``). The end goes to the reader's queue as ``_Done``. Loop thread only, but for
    ``taken`` and ``waiting``, which the reader writes and reads."""

    def __init__(self, conn: Connection, stream: str, subject: str, first: dict[str, Any], *, multi: bool,
                 total: int | None, max_bytes: int | None, out: queue.SimpleQueue) -> None:
        self.conn = conn
        self.stream = stream
        self.subject = subject
        self.out = out
        self.max_bytes = max_bytes
        self._multi = multi
        self._total = total
        self._cursor = {k: v for k, v in first.items() if k not in ("seq", "start_time")}  # kept by every request
        self._due: dict[str, Any] | None = first   # the next request
        self._request: _Request | None = None      # the request in flight
        self._asked = 0
        self._bytes = 0
        self._ended = False
        #: Replies received (handed to the reader's queue).
        self.received = 0
        #: Requests sent.
        self.requests = 0
        #: Written by the reader: the messages it had read when it last made a run into messages.
        self.taken = 0
        #: A request is due and waits for the reader to make room.
        self.waiting = False

    def start(self) -> None:
        self._send()

    def room(self) -> None:
        """The reader has read more: send the request that waits for room, if there is room now."""
        if self.waiting and not self._ended and self.received - self.taken <= AHEAD * BATCH_PER_REQUEST:
            self.waiting = False
            self._send()

    def _send(self) -> None:
        request, self._due = self._due, None
        if request is None or self._ended:
            return
        left = BATCH_PER_REQUEST if self._total is None else self._total - self.received
        self._asked = request["batch"] = min(left, BATCH_PER_REQUEST)
        request["max_bytes"] = BYTES_PER_REQUEST if self.max_bytes is None else \
            min(BYTES_PER_REQUEST, self.max_bytes - self._bytes)
        self._request = req = _Request(self, _body(request))
        self.requests += 1
        self.conn.loop_thread.spawn(req.start(), name="jetstream-sync-batch-get")

    def ended(self, req: _Request, status: bytes, error: BaseException | None) -> None:
        """A request ended (its replies are in the queue): the next one, or the end."""
        if req is not self._request or self._ended:
            return
        self._request = None
        self._bytes += req.bytes
        if error is not None:
            self._finish(error)
            return
        hdrs = decode_headers(status) or Headers()
        code = hdrs.get("Status", "")
        if code == "204":
            self._after(hdrs, req.got)
        elif code == "404":  # nothing (more) matched
            self._finish(None)
        else:
            self._finish(self._status_error(code, hdrs.get("Description", "")))

    def _after(self, eob: Headers, got: int) -> None:
        try:
            pending = int(eob.get("Nats-Num-Pending", "0"))
            last = int(eob.get("Nats-Last-Sequence", "0"))
            upto = int(eob.get("Nats-UpTo-Sequence", "0"))
        except ValueError:
            pending = last = upto = 0
        # Servers before 2.12 count one too few pending after a multi-subject batch that stopped at its
        # size: a full batch asks again (an empty answer ends it).
        more = pending > 0 or (self._multi and got >= self._asked)
        done = (self._total is not None and self.received >= self._total) or \
            (self.max_bytes is not None and self._bytes >= self.max_bytes)
        if not more or last == 0 or done:
            self._finish(None)
            return
        request = dict(self._cursor, seq=last + 1)
        if self._multi and upto:
            request.pop("up_to_time", None)
            request["up_to_seq"] = upto  # every page reads the stream as the first did
        self._due = request
        # The reader writes ``taken`` and then reads ``waiting``; this writes ``waiting`` and then reads
        # ``taken``: whichever comes second sees the other, so the request never waits for nothing.
        self.waiting = True
        self.room()

    def _status_error(self, code: str, desc: str) -> BaseException:
        if code == "503":
            return errors.NoRespondersError(
                f"no responders for direct gets on stream {self.stream!r} ({self.subject}): the stream does "
                f"not exist, does not allow direct gets, or JetStream is not enabled", self.subject)
        about = {"stream": self.stream, "operation": f"batch direct get from stream {self.stream!r}"}
        if code == "413":
            return errors.APIError(413, None, f"{desc or 'Too Many Results'}: the subjects match more subjects "
                                              f"than the server reads at once (1024)", **about)
        return errors.APIError(int(code) if code.isdigit() else None, None,
                               desc or f"batch direct get failed with status {code!r}", **about)

    def _finish(self, error: BaseException | None) -> None:
        self._ended = True
        self.waiting = False
        self.out.put(_Done(error))

    def abandon(self) -> None:
        """The reader gave up: stop the request in flight, send no other. Idempotent."""
        self._ended = True
        self._due = None
        req, self._request = self._request, None
        if req is not None:
            req.abandon()


class DirectBatch:
    """The stored messages of batch direct gets, read as an iterator (``Stream.get_batch``,
    ``Stream.get_last_for``): the reader's side of a ``_Chain`` of requests.

    Each request asks the server for up to :data:`BATCH_PER_REQUEST` messages, which it sends without
    flow control to an inbox of that request and ends with a 204 (end of batch) saying how many more
    match. The loop thread sends the next one from there, so replies keep coming while the reader
    works, as long as at most :data:`AHEAD` requests' worth wait unread: memory stays bounded for any
    range. Replies reach this thread as raw bytes; each run is made into ``StoredMsg`` here as
    iteration reaches it.

    Iteration blocks the calling thread, at most ``timeout`` per wait for the server (waking every
    0.25 s, so Ctrl-C lands; an interrupt stops the batch). It ends when ``total`` messages (or
    ``max_bytes``) were read or nothing more matches; a 404 (nothing matched) is an empty iterator.
    An error status, a closed client or a timeout is raised once the messages received before it
    were yielded. Not thread-safe: iterate from one thread. ``close()`` (or leaving a ``with`` block)
    stops early; one left unread holds nothing on the server once its request is answered.
    """

    def __init__(self, conn: Connection, stream: str, subject: str, first: dict[str, Any], *, multi: bool,
                 total: int | None, max_bytes: int | None, timeout: float | None) -> None:
        self._conn = conn
        self._stream = stream
        self._subject = subject
        self._timeout = timeout
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._chain = _Chain(conn, stream, subject, first, multi=multi, total=total, max_bytes=max_bytes,
                             out=self._out)
        self._started = False
        self._backlog: deque[tuple[list[bytes], list[bytes]]] = deque()  # runs received, not yet made messages
        self._ready: deque[StoredMsg] = deque()  # made, not yet yielded
        self._made = 0
        self._finished = False  # the chain is done (or this reader stopped)
        self._error: BaseException | None = None
        #: Messages received so far.
        self.received = 0

    @property
    def requests(self) -> int:
        """Requests sent so far."""
        return self._chain.requests

    def __iter__(self) -> Iterator[StoredMsg]:
        return self

    def __next__(self) -> StoredMsg:
        ready = self._ready
        if ready:
            return ready.popleft()
        # Handler around a call, not around the loop (see MessageStream.next).
        try:
            return self._next()
        except (StopIteration, errors.JetStreamError):
            raise
        except BaseException:
            self.close()  # KeyboardInterrupt: leave nothing listening
            raise

    def _next(self) -> StoredMsg:
        if not self._started:
            self._started = True
            self._call(self._chain.start)
        ready, backlog = self._ready, self._backlog
        while True:
            self._drain()
            if backlog:
                ready.extend(self._make(backlog.popleft()))
                if ready:
                    return ready.popleft()
                continue
            if self._finished:
                err, self._error = self._error, None
                if err is not None:
                    raise err
                raise StopIteration
            self._take(self._wait())

    def _call(self, fn: Any) -> None:
        """Run ``fn`` on the loop thread, without waiting."""
        try:
            self._conn.loop_thread.call_soon(fn)
        except errors.ClientClosedError as exc:
            self._stop(exc)

    def _wait(self) -> Any:
        """Block until the next item comes (None after a timeout or a close)."""
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        get = self._out.get
        while True:
            wait = WAKE_INTERVAL if deadline is None else min(WAKE_INTERVAL, deadline - time.monotonic())
            try:
                return get(timeout=wait if wait > 0 else 0)
            except queue.Empty:
                if self._conn.is_closed:
                    self._stop(errors.ClientClosedError("the client was closed during a batch direct get"))
                    return None
                if deadline is not None and time.monotonic() >= deadline:
                    self._stop(errors.TimeoutError.after(
                        f"batch direct get from stream {self._stream!r} ({self._subject})", self._timeout,
                        f"no reply after {self.received} messages"))
                    return None

    def _drain(self) -> None:
        """Take whatever has arrived, without waiting."""
        get = self._out.get_nowait
        while True:
            try:
                item = get()
            except queue.Empty:
                return
            self._take(item)

    def _take(self, item: Any) -> None:
        if item is None or self._finished:
            return  # stopped: what was still in the queue goes
        if type(item) is tuple:  # a run of replies
            self.received += len(item[0])
            self._backlog.append(item)
        else:
            self._finished = True
            self._error = item.error

    def _reached(self, run: tuple[list[bytes], list[bytes]]) -> None:
        """Reading has got to ``run`` (all before it was read): tell the chain, which may send on."""
        chain = self._chain
        chain.taken = self._made
        self._made += len(run[0])
        if chain.waiting:
            self._call(chain.room)

    def _make(self, run: tuple[list[bytes], list[bytes]]) -> list[StoredMsg]:
        """Messages of one run of raw replies, in order; tells the chain how far reading has got."""
        self._reached(run)  # all read but this run: it is made while the ready ones are empty
        datas, raws = run
        blocks = b"".join(raws)
        if blocks.count(b"\r\n") == _BARE_CRLF * len(raws):  # no stored headers in the run: one match reads all
            found = _BARE.findall(blocks)
            if found and len(found) == len(raws):
                subjects, seqs, seconds, fractions = zip(*found)
                return StoredMsg._many(map(int, seqs), map(bytes.decode, subjects), datas,
                                       times_from_parts(seconds, fractions))
        out: list[StoredMsg] = []
        for data, raw in zip(datas, raws):
            m = _BARE.fullmatch(raw)
            if m is not None:
                subject, seq, second, fraction = m.groups()
                out.append(StoredMsg._of(int(seq), subject.decode(), data, None,
                                         time_from_parts(second, fraction or b"")))
            else:
                out.append(_stored(data, raw)[0])
        return out

    def column_runs(self) -> Iterator["ColumnRun"]:
        """The messages as :class:`ColumnRun` s, one per run of replies the loop read together, in
        order: columns without a ``StoredMsg`` per message (what an Arrow read wants). Blocks and raises
        as iteration does; use instead of iterating, not after it. Ends when the batch read does."""
        backlog = self._backlog
        if not self._started:
            self._started = True
            self._call(self._chain.start)
        while True:
            self._drain()
            if backlog:
                run = backlog.popleft()
                self._reached(run)
                yield _columns(*run)
                continue
            if self._finished:
                err, self._error = self._error, None
                if err is not None:
                    raise err
                return
            try:
                self._take(self._wait())
            except BaseException:
                self.close()  # KeyboardInterrupt: leave nothing listening
                raise

    def _stop(self, err: BaseException | None) -> None:
        """End here (with ``err``, raised once what was received before it is yielded): the chain stops."""
        if not self._finished:
            self._finished = True
            self._error = err
        try:
            self._conn.loop_thread.call_soon(self._chain.abandon)
        except errors.ClientClosedError:
            pass

    def close(self) -> None:
        """Stop reading: the request in flight (if any) stops listening, no other is sent, and what was
        received and not yielded is dropped. Never blocks; idempotent."""
        self._started = True
        self._stop(None)
        self._error = None
        self._backlog.clear()
        self._ready.clear()

    def __enter__(self) -> "DirectBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<DirectBatch stream={self._stream!r} received={self.received} requests={self.requests}>"
