# What every handle on a server-side consumer shares, pull or push: its names, its context, the
# cached info and the management calls (info, delete, pause, resume). The read calls are the
# subclasses' (consumer.py, push_consumer.py), since they differ by kind.
#
# Rule: a handle holds no server resources; ``cached_info`` is what the last round trip said.
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

from ._connection import Connection
from ._engine import Target
from ._jsapi import JsApi
from ._protocol import DEFAULT, Timeout
from .api import ApiPrefix
from .config import ConsumerInfo, ConsumerPauseResponse
from .events import EventStream, open_events

__all__ = ["Context", "ConsumerHandle", "target_of"]


class Context(Protocol):
    """What the handles use of the JetStream context they belong to (``JetStream``, a layer above
    them: named by this protocol, never imported, so the layers hold for type checkers too)."""

    _conn: Connection
    _api: ApiPrefix
    _jsapi: JsApi

    @property
    def client(self) -> Any: ...

    @property
    def timeout(self) -> float: ...

    def consumer_info(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> ConsumerInfo: ...

    def delete_consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> None: ...

    def pause_consumer(self, stream: str, name: str, until: datetime | float | timedelta, *,
                       timeout: Timeout = DEFAULT) -> ConsumerPauseResponse: ...

    def resume_consumer(self, stream: str, name: str, *, timeout: Timeout = DEFAULT) -> ConsumerPauseResponse: ...
    def unpin_consumer(self, stream: str, name: str, group: str, *, timeout: Timeout = DEFAULT) -> None: ...


def target_of(js: Context, stream: str, consumer: str, label: str, subject: str | None = None,
              backoff: Any = None) -> Target:
    """The engine target of ``consumer`` of ``stream`` in context ``js``: pulls go to its
    ``CONSUMER.MSG.NEXT`` subject unless ``subject`` (a deliver subject) is given."""
    return Target(conn=js._conn, label=label, timeout=js.timeout, name=consumer, stream=stream,
                  consumer=consumer, subject=subject if subject is not None else js._api.msg_next(stream, consumer),
                  jsapi=js._jsapi, api=js._api, backoff=backoff)


class ConsumerHandle:
    """Base of :class:`~jetstream_sync.Consumer` and :class:`~jetstream_sync.PushConsumer`. Thread-safe."""

    #: How errors name the kind ("consumer", "push consumer").
    _kind = "consumer"

    def __init__(self, js: Context, info: ConsumerInfo) -> None:
        self._js = js
        self._info = info
        self.name: str = info.name  # type: ignore[assignment]
        self.stream_name: str = info.stream_name  # type: ignore[assignment]
        #: How errors name this consumer: ``consumer 'C' of stream 'S'``.
        self._label = f"{self._kind} {self.name!r} of stream {self.stream_name!r}"

    @property
    def js(self) -> Context:
        return self._js

    @property
    def client(self) -> Any:
        return self._js.client

    @property
    def _conn(self) -> Connection:
        return self._js._conn

    def _target(self, subject: str | None = None) -> Target:
        """What this handle's engines and readers take (``subject``: a push consumer's deliver subject)."""
        cfg = self._info.config
        return target_of(self._js, self.stream_name, self.name, self._label, subject,
                         cfg.backoff if cfg is not None else None)

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from the last server round trip. No I/O."""
        return self._info

    def info(self, *, timeout: Timeout = DEFAULT) -> ConsumerInfo:
        """Fetch fresh info from the server (one request, retried) and cache it.

        Blocks at most ``timeout`` per attempt. Raises ``ConsumerNotFoundError``, ``TimeoutError``."""
        info = self._js.consumer_info(self.stream_name, self.name, timeout=timeout)
        self._info = info
        return info

    def events(self, *, types: Any = None) -> EventStream:
        """This consumer's events (ack samples, max deliveries, NAKs, terms, actions, elections): see
        ``JetStream.events``. Blocks only to subscribe."""
        # Every consumer event's subject ends in <stream>.<consumer> after three tokens (ADVISORY.CONSUMER.
        # MSG_NAKED, METRIC.CONSUMER.ACK, ...): the server sends only this consumer's, not the account's.
        return open_events(self._js._conn, f"*.*.*.{self.stream_name}.{self.name}", types,
                           stream=self.stream_name, consumer=self.name)

    def delete(self, *, timeout: Timeout = DEFAULT) -> None:
        """Delete this consumer on the server (one request). Raises ``ConsumerNotFoundError``."""
        self._js.delete_consumer(self.stream_name, self.name, timeout=timeout)

    def pause(self, until: datetime | float | timedelta, *, timeout: Timeout = DEFAULT) -> ConsumerPauseResponse:
        """Pause this consumer until ``until`` (an aware ``datetime``, or seconds from now as a number
        or a ``timedelta``): the server delivers nothing from it meanwhile, then goes on by itself.
        Needs nats-server 2.11. ``cached_info`` is not refreshed.

        One request (retried), blocking at most ``timeout`` per attempt. Raises ValueError/TypeError
        naming ``until`` (a naive datetime, a time not in the future) and ``FeatureNotSupportedError``
        (an older server) before anything is sent; ``ConsumerNotFoundError``, ``TimeoutError``.
        """
        return self._js.pause_consumer(self.stream_name, self.name, until, timeout=timeout)

    def resume(self, *, timeout: Timeout = DEFAULT) -> ConsumerPauseResponse:
        """Resume this consumer now. The ``messages()`` and ``consume()`` of this client reading it pull
        again at once (the server would leave a pull request that waited through the pause unanswered
        until a new message came); a push consumer delivers again with the next message stored, or at its
        next idle heartbeat. Needs nats-server 2.11.

        One request (retried), blocking at most ``timeout`` per attempt. Raises
        ``FeatureNotSupportedError`` (nothing sent), ``ConsumerNotFoundError``, ``TimeoutError``.
        """
        return self._js.resume_consumer(self.stream_name, self.name, timeout=timeout)
