# The connection: one nats-py client owned by one private event loop thread, and everything the
# rest of the package does with it (write, request, subscribe an inbox, wait for the server to read
# what was written, shut down).
#
# Rule 1: the only module that imports nats-py, and ``translate`` is the only place nats-py
#         exceptions become ours. Nothing above this module sees a nats-py object: replies come back
#         as ``Reply`` tuples, subscriptions as opaque handles, inbox messages as raw bytes.
# Rule 2: the hot paths (acks, publishes, pulled messages) never pay a blocking loop round trip per
#         message: writes go through the Outbox (one crossing per batch) and inbox messages reach a
#         plain callback on the loop thread without nats-py's per-subscription queue and task.
# Rule 3: no JetStream semantics and no public facade here (those are jetstream.py and client.py).
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import logging
import os
import re
import ssl
import threading
import urllib.parse
import weakref
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import nats
import nats.errors
from nats.aio.client import Client as _NatsClient
from nats.aio.client import RawCredentials

from . import errors
from ._loop import EventLoopThread, Outbox
from ._protocol import DEFAULT, Timeout, check_timeout

__all__ = ["Connection", "Listener", "RawHandler", "Reply", "default_servers", "raw_credentials", "redact_url",
           "translate"]

log = logging.getLogger(__name__)


def _not_the_ssl_eof_notice(record: logging.LogRecord) -> bool:
    # nats-py's stream protocol asks to keep the transport open at EOF, which asyncio's SSL
    # transport cannot do; asyncio says so with a WARNING on every TLS connection the server
    # closes. It is harmless (the connection is closed either way) and not the user's to act on.
    return not (record.msg == "returning true from eof_received() has no effect when using ssl")


logging.getLogger("asyncio").addFilter(_not_the_ssl_eof_notice)

#: Raw inbox handler, run on the loop thread: (subject, reply, data, raw_headers).
RawHandler = Callable[[bytes, bytes, bytes, bytes], None]

_USER_CALLBACKS = ("error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "discovered_server_cb",
                   "lame_duck_mode_cb")


# nats-py lower-cases the server's -ERR text before handing it on.
_PERMISSION_RE = re.compile(r'permissions violation for (publish to|subscription to|publish with reply of) "(.*?)"',
                            re.IGNORECASE)


#: In the subject of a pull request ($JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, also under a domain).
_PULL_NEXT = ".CONSUMER.MSG.NEXT."
_AUTH_FAILURES = ("authorization violation", "authentication expired", "authentication revoked",
                  "authentication timeout")


def _is_auth_failure(exc: BaseException) -> bool:
    if isinstance(exc, nats.errors.AuthorizationError):
        return True
    text = str(exc).lower()
    return isinstance(exc, nats.errors.Error) and any(s in text for s in _AUTH_FAILURES)


def _permission_error(text: str, subject: str | None = None) -> errors.PermissionViolationError | None:
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
    if _is_auth_failure(exc):
        return errors.AuthorizationError(
            f"{str(exc).removeprefix('nats: ').strip(chr(39))}: the server refused this connection's credentials "
            "(user/password, token, nkey or JWT)")
    if isinstance(exc, nats.errors.Error):
        denied = _permission_error(str(exc))
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


async def _translated(coro: Any) -> Any:
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


class _Nats(_NatsClient):
    """nats-py's client with a raw fast path for our inbox subscriptions.

    Messages on a subscription registered through ``Client.subscribe_raw``
    are handed straight to a plain function on the loop thread, with the raw
    header block (so message sizes are counted exactly as the server counts
    them and multi-valued headers survive), skipping nats-py's Msg object,
    header parsing, per-subscription queue and task.
    """

    def __init__(self) -> None:
        super().__init__()
        self._raw_handlers: dict[int, RawHandler] = {}
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
            self.inbox_refused = _permission_error(f'permissions violation for {what} "{denied}"')
        for task, subject in list(self._requests.items()):
            if task.done() or task in self._denied:
                continue
            if inbox_refused:
                exc = errors.PermissionViolationError(
                    f"{self.inbox_refused}; a request to {subject!r} cannot receive its reply", denied)
            elif what == "publish to" and subject.lower() == denied:
                exc = _permission_error(f'permissions violation for publish to "{denied}"', subject)
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


