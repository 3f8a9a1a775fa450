# The pull engine: pull requests, status handling and hand-over to user
# threads, run on the loop thread (ADR-37 "Consume specification").
#
# Rule 1: one inbox subscription per pull call; its raw handler runs on the
#         loop thread, never blocks and never runs user code: messages go into
#         a queue.SimpleQueue that the user's thread reads.
# Rule 2: status sorting (``classify_status``) and option rules
#         (``fetch_options``) are pure functions, unit tested without a server.
# Rule 3: a pull that ends unsubscribes its inbox at once, so the server drops
#         any request still waiting on it and no later pull loses a message.
from __future__ import annotations

import asyncio
import datetime as _dt
import enum
import json
import queue
import time
from typing import TYPE_CHECKING, Any, Iterator

import attrs

from . import errors
from ._headers import decode_headers
from ._loop import WAKE_INTERVAL
from .message import Msg

if TYPE_CHECKING:
    from .consumer import Consumer

__all__ = ["FetchOptions", "MessageBatch", "Status", "classify_status", "fetch_options"]

#: With max_bytes the request's batch is set this high, so bytes are the limit (ADR-37).
BYTES_BATCH = 1_000_000
#: Extra time the client waits beyond the server-side ``expires``.
CLIENT_MARGIN = 1.0


class Status(enum.Enum):
    """What a status message means for a pull."""

    HEARTBEAT = "heartbeat"  # 100 Idle Heartbeat: resets the timer, nothing else
    END = "end"              # the pull finished quietly (404, 408, 409 batch completed / max bytes)
    WARNING = "warning"      # the pull was refused but the consumer is fine (409 Exceeded ...)
    TERMINAL = "terminal"    # stop for good (409 Consumer Deleted, 409 push based, 400, ...)


def classify_status(code: str, description: str) -> tuple[Status, BaseException | None]:
    """Sort a pull status message (ADR-37 "Status handling"); return the kind and the error to report."""
    desc = description.lower()
    if code == "100":
        return Status.HEARTBEAT, None
    if code in ("404", "408"):
        return Status.END, None
    if code == "409":
        if "consumer deleted" in desc:
            return Status.TERMINAL, errors.ConsumerDeletedError("the consumer was deleted (409 Consumer Deleted)")
        if "push based" in desc:
            return Status.TERMINAL, errors.APIError(409, None, description or "Consumer is push based")
        if "message size exceeds maxbytes" in desc or "batch completed" in desc:
            return Status.END, None
        if "exceeded max" in desc or "leadership change" in desc:
            return Status.WARNING, errors.APIError(409, None, description)
        return Status.WARNING, errors.APIError(409, None, description)
    if code == "503":
        return Status.TERMINAL, errors.NoRespondersError("no responders for the pull request (503)")
    return Status.TERMINAL, errors.APIError(int(code) if code.isdigit() else None, None,
                                            description or f"pull failed with status {code}")


