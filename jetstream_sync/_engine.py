# The engine contract: what the readers (``messages()`` and ``consume()``, in consume.py) need from
# an engine that delivers messages on the loop thread, the items it hands over, and the ``Target``
# both are built with. The pull engine (pull.py) and the push engine (push.py) keep it; readers are
# written against this module only, so one reader serves every consumer kind.
#
# Rule 1: an engine calls up only through its sink (loop thread, never blocks); readers call down
#         through ``start``, ``taken`` and ``stop_soon``. Nothing else crosses.
# Rule 2: engines and readers take a ``Target`` (built by the handles), never a handle.
# Rule 3: pure declarations: no I/O, no threads started here.
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol, Sequence

import attrs

from . import errors
from ._connection import Connection
from ._jsapi import JsApi
from .api import ApiPrefix

__all__ = ["Engine", "EngineFactory", "HeartbeatWatch", "Mark", "ResetHook", "Sink", "Target", "Terminal", "Warning_",
           "lost_verdict"]


@attrs.frozen(kw_only=True)
class Target:
    """Where an engine delivers from, as the handle that built it says: the connection, the names and
    the request path of a consumer (none for a core subscription), and the text errors name it by.
    Frozen: an ordered consumer moving to its next server-side consumer makes a new one (:meth:`moved`)."""

    conn: Connection
    #: How errors name it: ``consumer 'C' of stream 'S'``, ``the subscription to 'a.b'``.
    label: str
    #: Seconds a reader waits for the engine to start (the context's or the client's default).
    timeout: float
    #: What worker and reporter threads are named after (the consumer's name, or the subject).
    name: str
    stream: str | None = None
    consumer: str | None = None
    #: The pull request subject (pull), the deliver subject (push) or the subscribed subject (core).
    subject: str = ""
    #: The context's request path and API subjects (None for a core subscription).
    jsapi: JsApi | None = None
    api: ApiPrefix | None = None
    #: The consumer's ``backoff``: the default delays of a NAK after a handler failed.
    backoff: Sequence[float] | None = None

    def moved(self, consumer: str, subject: str) -> "Target":
        """The same target on another server-side consumer (an ordered consumer's next incarnation)."""
        return attrs.evolve(self, consumer=consumer, subject=subject)

    def info_subject(self) -> str:
        """The ``CONSUMER.INFO`` subject of this target's consumer (asked when it looks lost)."""
        assert self.api is not None and self.stream is not None and self.consumer is not None
        return self.api.consumer_info(self.stream, self.consumer)

    def pull_subject(self, consumer: str) -> str:
        """The ``CONSUMER.MSG.NEXT`` subject of ``consumer`` in this target's stream."""
        assert self.api is not None and self.stream is not None
        return self.api.msg_next(self.stream, consumer)


class Warning_:
    """A non-terminal problem travelling to the user's side with the messages."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Mark:
    """A point in a delivery that the owner of an engine marks for its reader (subclass it): a
    ``messages()`` reader returns it from ``next()`` in its place among the messages; ``consume()``
    passes it over. Engines that emit none are read as if this did not exist."""

    __slots__ = ()


class Terminal:
    """The end of delivery; ``error`` is None when it was stopped on purpose."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def lost_verdict(target: Target, err: BaseException, failure: BaseException | None) -> BaseException:
    """The error a pull ends with, given ``err`` (a 409 Consumer Deleted, a 503, a missed heartbeat) and
    what the consumer info request asked then raised (None: the consumer is there). A missing stream or
    consumer is a terminal ``ConsumerDeletedError`` naming both; anything else leaves ``err`` as it is."""
    if isinstance(failure, errors.StreamNotFoundError):
        gone: BaseException = errors.ConsumerDeletedError(
            f"{target.label} is gone: stream {target.stream!r} was deleted", target.stream, target.consumer)
    elif isinstance(failure, errors.ConsumerNotFoundError):
        gone = errors.ConsumerDeletedError(f"{target.label} was deleted", target.stream, target.consumer)
    else:
        return err
    gone.__cause__ = failure
    return gone


class HeartbeatWatch:
    """The idle-heartbeat alarm every engine keeps (ADR-37): anything arriving from the server
    (a message, a status, a heartbeat) counts as a sign of life; silence for twice the interval is a
    missed heartbeat. One object per engine, used from one thread at a time."""

    __slots__ = ("interval", "last_seen")

    def __init__(self, interval: float | None) -> None:
        #: The idle heartbeat the server was asked for, in seconds (None: no heartbeats, never missed).
        self.interval = interval
        self.last_seen = time.monotonic()

    def seen(self) -> None:
        """Something arrived (or the count restarts: a new pull, a reconnect)."""
        self.last_seen = time.monotonic()

    @property
    def limit(self) -> float:
        """Seconds of silence that count as a missed heartbeat (twice the interval)."""
        return 2 * self.interval if self.interval is not None else float("inf")

    def due_in(self, now: float) -> float:
        """Seconds from ``now`` until silence would count as missed."""
        return self.last_seen + self.limit - now

    def missed(self, now: float) -> bool:
        """True when nothing arrived for :attr:`limit` seconds; the count then restarts, so one
        silence is reported once."""
        if now - self.last_seen >= self.limit:
            self.last_seen = now
            return True
        return False


class ResetHook(Protocol):
    """What an engine asks the owner that may move it to a new consumer (loop thread): the ordered
    consumers' reset logic, held beside a pull or push engine instead of inside it."""

    def admit(self, reply: bytes) -> bool:
        """A message arrived with ack subject ``reply``: False drops it uncounted (out of step)."""

    def lost(self, reason: str, error: BaseException | None) -> bool:
        """The consumer may be gone or out of step (``reason``: "heartbeat", "no responders",
        "deleted", "reconnect", "dropped"): True means the hook recovers and the engine does nothing more."""


#: Called on the loop thread with each ``Msg``, each ``Warning_`` and one final ``Terminal``. Must not block.
Sink = Callable[[Any], None]


class Engine(Protocol):
    """What a reader drives. Built as ``factory(target, options, sink)``."""

    #: Set once nothing more can be delivered (the ``Terminal`` was sunk, or is about to be).
    halted: threading.Event
    #: Requests sent to the server for messages (pull requests; 0 for an engine that never asks).
    pulls: int
    #: Messages delivered to the sink so far.
    received: int
    #: Messages refused because the reader's buffer was full (push engines; 0 for pull engines).
    dropped: int
    #: At most this many messages are delivered and not yet taken (None: bounded in bytes instead).
    limit: int | None

    async def start(self) -> None:
        """(loop thread) Subscribe and start delivery. Raises what the connection raises."""

    def taken(self, size: int, count: int = 1) -> None:
        """(any thread) ``count`` delivered messages of ``size`` bytes in all left the reader's buffer."""

    def buffered(self) -> int:
        """Messages delivered and not yet taken (no I/O)."""

    def stop_soon(self) -> None:
        """(any thread) Stop delivering; the ``Terminal`` follows on the loop thread. Never blocks."""


#: Builds an engine for a target: ``factory(target, options, sink)``.
EngineFactory = Callable[[Target, Any, Sink], Engine]