class Listener:
    """Loop-thread hooks for connection events, kept by whatever waits on the connection: the pull
    and push engines, the publish window (``_publish.Publisher``) and a direct get in flight."""

    def on_disconnected(self) -> None: ...
    def on_reconnected(self) -> None: ...
    def on_closed(self) -> None: ...

    def on_permission_denied(self, subject: str, error: errors.PermissionViolationError) -> None:
        """The server refused a publish to (or a subscription on) ``subject``.

        Optional. ``subject`` is lower-cased (nats-py lower-cases the server's
        -ERR line): compare it with ``your_subject.lower()``. The server keeps
        the connection open; the refused message was dropped.
        """


class Reply(NamedTuple):
    """A reply to a request, as plain values (nats-py's message stays in this module)."""

    subject: str
    reply: str
    data: bytes
    headers: dict[str, str] | None


class Connection:
    """The NATS connection under one ``Client``: loop thread, nats-py client, Outbox, listeners.

    Internal: the public facade is ``client.Client``; the JetStream context, handles, engines and
    messages hold this object. Thread-safe except where a method says "loop thread". Blocking
    methods raise ``RuntimeError`` on the loop thread (waiting there would deadlock) and
    ``ClientClosedError`` after close or in a forked child.
    """

    def __init__(self, servers: str | Sequence[str] | None = None, *, name: str | None = None,
                 timeout: float = 5.0, **options: Any) -> None:
        self._timeout = check_timeout(timeout, allow_none=False)
        servers = _normalize_servers(servers)
        self._servers = servers
        self._name = name
        user_callbacks = {}
        for key in _USER_CALLBACKS:
            cb = options.pop(key, None)
            if cb is None:
                continue
            if inspect.iscoroutinefunction(cb) or not callable(cb):
                raise TypeError(f"{key} must be a plain function (it runs on a jetstream_sync worker thread, "
                                f"never on the event loop), got {cb!r}")
            user_callbacks[key] = cb
        tls = options.get("tls")
        if tls is not None and not isinstance(tls, ssl.SSLContext):
            raise TypeError(f"tls must be an ssl.SSLContext, got {type(tls).__name__}")
        _check_credential_files(options)
        self._user_callbacks = user_callbacks
        self._events: concurrent.futures.ThreadPoolExecutor | None = None
        self._events_lock = threading.Lock()
        self._listeners: set[Listener] = set()
        self._close_lock = threading.Lock()
        self._inbox_ids = itertools.count(1)
        self._lt = EventLoopThread(f"jetstream-sync-loop-{name or 'client'}")
        self._lt.start()
        self._outbox = Outbox(self._lt, self._write_batch)
        self._nc: _Nats
        try:
            n = len(servers)
            connect_timeout = options.pop("connect_timeout", max(1, int(min(self._timeout, 5))))
            budget = (connect_timeout + 1) * max(1, n) * 2 + 2
            self._nc = self._lt.run(_translated(self._connect(servers, name, connect_timeout, options)), budget)
        except BaseException:
            self._lt.stop(reason="the client failed to connect")
            raise
        self._finalizer = weakref.finalize(self, _finalize, self._lt, self._nc)

    async def _connect(self, servers: list[str], name: str | None, connect_timeout: int,
                       options: dict[str, Any]) -> _Nats:
        # nats-py retries a failed *initial* connect like a reconnect
        # (max_reconnect_attempts x reconnect_time_wait: two minutes by
        # default). As in nats.go without RetryOnFailedConnect, the first
        # connect tries each server once and then gives up with
        # NoServersError; the reconnect options apply once connected.
        nc = _Nats()
        nc.denied_cb = self._on_denied
        failures: list[BaseException] = []
        gave_up = asyncio.Event()
        connecting = True

        async def on_error(exc: Exception) -> None:
            if connecting:
                failures.append(exc)
                if len(failures) >= len(servers):
                    gave_up.set()
            await self._on_error(exc)

        attempt = asyncio.ensure_future(nc.connect(
            servers=servers, name=name, connect_timeout=connect_timeout,
            error_cb=on_error, disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected, closed_cb=self._on_closed,
            discovered_server_cb=self._on_discovered_server, lame_duck_mode_cb=self._on_lame_duck_mode,
            **options,
        ))
        giving_up = asyncio.ensure_future(gave_up.wait())
        try:
            await asyncio.wait({attempt, giving_up}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled by run(): timeout or Ctrl-C
            attempt.cancel()
            raise
        finally:
            giving_up.cancel()
        if attempt.done():
            connecting = False
            attempt.result()  # raises nats-py's error, translated by the caller
            return nc
        attempt.cancel()
        await asyncio.gather(attempt, return_exceptions=True)
        try:
            await nc.close()
        except Exception:  # pragma: no cover - half-open connection; the loop stops next anyway
            pass
        # An authorization failure is what the user needs to hear about, not
        # the connection reset that follows it.
        refused = [exc for exc in failures if _is_auth_failure(exc)]
        if refused:
            reason = str(refused[-1]).removeprefix("nats: ").strip("'") or "authorization violation"
            raise errors.AuthorizationError(
                f"{reason}: {_redact_urls(servers)} refused this connection's credentials "
                f"(user/password, token, nkey or JWT); not retrying") from refused[-1]
        last = failures[-1]
        hint = ""
        if options.get("tls") is not None and isinstance(last, (BrokenPipeError, ConnectionResetError)):
            # With TLS the server hangs up mid-handshake when it refuses us, most
            # often for a missing or untrusted client certificate.
            hint = " (the server closed the connection during the TLS handshake: check the client certificate)"
        raise errors.NoServersError(f"could not connect to any server of {_redact_urls(servers)}: "
                                    f"{_redact_text(repr(last), servers)}{hint}") from last

    # -- connection events (loop thread) ---------------------------------------

    def _dispatch_user(self, key: str, *args: Any) -> None:
        cb = self._user_callbacks.get(key)
        if cb is None or self._lt.closed:
            return
        with self._events_lock:
            if self._events is None:
                self._events = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jetstream-sync-events")
            try:
                self._events.submit(cb, *args)
            except RuntimeError:  # executor shut down while closing
                pass

    async def _on_error(self, exc: Exception) -> None:
        log.debug("jetstream_sync: connection error: %s", _redact_text(repr(exc), self._servers))
        self._dispatch_user("error_cb", translate(exc))

    async def _on_disconnected(self) -> None:
        log.info("jetstream_sync: disconnected")
        for lst in list(self._listeners):
            lst.on_disconnected()
        self._dispatch_user("disconnected_cb")

    async def _on_reconnected(self) -> None:
        self._nc.inbox_refused = None  # the reconnect subscribed again; the server may allow it now
        log.info("jetstream_sync: reconnected to %s", self.connected_url)
        for lst in list(self._listeners):
            lst.on_reconnected()
        self._dispatch_user("reconnected_cb")

    def _on_denied(self, what: str, subject: str) -> None:
        exc = _permission_error(f'permissions violation for {what} "{subject}"')
        if exc is None:  # pragma: no cover - the caller matched the same pattern
            return
        for lst in list(self._listeners):
            hook = getattr(lst, "on_permission_denied", None)
            if hook is not None:
                hook(subject, exc)

    async def _on_discovered_server(self) -> None:
        self._dispatch_user("discovered_server_cb")

    async def _on_lame_duck_mode(self) -> None:
        log.info("jetstream_sync: the server entered lame duck mode")
        self._dispatch_user("lame_duck_mode_cb")

    async def _on_closed(self) -> None:
        for lst in list(self._listeners):
            lst.on_closed()
        self._dispatch_user("closed_cb")

    def add_listener(self, listener: Listener) -> None:
        """Register connection-event hooks (loop thread)."""
        self._listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    # -- internals used by the rest of the package ------------------------------

    @property
    def loop_thread(self) -> EventLoopThread:
        return self._lt

    @property
    def default_timeout(self) -> float:
        return self._timeout

    def timeout_or_default(self, timeout: Any, name: str = "timeout") -> float | None:
        """Resolve a ``timeout=`` argument: :data:`DEFAULT` (not given) means the client default; so does
        ``...``, the default before there was a sentinel, which wrappers may still pass on."""
        if timeout is DEFAULT or timeout is ...:
            return self._timeout
        return check_timeout(timeout, name)

    def call(self, coro: Any, timeout: float | None) -> Any:
        """Run a coroutine on the loop, translating nats-py errors; block until done.

        Blocks at most ``timeout`` plus a grace period. Raises what the coroutine
        raises (translated), ``ClientClosedError``, ``TimeoutError``, or
        ``RuntimeError`` on the loop thread.
        """
        try:
            self._lt.check_usable()
        except BaseException:
            coro.close()  # never started: close it so it does not warn "never awaited"
            raise
        return self._lt.run(_translated(coro), timeout)

    def write_now(self, cmd: bytes) -> None:
        """(loop thread) Append a protocol command to the outbound buffer at once, ahead of the Outbox.

        Raises ClientClosedError (closed or draining) or NotConnectedError (disconnected with a full buffer).
        """
        self._nc.write_nowait(cmd)

    async def request(self, subject: str, payload: bytes, timeout: float | None,
                      headers: Mapping[str, str] | None = None) -> Reply:
        """(loop thread) A core request; the first reply. ``None`` waits without limit. Raises our
        errors, already translated (TimeoutError, NoRespondersError, PermissionViolationError, ...)."""
        # A message a consumer delivers keeps its stream subject, so nats-py's shared reply subscription
        # (which matches replies by subject) never sees it: a pull request by hand gets an inbox of its own.
        m = await _translated(self._nc.request(subject, payload, timeout=timeout if timeout is not None else 1e9,
                                               headers=dict(headers) if headers else None,
                                               old_style=_PULL_NEXT in subject))
        return Reply(m.subject, m.reply or "", m.data, m.headers or None)

    def write(self, cmd: bytes, owner: Any = None, token: Any = None) -> None:
        """Queue a protocol command for the loop thread; never blocks. Thread-safe.

        If writing fails, ``owner.fail(token, exc)`` is called on the loop thread.
        """
        self._outbox.put((cmd, owner, token))

    def _write_batch(self, items: list) -> None:
        nc = self._nc
        transport = nc._transport
        if not nc._pending and nc.is_connected and not nc.is_draining_pubs and transport:
            # Nothing of nats-py's is waiting to go out, so order is kept if this
            # batch goes straight to the socket: one write, no flusher hop.
            data = b"".join([item[0] for item in items])
            transport.write(data)
            nc.stats["out_msgs"] += len(items)
            return
        for cmd, owner, token in items:
            try:
                nc.write_nowait(cmd)
            except Exception as exc:
                if owner is not None:
                    owner.fail(token, exc)
                else:
                    log.warning("jetstream_sync: dropped a fire-and-forget write: %s", exc)

    def new_inbox(self) -> str:
        """A unique inbox subject (no I/O). Thread-safe."""
        return self._nc.new_inbox()

    async def subscribe_raw(self, subject: str, handler: RawHandler, queue: str = "") -> Any:
        """(loop thread) Subscribe with a raw handler; returns an opaque subscription handle with
        ``.subject``, for :meth:`unsubscribe_raw` and :meth:`mute`.

        The handler runs on the loop thread for every message (never user code).
        nats-py's pending limits do not apply: messages never sit in its queue.
        """
        sub = await self._nc.subscribe(subject, queue=queue, pending_msgs_limit=0, pending_bytes_limit=0)
        self._nc._raw_handlers[sub._id] = handler
        return sub

    def mute(self, sub: Any) -> None:
        """(loop thread) Drop whatever still arrives on ``sub`` until it is unsubscribed."""
        self._nc._raw_handlers[sub._id] = _ignore

    async def unsubscribe_raw(self, sub: Any, linger: float = 0.0) -> None:
        """Unsubscribe (loop thread). With ``linger`` the handler keeps seeing messages
        already on the wire for that many seconds, so it can hand them back."""
        handlers = self._nc._raw_handlers
        if not linger:
            handlers.pop(sub._id, None)
        if not self._nc.is_closed:
            try:
                await sub.unsubscribe()
            except nats.errors.Error:
                pass
        if linger:
            self._lt.loop.call_later(linger, handlers.pop, sub._id, None)

    # -- public API ----------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        """True while connected (False while reconnecting or after close). No I/O."""
        return not self._lt.closed and self._nc.is_connected

    @property
    def is_closed(self) -> bool:
        """True once :meth:`close` or :meth:`drain` finished (or the connection gave up)."""
        return self._lt.closed or self._nc.is_closed

    @property
    def connected_url(self) -> str | None:
        """The server URL currently connected to (credentials masked), or None. No I/O."""
        url = self._nc.connected_url
        return None if url is None else redact_url(url.geturl())

    @property
    def max_payload(self) -> int:
        """The server's maximum message size in bytes (from its INFO). No I/O."""
        return self._nc.max_payload

    def flush(self, timeout: Timeout = DEFAULT) -> None:
        """Block until the server has processed everything written so far (a PING/PONG).

        Raises TimeoutError, ClientClosedError.
        """
        t = self.timeout_or_default(timeout)
        self._lt.check_usable()
        # Outbox items scheduled before this call are flushed first: call_soon is FIFO.
        try:
            self.call(self._read_by_server(t if t is not None else 3600), t)
        except errors.TimeoutError as exc:
            raise errors.TimeoutError.after(f"flush to {self.connected_url or 'the server'}", t,
                                            "no PONG for the PING") from exc

    async def _read_by_server(self, timeout: float) -> None:
        """(loop thread) Return once the server has read every command written so far (a PING/PONG)."""
        nc = self._nc
        # nats-py writes its PING straight to the socket, ahead of commands
        # still buffered for the flusher; write those first so the PONG
        # really means "the server has everything sent before this".
        if nc.is_connected and nc._pending_data_size:
            nc._transport.writelines(nc._pending[:])
            nc._pending = []
            nc._pending_data_size = 0
        await nc.flush(timeout=int(timeout) + 1)

    async def round_trip(self, timeout: float) -> None:
        """(loop thread) One PING/PONG: once it returns, the server has read everything written
        before and every message it sent before its PONG has been handed to its handler.
        Raises TimeoutError, ClientClosedError (translated)."""
        await _translated(self._read_by_server(timeout))

    def confirm_writes(self, timeout: float | None = None) -> bool:
        """Block until the server has read every ack and publish written so far; True once it has.

        One PING/PONG, bounded by ``timeout`` (default: the client's). Returns False at once
        when the client is closed or disconnected (queued writes then go out on reconnect, or
        never), and False after ``timeout``. Never raises a client error; KeyboardInterrupt
        propagates. Used where "closed" must mean "the server has every ack" (consume, messages).
        """
        if self._lt.closed or not self._nc.is_connected or self._lt.on_loop_thread():
            return False
        try:
            self.flush(self._timeout if timeout is None else timeout)
            return True
        except errors.JetStreamError as exc:
            log.debug("jetstream_sync: could not confirm the last writes: %s", exc)
            return False

    @property
    def name(self) -> str | None:
        return self._name

    def __reduce__(self) -> Any:
        # Messages, streams and handles hold the connection: pickling one says what to do instead.
        raise TypeError(
            "a jetstream_sync connection (held by every Client, Msg and handle) is a live socket and a thread "
            "and cannot be pickled; pass the connection options (servers=..., credentials, ...) instead and "
            "call jetstream_sync.connect() where it is used"
        )

    @property
    def servers(self) -> list[str]:
        """The server URLs as given (may hold credentials: show them through ``redact_url``)."""
        return self._servers

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """``Client.drain``: read by the server, drain, close (blocks; idempotent)."""
        self._shutdown(drain=True, timeout=self.timeout_or_default(timeout))

    def close(self, timeout: Timeout = DEFAULT) -> None:
        """``Client.close``: flush, stop the loop thread and join it (blocks at most ``timeout``; idempotent)."""
        self._shutdown(drain=False, timeout=self.timeout_or_default(timeout))

    def _shutdown(self, drain: bool, timeout: float | None) -> None:
        with self._close_lock:
            if self._lt.closed:
                return
            if self._lt.on_loop_thread():
                raise RuntimeError("close() was called on the client's event loop thread; call it from another thread")
            budget = timeout if timeout is not None else 30.0
            if os.getpid() == self._lt._pid:

                async def go() -> None:
                    nc = self._nc
                    if nc.is_closed:
                        return
                    try:
                        # Everything written before close()/drain() (acks of handled
                        # messages, publishes) is read by the server before we hang up.
                        # While reconnecting a flush could only wait out its timeout.
                        if nc.is_connected:
                            await asyncio.wait_for(self._read_by_server(max(1.0, budget / 2)), budget / 2)
                        if drain:
                            await asyncio.wait_for(nc.drain(), budget)
                    except Exception:
                        pass
                    if not nc.is_closed:
                        try:
                            await nc.close()
                        except Exception as exc:  # e.g. ConnectionResetError: the server is already gone
                            log.debug("jetstream_sync: error while closing the connection: %r", exc)

                try:
                    self._lt.run(go(), budget)
                except (errors.JetStreamError, concurrent.futures.CancelledError):
                    pass
            self._lt.stop(timeout=budget if timeout else 5.0)
            for lst in list(self._listeners):
                try:
                    lst.on_closed()
                except Exception:  # pragma: no cover
                    log.exception("jetstream_sync: close listener failed")
            with self._events_lock:
                if self._events is not None:
                    # A callback that closes the client must not join its own thread.
                    on_events = threading.current_thread().name.startswith("jetstream-sync-events")
                    self._events.shutdown(wait=not on_events)
            self._finalizer.detach()

def raw_credentials(text: str) -> Any:
    """A creds file's content (JWT and seed) as nats-py's ``user_credentials`` takes it, no file needed."""
    return RawCredentials(text)


def _ignore(_subject: bytes, _reply: bytes, _data: bytes, _raw_headers: bytes) -> None:
    pass


def _finalize(lt: EventLoopThread, nc: _Nats) -> None:
    # The user forgot close(): stop the loop without the network round trip.
    if not lt.closed and not lt.on_loop_thread():
        lt.stop(timeout=1.0)


def redact_url(url: str) -> str:
    """``url`` with its credentials masked: ``nats://alice:***@host``, ``nats://***@host`` (a token)."""
    try:
        parts = urllib.parse.urlsplit(url if "://" in url else "nats://" + url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    masked = f"{user}:***" if has_password else "***"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{masked}@{hostport}"))


def _redact_urls(servers: Sequence[str]) -> list[str]:
    return [redact_url(s) for s in servers]


def _redact_text(text: str, servers: Sequence[str]) -> str:
    """``text`` with every server URL's credentials masked."""
    for url in servers:
        if "@" in url:
            text = text.replace(url, redact_url(url))
            userinfo = urllib.parse.urlsplit(url).netloc.rpartition("@")[0]
            for secret in userinfo.split(":")[-1:]:
                if secret:
                    text = text.replace(secret, "***")
    return text


def _read_credential_file(path: Any, name: str) -> str:
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path, got {type(path).__name__}")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {os.fspath(path)!r}: {exc.strerror or exc}") from None


def _check_credential_files(options: Mapping[str, Any]) -> None:
    """Check credential files before connecting (never echoing their content).

    nats-py reads them only once a server asks for a signature, and a creds
    file without a JWT block makes it loop forever on the event loop.
    """
    creds = options.get("user_credentials")
    if creds is not None:
        if isinstance(creds, tuple):
            if len(creds) != 2:
                raise ValueError("user_credentials: a tuple must be (jwt_file, seed_file)")
            _read_credential_file(creds[0], "user_credentials[0] (the JWT file)")
            _read_credential_file(creds[1], "user_credentials[1] (the seed file)")
        else:
            text = creds.data if hasattr(creds, "data") and isinstance(creds.data, str) else \
                _read_credential_file(creds, "user_credentials")
            lines = text.splitlines()
            jwt_at = next((i for i, line in enumerate(lines) if "BEGIN NATS USER JWT" in line), None)
            if jwt_at is None or jwt_at + 1 >= len(lines) or not lines[jwt_at + 1].strip() \
                    or not any("BEGIN USER NKEY SEED" in line for line in lines):
                raise ValueError("user_credentials: not a NATS creds file (it needs a 'BEGIN NATS USER JWT' "
                                 "block and a 'BEGIN USER NKEY SEED' block)")
    seed_file = options.get("nkeys_seed")
    if seed_file is not None:
        _read_credential_file(seed_file, "nkeys_seed")
    seed = options.get("nkeys_seed_str")
    if seed is not None and not isinstance(seed, str):
        raise TypeError(f"nkeys_seed_str must be a str, got {type(seed).__name__}")


DEFAULT_URL = "nats://127.0.0.1:4222"


def default_servers() -> str:
    """``$NATS_URL`` when set (the NATS tools' convention), else ``nats://127.0.0.1:4222``."""
    return os.environ.get("NATS_URL") or DEFAULT_URL


def _normalize_servers(servers: Any) -> list[str]:
    if servers is None:
        servers = default_servers()
    if isinstance(servers, str):
        out = [s.strip() for s in servers.split(",") if s.strip()]
    elif isinstance(servers, (list, tuple)):
        out = list(servers)
    else:
        raise TypeError(f"servers must be a URL string or a list of URLs, got {type(servers).__name__}")
    if not out or not all(isinstance(s, str) and s for s in out):
        shown = _redact_urls(out) if all(isinstance(s, str) for s in out) else f"a list of {len(out)} items"
        raise ValueError(f"servers must name at least one server URL (non-empty strings), got {shown!r}")
    for url in out:
        scheme, sep, _ = url.partition("://")
        if sep and scheme not in _SCHEMES:
            # nats-py would take "http" for a host name and report a DNS failure.
            raise ValueError(f"servers: {redact_url(url)!r} is not a NATS server URL (scheme {scheme!r}); a server "
                             f"URL starts with nats://, tls://, ws:// or wss:// (or is host:port)")
    return out


#: The URL schemes nats-py connects with.
_SCHEMES = ("nats", "tls", "ws", "wss")
