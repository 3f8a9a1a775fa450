# The connection: one nats-py client owned by one private event loop thread, and everything the
# rest of the package does with it (write, request, subscribe an inbox, wait for the server to read
# what was written, shut down). The nats-py client itself, adapted, and the translation of its
# exceptions live in ``_nats``; server URLs and credential files in ``_servers``.
#
# Rule 1: with ``_nats`` and its ``_parser``, the only modules that import nats-py
#         (``_nats.translate`` is the only place nats-py exceptions become ours). Nothing above this
#         module sees a nats-py object: replies come back as ``Reply`` tuples, subscriptions as
#         opaque handles, inbox messages as raw bytes.
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
import ssl
import threading
import weakref
from typing import Any, Mapping, NamedTuple, Sequence

import nats
import nats.errors
from nats.aio.client import RawCredentials

from . import errors
from ._loop import EventLoopThread, Outbox
from ._nats import Nats, RawHandler, is_auth_failure, permission_error, translate, translated
from ._protocol import DEFAULT, Timeout, check_timeout
from ._servers import check_credential_files, normalize_servers, redact_text, redact_url, redact_urls

__all__ = ["Connection", "Listener", "RawHandler", "Reply", "raw_credentials", "translate"]

log = logging.getLogger(__name__)

_USER_CALLBACKS = ("error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "discovered_server_cb",
                   "lame_duck_mode_cb")

#: In the subject of a pull request ($JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, also under a domain).
_PULL_NEXT = ".CONSUMER.MSG.NEXT."


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
        servers = normalize_servers(servers)
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
        check_credential_files(options)
        self._user_callbacks = user_callbacks
        self._events: concurrent.futures.ThreadPoolExecutor | None = None
        self._events_lock = threading.Lock()
        self._listeners: set[Listener] = set()
        self._close_lock = threading.Lock()
        self._inbox_ids = itertools.count(1)
        self._lt = EventLoopThread(f"jetstream-sync-loop-{name or 'client'}")
        self._lt.start()
        self._outbox = Outbox(self._lt, self._write_batch)
        self._nc: Nats
        try:
            n = len(servers)
            connect_timeout = options.pop("connect_timeout", max(1, int(min(self._timeout, 5))))
            budget = (connect_timeout + 1) * max(1, n) * 2 + 2
            self._nc = self._lt.run(translated(self._connect(servers, name, connect_timeout, options)), budget)
        except BaseException:
            self._lt.stop(reason="the client failed to connect")
            raise
        self._finalizer = weakref.finalize(self, _finalize, self._lt, self._nc)

    async def _connect(self, servers: list[str], name: str | None, connect_timeout: int,
                       options: dict[str, Any]) -> Nats:
        # nats-py retries a failed *initial* connect like a reconnect
        # (max_reconnect_attempts x reconnect_time_wait: two minutes by
        # default). As in nats.go without RetryOnFailedConnect, the first
        # connect tries each server once and then gives up with
        # NoServersError; the reconnect options apply once connected.
        nc = Nats()
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
        raise _connect_failure(failures, servers, options)

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
        log.debug("jetstream_sync: connection error: %s", redact_text(repr(exc), self._servers))
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
        exc = permission_error(f'permissions violation for {what} "{subject}"')
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
        return self._lt.run(translated(coro), timeout)

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
        m = await translated(self._nc.request(subject, payload, timeout=timeout if timeout is not None else 1e9,
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
        nc = self._nc
        sid = nc._sid + 1  # the id nats-py gives it, synchronously, before its first suspension point
        try:
            sub = await nc.subscribe(subject, queue=queue, pending_msgs_limit=0, pending_bytes_limit=0)
        except asyncio.CancelledError:
            # The caller gave up while the SUB was being written: nats-py registered it all the same, and
            # nobody holds a handle to unsubscribe it with. Unsubscribe it here, or it stays for good.
            orphan = nc._subs.get(sid)
            if orphan is not None and orphan.subject == subject:
                self._lt.spawn(self.unsubscribe_raw(orphan), name="jetstream-sync-unsub")
            raise
        nc._raw_handlers[sub._id] = handler
        return sub

    def mute(self, sub: Any) -> None:
        """(loop thread) Drop whatever still arrives on ``sub`` until it is unsubscribed."""
        self._nc._raw_handlers[sub._id] = _ignore

    def reroute(self, sub: Any, handler: RawHandler) -> None:
        """(loop thread) Hand whatever still arrives on ``sub`` to ``handler`` instead (loop thread, as
        any raw handler), e.g. to hand back what a request dropped for a newer one still delivers."""
        self._nc._raw_handlers[sub._id] = handler

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

    @property
    def server_version(self) -> str:
        """The version of the server connected to (from its INFO; "" before the first connect). No I/O."""
        return str((getattr(self._nc, "_server_info", None) or {}).get("version", ""))

    @property
    def api_level(self) -> int:
        """The JetStream API level of the server connected to (its INFO's ``api_lvl``; 0 for servers
        before 2.11, which have none). No I/O."""
        level = (getattr(self._nc, "_server_info", None) or {}).get("api_lvl", 0)
        return level if isinstance(level, int) else 0

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
        await translated(self._read_by_server(timeout))

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

def _connect_failure(failures: list[BaseException], servers: list[str], options: Mapping[str, Any]) -> BaseException:
    """What to raise when every server of a first connect failed (credentials masked)."""
    # An authorization failure is what the user needs to hear about, not
    # the connection reset that follows it.
    refused = [exc for exc in failures if is_auth_failure(exc)]
    if refused:
        reason = str(refused[-1]).removeprefix("nats: ").strip("'") or "authorization violation"
        exc: BaseException = errors.AuthorizationError(
            f"{reason}: {redact_urls(servers)} refused this connection's credentials "
            f"(user/password, token, nkey or JWT); not retrying")
        exc.__cause__ = refused[-1]
        return exc
    last = failures[-1]
    hint = ""
    if options.get("tls") is not None and isinstance(last, (BrokenPipeError, ConnectionResetError)):
        # With TLS the server hangs up mid-handshake when it refuses us, most
        # often for a missing or untrusted client certificate.
        hint = " (the server closed the connection during the TLS handshake: check the client certificate)"
    exc = errors.NoServersError(f"could not connect to any server of {redact_urls(servers)}: "
                                f"{redact_text(repr(last), servers)}{hint}")
    exc.__cause__ = last
    return exc


def raw_credentials(text: str) -> Any:
    """A creds file's content (JWT and seed) as nats-py's ``user_credentials`` takes it, no file needed."""
    return RawCredentials(text)


def _ignore(_subject: bytes, _reply: bytes, _data: bytes, _raw_headers: bytes) -> None:
    pass


def _finalize(lt: EventLoopThread, nc: Nats) -> None:
    # The user forgot close(): stop the loop without the network round trip.
    if not lt.closed and not lt.on_loop_thread():
        lt.stop(timeout=1.0)
