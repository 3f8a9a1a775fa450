# The JetStream publish window: one reply inbox, a token per message, counters.
#
# Rule 1: a publish costs the caller one semaphore slot, one Future and one
#         Outbox append (the PUB bytes are built on the calling thread); the
#         loop thread only writes batches and routes PubAcks. No task, no
#         loop round trip and no asyncio future per message.
# Rule 2: at most ``max_pending`` publishes are in flight; the caller blocks
#         (in 0.25 s slices) when the window is full. Memory stays bounded.
# Rule 3: every future ends: with a PubAck, an APIError, NoRespondersError,
#         TimeoutError (swept every 0.25 s) or ClientClosedError.
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from . import errors
from ._headers import decode_headers
from .config import PubAck

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Publisher"]

_SWEEP_INTERVAL = 0.25


class Publisher:
    """Routes PubAcks for one JetStream context. Thread-safe."""

    def __init__(self, client: "Client", max_pending: int) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be an int >= 1, got {max_pending!r}")
        self._client = client
        self.max_pending = max_pending
        self._slots = threading.BoundedSemaphore(max_pending)
        # token -> (future, deadline); inserted by callers, popped on the loop thread.
        self._pending: dict[str, tuple[concurrent.futures.Future, float]] = {}
        self._tokens = itertools.count(1)
        self._prefix = ""
        self._prefix_b = b""
        self._start_lock = threading.Lock()
        self._sub: Any = None
        self._sweeper: asyncio.Task | None = None

    def _ensure_started(self) -> None:
        if self._sub is not None:
            return
        with self._start_lock:
            if self._sub is not None:
                return
            prefix = self._client.new_inbox() + "."

            async def start() -> Any:
                return await self._client.subscribe_raw(prefix + "*", self._on_reply)

            self._prefix = prefix
            self._prefix_b = prefix.encode()
            self._sub = self._client.call(start(), self._client.default_timeout)

    def in_flight(self) -> int:
        """Publishes sent and not yet acknowledged. No I/O."""
        return len(self._pending)

    def submit(self, cmd_for: Any, timeout: float, wait_slot: float | None) -> concurrent.futures.Future:
        """Take a window slot and queue a publish; return its future.

        ``cmd_for(reply)`` builds the PUB bytes for a reply subject. Blocks
        while the window is full, at most ``wait_slot`` seconds (None = no
        bound), waking every 0.25 s.

        Raises TimeoutError (window stayed full), ClientClosedError.
        """
        self._client.loop_thread.check_usable()
        self._ensure_started()
        slots = self._slots
        if not slots.acquire(blocking=False):
            deadline = None if wait_slot is None else time.monotonic() + wait_slot
            while not slots.acquire(timeout=0.25):
                self._client.loop_thread.check_usable()
                if deadline is not None and time.monotonic() >= deadline:
                    raise errors.TimeoutError(
                        f"publish window full: {self.max_pending} publishes unacknowledged for {wait_slot:.3g}s")
        token = str(next(self._tokens))
        fut: concurrent.futures.Future = concurrent.futures.Future()
        try:
            cmd = cmd_for(self._prefix + token)
        except BaseException:
            slots.release()
            raise
        # Registered before the write is queued, so the reply cannot beat it.
        self._pending[token] = (fut, time.monotonic() + timeout)
        try:
            self._client.write(cmd, lambda exc, t=token: self._fail(t, exc))
        except BaseException:
            self._pending.pop(token, None)
            slots.release()
            raise
        if self._sweeper is None:
            self._client.loop_thread.call_soon(self._start_sweeper)
        return fut

    # -- loop thread ------------------------------------------------------

    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, raw_headers: bytes) -> None:
        entry = self._pending.pop(subject[len(self._prefix_b):].decode(), None)
        if entry is None:
            return  # timed out already, or a duplicate
        self._slots.release()
        fut = entry[0]
        if fut.done():
            return
        if raw_headers:
            hdrs = decode_headers(raw_headers)
            status = hdrs.get("Status") if hdrs else None
            if status == "503":
                fut.set_exception(errors.NoRespondersError(
                    "no responders: no stream captures this subject (or JetStream is not enabled)"))
                return
            if status and not data:
                fut.set_exception(errors.JetStreamError(f"publish failed with status {status} "
                                                        f"{hdrs.get('Description', '')}".strip()))
                return
        try:
            resp = json.loads(data)
            err = resp.get("error")
            if err:
                fut.set_exception(errors.api_error_from(err))
            else:
                fut.set_result(PubAck.from_response(resp))
        except Exception as exc:  # a malformed reply must still end the future
            fut.set_exception(errors.JetStreamError(f"unexpected publish reply {data[:200]!r}: {exc}"))

    def _fail(self, token: str, exc: BaseException) -> None:
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        self._slots.release()
        if not entry[0].done():
            entry[0].set_exception(exc)

    def _start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = self._client.loop_thread.spawn(self._sweep(), name="jetstream-sync-puback-sweeper")

    async def _sweep(self) -> None:
        try:
            while True:
                await asyncio.sleep(_SWEEP_INTERVAL)
                if not self._pending:
                    continue
                now = time.monotonic()
                for token, (fut, deadline) in list(self._pending.items()):
                    if deadline <= now:
                        self._fail(token, errors.TimeoutError("no PubAck from the server in time"))
        finally:
            self.close()

    def close(self) -> None:
        """Fail every outstanding future with ClientClosedError (any thread)."""
        for token in list(self._pending):
            self._fail(token, errors.ClientClosedError("the client closed before the PubAck arrived"))

    def outstanding(self) -> list[concurrent.futures.Future]:
        return [f for f, _ in list(self._pending.values())]
