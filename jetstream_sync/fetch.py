# The caller's side of one-shot pulls, for any thread that asks: ``MessageBatch`` (what ``fetch()``
# returns, iterated on the caller's thread) and ``NextCall`` (the waiting half of ``next()`` on a
# long-lived inbox). The loop-thread halves, the pull on its own inbox and the inbox itself, are
# pull.py's; the handle (consumer.py) joins the two, so this module imports no engine.
#
# Rule 1: waits wake every 0.25 s (Ctrl-C lands; an interrupt withdraws the pull); a message is built
#         on the caller's thread, never on the loop.
# Rule 2: nothing received is lost: a batch stopped early NAKs what it did not yield; a next() that
#         gave up retires its inbox, so the server drops the request still waiting there.
from __future__ import annotations

import json
import queue
import time
from typing import Any, Iterator, Protocol

from . import errors
from ._engine import HeartbeatWatch, Target, Terminal, lost_verdict
from ._loop import WAKE_INTERVAL
from ._protocol import Status, classify_status, status_of
from .message import Msg

__all__ = ["MessageBatch", "NextCall", "OneShot", "lost_consumer_sync", "request_body"]

#: How long a next() waits for the consumer info that tells a consumer (or stream) that is gone.
CHECK_TIMEOUT = 2.0
#: The statuses after which next() asks the server whether its consumer is gone.
_LOST = (errors.ConsumerDeletedError, errors.NoRespondersError)
#: Status kinds that only show the consumer is alive.
_IDLE = (Status.HEARTBEAT, Status.FLOW_CONTROL)


def request_body(opts: Any) -> bytes:
    """The JSON body of the pull request of ``opts`` (no I/O)."""
    return json.dumps(opts.request(), separators=(",", ":")).encode()


def lost_consumer_sync(target: Target, err: BaseException) -> BaseException:
    """After a 409 Consumer Deleted, a 503 or a missed heartbeat on ``next()``, ask the server once
    (a consumer info request, blocking at most :data:`CHECK_TIMEOUT`) whether the consumer and its
    stream still exist; return the error the call raises (``_engine.lost_verdict``). Not asked while
    disconnected. Never raises."""
    if not target.conn.is_connected or target.jsapi is None:
        return err
    try:
        target.jsapi.request(target.info_subject(), None, CHECK_TIMEOUT, idempotent=False)
    except errors.JetStreamError as exc:
        return lost_verdict(target, err, exc)
    return err


class OneShot(Protocol):
    """What a batch reads of its pull (pull.FetchPull, on the loop thread)."""

    #: Lists of messages, then one ``Terminal``.
    out: queue.SimpleQueue
    #: Asking whether the consumer is gone: the batch waits for the answer past its own deadline.
    checking: bool
    received: int

    @property
    def conn(self) -> Any: ...

    def unfinished(self) -> bool: ...

    def abandon(self, unread: list[Msg] | None = None) -> None: ...


