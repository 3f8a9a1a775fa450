# The push engine (ADR-15 "Automatic management"): the server delivers a push consumer's messages to
# its deliver subject; this engine subscribes there (in the deliver group, if any), keeps the
# idle-heartbeat alarm, detects gaps in the consumer sequence, answers flow control when the
# reader reaches the request (so a slow handler pauses the server), and bounds the local buffer.
#
# Rule 1: the raw handler runs on the loop thread, never blocks and never runs user code: messages
#         go to the reader's sink; status messages are never delivered, counted or handed over.
# Rule 2: a flow-control request is answered once a reader has taken every message delivered before
#         it; a ``Nats-Consumer-Stalled`` heartbeat is answered at once; no subject is answered twice.
# Rule 3: a full buffer drops (core NATS semantics), counts each drop and says so once per episode;
#         nothing is dropped silently. Wind-down stops interest first (UNSUB, then a round trip), so
#         everything the server sent before reaches the reader.
from __future__ import annotations

import collections
import logging
import threading
from time import monotonic
from typing import Any, Callable

import attrs

from . import errors
from ._connection import Connection
from ._delivery import ACK_PREFIX, Delivery
from ._engine import ResetHook, Sink, Target, Warning_
from ._protocol import (
    Status, check_count, classify_status, pub_command, status_of,
    wire_consumer_seq,
)
from .config import AckPolicy, ConsumerConfig
from .message import Msg

__all__ = ["PushEngine", "PushOptions", "core_options", "core_target", "push_options"]

log = logging.getLogger(__name__)

#: Default bound of a push buffer, as nats-py's subscriptions.
DEFAULT_PENDING_MSGS = 65536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
#: Flow-control subjects remembered as answered (the server asks again when unsure; answer once).
_REMEMBERED = 16
#: How long wind-down waits for the server's PONG before ending anyway.
_WIND_DOWN_WAIT = 0.5


@attrs.frozen(kw_only=True)
class PushOptions:
    """A validated push delivery: where it comes from and how much may wait locally."""

    deliver_subject: str
    deliver_group: str | None
    idle_heartbeat: float | None
    flow_control: bool
    pending_msgs_limit: int
    pending_bytes_limit: int
    #: Report consumer-sequence gaps (off for queue subscriptions: members see parts of the sequence).
    gap_check: bool
    #: The consumer wants acks, so a dropped message comes back after ack_wait (AckNone: it is gone).
    acked: bool = True


def push_options(config: "ConsumerConfig", pending_msgs_limit: Any = DEFAULT_PENDING_MSGS,
                 pending_bytes_limit: Any = DEFAULT_PENDING_BYTES, deliver_subject: str | None = None) -> PushOptions:
    """The delivery of a push consumer with ``config`` (its own heartbeat, flow control and group).
    Raises ValueError naming a bad limit, or ``ConsumerTypeError`` when the config has no deliver subject."""
    msgs = check_count(pending_msgs_limit, "pending_msgs_limit")
    size = check_count(pending_bytes_limit, "pending_bytes_limit")
    subject = deliver_subject or config.deliver_subject
    if not subject:
        raise errors.ConsumerTypeError(f"consumer {config.name or config.durable_name!r} is a pull consumer "
                                       f"(no deliver_subject)")
    return PushOptions(deliver_subject=subject, deliver_group=config.deliver_group or None,
                       idle_heartbeat=config.idle_heartbeat or None, flow_control=bool(config.flow_control),
                       pending_msgs_limit=DEFAULT_PENDING_MSGS if msgs is None else msgs,
                       pending_bytes_limit=DEFAULT_PENDING_BYTES if size is None else size,
                       gap_check=not config.deliver_group, acked=config.ack_policy is not AckPolicy.NONE)


def core_options(subject: str, queue: str | None, pending_msgs_limit: Any = DEFAULT_PENDING_MSGS,
                 pending_bytes_limit: Any = DEFAULT_PENDING_BYTES) -> PushOptions:
    """A plain core NATS subscription read by the push engine: no heartbeats, flow control or gaps."""
    msgs = check_count(pending_msgs_limit, "pending_msgs_limit")
    size = check_count(pending_bytes_limit, "pending_bytes_limit")
    return PushOptions(deliver_subject=subject, deliver_group=queue or None, idle_heartbeat=None,
                       flow_control=False, pending_msgs_limit=DEFAULT_PENDING_MSGS if msgs is None else msgs,
                       pending_bytes_limit=DEFAULT_PENDING_BYTES if size is None else size, gap_check=False,
                       acked=False)


