# The delivery skeleton every engine holds (pull.py's continuous pull, push.py's push engine): the
# connection listener and the pause it keeps, the idle-heartbeat timer, the NAK of what arrives after
# the end, the end itself (unsubscribe, Terminal) and stop_soon. An engine holds one and keeps only
# its policy: what a missed heartbeat or a reconnect means, and how it stops.
#
# Rule 1: loop thread, except ``stop_soon`` (any thread); never blocks, never runs user code.
# Rule 2: it ends once: ``end`` unsubscribes, cancels the timer, sets ``halted`` and sinks the Terminal.
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Protocol

from . import errors
from ._engine import HeartbeatWatch, Sink, Target, Terminal
from ._protocol import NAK, ack_command, spelled

__all__ = ["ACK_PREFIX", "Delivery", "Policy"]

#: What a JetStream message's reply subject starts with (its ack subject).
ACK_PREFIX = b"$JS.ACK."
#: The heartbeat alarm never wakes sooner than this after its last wake-up (seconds).
MIN_TICK = 0.05


class Policy(Protocol):
    """What the skeleton asks of the engine holding it (loop thread)."""

    def missed_heartbeat(self) -> None:
        """Nothing arrived for twice the idle heartbeat while receiving."""

    def reconnected(self) -> None:
        """The connection came back (the pause is over, the heartbeat count restarted)."""

    def halt(self, err: BaseException | None) -> None:
        """End delivery (closed client, refused subject): the engine's halt, which ends here."""


class Delivery:
    """The shared part of an engine (see the module's charter). ``sub`` is the engine's current
    subscription (None: not receiving); ``subjects`` the ones whose refusal ends delivery."""

    __slots__ = ("conn", "_sink", "_policy", "heartbeat", "halted", "stopped", "paused", "sub", "subjects", "_timer")

    def __init__(self, target: Target, sink: Sink, interval: float | None, policy: Policy) -> None:
        self.conn = target.conn
        self._sink = sink
        self._policy = policy
        self.heartbeat = HeartbeatWatch(interval)
        #: Set once nothing more can be delivered.
        self.halted = threading.Event()
        self.stopped = False
        self.paused = False
        self.sub: Any = None
        self.subjects: tuple[str, ...] = ()
        self._timer: asyncio.TimerHandle | None = None

    def attach(self) -> None:
        """Follow the connection's events and arm the heartbeat alarm (when there are heartbeats)."""
        self.conn.add_listener(self)
        self.paused = not self.conn.is_connected
        self.heartbeat.seen()
        if self.heartbeat.interval:
            self._arm()

    def _arm(self, delay: float | None = None) -> None:
        if not self.stopped:
            self._timer = self.conn.loop_thread.loop.call_later(
                self.heartbeat.interval if delay is None else delay, self._on_timer)

    def _on_timer(self) -> None:
        if self.stopped:
            return
        hb = self.heartbeat
        if not self.watching:
            self._arm()
            return
        if hb.missed(time.monotonic()):
            self._policy.missed_heartbeat()
        # Wake when the silence would next count as missed, so a lost consumer is noticed at 2 x the
        # interval after the last sign of life (a fixed tick noticed it up to a whole interval later).
        self._arm(max(hb.due_in(time.monotonic()), MIN_TICK))

    @property
    def watching(self) -> bool:
        """Whether silence now means a missed heartbeat (not while disconnected or between subscriptions)."""
        return not self.paused and self.sub is not None

    def nak_late(self, reply: bytes) -> None:
        """A message arrived after the end: hand it back at once (a core message is not ours to answer)."""
        if reply.startswith(ACK_PREFIX):
            try:
                self.conn.write_now(ack_command(reply, NAK))
            except errors.JetStreamError:
                pass  # disconnected: the server redelivers after ack_wait

    def end(self, err: BaseException | None) -> None:
        """End for good: cancel the alarm, stop following the connection, unsubscribe (the handler
        stays a little longer to NAK what is on the wire), set ``halted``, sink ``Terminal(err)``.
        Dropping interest also makes the server discard waiting pull requests. Idempotent."""
        if self.stopped:
            return
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self.conn.remove_listener(self)
        if self.sub is not None:
            sub, self.sub = self.sub, None
            self.conn.loop_thread.spawn(self.conn.unsubscribe_raw(sub, linger=2.0), name="jetstream-sync-unsub")
        self.halted.set()
        self._sink(Terminal(err))

    def stop_soon(self, stop: Callable[..., Any], *args: Any) -> None:
        """Run ``stop(*args)`` on the loop thread (any thread; never blocks); with the client closed
        nothing more can come, so it counts as halted at once."""
        try:
            self.conn.loop_thread.call_soon(stop, *args)
        except errors.ClientClosedError:
            self.halted.set()

    # connection events (loop thread)
    def on_disconnected(self) -> None:
        self.paused = True

    def on_reconnected(self) -> None:
        self.paused = False
        self.heartbeat.seen()  # nats-py subscribed again; deliveries resume
        self._policy.reconnected()

    def on_closed(self) -> None:
        self._policy.halt(errors.ClientClosedError("the client was closed"))

    def on_permission_denied(self, subject: str, error: BaseException) -> None:
        for mine in self.subjects:
            if subject == mine.lower():
                self._policy.halt(spelled(error, mine))
                return
