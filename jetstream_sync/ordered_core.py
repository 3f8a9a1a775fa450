# The ordered consumer's core (ADR-17 semantics), shared by the ordered pull engine (ordered.py) and
# the ordered push engine (ordered_push.py): the cursor, the consumer-sequence check, resets, and the
# server-side consumers ("incarnations") they create and delete. Each engine holds one ``OrderedCore``
# beside its pull or push engine; the core is that engine's ``_engine.ResetHook``.
#
# Rule 1: a reset asked for while one runs always follows it (once, however often it was asked): what
#         was delivered during the reset may already be out of step, so it is never dropped.
# Rule 2: incarnations are created through the context's request path (its retry policy first) and
#         deleted without waiting, the old one at every reset and the last one at the end; an
#         incarnation created after the engine was told to stop is deleted at once, and so is every
#         name a create was given up for (timed out, cancelled with its caller, or outrun by a hedged
#         try of the ordered pull): it may land late.
# Rule 3: loop thread only; no blocking, no user code.
from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Protocol

import attrs

from . import errors
from ._engine import Sink, Target, Warning_
from ._protocol import ACK_CONSUMER_SEQ, ACK_STREAM_SEQ, parse_ack_subject, wire_consumer_seq
from .config import ConsumerConfig, DeliverPolicy

__all__ = ["Movable", "OrderedCore", "create_incarnation", "start_after", "wire_sequences"]

#: Pause between tries to create an incarnation once the retry policy gave up.
RESET_RETRY = 1.0
#: An ordered pull's create not answered within this many seconds is joined by another try.
HEDGE = 1.0
#: At most this many creates of one reset wait for an answer at once.
MAX_TRIES = 4


def wire_sequences(reply: bytes) -> tuple[int, int] | None:
    """(stream seq, consumer seq) from an ack subject as it comes off the wire (loop thread)."""
    try:
        fields = parse_ack_subject(reply)
    except ValueError:
        return None
    return fields[ACK_STREAM_SEQ], fields[ACK_CONSUMER_SEQ]


def start_after(cfg: ConsumerConfig, after: int) -> ConsumerConfig:
    """``cfg`` starting right after stream sequence ``after`` (unchanged for 0: nothing seen yet)."""
    if not after:
        return cfg
    return attrs.evolve(cfg, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1,
                        opt_start_time=None)


def create_request(target: Target, cfg: ConsumerConfig) -> tuple[str, dict[str, Any], str]:
    """(subject, payload, name) of the request that creates consumer ``cfg`` in the target's stream."""
    assert target.api is not None and target.stream is not None and cfg.name is not None
    filt = cfg.filter_subject if not cfg.filter_subjects else None
    payload = {"stream_name": target.stream, "config": cfg.to_request(), "action": "create"}
    return target.api.consumer_create(target.stream, cfg.name, filt), payload, cfg.name