def core_target(conn: Connection, subject: str, queue: str | None) -> Target:
    """The target of a plain core NATS subscription: no stream, no consumer; starts within the
    connection's default timeout."""
    label = f"the subscription to {subject!r}" + (f" in queue group {queue!r}" if queue else "")
    return Target(conn=conn, label=label, timeout=conn.default_timeout, name=subject, subject=subject)


class FlowLedger:
    """The push engine's bookkeeping, pure, with no I/O: the buffer's room (messages and bytes
    delivered, not yet taken) and flow control (ADR-15): a request is answered once readers have
    taken every message delivered before it, and no subject is answered twice. Thread-safe: the
    loop thread alone delivers and records requests (the delivered counts are its own, written
    without a lock), readers take (under the lock)."""

    __slots__ = ("msgs_limit", "bytes_limit", "_lock", "delivered_msgs", "delivered_bytes", "taken_count",
                 "taken_bytes", "_waiting", "_answered")

    def __init__(self, msgs_limit: int, bytes_limit: int) -> None:
        self.msgs_limit = msgs_limit
        self.bytes_limit = bytes_limit
        self._lock = threading.Lock()
        self.delivered_msgs = 0   # messages delivered, ever (the loop thread's)
        self.delivered_bytes = 0
        self.taken_count = 0      # messages readers took, ever
        self.taken_bytes = 0
        self._waiting: collections.deque[tuple[int, str]] = collections.deque()  # (delivered before it, reply)
        self._answered: collections.deque[str] = collections.deque(maxlen=_REMEMBERED)  # newest last

    @property
    def buffered_msgs(self) -> int:
        """Messages delivered, not yet taken."""
        return self.delivered_msgs - self.taken_count

    @property
    def buffered_bytes(self) -> int:
        return self.delivered_bytes - self.taken_bytes

    def full(self, size: int) -> bool:
        """Whether a message of ``size`` bytes finds no room. Only the delivering thread adds, readers
        only take away, so what was free here is still free when :meth:`delivered` follows."""
        return (self.delivered_msgs - self.taken_count >= self.msgs_limit
                or self.delivered_bytes - self.taken_bytes + size > self.bytes_limit)

    def delivered(self, size: int) -> None:
        """(the delivering thread only) A message of ``size`` bytes went to the readers."""
        self.delivered_msgs += 1
        self.delivered_bytes += size

    def taken(self, size: int, count: int = 1) -> bool:
        """A reader took ``count`` messages of ``size`` bytes in all; True when a waiting flow-control
        request is due."""
        with self._lock:
            self.taken_count += count
            self.taken_bytes += size
            return bool(self._waiting) and self.taken_count >= self._waiting[0][0]

    def requested(self, delivered: int, reply: str) -> bool:
        """A flow-control request came after ``delivered`` messages: True to answer it now (all taken),
        else it waits for :meth:`due`."""
        with self._lock:
            if self.taken_count >= delivered:
                return True
            self._waiting.append((delivered, reply))
            return False

    def due(self) -> list[str]:
        """The waiting requests whose messages were all taken, oldest first (removed from the ledger)."""
        with self._lock:
            due = []
            while self._waiting and self.taken_count >= self._waiting[0][0]:
                due.append(self._waiting.popleft()[1])
            return due

    def first_answer(self, reply: str) -> bool:
        """True the first time ``reply`` is to be answered (remembered since); False for a repeat."""
        if reply in self._answered:
            return False
        self._answered.append(reply)
        return True

    def forget_requests(self) -> None:
        """The consumer changed: its waiting requests will never be answered."""
        with self._lock:
            self._waiting.clear()


