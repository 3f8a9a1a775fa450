# The ordered push engine (``js.subscribe(..., ordered_consumer=True)``, ADR-15 and ADR-17): a push
# engine and the ordered core (ordered_core.py, shared with the ordered pull engine) held side by
# side; on every reset the engine subscribes a new deliver subject, then the core creates an
# ephemeral, AckNone, flow-controlled consumer delivering there after the last stream sequence received.
#
# Rule 1: interest first: the new deliver subject is subscribed before its consumer is created, so
#         nothing the new consumer delivers is missed.
# Rule 2: loop thread only, like the engines it composes; no blocking, no user code.
from __future__ import annotations

import itertools
import secrets
from typing import Any, Callable

import attrs

from ._engine import Sink, Target
from .config import ConsumerConfig
from .ordered_core import OrderedCore, start_after
from .push import PushEngine, PushOptions

__all__ = ["OrderedPush"]


class OrderedPush:
    """The engine of ``subscribe(ordered_consumer=True)`` (loop thread): a :class:`PushEngine` and an
    :class:`~jetstream_sync.ordered_core.OrderedCore` it holds, the core moving the engine to a new
    consumer whenever the consumer sequence skips, a heartbeat is missed, the buffer overflowed or
    the connection came back. ``named(name)`` is told each new consumer's name, ``created(answer)``
    the server's answer to its create (its consumer info)."""

    pulls = 0

    def __init__(self, base: ConsumerConfig, target: Target, opts: PushOptions, sink: Sink,
                 named: Callable[[str], Any] = lambda name: None,
                 created: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self._base = base
        self._target = target
        self._sink = sink
        self._named = named
        self._core = OrderedCore(target, sink, created=created)
        # The sink is the reader's own: nothing stands between the engine and the reader per message.
        self._push = PushEngine(target, opts, sink, hook=self._core, on_end=self._core.ended)
        self._core.bind(self._push, self._move)
        self.halted = self._push.halted
        self.taken = self._push.taken
        self.buffered = self._push.buffered
        self.limit = self._push.limit
        self._token = secrets.token_hex(4)
        self._serial = itertools.count(1)

    @property
    def received(self) -> int:
        return self._push.received

    @property
    def dropped(self) -> int:
        return self._push.dropped

    async def start(self) -> None:
        self._push.attach()
        try:
            await self._core.reset()
        except BaseException:  # cancelled by the caller's timeout, or worse: leave nothing running
            self._push.halt(None)  # its Terminal deletes a consumer already made
            raise

    def stop_soon(self) -> None:
        self._push.stop_soon()

    async def _move(self) -> None:
        """A reset's own step: interest in a new deliver subject first, then the consumer delivering there."""
        inbox = self._target.conn.new_inbox()
        await self._push.retarget(inbox)
        if self._push.ending:  # told to stop meanwhile: make nothing new
            return
        name = await self._core.create(lambda after: self._config(after, inbox))
        if name is not None:
            self._named(name)

    def _config(self, after: int, inbox: str) -> ConsumerConfig:
        cfg = attrs.evolve(self._base, name=f"jss_ordered_{self._token}_{next(self._serial)}", deliver_subject=inbox)
        return start_after(cfg, after)