async def create_incarnation(jsapi: Any, request: Callable[[], tuple[str, dict[str, Any], str]], sink: Sink,
                             halted: threading.Event, halt: Callable[[BaseException], Any],
                             hedge: float | None = None,
                             answered_late: Callable[[str], Any] = lambda name: None) -> dict[str, Any] | None:
    """(loop thread) Create the next server-side consumer of an ordered read; return the server's answer
    (its consumer info, ``name`` and ``num_pending`` among it).

    ``request()`` gives (subject, payload, name) afresh for each try. The context's retry policy
    applies first; past it a transient failure is a warning and the next try follows after a pause,
    for as long as the read runs (an ordered consumer heals by itself). A refusal for good (the
    stream is gone, a config the server rejects) calls ``halt(error)``. None once the read has ended.

    With ``hedge`` (seconds), a try not answered by then is joined by another one under a new name
    (at most :data:`MAX_TRIES` waiting), and the first answer wins: the server places a one-replica
    consumer on any server of the stream, a killed one included until it is known to be gone, and a
    create placed there is never answered. The caller deletes every name tried but the winner's; a try
    still unanswered when this returns (or is cancelled) runs on, and ``answered_late(name)`` is called
    when it ends, answered or not: the server may make that consumer after the caller's delete.
    """
    loop = asyncio.get_running_loop()
    tries: dict[asyncio.Future, str] = {}
    rest_until = 0.0  # after a failure no new try starts before this (loop time)
    try:
        while not halted.is_set():
            now = loop.time()
            if len(tries) < (MAX_TRIES if hedge else 1) and now >= rest_until:
                subject, payload, name = request()
                tries[asyncio.ensure_future(jsapi.request_async(subject, payload, idempotent=True))] = name
            if not tries:
                await asyncio.sleep(rest_until - now)
                continue
            wait = hedge if now >= rest_until else (rest_until - now if hedge is None else min(hedge, rest_until - now))
            done, _ = await asyncio.wait(list(tries), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                name = tries.pop(task)
                exc = task.exception()
                if exc is None:
                    resp = task.result()
                    return {"name": name, **resp} if isinstance(resp, dict) else {"name": name}
                if isinstance(exc, errors.APIError):
                    if not exc.retriable:
                        halt(exc)
                        return None
                    sink(Warning_(exc))  # 503: JetStream busy electing a leader
                elif isinstance(exc, errors.PermissionViolationError):
                    sink(Warning_(exc))
                elif isinstance(exc, Exception):  # timeouts, a server on its way back
                    # Said as a warning about recreating, not a bare timeout the caller could take for its own.
                    sink(Warning_(errors.JetStreamError(f"recreating the ordered consumer: {exc!r}")))
                else:
                    raise exc
                rest_until = loop.time() + RESET_RETRY
        return None
    finally:
        for task, name in tries.items():
            if task.done():
                if not task.cancelled():
                    task.exception()  # answered as another try won: looked at, so never reported as unread
            else:  # still on its way: let it end, then delete what it may have made
                task.add_done_callback(lambda t, n=name: _late(t, n, answered_late))


def _late(task: asyncio.Future, name: str, answered_late: Callable[[str], Any]) -> None:
    if task.cancelled():
        return  # the loop is closing: nothing can be sent, the consumer's inactive threshold is the backstop
    task.exception()  # looked at, so never reported as unread
    try:
        answered_late(name)
    except errors.JetStreamError:  # the client is closing: its inactive threshold is the backstop
        pass


class Movable(Protocol):
    """What the core needs of the pull or push engine it moves from one incarnation to the next."""

    halted: threading.Event

    @property
    def ending(self) -> bool:
        """True once the engine was told to stop."""

    async def suspend(self) -> None:
        """Stop receiving from the current incarnation."""

    def halt(self, err: BaseException | None) -> None:
        """End delivery for good."""


class OrderedCore:
    """The cursor, the sequence check and the resets of one ordered read (loop thread).

    Built with the read's target and sink, then :meth:`bind` to the engine it moves and to ``move``:
    the kind's own step of a reset (subscribe and create for push, create and pull for pull), which
    calls :meth:`create`. It is the engine's ``ResetHook``: :meth:`admit` checks each delivery's
    consumer sequence, :meth:`lost` turns a missed heartbeat, a drop, a deleted consumer or a
    reconnect into a reset."""

    def __init__(self, target: Target, sink: Sink, cursor: int = 0, spawn: Callable[..., Any] | None = None,
                 created: Callable[[dict[str, Any]], Any] | None = None, hedge: float | None = None) -> None:
        self._target = target
        #: Seconds after which an unanswered create is joined by another try (None: one at a time).
        self._hedge = hedge
        #: Told the server's answer to each incarnation created (loop thread), before the move goes on.
        self._created = created
        self._sink = sink
        self._spawn = spawn if spawn is not None else target.conn.loop_thread.spawn
        self.engine: Movable | None = None
        self._move: Callable[[], Awaitable[None]] | None = None
        self._cursor = cursor
        self._last = b""  # the ack subject of the last delivery kept, not yet read into the cursor
        #: The last consumer sequence received from the current incarnation.
        self.consumer_seq = 0
        #: The current incarnation ("" before the first and between two).
        self.name = ""
        self.resetting = False
        self._again = False  # asked to reset while resetting: once more when it is done
        #: Resets completed (moves made), for the curious and for tests.
        self.resets = 0

    def bind(self, engine: Movable, move: Callable[[], Awaitable[None]]) -> None:
        self.engine = engine
        self._move = move

    # -- the reset hook --------------------------------------------------------

    def admit(self, reply: bytes) -> bool:
        """A delivery with ack subject ``reply``: True keeps it (next in the consumer sequence); out of
        step, it is dropped and a reset asked for. During a reset what arrives is the new incarnation's
        (the old one's subject was muted first), which may deliver before its create call returned.
        Only the consumer sequence is read here; the stream sequence of the last one kept is read
        when the cursor is asked for (once per reset, not once per message)."""
        if not reply:
            return True
        try:
            cseq = wire_consumer_seq(reply)
        except ValueError:
            return True
        if cseq != self.consumer_seq + 1:
            self.reset_soon()
            return False
        self.consumer_seq = cseq
        self._last = reply
        return True

    @property
    def cursor(self) -> int:
        """The last stream sequence received (buffered or handed over): the next incarnation starts after it."""
        last = self._last
        if last:
            seqs = wire_sequences(last)
            if seqs is not None:
                self._cursor = seqs[0]
            self._last = b""
        return self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self._cursor = value
        self._last = b""

    def lost(self, reason: str, error: BaseException | None) -> bool:
        if reason == "heartbeat":
            self._sink(Warning_(errors.NoHeartbeatError(f"{error}; recreating it")))
        elif reason == "dropped" and not self.resetting:
            self._sink(Warning_(errors.SlowConsumerError(
                f"{self._target.label}: buffer full; recreating it after the last message kept")))
        self.reset_soon()
        return True

    def ended(self) -> None:
        """The read ended (its Terminal): delete the current incarnation without waiting."""
        if self.name:
            self.delete_soon(self.name)

    # -- resets ------------------------------------------------------------------

    def reset_soon(self) -> None:
        """Ask for a reset: started now, or run once more after the one running."""
        engine = self.engine
        if engine is None or engine.halted.is_set():
            return
        if self.resetting:
            self._again = True
            return
        self._spawn(self.reset(), name="jetstream-sync-ordered-reset")

    async def reset(self) -> None:
        """Move the engine to a new incarnation starting after the cursor, as often as asked meanwhile."""
        engine = self.engine
        assert engine is not None and self._move is not None
        if self.resetting or engine.halted.is_set():
            return
        self.resetting = True
        try:
            while True:
                self._again = False
                await engine.suspend()
                if self.name:
                    self.delete_soon(self.name)
                    self.name = ""
                self.consumer_seq = 0
                await self._move()
                self.resets += 1
                if not self._again or engine.ending or engine.halted.is_set():
                    return
        finally:
            self.resetting = False

    async def create(self, config: Callable[[int], ConsumerConfig]) -> str | None:
        """Create the next incarnation, ``config(cursor)`` (the cursor as it is at each try); return its
        name, or None when the read ended first (one created meanwhile is deleted at once)."""
        engine = self.engine
        assert engine is not None
        tried: list[str] = []

        def request() -> tuple[str, dict[str, Any], str]:
            req = create_request(self._target, config(self.cursor))
            tried.append(req[2])
            return req

        try:
            resp = await create_incarnation(self._target.jsapi, request, self._sink, engine.halted, engine.halt,
                                            self._hedge, self.delete_soon)
        except asyncio.CancelledError:
            for name in tried:  # a create on its way when its caller gave up: the server may still make it
                self.delete_soon(name)
            raise
        name = resp["name"] if resp is not None else None
        for other in tried:
            if other != name:
                self.delete_soon(other)  # a try that timed out may have landed after all
        if name is not None and (engine.ending or engine.halted.is_set()):
            self.delete_soon(name)  # ended while creating: the Terminal did not know this one
            return None
        if resp is not None:
            self.name = resp["name"]
            if self._created is not None:
                self._created(resp)
        return name

    def delete_soon(self, name: str) -> None:
        """Ask the server to delete incarnation ``name`` without waiting (its inactive threshold is the
        backstop)."""
        target = self._target
        assert target.jsapi is not None and target.api is not None and target.stream is not None
        target.jsapi.request_soon(target.api.consumer_delete(target.stream, name), None,
                                  f"deleting ordered consumer {name!r}")