class PushEngine:
    """Delivery of one push consumer to one reader (loop thread), keeping the ``_engine`` contract.

    ``sink(item)`` gets each Msg, each ``Warning_`` (missed heartbeat, gap, slow consumer) and one
    final ``Terminal``; readers call ``taken(size)`` for each message they take out of their buffer.
    Counters: ``received`` (JetStream messages delivered to the sink), ``dropped`` (messages a full
    buffer refused), ``pulls`` (always 0).
    """

    pulls = 0

    def __init__(self, target: Target, opts: PushOptions, sink: Sink, hook: ResetHook | None = None,
                 on_end: Callable[[], Any] | None = None) -> None:
        self._target = target
        self._hook = hook
        self._on_end = on_end  # told once, just before the Terminal (the ordered consumer's clean-up)
        self._subject = opts.deliver_subject
        self._conn = target.conn
        self._opts = opts
        self._sink = sink
        self.limit: int | None = opts.pending_msgs_limit
        self._ledger = FlowLedger(opts.pending_msgs_limit, opts.pending_bytes_limit)
        self._lock = threading.Lock()   # the drop count
        self.received = 0
        self.dropped = 0
        self._overflowing = False
        self._dseq = 0                  # last consumer sequence seen (kept across reconnects)
        self._winding = False
        self._d = Delivery(target, sink, opts.idle_heartbeat, self)
        self.halted = self._d.halted

    # -- loop thread ---------------------------------------------------------

    async def start(self) -> None:
        """Subscribe to the deliver subject; delivery starts as the server sees the interest."""
        self.attach()
        try:
            await self.retarget(self._subject)
        except BaseException:
            self.halt(None)  # listener, alarm and all: nothing of a failed start stays behind
            raise

    def attach(self) -> None:
        """Follow the connection's events and arm the heartbeat alarm; nothing is received until
        :meth:`retarget` names a deliver subject."""
        self._d.attach()

    async def retarget(self, deliver_subject: str) -> None:
        """Receive on ``deliver_subject`` from now on (a new consumer's, for the ordered push consumer)."""
        self._subject = deliver_subject
        d = self._d
        d.subjects = (deliver_subject,)
        sub = await self._conn.subscribe_raw(deliver_subject, self._on_msg, queue=self._opts.deliver_group or "")
        if d.stopped or self._winding:
            await self._conn.unsubscribe_raw(sub)
            return
        d.sub = sub
        d.heartbeat.seen()

    async def suspend(self) -> None:
        """Stop receiving from the current deliver subject: muted (what is on the wire is dropped) and
        unsubscribed; flow-control requests of that consumer are forgotten and the consumer sequence
        restarts. Messages already delivered keep their room until taken."""
        sub, self._d.sub = self._d.sub, None
        if sub is not None:
            self._conn.mute(sub)
            await self._conn.unsubscribe_raw(sub)
        self._ledger.forget_requests()
        self._dseq = 0

    def missed_heartbeat(self) -> None:
        """(the skeleton's policy) Said as a warning, unless an ordered consumer recreates itself."""
        err = errors.NoHeartbeatError(
            f"{self._target.label}: no message or heartbeat for {self._d.heartbeat.limit:.3g}s")
        if self._hook is None or not self._hook.lost("heartbeat", err):
            self._sink(Warning_(err))

    def _on_msg(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        d = self._d
        if d.stopped:
            d.nak_late(reply)
            return
        d.heartbeat.last_seen = monotonic()  # HeartbeatWatch.seen(), inlined: once per message
        if raw_headers and not data:
            status = status_of(raw_headers, data)
            if status is not None:
                self._on_status(reply, *status)
                return
        opts = self._opts
        size = len(subject) + len(reply) + len(raw_headers) + len(data)
        # Room is checked first and taken last: only this thread adds to the counts, readers only
        # take away, so what was free here is still free below.
        ledger = self._ledger
        # ledger.full(size) and ledger.delivered(size), inlined: once per message
        if (ledger.delivered_msgs - ledger.taken_count >= ledger.msgs_limit
                or ledger.delivered_bytes - ledger.taken_bytes + size > ledger.bytes_limit):
            self._full(reply)
            return
        is_js = reply.startswith(ACK_PREFIX)
        if is_js:
            if self._hook is not None and not self._hook.admit(reply):
                return
            if opts.gap_check:
                try:
                    dseq = wire_consumer_seq(reply)
                except ValueError:
                    pass
                else:
                    last, self._dseq = self._dseq, dseq  # _check_sequence, inlined: once per message
                    if last and dseq > last + 1:
                        self._gap(last, dseq)
        ledger.delivered_msgs += 1
        ledger.delivered_bytes += size
        self._overflowing = False
        msg = Msg(self._conn, subject.decode(), reply.decode(), data, raw_headers, None, reply)
        if is_js:
            self.received += 1
        self._sink(msg)

    def _full(self, reply: bytes) -> None:
        """A message found the buffer full: drop it, count it, say so once per episode (loop thread)."""
        opts = self._opts
        with self._lock:
            self.dropped += 1
        if opts.gap_check and reply.startswith(ACK_PREFIX):
            try:  # it arrived: a drop is counted and said, never also reported as a gap
                self._dseq = wire_consumer_seq(reply)
            except ValueError:
                pass
        if self._hook is not None and reply.startswith(ACK_PREFIX) and self._hook.lost("dropped", None):
            return  # an ordered consumer starts again after the last message it kept (every drop: idempotent)
        if self._overflowing:
            return
        self._overflowing = True
        err = errors.SlowConsumerError(
            f"{self._target.label}: buffer full ({opts.pending_msgs_limit} messages or "
            f"{opts.pending_bytes_limit} bytes waiting): dropping messages; "
            + ("they are redelivered after ack_wait" if opts.acked and reply else "they are lost"))
        self._sink(Warning_(err))

    def _hook_seq(self) -> int:
        return getattr(self._hook, "consumer_seq", 0)

    def _gap(self, last: int, dseq: int) -> None:
        self._sink(Warning_(errors.MessageGapError(
            f"{self._target.label}: consumer sequence jumped from {last} to {dseq}", last, dseq)))

    def _on_status(self, reply: bytes, code: str, hdrs: Any) -> None:
        kind, err = classify_status(code, hdrs.get("Description", ""))
        if kind is Status.FLOW_CONTROL:
            if reply:
                self._flow_control(reply.decode())
            return
        if kind is Status.HEARTBEAT:
            stalled = hdrs.get("Nats-Consumer-Stalled")
            if stalled:
                self._answer(stalled)  # the server is stuck waiting for this answer: at once
            last = hdrs.get("Nats-Last-Consumer")
            if self._hook is not None and last and last.isdigit() and int(last) > self._hook_seq():
                self._hook.lost("gap", None)  # the server delivered more than the hook kept
                return
            if self._opts.gap_check and last and last.isdigit() and self._dseq and int(last) > self._dseq:
                seen, self._dseq = self._dseq, int(last)
                self._sink(Warning_(errors.MessageGapError(
                    f"{self._target.label}: the server delivered up to consumer sequence {last}, "
                    f"the last received was {seen}", seen, int(last))))
            return
        # Push consumers get no pull statuses; whatever comes is reported, never swallowed.
        self._sink(Warning_(err if err is not None else errors.JetStreamError(f"status {code}")))

    def _flow_control(self, reply: str) -> None:
        if self._ledger.requested(self.received, reply):
            self._answer(reply)  # everything before it was already taken

    def _answer(self, reply: str) -> None:
        if self._d.stopped or not self._ledger.first_answer(reply):
            return
        self._write(pub_command(reply, "", b"", b""))

    def _answer_due(self) -> None:
        for reply in self._ledger.due():
            self._answer(reply)

    def _write(self, cmd: bytes) -> None:
        try:
            self._conn.write_now(cmd)
        except errors.JetStreamError as exc:  # disconnected: the server asks again, or redelivers
            log.debug("jetstream_sync: push control write not sent: %s", exc)

    async def _wind_down(self) -> None:
        """Stop interest first (UNSUB, then a round trip), so every message the server sent before
        reaches the reader; then end."""
        if self._winding or self._d.stopped:
            return
        self._winding = True
        try:
            sub, self._d.sub = self._d.sub, None
            if sub is not None:
                await self._conn.unsubscribe_raw(sub, linger=_WIND_DOWN_WAIT + 2.0)
                try:
                    await self._conn.round_trip(_WIND_DOWN_WAIT)
                except errors.JetStreamError as exc:
                    log.debug("jetstream_sync: push wind-down without a round trip: %s", exc)
        finally:
            self.halt(None)

    @property
    def ending(self) -> bool:
        """True once the engine was told to stop (winding down or halted). No I/O."""
        return self._winding or self._d.stopped

    def halt(self, err: BaseException | None) -> None:
        """End delivery for good (loop thread): unsubscribe, cancel the alarm, send ``Terminal``. Idempotent."""
        if self._on_end is not None and not self._d.stopped:
            self._on_end()
        self._d.end(err)

    def reconnected(self) -> None:
        """(the skeleton's policy) nats-py subscribed again; an ordered consumer starts afresh."""
        if self._hook is not None:
            self._hook.lost("reconnect", None)

    # -- any thread ------------------------------------------------------------

    def taken(self, size: int, count: int = 1) -> None:
        """A reader took ``count`` messages (``size`` bytes) out of its buffer: free their room; answer
        the flow control they reached."""
        if self._ledger.taken(size, count):
            try:
                self._conn.loop_thread.call_soon(self._answer_due)
            except errors.ClientClosedError:
                pass

    def buffered(self) -> int:
        """Messages delivered and not yet taken (no I/O)."""
        return self._ledger.buffered_msgs

    def stop_soon(self) -> None:
        """Stop interest and end once the server's messages sent before are in (any thread). Never blocks."""
        lt = self._conn.loop_thread
        self._d.stop_soon(lambda: lt.spawn(self._wind_down(), name="jetstream-sync-push-wind-down"))

