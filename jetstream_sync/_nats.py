# nats-py, adapted: its client with the hooks the connection needs (a raw fast path for our inbox
# subscriptions, requests ended by a permission violation, TLS refused when the server does not offer
# it, a synchronous write) and ``translate``, the one place nats-py exceptions become ours.
#
# Rule 1: with ``_connection`` and the wire-protocol parser ``_parser`` (installed here), the only
#         modules that import nats-py; nothing above the connection sees a nats-py object.
# Rule 2: loop thread only; no JetStream semantics.
from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Callable

import nats
import nats.errors
from nats.aio.client import Client as _NatsClient

from . import errors
from ._parser import Parser

__all__ = ["Nats", "RawHandler", "TLSNotOfferedError", "is_auth_failure", "permission_error", "translate",
           "translated"]

log = logging.getLogger(__name__)


def _not_the_ssl_eof_notice(record: logging.LogRecord) -> bool:
    # nats-py's stream protocol asks to keep the transport open at EOF, which asyncio's SSL
    # transport cannot do; asyncio says so with a WARNING on every TLS connection the server
    # closes. It is harmless (the connection is closed either way) and not the user's to act on.
    return not (record.msg == "returning true from eof_received() has no effect when using ssl")


logging.getLogger("asyncio").addFilter(_not_the_ssl_eof_notice)

#: Raw inbox handler, run on the loop thread: (subject, reply, data, raw_headers).
RawHandler = Callable[[bytes, bytes, bytes, bytes], None]

# nats-py lower-cases the server's -ERR text before handing it on.
_PERMISSION_RE = re.compile(r'permissions violation for (publish to|subscription to|publish with reply of) "(.*?)"',
                            re.IGNORECASE)


_AUTH_FAILURES = ("authorization violation", "authentication expired", "authentication revoked",
                  "authentication timeout")


def is_auth_failure(exc: BaseException) -> bool:
    if isinstance(exc, nats.errors.AuthorizationError):
        return True
    text = str(exc).lower()
    return isinstance(exc, nats.errors.Error) and any(s in text for s in _AUTH_FAILURES)


def permission_error(text: str, subject: str | None = None) -> errors.PermissionViolationError | None:
    """A PermissionViolationError for a server -ERR text, naming ``subject`` (else the one in the text)."""
    m = _PERMISSION_RE.search(text)
    if m is None:
        return None
    what, denied = m.group(1).lower(), m.group(2)
    subject = subject or denied
    if what == "subscription to":
        msg = f"permission denied: this connection may not subscribe to {subject!r}"
    elif what == "publish with reply of":
        msg = f"permission denied: this connection may not use the reply subject {subject!r}"
    else:
        msg = f"permission denied: this connection may not publish to {subject!r}"
    return errors.PermissionViolationError(f"{msg} (the server's user permissions refuse it)", subject)


def translate(exc: BaseException) -> BaseException:
    """Map a nats-py (or asyncio) exception to the most specific jetstream_sync error."""
    if isinstance(exc, errors.JetStreamError):
        return exc
    if is_auth_failure(exc):
        return errors.AuthorizationError(
            f"{str(exc).removeprefix('nats: ').strip(chr(39))}: the server refused this connection's credentials "
            "(user/password, token, nkey or JWT)")
    if isinstance(exc, nats.errors.Error):
        denied = permission_error(str(exc))
        if denied is not None:
            return denied
    if type(exc).__module__.split(".")[0] == "nkeys":  # a malformed seed or creds file (nkeys is optional)
        return ValueError(f"nkeys_seed/nkeys_seed_str/user_credentials: not a valid NATS nkey seed ({exc})")
    if isinstance(exc, nats.errors.NoRespondersError):
        return errors.NoRespondersError("no responders: nobody is subscribed to the subject")
    if isinstance(exc, (nats.errors.TimeoutError, asyncio.TimeoutError)):
        return errors.TimeoutError(str(exc) or "timed out waiting for the server")
    if isinstance(exc, (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError)):
        return errors.ClientClosedError("the connection is closed or draining")
    if isinstance(exc, nats.errors.OutboundBufferLimitError):
        return errors.NotConnectedError("disconnected and the outbound buffer is full; retry after reconnect")
    if isinstance(exc, nats.errors.MaxPayloadError):
        return ValueError("data: message is larger than the server's max_payload")
    if isinstance(exc, nats.errors.BadSubjectError):
        return ValueError("subject: not a valid NATS subject")
    if isinstance(exc, (nats.errors.NoServersError, OSError)):
        return errors.NoServersError(f"could not connect to any server: {exc}")
    if isinstance(exc, nats.errors.Error):
        return errors.JetStreamError(str(exc) or type(exc).__name__)
    return exc


async def translated(coro: Any) -> Any:
    try:
        return await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        mapped = translate(exc)
        if mapped is exc:
            raise
        raise mapped from exc


class TLSNotOfferedError(ConnectionError):
    """The client asked for TLS and the server does not offer it (the connection is dropped)."""


