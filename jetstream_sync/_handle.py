# What every handle on a server-side consumer shares, pull or push: its names, its context, the
# cached info and the two management calls. The read calls are the subclasses' (consumer.py,
# push_consumer.py), since they differ by kind.
#
# Rule: a handle holds no server resources; ``cached_info`` is what the last round trip said.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._protocol import DEFAULT, Timeout
from .config import ConsumerInfo
from .events import EventStream, open_events

if TYPE_CHECKING:
    from ._connection import Connection
    from .client import Client
    from .jetstream import JetStream

__all__ = ["ConsumerHandle"]


class ConsumerHandle:
    """Base of :class:`~jetstream_sync.Consumer` and :class:`~jetstream_sync.PushConsumer`. Thread-safe."""

    #: How errors name the kind ("consumer", "push consumer").
    _kind = "consumer"

    def __init__(self, js: "JetStream", info: ConsumerInfo) -> None:
        self._js = js
        self._info = info
        self.name: str = info.name  # type: ignore[assignment]
        self.stream_name: str = info.stream_name  # type: ignore[assignment]
        #: How errors name this consumer: ``consumer 'C' of stream 'S'``.
        self._label = f"{self._kind} {self.name!r} of stream {self.stream_name!r}"

    @property
    def js(self) -> "JetStream":
        return self._js

    @property
    def client(self) -> "Client":
        return self._js.client

    @property
    def _conn(self) -> "Connection":
        return self._js._conn

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
