# The JetStream API request path (as nats.go's api.go): one place for the JSON, the timeouts, the
# error envelopes, "no responders" meaning JetStream is off, the retry of idempotent requests, the
# stored-message gets (the direct get, whose replies are messages, and STREAM.MSG.GET), and paged
# listings.
#
# Rule 1: every API request of the package goes through JsApi.request (or request_raw / paged).
# Rule 2: only idempotent requests are retried; the caller says which.
# Rule 3: blocking calls for user threads; nothing here runs on the loop thread but the coroutines
#         handed to Connection.call.
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterator, Mapping

from . import errors
from ._headers import Headers, decode_headers
from ._protocol import DEFAULT, Timeout
from ._retry import RetryPolicy
from .api import ApiPrefix, decode
from .config import StoredMsg, parse_time

from ._connection import Connection

__all__ = ["JsApi"]

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

    def request_raw(self, subject: str, payload: Mapping[str, Any], timeout: Timeout = DEFAULT) -> tuple[bytes, Headers | None]:
        """An idempotent request whose reply is a message, not JSON (direct get); retried.

        Returns the reply's payload and its headers decoded from the raw header
        block: multi-valued headers survive (nats-py's ``request()`` keeps only
        the last value of a repeated key) and a status line shows up as the
        ``Status``/``Description`` pseudo-headers. Blocks at most ``timeout``
        per attempt. Raises ``JetStreamNotEnabledError`` (no responders),
        ``TimeoutError``, ``ClientClosedError``.
        """
        t = self.resolve_timeout(timeout)
        body = _body(payload)
        attempt = 0

        def once() -> tuple[bytes, Headers | None]:
            nonlocal attempt
            attempt += 1
            try:
                data, raw = self._message_request(subject, body, t)
            except errors.TimeoutError as exc:
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

        One idempotent request, retried; blocks at most ``timeout`` per attempt. Raises
        ``MessageNotFoundError`` (status 404), ``APIError`` (any other status), the errors of
        :meth:`request_raw`.
        """
        data, hdrs = self.request_raw(self._prefix.direct_get(stream), _get_request(seq, last_by_subj, next_by_subj),
                                      timeout)
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