class Nats(_NatsClient):
    """nats-py's client with a raw fast path for our inbox subscriptions.

    Messages on a subscription registered through ``Client.subscribe_raw``
    are handed straight to a plain function on the loop thread, with the raw
    header block (so message sizes are counted exactly as the server counts
    them and multi-valued headers survive), skipping nats-py's Msg object,
    header parsing, per-subscription queue and task. The parser
    (``_parser.Parser``) calls the handler as it reads the message;
    ``_process_msg`` does the same for anything that still reaches it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._raw_handlers: dict[int, RawHandler] = {}
        # Hands messages of a raw subscription to their handler itself (Parser's charter); anything
        # else still comes through _process_msg.
        self._ps = Parser(self)
        # Requests in flight (task -> subject), so a permission violation the
        # server reports asynchronously ends the request that caused it.
        self._requests: dict[asyncio.Task, str] = {}
        self._denied: dict[asyncio.Task, BaseException] = {}
        #: Called on the loop thread with (what, subject) for every permission violation.
        self.denied_cb: Callable[[str, str], None] | None = None
        #: Set when the server refused the request inbox subscription (until a reconnect re-subscribes).
        self.inbox_refused: errors.PermissionViolationError | None = None

    async def request(self, subject: str, payload: bytes = b"", timeout: float = 0.5, old_style: bool = False,
                      headers: dict[str, Any] | None = None) -> Any:
        """nats-py's request, ended with PermissionViolationError when the server refuses it.

        The server answers a refused publish (or inbox subscription) with an
        -ERR and drops it, so without this the request would only time out.
        """
        refused = self.inbox_refused
        if refused is not None and not old_style:
            raise errors.PermissionViolationError(
                f"{refused}; a request to {subject!r} cannot receive its reply", refused.subject)
        task = asyncio.current_task()
        if task is None or task in self._requests:  # pragma: no cover - not in a task, or nested
            return await super().request(subject, payload, timeout=timeout, old_style=old_style, headers=headers)
        self._requests[task] = subject
        try:
            return await super().request(subject, payload, timeout=timeout, old_style=old_style, headers=headers)
        except asyncio.CancelledError:
            denied = self._denied.pop(task, None)
            if denied is None:
                raise
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None:
                uncancel()
            raise denied from None
        finally:
            self._requests.pop(task, None)
            self._denied.pop(task, None)

    async def _process_info(self, info: dict[str, Any], initial_connection: bool = False) -> None:
        # nats-py upgrades to TLS only when the server's INFO asks for it, even
        # when the user gave an SSLContext or a tls:// URL; a server without TLS
        # (or anyone rewriting its INFO) would then receive the credentials in
        # clear text. As nats.go does, refuse before CONNECT is written.
        server = self._current_server
        if (initial_connection and server is not None and not info.get("tls_required")
                and not self.options.get("tls_handshake_first") and server.uri.scheme not in ("ws", "wss")
                and (self.options.get("tls") is not None or server.uri.scheme == "tls")):
            raise TLSNotOfferedError(f"TLS was requested (tls= or a tls:// URL) but {server.uri.hostname}:"
                                     f"{server.uri.port} does not offer it; not sending credentials in clear text")
        await super()._process_info(info, initial_connection)

    async def _process_err(self, err_msg: str) -> None:
        m = _PERMISSION_RE.search(err_msg)
        if m is not None:
            self._fail_denied_requests(m.group(1).lower(), m.group(2))
            if self.denied_cb is not None:
                try:
                    self.denied_cb(m.group(1).lower(), m.group(2))
                except Exception:  # a listener bug must not kill the reader task
                    log.exception("jetstream_sync: permission violation listener failed")
        await super()._process_err(err_msg)

    def _fail_denied_requests(self, what: str, denied: str) -> None:
        denied = denied.lower()
        prefix = (self._resp_sub_prefix or b"").decode().lower()
        inbox_refused = what != "publish to" and bool(prefix) and denied.startswith(prefix.rstrip("."))
        if inbox_refused:
            self.inbox_refused = permission_error(f'permissions violation for {what} "{denied}"')
        for task, subject in list(self._requests.items()):
            if task.done() or task in self._denied:
                continue
            if inbox_refused:
                exc = errors.PermissionViolationError(
                    f"{self.inbox_refused}; a request to {subject!r} cannot receive its reply", denied)
            elif what == "publish to" and subject.lower() == denied:
                exc = permission_error(f'permissions violation for publish to "{denied}"', subject)
            else:
                continue
            self._denied[task] = exc
            task.cancel()

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        handler = self._raw_handlers.get(sid)
        if handler is None:
            return await super()._process_msg(sid, subject, reply, data, headers)
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        try:
            # nats-py's parser passes None, not b"", for a MSG without headers.
            handler(subject, reply, data, headers or b"")
        except Exception:  # a handler bug must not kill the reader task
            log.exception("jetstream_sync: inbox handler failed")

    def write_nowait(self, cmd: bytes) -> None:
        """Append a protocol command to the outbound buffer and wake the flusher.

        Synchronous (loop thread only), the same bookkeeping nats-py's
        ``publish`` does, without a coroutine per message.
        """
        if self.is_closed:
            raise errors.ClientClosedError("the connection is closed")
        if self.is_draining_pubs:
            raise errors.ClientClosedError("the connection is draining")
        if not self.is_connected and (
            self._max_pending_size <= 0 or self._pending_data_size + len(cmd) > self._max_pending_size
        ):
            raise errors.NotConnectedError("disconnected and the outbound buffer is full; retry after reconnect")
        self._pending.append(cmd)
        self._pending_data_size += len(cmd)
        self.stats["out_msgs"] += 1
        q = self._flush_queue
        if self.is_connected and q is not None and q.empty():
            try:
                q.put_nowait(asyncio.get_running_loop().create_future())
            except asyncio.QueueFull:  # pragma: no cover - the flusher is already awake
                pass


