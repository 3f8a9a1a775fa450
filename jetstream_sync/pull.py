# The pull engines: pull requests, status handling and hand-over to user
# threads, run on the loop thread (ADR-37 "Consume specification"): the one-shot
# pull of fetch(), the inbox of next() and the continuous pull of messages() and
# consume(). What the user's thread does with them is fetch.py's and consume.py's.
#
# Rule 1: one inbox subscription per pull call; its raw handler runs on the
#         loop thread, never blocks and never runs user code: messages go into
#         a queue.SimpleQueue that the user's thread reads.
# Rule 2: option rules (``fetch_options``) are pure functions, unit tested without a server;
#         status sorting is ``_protocol.classify_status``.
# Rule 3: a pull that ends unsubscribes its inbox at once, so the server drops
#         any request still waiting on it and no later pull loses a message.
# Rule 4: a consumer resumed through a connection (``wake_resumed``) has each continuous
#         pull of it on that connection pull again at once: the server does not go back to the
#         requests that waited through the pause. The registry of running pulls is written on
#         the loop threads and read by the resuming thread, under its lock.
# Rule 5: a replicated consumer's new leader (its 409 Leadership Change, or its leader-elected
#         advisory, which a continuous pull follows) has the pull pull again at once: the requests
#         that waited at the old leader are gone, and nothing else would say so before the heartbeat.
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import queue
import threading
import time
from time import monotonic as _monotonic
from typing import Any

from . import errors
from ._connection import Connection, translate
from ._delivery import ACK_PREFIX, Delivery
from ._engine import HeartbeatWatch, ResetHook, Sink, Target, Terminal, Warning_, lost_verdict
from ._protocol import NAK, Status, ack_command, classify_status, pub_command, spelled, status_of
from .message import Msg
from .pull_options import BYTES_BATCH, ConsumeOptions, FetchOptions

__all__ = ["ContinuousPull", "FetchPull", "NextInbox", "PullCredit", "lost_consumer", "wake_resumed"]

log = logging.getLogger(__name__)

#: Status kinds that only show the consumer is alive (a flow-control request never comes to a pull).
_IDLE = (Status.HEARTBEAT, Status.FLOW_CONTROL)


#: How long a pull waits for the consumer info that tells a consumer (or stream) that is gone from a
#: passing 503 (a leader election); past it, the pull ends with what the server said.
CHECK_TIMEOUT = 2.0  # the same bound as fetch.CHECK_TIMEOUT (next())
#: The statuses after which a pull asks the server whether its consumer is gone.
_LOST = (errors.ConsumerDeletedError, errors.NoRespondersError)


async def lost_consumer(target: Target, err: BaseException) -> BaseException:
    """(loop thread) After a 409 Consumer Deleted, a 503 or a missed heartbeat on a pull, ask the server
    once (a consumer info request, at most :data:`CHECK_TIMEOUT`) whether the consumer and its stream
    still exist; return the error the pull ends with (:func:`_verdict`). Not asked while disconnected.
    Never raises."""
    if not target.conn.is_connected or target.jsapi is None:
        return err
    try:
        await target.jsapi.request_async(target.info_subject(), None, CHECK_TIMEOUT, idempotent=False)
    except Exception as exc:  # noqa: BLE001 - any failure to answer leaves err as it is
        return lost_verdict(target, err, exc)
    return err