def _seconds(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (a number or timedelta), got {value!r}")
    if not value > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
    return float(value)


def _count(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value!r}")
    return value


@attrs.frozen(kw_only=True)
class FetchOptions:
    """A validated one-shot pull: what goes into the ``CONSUMER.MSG.NEXT`` request."""

    batch: int
    max_bytes: int | None
    expires: float
    idle_heartbeat: float | None
    no_wait: bool = False

    def request(self) -> dict[str, Any]:
        req: dict[str, Any] = {"batch": self.batch}
        if self.max_bytes is not None:
            req["max_bytes"] = self.max_bytes
        if self.no_wait:
            req["no_wait"] = True
        else:
            req["expires"] = int(self.expires * 1e9)
        if self.idle_heartbeat is not None:
            req["idle_heartbeat"] = int(self.idle_heartbeat * 1e9)
        return req

    @property
    def client_deadline(self) -> float:
        """Seconds the client waits: always longer than the server-side ``expires``."""
        return self.expires + max(CLIENT_MARGIN, self.expires * 0.1)


def fetch_options(max_messages: Any = None, max_bytes: Any = None, expires: Any = 30.0,
                  idle_heartbeat: Any = None, no_wait: bool = False) -> FetchOptions:
    """Apply ADR-37's rules for fetch/next: exactly one of max_messages/max_bytes, positive expiry,
    heartbeat at most half the expiry, on by default from 10 s expiries (5 s, as nats.go)."""
    max_messages = _count(max_messages, "max_messages")
    max_bytes = _count(max_bytes, "max_bytes")
    if max_messages is not None and max_bytes is not None:
        raise ValueError("max_messages and max_bytes are exclusive: give exactly one")
    if max_messages is None and max_bytes is None:
        raise ValueError("give exactly one of max_messages or max_bytes")
    exp = _seconds(expires, "expires")
    if exp is None:
        raise ValueError("expires must be > 0 seconds, got None")
    hb = _seconds(idle_heartbeat, "idle_heartbeat")
    if hb is not None and hb > exp / 2:
        raise ValueError(f"idle_heartbeat must be at most half of expires ({exp / 2:.3g}s), got {hb:.3g}s")
    if hb is None and exp >= 10 and not no_wait:
        hb = 5.0
    return FetchOptions(batch=max_messages if max_messages is not None else BYTES_BATCH, max_bytes=max_bytes,
                        expires=exp, idle_heartbeat=None if no_wait else hb, no_wait=no_wait)


_END = object()


class _FetchPull:
    """One pull request on its own inbox (loop thread). Feeds a SimpleQueue; ends exactly once."""

    def __init__(self, consumer: "Consumer", opts: FetchOptions) -> None:
        self._consumer = consumer
        self._client = consumer.client
        self._opts = opts
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self.received = 0
        self.received_bytes = 0
        self._sub: Any = None
        self._ended = False
        self._last_seen = time.monotonic()
        self._watchdog: asyncio.TimerHandle | None = None
        self._deadline: float = 0.0

    async def start(self) -> None:
        client = self._client
        inbox = client.new_inbox()
        self._sub = await client.subscribe_raw(inbox, self._on_msg)
        client.add_listener(self)
        subject = self._consumer.js.api.msg_next(self._consumer.stream_name, self._consumer.name)
        body = json.dumps(self._opts.request(), separators=(",", ":")).encode()
        client.nc.write_nowait(f"PUB {subject} {inbox} {len(body)}\r\n".encode() + body + b"\r\n")
        now = time.monotonic()
        self._last_seen = now
        self._deadline = now + self._opts.client_deadline
        self._arm()

    def _arm(self) -> None:
        loop = self._client.loop_thread.loop
        hb = self._opts.idle_heartbeat
        wait = self._deadline - time.monotonic()
        if hb is not None:
            wait = min(wait, self._last_seen + 2 * hb - time.monotonic())
        self._watchdog = loop.call_later(max(0.0, wait), self._on_timer)

    def _on_timer(self) -> None:
        if self._ended:
            return
        now = time.monotonic()
        if now >= self._deadline:
            self.end(None)  # the server should have ended it; finishing is not an error
            return
        hb = self._opts.idle_heartbeat
        if hb is not None and now - self._last_seen >= 2 * hb:
            self.end(errors.NoHeartbeatError(f"no heartbeat for {2 * hb:.3g}s during fetch"))
            return
        self._arm()

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        if self._ended:
            return
        self._last_seen = time.monotonic()
        if raw_headers and not data and raw_headers.startswith(b"NATS/1.0 "):
            hdrs = decode_headers(raw_headers)
            if hdrs is not None and hdrs.get("Status"):
                kind, err = classify_status(hdrs["Status"], hdrs.get("Description", ""))
                if kind is Status.HEARTBEAT:
                    return
                self.end(err if kind is not Status.END else None)
                return
        self.received += 1
        size = len(subject) + len(reply) + len(raw_headers) + len(data)
        self.received_bytes += size
        self.out.put(Msg(self._client, subject.decode(), reply.decode(), data, raw_headers))
        opts = self._opts
        if self.received >= opts.batch or (opts.max_bytes is not None and self.received_bytes >= opts.max_bytes):
            self.end(None)

    def end(self, err: BaseException | None) -> None:
        """Finish the pull (loop thread): unsubscribe, then tell the reader. Idempotent."""
        if self._ended:
            return
        self._ended = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._client.remove_listener(self)
        if self._sub is not None:
            self._client.loop_thread.spawn(self._client.unsubscribe_raw(self._sub), name="jetstream-sync-unsub")
        self.out.put((_END, err))

    # connection events (loop thread)
    def on_disconnected(self) -> None: ...

    def on_reconnected(self) -> None: ...

    def on_closed(self) -> None:
        self.end(errors.ClientClosedError("the client closed during the fetch"))


class MessageBatch:
    """The result of ``fetch()``: iterate to get messages as they arrive.

    Iteration blocks the calling thread (waking every 0.25 s, so Ctrl-C lands;
    an interrupt cancels the pull) and ends when the pull ends. A terminal
    error (consumer deleted, 400, connection closed) is raised once every
    message received before it was yielded, and is kept in ``error``.
    Not thread-safe: iterate from one thread.
    """

    def __init__(self, pull: _FetchPull, client_deadline: float) -> None:
        self._pull = pull
        self._deadline = time.monotonic() + client_deadline + 1.0
        self.error: BaseException | None = None
        self._done = False
        self.received = 0

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        get = self._pull.out.get
        lt = self._pull._client.loop_thread
        try:
            while True:
                try:
                    item = get(timeout=WAKE_INTERVAL)
                except queue.Empty:
                    if lt.closed:
                        self._finish(errors.ClientClosedError("the client was closed during the fetch"))
                    if time.monotonic() > self._deadline:
                        # The loop missed its own deadline: end the pull from here.
                        self.stop()
                        self._finish(None)
                        raise StopIteration from None
                    continue
                if type(item) is tuple and item and item[0] is _END:
                    self._finish(item[1])
                    raise StopIteration
                self.received += 1
                return item
        except (StopIteration, errors.JetStreamError):
            raise
        except BaseException:
            # KeyboardInterrupt (also from _thread.interrupt_main(), which lands
            # after the 0.25 s wait returns): leave no pull behind on the server.
            self.stop()
            raise

    def _finish(self, err: BaseException | None) -> None:
        self._done = True
        if err is not None:
            self.error = err
            raise err

    def stop(self) -> None:
        """Abandon the pull: the inbox is unsubscribed; messages not yet read are redelivered by the server."""
        try:
            self._pull._client.loop_thread.call_soon(self._pull.end, None)
        except errors.ClientClosedError:
            pass

    def __enter__(self) -> "MessageBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_fetch(consumer: "Consumer", opts: FetchOptions, timeout: float | None = None) -> MessageBatch:
    """Send the pull request now (blocking until it is queued, at most ``timeout`` or the
    context's timeout) and return the batch to iterate."""
    pull = _FetchPull(consumer, opts)
    consumer.client.call(pull.start(), timeout if timeout is not None else consumer.js.timeout)
    return MessageBatch(pull, opts.client_deadline)