class MessageBatch:
    """The result of ``fetch()``: iterate to get messages as they arrive.

    Iteration blocks the calling thread (waking every 0.25 s, so Ctrl-C lands;
    an interrupt cancels the pull) and ends when the pull ends. A terminal
    error (consumer deleted, 400, connection closed) is raised once every
    message received before it was yielded, and is kept in ``error``.
    Not thread-safe: iterate from one thread.
    """

    def __init__(self, pull: OneShot, client_deadline: float) -> None:
        self._pull = pull
        self._deadline = time.monotonic() + client_deadline + 1.0
        self.error: BaseException | None = None
        self._done = False
        self.received = 0
        self._ready: list[Msg] = []  # taken from the pull, not yet yielded (reversed: pop() is the next)

    def __iter__(self) -> Iterator[Msg]:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        # Handler around a call, not around the loop (see MessageStream.next).
        try:
            return self._next()
        except (StopIteration, errors.JetStreamError):
            raise
        except BaseException:
            # KeyboardInterrupt: leave no pull behind on the server.
            self.stop()
            raise

    def _next(self) -> Msg:
        ready = self._ready
        if ready:
            self.received += 1
            return ready.pop()
        get = self._pull.out.get
        lt = self._pull.conn.loop_thread
        while True:
            try:
                item = get(timeout=WAKE_INTERVAL)
            except queue.Empty:
                if lt.closed:
                    self._finish(errors.ClientClosedError("the client was closed during the fetch"))
                if time.monotonic() > self._deadline and not self._pull.checking:
                    # The loop missed its own deadline: end the pull from here.
                    self.stop()
                    self._finish(None)
                    raise StopIteration from None
                continue
            if type(item) is Terminal:
                self._finish(item.error)
                raise StopIteration
            item.reverse()
            self._ready = ready = item
            self.received += 1
            return ready.pop()

    def _finish(self, err: BaseException | None) -> None:
        self._done = True
        if err is not None:
            self.error = err
            raise err

    @property
    def unread(self) -> bool:
        """True while the pull may hold messages not yet read: more may still arrive, or some
        arrived and were not iterated. No I/O; read on any thread (a stale answer errs to True)."""
        pull = self._pull
        return pull.unfinished() or pull.received > self.received

    def stop(self) -> None:
        """Abandon the pull: the inbox is unsubscribed, and messages received but not yet read (or
        still on the wire) are NAKed, so the server redelivers them at once. Never blocks."""
        if self._done:
            return  # iterated to its end: nothing unread
        ready, self._ready = self._ready, []  # taken from the pull, never yielded: the pull NAKs them
        try:
            self._pull.conn.loop_thread.call_soon(self._pull.abandon, ready[::-1])
        except errors.ClientClosedError:
            pass

    def __enter__(self) -> "MessageBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class NextCall:
    """One ``next()`` on a long-lived inbox (pull.NextInbox, reserved with ``try_acquire``): sends a
    one-message pull and waits for its answer on the calling thread, where the message is built.
    A call that ends abnormally (interrupted, or the client gave up before the server's expiry)
    retires the inbox, so the request still waiting on it cannot take the next message."""

    def __init__(self, inbox: Any, target: Target) -> None:
        self._inbox = inbox
        self._target = target
        self._conn = target.conn
        self._ok = False

    def run(self, opts: Any, what: str, body: bytes | None = None) -> Msg:
        """Send the pull (``body``: ``opts``' request as JSON, if the caller keeps it) and wait."""
        inbox = self._inbox
        token, q = inbox.begin()
        if body is None:
            body = request_body(opts)
        # Everything the wait needs is ready before the write: after it this thread only blocks,
        # leaving the GIL to the loop thread it wakes.
        now = time.monotonic()
        deadline = now + opts.client_deadline
        heartbeat = HeartbeatWatch(opts.idle_heartbeat)
        self._head = head = b"PUB " + inbox.subject + b" " + inbox.prefix + token
        self._server_end = now + opts.expires
        cmd = head + b" %d\r\n" % len(body) + body + b"\r\n"
        # The cleanup wraps a call, not the wait loop (see MessageStream.next).
        try:
            self._conn.write(cmd)
            return self._wait(q, opts, what, deadline, heartbeat)
        finally:
            inbox.finish(self._ok)

    def _pull_rest(self, opts: Any) -> bool:
        """A 423: the group's pin is no longer this handle's (ADR-42). Forget the pin id and pull again,
        without it, until the first pull's end; False when no time is left."""
        opts.priority.pin.refused()
        rest = opts.rest(0, 0, self._server_end - time.monotonic())
        if rest is None:
            return False
        body = request_body(rest)
        self._conn.write(self._head + b" %d\r\n" % len(body) + body + b"\r\n")
        return True

    def _wait(self, q: queue.SimpleQueue, opts: Any, what: str, deadline: float, heartbeat: HeartbeatWatch) -> Msg:
        client = self._conn
        pin = opts.priority.pin if opts.priority is not None else None
        while True:
            try:
                item = q.get(timeout=WAKE_INTERVAL)
            except queue.Empty:
                now = time.monotonic()
                # is_closed, not lt.closed: a connection that gave up reconnecting
                # is closed while the loop thread still runs.
                if client.is_closed:
                    raise errors.ClientClosedError("the client was closed during next()") from None
                if now > deadline:
                    raise errors.TimeoutError.after(what, opts.expires, "no message") from None
                if heartbeat.missed(now):  # gone without a word (a deleted stream may drop the pull)?
                    self._inbox.current = None  # what still comes is NAKed while we ask
                    raise lost_consumer_sync(self._target, errors.NoHeartbeatError(
                        f"{what}: no heartbeat for {heartbeat.limit:.3g}s")) from None
                continue
            if len(item) == 1:  # the server refused the pull or the inbox
                self._ok = True
                raise item[0]
            subject, reply, data, raw = item
            heartbeat.seen()
            status = status_of(raw, data) if raw and not data else None
            if status is not None:
                target = self._target
                kind, err = classify_status(status[0], status[1].get("Description", ""), target.stream,
                                            target.consumer)
                if kind in _IDLE:
                    continue
                if isinstance(err, errors.PinIdMismatchError) and pin is not None:
                    if self._pull_rest(opts):
                        continue
                    kind = Status.END  # no time left to pull again: as if it had expired
                self._ok = True  # the server ended this request itself
                if kind is Status.END:
                    raise errors.TimeoutError.after(what, opts.expires, "no message")
                assert err is not None
                if isinstance(err, _LOST):  # is it gone? one consumer info request says
                    self._inbox.current = None
                    raise lost_consumer_sync(target, err)
                raise err
            self._ok = True
            if pin is not None and raw:
                pin.seen(raw)
            return Msg(client, subject.decode(), reply.decode(), data, raw, None, reply)
