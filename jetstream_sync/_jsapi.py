# The JetStream API request path (as nats.go's api.go): one place for the JSON, the timeouts, the
# error envelopes, "no responders" meaning JetStream is off, the retry of idempotent requests, the
# direct-get replies that are messages, and paged listings.
#
# Rule 1: every API request of the package goes through JsApi.request (or request_raw / paged).
# Rule 2: only idempotent requests are retried; the caller says which.
# Rule 3: blocking calls for user threads; nothing here runs on the loop thread but the coroutines
#         handed to Connection.call.
from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from . import errors
from ._headers import Headers, decode_headers
from ._protocol import DEFAULT, Timeout, pub_command
from ._retry import RetryPolicy
from .api import ApiPrefix, decode

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["JsApi"]

log = logging.getLogger(__name__)


def _not_enabled(subject: str) -> errors.JetStreamNotEnabledError:
    return errors.JetStreamNotEnabledError(
        f"no responders on {subject}: JetStream is not enabled, or the domain/api_prefix is wrong", subject)


def _body(payload: Mapping[str, Any] | None) -> bytes:
    return b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()


class JsApi:
    """The request path of one JetStream context: its connection, API prefix, default timeout and
    retry policy. Thread-safe; every call blocks the calling thread (see each)."""

    def __init__(self, conn: "Connection", prefix: ApiPrefix, timeout: float, retry: RetryPolicy) -> None:
        self._conn = conn
        self._prefix = prefix
        self._timeout = timeout
        #: The policy of idempotent requests; the context's ``retry`` reads and sets it.
        self.retry = retry

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
        client = self._conn

        async def go() -> tuple[bytes, bytes]:
            fut: asyncio.Future = asyncio.get_running_loop().create_future()

            def on_reply(_subject: bytes, _reply: bytes, data: bytes, raw_headers: bytes | None) -> None:
                if not fut.done():
                    fut.set_result((data, raw_headers or b""))

            inbox = client.new_inbox()
            watched = {subject.lower(): subject, inbox.lower(): inbox}

            class _Denied:  # a refused publish or inbox ends this request at once
                def on_permission_denied(self, denied: str, error: BaseException) -> None:
                    if denied in watched and not fut.done():
                        spelled = getattr(error, "spelled", None)
                        fut.set_exception(spelled(watched[denied]) if spelled is not None else error)

                def on_disconnected(self) -> None: ...

                def on_reconnected(self) -> None: ...

                def on_closed(self) -> None: ...

            listener = _Denied()
            client.add_listener(listener)  # type: ignore[arg-type]
            sub = await client.subscribe_raw(inbox, on_reply)
            try:
                # The SUB above sits in the same outbound buffer, ahead of this PUB.
                client.write_now(pub_command(subject, sub.subject, body, b""))
                return await asyncio.wait_for(fut, t)
            finally:
                client.remove_listener(listener)  # type: ignore[arg-type]
                await client.unsubscribe_raw(sub)

        attempt = 0

        def once() -> tuple[bytes, Headers | None]:
            nonlocal attempt
            attempt += 1
            try:
                data, raw = client.call(go(), t)
            except errors.TimeoutError as exc:
                raise self.timed_out(subject, t, attempt, True) from exc
            hdrs = decode_headers(raw) if raw else None
            if hdrs is not None and hdrs.get("Status") == "503" and not data:
                raise _not_enabled(subject)
            return data, hdrs

        return self.retry.call(once)

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