class FetchPull:
    """One pull request on its own inbox (loop thread). Feeds a SimpleQueue; ends exactly once."""

    def __init__(self, target: Target, opts: FetchOptions) -> None:
        self._target = target
        self._conn = target.conn
        self._opts = opts
        #: Lists of messages (each run of deliveries the loop read together), then one ``Terminal``.
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self._batch: list[Msg] = []  # received since the last hand-over (loop thread)
        self.received = 0
        self.received_bytes = 0
        self._sub: Any = None
        self._ended = False
        self._heartbeat = HeartbeatWatch(opts.idle_heartbeat)
        self._watchdog: asyncio.TimerHandle | None = None
        self._deadline: float = 0.0
        #: A consumer info request is on its way (the pull saw 409 Consumer Deleted or 503).
        self.checking = False
        #: The handle's pin of a pinned priority group (ADR-42), None for any other pull.
        self._pin = opts.priority.pin if opts.priority is not None else None
        self._server_end = 0.0  # when the server ends the pull (monotonic), for a pull sent again

    @property
    def conn(self) -> Any:
        return self._conn

    def unfinished(self) -> bool:
        """True while more may still arrive (not ended, batch not complete). No I/O."""
        return not self._ended and self.received < self._opts.batch

    def start_soon(self) -> None:
        """Schedule ``start()`` on the loop without waiting for it (any thread). Never blocks."""
        lt = self._conn.loop_thread
        lt.call_soon(lambda: lt.spawn(self.start(), name="jetstream-sync-fetch"))

    async def start(self) -> None:
        if self._ended:  # stopped before it began
            return
        client = self._conn
        inbox = client.new_inbox()
        try:
            self._sub = await client.subscribe_raw(inbox, self._on_msg)
        except Exception as exc:
            self.end(translate(exc))
            return
        if self._ended:
            await client.unsubscribe_raw(self._sub)
            return
        client.add_listener(self)
        subject = self._target.subject
        self._watched = {subject.lower(): subject, inbox.lower(): inbox}
        body = json.dumps(self._opts.request(), separators=(",", ":")).encode()
        try:
            client.write_now(pub_command(subject, inbox, body, b""))
        except errors.JetStreamError as exc:
            self.end(exc)
            return
        self._heartbeat.seen()
        now = time.monotonic()
        self._deadline = now + self._opts.client_deadline
        self._server_end = now + self._opts.expires
        self._arm()

    def _arm(self) -> None:
        loop = self._conn.loop_thread.loop
        now = time.monotonic()
        wait = min(self._deadline - now, self._heartbeat.due_in(now))
        self._watchdog = loop.call_later(max(0.0, wait), self._on_timer)

    def _on_timer(self) -> None:
        if self._ended:
            return
        now = time.monotonic()
        if now >= self._deadline:
            self.end(None)  # the server should have ended it; finishing is not an error
            return
        if self._heartbeat.missed(now):
            # The server may drop a waiting pull without a word when the stream is deleted.
            self._check(errors.NoHeartbeatError(
                f"fetch from {self._target.label}: no heartbeat for {self._heartbeat.limit:.3g}s"))
            return
        self._arm()

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        if self._ended:
            if reply.startswith(ACK_PREFIX):  # on the wire when the pull ended: hand it back at once
                self._nak(reply)
            return
        self._heartbeat.seen()
        status = status_of(raw_headers, data) if raw_headers and not data else None
        if status is not None:
            target = self._target
            kind, err = classify_status(status[0], status[1].get("Description", ""), target.stream,
                                        target.consumer)
            if isinstance(err, _LOST):
                self._check(err)
            elif isinstance(err, errors.PinIdMismatchError) and self._pin is not None:
                self._pull_rest()
            elif kind not in _IDLE:
                self.end(err if kind is not Status.END else None)
            return
        if self._pin is not None and raw_headers:
            self._pin.seen(raw_headers)
        self.received += 1
        size = len(subject) + len(reply) + len(raw_headers) + len(data)
        self.received_bytes += size
        batch = self._batch
        batch.append(Msg(self._conn, subject.decode(), reply.decode(), data, raw_headers, None, reply))
        if len(batch) == 1:
            # One hand-over (one wake of the reader) per run of deliveries, not one per message.
            self._conn.loop_thread.loop.call_soon(self._hand_over)
        opts = self._opts
        if self.received >= opts.batch or (opts.max_bytes is not None and self.received_bytes >= opts.max_bytes):
            self.end(None)

    def _pull_rest(self) -> None:
        """A 423: the group's pin is no longer this handle's (ADR-42). Forget the pin id and ask again,
        without it, for what is left of the batch until the pull's own end (loop thread)."""
        assert self._pin is not None
        self._pin.refused()
        rest = self._opts.rest(self.received, self.received_bytes, self._server_end - time.monotonic())
        if rest is None:
            self.end(None)
            return
        body = json.dumps(rest.request(), separators=(",", ":")).encode()
        try:
            self._conn.write_now(pub_command(self._target.subject, self._sub.subject, body, b""))
        except errors.JetStreamError as exc:
            self.end(exc)

    def _hand_over(self) -> None:
        """Give the reader what arrived since the last hand-over (loop thread)."""
        if self._batch:
            batch, self._batch = self._batch, []
            self.out.put(batch)

    def _check(self, err: BaseException) -> None:
        """The consumer looks gone: end with what one consumer info request says (loop thread)."""
        if self.checking:
            return
        self.checking = True
        if self._watchdog is not None:
            self._watchdog.cancel()

        async def check() -> None:
            self.end(await lost_consumer(self._target, err))

        self._conn.loop_thread.spawn(check(), name="jetstream-sync-fetch-check")

    def end(self, err: BaseException | None) -> None:
        """Finish the pull (loop thread): unsubscribe, then tell the reader. Idempotent."""
        if self._ended:
            return
        self._ended = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._conn.remove_listener(self)
        if self._sub is not None:
            # The handler stays a little longer to NAK what was already on the wire.
            self._conn.loop_thread.spawn(self._conn.unsubscribe_raw(self._sub, linger=2.0),
                                         name="jetstream-sync-unsub")
        self._hand_over()  # the messages before the end first
        self.out.put(Terminal(err))

    def abandon(self, unread: list[Msg] | None = None) -> None:
        """The reader gave up on the batch (loop thread): end (if the pull had not ended yet), then NAK
        ``unread`` (what the reader took and did not yield) and what arrived and was not handed over
        or not taken. The NAKs follow the UNSUB that ending writes, so the server cannot redeliver
        them to this pull while it still waits. The end marker stays for the reader."""
        self._hand_over()
        naks = [msg for msg in unread or () if msg.reply.startswith("$JS.ACK.") and not msg.acked]
        ending = None
        while True:
            try:
                item = self.out.get_nowait()
            except queue.Empty:
                break
            if type(item) is list:
                naks.extend(msg for msg in item if msg.reply.startswith("$JS.ACK."))
            else:
                ending = item
        if ending is not None:
            self.out.put(ending)
        self.end(None)
        if naks:
            # After the unsubscribe's first step, which writes the UNSUB (tasks start in FIFO order).
            self._conn.loop_thread.loop.call_soon(self._nak_all, naks)

    def _nak_all(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            self._nak(msg.reply.encode())

    def _nak(self, reply: bytes) -> None:
        try:
            self._conn.write_now(ack_command(reply, NAK))
        except errors.JetStreamError:
            pass  # disconnected: the server redelivers after ack_wait

    # connection events (loop thread)
    def on_disconnected(self) -> None: ...

    def on_reconnected(self) -> None: ...

    def on_closed(self) -> None:
        self.end(errors.ClientClosedError("the client closed during the fetch"))

    def on_permission_denied(self, subject: str, error: BaseException) -> None:
        watched = getattr(self, "_watched", {})
        if subject in watched:
            self.end(spelled(error, watched[subject]))


# -- the continuous pull (messages() and consume()) ---------------------------


class PullCredit:
    """The credit of a continuous pull (ADR-37), pure bookkeeping with no I/O: messages (or bytes)
    requested from the server and not yet taken by a reader. A new request tops credit back up to
    the limit once it has fallen to the threshold, so what waits locally never exceeds
    ``max_messages``/``max_bytes``. Thread-safe: the loop thread alone delivers and requests (the
    pending and delivered counts are its own, written without a lock), readers take (under the lock)."""

    __slots__ = ("_opts", "_lock", "pending_msgs", "pending_bytes", "delivered_msgs", "delivered_bytes",
                 "taken_msgs", "taken_bytes", "scheduled", "largest", "room_needed")

    def __init__(self, opts: ConsumeOptions) -> None:
        self._opts = opts
        self._lock = threading.Lock()  # readers' counts and ``scheduled``
        self.pending_msgs = 0       # requested, not yet delivered (or cancelled by a status)
        self.pending_bytes = 0
        self.delivered_msgs = 0     # delivered, ever (the loop thread's)
        self.delivered_bytes = 0
        self.taken_msgs = 0         # taken by a reader, ever
        self.taken_bytes = 0
        #: A refill was asked of the loop thread and has not run yet.
        self.scheduled = False
        #: The largest message delivered so far (bytes).
        self.largest = 0
        #: A message did not fit the room its request had left: the next request must offer at least
        #: this many bytes (the larger of the largest message seen and that room + 1), or wait for an
        #: empty buffer. 0 when no such wait is on. A smaller request would end the same way at once.
        self.room_needed = 0

    @property
    def buffered_msgs(self) -> int:
        """Delivered, not yet taken by a reader."""
        return self.delivered_msgs - self.taken_msgs

    @property
    def buffered_bytes(self) -> int:
        return self.delivered_bytes - self.taken_bytes

    def _due(self) -> bool:
        opts = self._opts
        if opts.max_bytes is None:
            return self.pending_msgs + self.delivered_msgs - self.taken_msgs <= opts.threshold_messages
        return (self.pending_bytes + self.delivered_bytes - self.taken_bytes  # type: ignore[operator]
                <= opts.threshold_bytes)

    def delivered(self, size: int) -> bool:
        """(loop thread) A message of ``size`` bytes arrived; True when credit has fallen to the threshold."""
        pending = self.pending_msgs - 1
        self.pending_msgs = pending if pending > 0 else 0
        pending = self.pending_bytes - size
        self.pending_bytes = pending if pending > 0 else 0
        self.delivered_msgs += 1
        self.delivered_bytes += size
        if size > self.largest:
            self.largest = size
        return self._due()

    def taken(self, size: int, count: int = 1) -> bool:
        """A reader took ``count`` messages of ``size`` bytes in all; True when a refill should be asked
        for now (due, and none asked for yet: the caller then asks once)."""
        with self._lock:
            self.taken_msgs += count
            self.taken_bytes += size
            if self.scheduled or not self._due():
                return False
            self.scheduled = True
            return True

    def next_request(self) -> tuple[int, int | None] | None:
        """(batch, max_bytes) of the pull request that tops credit up to the limit, counted as pending;
        None when credit is above the threshold (or a message too big waits for an empty buffer)."""
        opts = self._opts
        with self._lock:
            self.scheduled = False
            if opts.max_bytes is None:
                credit = self.pending_msgs + self.buffered_msgs
                if credit > opts.threshold_messages or credit >= opts.max_messages:
                    return None
                batch = opts.max_messages - credit
                self.pending_msgs += batch
                return batch, None
            credit = self.pending_bytes + self.buffered_bytes
            if credit > opts.threshold_bytes or credit >= opts.max_bytes:  # type: ignore[operator]
                return None
            max_bytes = opts.max_bytes - credit  # type: ignore[operator]
            if self.room_needed:
                if max_bytes < self.room_needed and self.buffered_bytes > 0:
                    return None
                self.room_needed = 0
            self.pending_bytes += max_bytes
            return BYTES_BATCH, max_bytes

    def unsent(self, batch: int, max_bytes: int | None) -> None:
        """The request of :meth:`next_request` never left: its credit is not pending."""
        with self._lock:
            if max_bytes is None:
                self.pending_msgs -= batch
            else:
                self.pending_bytes -= max_bytes

    def forget(self) -> None:
        """Credit in flight will never arrive (a refused or lost pull, a reconnect, a new consumer)."""
        with self._lock:
            self.pending_msgs = 0
            self.pending_bytes = 0

    def cancelled(self, msgs: int, size: int) -> None:
        """The server ended a request with ``msgs`` messages and ``size`` bytes undelivered."""
        with self._lock:
            self.pending_msgs = max(0, self.pending_msgs - msgs)
            self.pending_bytes = max(0, self.pending_bytes - size)

    def too_big(self, left: int | None = None) -> bool:
        """A request ended because its next message is bigger than the ``left`` bytes it still had room
        for (None: the server did not say). True when the message cannot be delivered at all: ``left``
        was the whole budget (not said: the buffer is empty already); else the next request waits until it
        can offer more than ``left`` and at least the largest message seen, or the buffer is empty. A request asked for while others were in flight has less than the budget, so an
        empty buffer alone does not make a message too big."""
        budget = self._opts.max_bytes
        with self._lock:
            if left is not None and budget is not None:
                hopeless = left >= budget
            else:
                hopeless = self.buffered_bytes <= 0
            self.room_needed = 0 if hopeless else max(self.largest, (left or 0) + 1)
            return hopeless


RETRY_PULL_DELAY = 1.0
#: Seconds after a consumer leader-elected advisory before a pull acts on it (the new leader answers
#: pulls once it has taken over, a moment after it announced itself): a pull that heard nothing from
#: the consumer since then pulls again on a new inbox (its requests died with the old leader), and a
#: refused pull waiting to be sent again goes at once.
ELECTED_GRACE = 0.1


def _leadership_change(err: BaseException | None) -> bool:
    """A 409 Leadership Change: the consumer's new leader says the requests waiting at the old one are gone."""
    return isinstance(err, errors.APIError) and err.code == 409 and "leadership change" in err.description.lower()


#: The continuous pulls running, by (connection, pull subject): what ``wake_resumed`` wakes.
_running: dict[tuple[Connection, str], set[ContinuousPull]] = {}
_running_lock = threading.Lock()


def wake_resumed(conn: Connection, subject: str) -> None:
    """The consumer whose pull requests go to ``subject`` was resumed through ``conn``: each continuous
    pull of it on ``conn`` pulls again at once (:meth:`ContinuousPull.resumed`, on the loop thread).
    Any thread; never blocks."""
    with _running_lock:
        pulls = list(_running.get((conn, subject), ()))
    for pull in pulls:
        try:
            conn.loop_thread.call_soon(pull.resumed)
        except errors.ClientClosedError:
            return


class ContinuousPull:
    """The ADR-37 continuous pull on one inbox (loop thread), with credit counted until handed over.

    Credit = messages (or bytes) requested from the server and not yet taken
    by a user thread. A new pull request tops credit back up to the limit
    once it falls to the threshold, so what sits in the local buffer never
    exceeds ``max_messages``/``max_bytes`` and a slow taker stops the pulling.

    ``sink(item)`` is called on the loop thread for each Msg, ``Warning_`` and
    the final ``Terminal``; it must not block. User threads call
    ``taken(size)`` for each message they take out of the buffer.

    A ``hook`` (:class:`ResetHook`, the ordered consumer's) may take over when the
    consumer looks lost or out of step; it moves the pull to a new consumer with
    :meth:`suspend` and :meth:`retarget`, and the credit counts carry over.
    """

    #: A pull never asks for more than its buffer holds, so nothing is ever dropped.
    dropped = 0

    def __init__(self, target: Target, opts: ConsumeOptions, sink: Sink,
                 hook: ResetHook | None = None) -> None:
        self._target = target
        self._hook = hook
        self._conn = target.conn
        self._opts = opts
        self._sink = sink
        self._credit = PullCredit(opts)
        self.pulls = 0
        self.received = 0
        self._inbox = ""
        self._subject = ""
        self._d = Delivery(target, sink, opts.idle_heartbeat, self)
        self._retry_timer: asyncio.TimerHandle | None = None
        self.halted = self._d.halted  # set once no message can be delivered any more
        self.limit = opts.max_messages if opts.max_bytes is None else None
        self._asked = False     # a consumer info was asked since the last sign of life (a 503 is asked about once)
        self._checking = False  # ... and its answer is awaited: no pull goes out meanwhile
        self._registered: tuple[Connection, str] | None = None  # its key in ``_running``, while there
        self._renewing = False  # pulling afresh on a new inbox (after a resume or a leader change)
        self._resumed_again = False  # ... and another resume came meanwhile: renew once more after it
        self._elected: Any = None  # the subscription to the consumer's leader-elected advisory
        self._moving = False    # ... and the old inbox is being dropped: no pull goes out meanwhile
        #: The handle's pin of a pinned priority group (ADR-42), None for any other pull.
        self._pin = opts.priority.pin if opts.priority is not None else None

    # -- loop thread -------------------------------------------------------

    async def start(self) -> None:
        """Subscribe an inbox and send the first pull request to the target's consumer."""
        self.attach()
        assert self._target.consumer is not None
        await self.retarget(self._target.consumer)
        if not self._d.stopped:  # a resume through this connection finds it (wake_resumed)
            self._registered = key = (self._conn, self._subject)
            with _running_lock:
                _running.setdefault(key, set()).add(self)
            await self._watch_elections()

    async def _watch_elections(self) -> None:
        """Follow the consumer's leader-elected advisories (a replicated consumer's new leader): a pull
        whose requests died with the old leader, and that no 409 Leadership Change reached, pulls again
        then rather than at its missed heartbeat. Best effort: without the permission to subscribe, the
        409 and the heartbeat alarm remain."""
        target = self._target
        if target.api is None or target.stream is None or target.consumer is None:
            return
        subject = target.api.consumer_leader_elected(target.stream, target.consumer)
        if subject is None:
            return
        try:
            sub = await self._conn.subscribe_raw(subject, self._on_elected)
        except Exception as exc:  # noqa: BLE001 - the pull goes on without it
            log.debug("jetstream_sync: %s: not following its leader elections: %r", target.label, exc)
            return
        if self._d.stopped:
            await self._conn.unsubscribe_raw(sub)
            return
        self._elected = sub

    def _on_elected(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        """(loop thread) The consumer has a new leader: a refused pull waiting to be sent again goes now;
        else, unless the consumer spoke to this pull meanwhile (a 409 Leadership Change, a message), pull
        again on a new inbox."""
        if self._d.stopped:
            return
        elected = _monotonic()

        def act() -> None:
            if self._d.stopped:
                return
            if self._retry_timer is not None:
                self._retry_timer.cancel()
                self._retry_pull()
            elif self._d.heartbeat.last_seen < elected:
                self._renew_soon(paused=False)

        self._conn.loop_thread.loop.call_later(ELECTED_GRACE, act)

    def attach(self) -> None:
        """Follow the connection's events and arm the heartbeat alarm; nothing is pulled until
        :meth:`retarget` names a consumer."""
        self._d.attach()

    async def retarget(self, name: str) -> None:
        """Pull from consumer ``name`` (of the same stream) on a fresh inbox, starting now."""
        client = self._conn
        self._inbox = client.new_inbox()
        self._subject = self._target.pull_subject(name)
        self._target = self._target.moved(name, self._subject)
        d = self._d
        d.subjects = (self._subject, self._inbox)
        # Only a pinned group's pull looks for the pin id in what arrives: the others pay nothing for it.
        sub = await client.subscribe_raw(self._inbox, self._on_msg if self._pin is None else self._on_pinned_msg)
        if d.stopped:  # halted while subscribing
            await client.unsubscribe_raw(sub)
            return
        d.sub = sub
        d.heartbeat.seen()
        self._check()

    async def suspend(self) -> None:
        """Stop pulling from the current consumer: its inbox is muted (what is still on the wire is
        dropped) and unsubscribed, and the credit in flight forgotten. Messages already delivered
        keep their credit until taken. The heartbeat alarm sleeps until :meth:`retarget`."""
        sub, self._d.sub = self._d.sub, None
        if sub is not None:
            self._conn.mute(sub)
            await self._conn.unsubscribe_raw(sub)
        self._credit.forget()

    def _request(self, batch: int, max_bytes: int | None) -> None:
        body = json.dumps(self._opts.request(batch, max_bytes), separators=(",", ":")).encode()
        self._conn.write_now(pub_command(self._subject, self._inbox, body, b""))
        self.pulls += 1

    def _check(self) -> None:
        """Top credit back up to the limit when it has fallen to the threshold (ADR-37 steps 1-2)."""
        d = self._d
        if (d.stopped or d.paused or self._retry_timer is not None or d.sub is None or self._checking
                or self._moving):
            return  # a refused pull waits out RETRY_PULL_DELAY before the next one
        credit = self._credit
        idle = not (credit.pending_msgs or credit.pending_bytes)
        request = credit.next_request()
        if request is None:
            return
        batch, max_bytes = request
        try:
            self._request(batch, max_bytes)
        except errors.JetStreamError as exc:  # disconnected with a full buffer: retry on reconnect
            credit.unsent(batch, max_bytes)
            log.debug("jetstream_sync: pull request not sent: %s", exc)
            return
        if idle:  # the first request waiting at the server since the buffer filled: the silence counts from now
            d.heartbeat.seen()

    def _check_soon(self) -> None:
        self._check()

    def missed_heartbeat(self) -> None:
        # The server (or the pull) is gone without a word: report it, forget
        # the credit that will never arrive and pull afresh. With no request
        # waiting (a full buffer) the server owes no heartbeat: silence is no news.
        credit = self._credit
        if not (credit.pending_msgs or credit.pending_bytes):
            return
        err = errors.NoHeartbeatError(
            f"{self._target.label}: no message or heartbeat for {self._d.heartbeat.limit:.3g}s")
        if self._hook is not None and self._hook.lost("heartbeat", err):
            return
        self._sink(Warning_(err))
        self._credit.forget()
        self._check()

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        d = self._d
        if d.stopped:
            d.nak_late(reply)
            return
        d.heartbeat.last_seen = _monotonic()  # HeartbeatWatch.seen(), inlined: once per message
        status = status_of(raw_headers, data) if raw_headers and not data else None
        if status is not None:
            self._on_status(*status)
            return
        if self._hook is not None and not self._hook.admit(reply):
            return
        # Workers free credit as they take messages; notice it here too, so
        # a busy loop refills without waiting for a worker's wake-up call.
        due = self._credit.delivered(len(subject) + len(reply) + len(raw_headers) + len(data))
        self.received += 1
        self._sink(Msg(self._conn, subject.decode(), reply.decode(), data, raw_headers, None, reply))
        if due:
            self._check()

    def _on_pinned_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        if raw_headers:
            self._pin.seen(raw_headers)  # type: ignore[union-attr]  # before the refill it may trigger
        self._on_msg(subject, reply, data, raw_headers)

    def _on_status(self, status: str, hdrs: Any) -> None:
        target = self._target
        kind, err = classify_status(status, hdrs.get("Description", ""), target.stream, target.consumer)
        no_responders = isinstance(err, errors.NoRespondersError)
        if not no_responders:
            self._asked = False  # the server answered for the consumer: a later 503 is worth asking about
        if kind in _IDLE:
            return
        if no_responders and self._hook is not None and self._hook.lost("no responders", err):
            return  # nobody serves this consumer's pulls: it is gone
        pm, pb = hdrs.get("Nats-Pending-Messages"), hdrs.get("Nats-Pending-Bytes")
        if pm is not None or pb is not None:
            self._credit.cancelled(int(pm or 0), int(pb or 0))
        if isinstance(err, errors.PinIdMismatchError) and self._pin is not None:
            # ADR-42: the pin went to another client (or was cleared). Forget the id and pull on at once
            # without it, as a standby. A request refused on arrival says nothing of its credit.
            if pm is None and pb is None:
                self._credit.forget()
            if self._pin.refused():  # said once per pin lost, not once per request that carried it
                self._sink(Warning_(err))
            self._check()
            return
        if kind is Status.END:
            if self._opts.max_bytes is not None and "exceeds maxbytes" in hdrs.get("Description", "").lower():
                # The next message is bigger than the room its request had left.
                # Pull again once a request can hold it (or the buffer is empty);
                # if even the whole budget is too small, say so and back off.
                if self._credit.too_big(int(pb) if pb is not None else None):
                    self._sink(Warning_(errors.JetStreamError(
                        f"a message is larger than max_bytes ({self._opts.max_bytes}); it cannot be delivered")))
                    if self._retry_timer is None:
                        self._retry_timer = self._conn.loop_thread.loop.call_later(RETRY_PULL_DELAY,
                                                                                     self._retry_pull)
                    return
            self._check()
            return
        if isinstance(err, errors.ConsumerDeletedError) and self._hook is None:
            self._ask(err, terminal=True)  # to say whether the stream went with it
            return
        if kind is Status.TERMINAL and not no_responders:
            self.halt(err)
            return
        # A refused request (409 Exceeded ..., 503 during an election): its
        # credit never arrives. Report, forget the credit, pull again shortly.
        # The first 503 since the consumer last showed life asks whether it is
        # gone (then the pull ends); the warning waits for the answer.
        assert err is not None
        if no_responders and not self._asked:
            self._ask(err, terminal=False)
        elif not self._checking:
            self._sink(Warning_(err))
        if _leadership_change(err) and self._renew_soon(paused=False):
            return  # the new leader is there: pull from it at once, on a new inbox (see _renew)
        self._credit.forget()
        if self._retry_timer is None:
            self._retry_timer = self._conn.loop_thread.loop.call_later(RETRY_PULL_DELAY, self._retry_pull)

    def _retry_pull(self) -> None:
        self._retry_timer = None
        self._check()

    def resumed(self) -> None:
        """(loop thread) The consumer was resumed through this connection. The server does not go back
        to the pull requests that waited through the pause until a message or a new request arrives, so
        the one waiting here could get nothing until it expires: pull afresh on a new inbox, dropping the
        old one (which makes the server discard the request waiting on it). Nothing while disconnected
        (the reconnect pulls afresh) or once stopped; one renewal at a time (a resume during one renews
        again after it: a pause between the two could have caught the fresh request)."""
        self._renew_soon(paused=True)

    def _renew_soon(self, paused: bool) -> bool:
        """(loop thread) Pull afresh on a new inbox (:meth:`_renew`), after the consumer was resumed
        (``paused``) or got a new leader; True when a renewal is (or already was) on its way."""
        d, credit = self._d, self._credit
        if self._renewing:
            if paused:
                self._resumed_again = True
            return True
        if d.stopped or d.paused or d.sub is None:
            return False
        if not (credit.pending_msgs or credit.pending_bytes):
            return False  # no request of ours is waiting (the buffer is full): the next one goes out as usual
        self._renewing = True
        if not paused and self._retry_timer is not None:  # a new leader is there: no reason to wait
            self._retry_timer.cancel()
            self._retry_timer = None
        self._conn.loop_thread.spawn(self._renew(paused), name="jetstream-sync-pull-renew")
        return True

    async def _renew(self, paused: bool) -> None:
        """Pull afresh on a new inbox, dropping the old one: the server discards the requests waiting on it
        (each one left at a resumed consumer, or answered by a new leader), and whatever they still deliver
        goes back at once, so no request counts twice."""
        client, d = self._conn, self._d
        try:
            if paused:
                await self._until_resumed()
            if d.stopped or d.paused or d.sub is None:
                return
            inbox = client.new_inbox()
            sub = await client.subscribe_raw(inbox, self._on_msg if self._pin is None else self._on_pinned_msg)
            if d.stopped or d.sub is None:  # halted (or suspended) while subscribing
                await client.unsubscribe_raw(sub)
                return
            old, d.sub = d.sub, sub
            self._inbox = inbox
            d.subjects = (self._subject, inbox)
            # Whatever the old request still delivers goes back at once, uncounted: its credit is gone.
            client.reroute(old, self._late)
            self._credit.forget()
            self._moving = True  # the UNSUB goes out before the new request: the old one cannot take more
            try:
                await client.unsubscribe_raw(old, linger=2.0)
            finally:
                self._moving = False
            d.heartbeat.seen()
            self._check()
        except Exception as exc:  # noqa: BLE001 - the waiting request stays; its expiry pulls again
            log.debug("jetstream_sync: %s: pulling again after a resume failed: %r", self._target.label, exc)
        finally:
            self._renewing = False
            if self._resumed_again:
                self._resumed_again = False
                self._renew_soon(paused=True)

    async def _until_resumed(self) -> None:
        """Wait (at most :data:`CHECK_TIMEOUT`) until the consumer's info no longer says paused: in a
        cluster the answer to a resume leaves before the consumer's leader has applied it, and a pull
        arriving there first would wait again. Never raises."""
        target = self._target
        if target.jsapi is None:
            return
        deadline = _monotonic() + CHECK_TIMEOUT
        delay = 0.02
        while not self._d.stopped:
            try:
                info = await target.jsapi.request_async(target.info_subject(), None, CHECK_TIMEOUT, idempotent=False)
            except Exception:  # noqa: BLE001 - no answer: pull again anyway
                return
            if not info.get("paused") or _monotonic() + delay > deadline:
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.25)

    def _late(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        """(loop thread) A message on an inbox this pull dropped: NAKed, so it is redelivered at once."""
        self._d.nak_late(reply)

    def _ask(self, err: BaseException, terminal: bool) -> None:
        """Ask the server once whether the consumer and its stream still exist (loop thread; the answer
        comes back on it). Gone: halt with a ``ConsumerDeletedError`` naming them. There (or no
        answer): halt with ``err`` when ``terminal``, else report it as a warning and pull on."""
        self._asked = True
        self._checking = True

        async def ask() -> None:
            verdict = await lost_consumer(self._target, err)
            self._checking = False
            if self._d.stopped:
                return
            if terminal or verdict is not err:
                self.halt(verdict)
                return
            self._sink(Warning_(err))
            self._check()  # the retry may have come due while asking

        self._conn.loop_thread.spawn(ask(), name="jetstream-sync-pull-check")

    @property
    def ending(self) -> bool:
        """True once the pull was told to stop (halted). No I/O."""
        return self._d.stopped

    def halt(self, err: BaseException | None) -> None:
        """Stop pulling for good (loop thread): unsubscribe, cancel timers, send ``Terminal``. Idempotent."""
        if self._d.stopped:
            return
        if (isinstance(err, errors.ConsumerDeletedError) and self._hook is not None
                and self._hook.lost("deleted", err)):
            return
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        if self._elected is not None:
            sub, self._elected = self._elected, None
            self._conn.loop_thread.spawn(self._conn.unsubscribe_raw(sub), name="jetstream-sync-unsub")
        key, self._registered = self._registered, None
        if key is not None:
            with _running_lock:
                pulls = _running.get(key)
                if pulls is not None:
                    pulls.discard(self)
                    if not pulls:
                        del _running[key]
        self._d.end(err)  # dropping interest makes the server discard our waiting pull requests

    def reconnected(self) -> None:
        """(the skeleton's policy) ADR-37 rev 2: the heartbeat count restarted; pull again with full
        credit, without asking whether the consumer still exists."""
        self._asked = False  # deleted while we were away? the next 503 asks
        if self._hook is not None and self._hook.lost("reconnect", None):
            return
        self._credit.forget()
        self._check()

    # -- user threads ------------------------------------------------------

    def taken(self, size: int, count: int = 1) -> None:
        """A user thread took ``count`` messages (``size`` bytes) out of the buffer: free their credit.
        Never blocks on I/O."""
        if not self._credit.taken(size, count) or self._d.stopped:
            return
        try:
            self._conn.loop_thread.call_soon(self._check_soon)
        except errors.ClientClosedError:
            return
        # Let the loop thread run the refill now: a busy worker would otherwise
        # keep the GIL for a whole switch interval (5 ms) and drain the buffer
        # before the next pull request leaves, starving the server.
        time.sleep(0)

    def buffered(self) -> int:
        """Messages delivered and not yet taken (no I/O)."""
        return self._credit.buffered_msgs

    def stop_soon(self) -> None:
        """Ask the loop to halt this pull (any thread). Never blocks."""
        self._d.stop_soon(self.halt, None)


# -- next(): one message on a long-lived inbox --------------------------------


class NextInbox:
    """A long-lived inbox for ``Consumer.next()``, serving one call at a time (the loop-thread half;
    the caller's half is ``fetch.NextCall``).

    Saves a SUB/UNSUB and a task per call: the pull request rides the Outbox
    (sharing a loop crossing with the previous ack) and the reply reaches the
    caller through a SimpleQueue as raw parts, parsed on the caller's thread.
    A pulled message carries its stream subject, not the inbox, so requests
    cannot be told apart by subject: hence one outstanding request at a time
    (``try_acquire``). A call that ends abnormally (interrupted, or the client
    gave up before the server's expiry) retires the inbox: dropping its
    interest makes the server discard the request still waiting on it, so it
    cannot take the next message. A message arriving with nobody waiting is NAKed.
    """

    def __init__(self, target: Target) -> None:
        #: Whose next() this inbox serves.
        self.target = target
        self._conn = target.conn
        self._busy = threading.Lock()
        self.current: queue.SimpleQueue | None = None  # the queue of the call in progress
        self.token = b""
        self._tokens = itertools.count(1)
        self.prefix = target.conn.new_inbox().encode() + b"."
        self.subject = target.subject.encode()
        self._sub: Any = None
        self.retired = False

    async def start(self) -> None:
        self._sub = await self._conn.subscribe_raw(self.prefix.decode() + "*", self._on_msg)
        self._conn.add_listener(self)

    # connection events (loop thread)
    def on_disconnected(self) -> None: ...

    def on_reconnected(self) -> None: ...

    def on_closed(self) -> None: ...

    def on_permission_denied(self, subject: str, error: BaseException) -> None:
        q = self.current
        if q is None:
            return
        if subject == self.subject.decode().lower():
            q.put((spelled(error, self.subject.decode()),))
        elif subject.startswith(self.prefix.decode().lower()):
            q.put((error,))

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        q = self.current
        if subject.startswith(self.prefix):  # a status: it names its request
            if q is not None and subject[len(self.prefix):] == self.token:
                q.put((subject, reply, data, raw_headers))
            return
        if q is not None:
            q.put((subject, reply, data, raw_headers))
        elif reply.startswith(ACK_PREFIX):  # nobody waits for it any more: hand it back
            try:
                self._conn.write_now(ack_command(reply, NAK))
            except errors.JetStreamError:
                pass

    def begin(self) -> tuple[bytes, queue.SimpleQueue]:
        """Start one call (after :meth:`try_acquire`): its token, and the queue its answer comes to."""
        self.token = token = b"%d" % next(self._tokens)
        self.current = q = queue.SimpleQueue()
        return token, q

    def finish(self, ok: bool) -> None:
        """The call is over (its thread); a call that did not end normally retires the inbox."""
        self.current = None
        self._busy.release()
        if not ok:
            self.retire()

    def try_acquire(self) -> bool:
        """Reserve the inbox for one call (False when another thread is using it)."""
        return self._busy.acquire(blocking=False)

    def retire(self) -> None:
        """Drop the inbox's interest (any thread); the next call makes a new inbox."""
        if self.retired:
            return
        self.retired = True
        try:
            self._conn.loop_thread.call_soon(self._conn.remove_listener, self)
        except errors.ClientClosedError:
            pass
        if self._sub is not None:
            try:
                self._conn.loop_thread.call_soon(
                    lambda: self._conn.loop_thread.spawn(self._conn.unsubscribe_raw(self._sub, linger=2.0),
                                                           name="jetstream-sync-unsub"))
            except errors.ClientClosedError:
                pass
